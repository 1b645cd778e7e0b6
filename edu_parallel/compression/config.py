"""One validated description of a gradient-compression run: :class:`CompressConfig`.

Torch-free, so that ``edu-parallel run compress`` checks every option before any process starts.
The run trains the ``classifier`` task (:mod:`edu_parallel.task.classifier`) with lesson 06's
data-parallel trainer, each bucket reduced by the compressor's communication hook
(:mod:`edu_parallel.compression.compressors`, :mod:`edu_parallel.compression.powersgd`):

* ``none``: DDP's default, ``x 1/N`` then a ring all-reduce of fp32;
* ``fp16`` / ``bf16``: cast, ``/ N``, ring all-reduce in 16 bits, cast back (torch's
  ``fp16_compress_hook`` / ``bf16_compress_hook``);
* ``topk``: each rank keeps its ``k = ratio * d`` largest-magnitude entries; indices and values
  travel by ring all-gather (Aji & Heafield 2017; Lin et al. 2018, Deep Gradient Compression);
* ``randk``: ``k`` entries at indices every rank draws from the same seed, so they can be summed
  by an all-reduce of ``k`` values (Stich et al. 2018);
* ``sign``: one bit per entry and one fp32 scale ``||p||_1 / d`` per rank, by all-gather (Seide et
  al. 2014, 1-bit SGD; Bernstein et al. 2018, signSGD; Karimireddy et al. 2019, EF-SignSGD);
* ``powersgd``: rank-``r`` factors ``P Q^T`` of each weight matrix by two all-reduces (Vogels et
  al. 2019), as torch's ``powerSGD_hook`` does it.

``error_feedback`` keeps what compression dropped and adds it to the next step's gradient.

The config is the one check of a run's options: the command line builds it (naming options as
it spells them, :func:`~edu_parallel.core.errors.spelled_as`), or ``run_compress`` from its
keywords; the runner, the rank jobs and torch's reference take it as it is. A docstring under
each field says what it means (torchtitan's ``JobConfig`` style).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from ..core.errors import (
    Checked,
    Problems,
    bad_value,
    check_bool,
    check_choice,
    check_int,
    check_positive,
    check_seed,
    conflicts,
    spelling,
)
from ..core.i18n import _
from ..data_parallel.config import DDP_MODELS, MAX_STEPS, DdpConfig

Method = Literal["none", "fp16", "bf16", "topk", "randk", "sign", "powersgd"]
METHODS: tuple[Method, ...] = get_args(Method)
SPARSE = ("topk", "randk")  # the methods ``ratio`` applies to
CASTS = {"fp16": "float16", "bf16": "bfloat16"}
MIN_COMPRESSION_RATE = 2  # torch's PowerSGDState default: compress when (n+m) r * 2 < n m
MODEL = "classifier"
BATCH = DDP_MODELS[MODEL].batch  # rows of one step, split over the ranks
# Lesson 13's runs: at 1.5x the task's lr (TASK_LR = 0.2, TARGET_STEPS = 200) the target comes
# sooner, so 140 steps keep every claim of the lesson with a margin (2 ranks: none, fp16 and bf16
# reach it at step 90, sign + EF 89, top-k 1% + EF 111, PowerSGD r=1 + EF 118; random-k 1% + EF and
# top-k and PowerSGD without feedback never do), checked at this size by tests/test_compress.py.
# Every step costs the same messages, so 60 steps fewer make every run 30% shorter.
LESSON_LR = 0.3
LESSON_STEPS = 140
# the defaults of the options that belong to some methods only (a field left None gets its
# method's default, and stays None under the other methods, where giving it is refused)
DEFAULT_RATIO = 0.01  # top-k and random-k keep 1% of the entries
DEFAULT_POWERSGD_RANK = 1
DEFAULT_START_STEP = 2  # torch's start_powerSGD_iter must be at least 2 (torch_hooks.py)


def max_powersgd_rank(dims: tuple[int, ...], rate: int = MIN_COMPRESSION_RATE) -> int:
    """The largest rank at which some weight of an MLP of ``dims`` is still compressed: the
    largest ``r`` with ``(n + m) r * rate < n m`` over its ``(d_out, d_in)`` weights."""
    best = 0
    for d_in, d_out in zip(dims[:-1], dims[1:], strict=False):
        n, m = d_out, d_in
        best = max(best, (n * m - 1) // ((n + m) * rate))
    return best


MAX_POWERSGD_RANK = max_powersgd_rank(DDP_MODELS[MODEL].dims)  # 31 for the classifier


def check_ratio(name: str, value: object) -> float:
    """``value`` as a float in (0, 1], the fraction of entries kept, or a ValueError."""
    valid = _("a number in (0, 1]: the kept fraction")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_value(name, value, valid)
    if not 0 < value <= 1:  # nan fails both comparisons
        raise bad_value(name, value, valid)
    return float(value)


@dataclass(frozen=True)
class CompressConfig(Checked):
    """What every rank runs (see the module doc), checked once: the constructor names every bad
    field in one ValueError, and the runner, the rank jobs and torch's reference trust it."""

    world_size: int
    """Ranks: a divisor of the classifier's batch of :data:`BATCH` rows (each gets batch / N)."""
    method: Method = "none"
    """How each bucket travels: one of :data:`METHODS` (the module doc)."""
    ratio: float | None = None
    """The fraction of entries top-k and random-k keep, in (0, 1]; only with those methods
    (None there: :data:`DEFAULT_RATIO`, set by the check; under the others it stays None)."""
    rank: int | None = None
    """PowerSGD's rank ``r``: at most the largest at which some weight is still compressed; only
    with ``powersgd`` (None there: :data:`DEFAULT_POWERSGD_RANK`; else it stays None)."""
    error_feedback: bool = False
    """Keep what compression dropped and add it to the next step's gradient."""
    steps: int = LESSON_STEPS
    """SGD steps, at most the DDP trainer's ``MAX_STEPS``."""
    lr: float = LESSON_LR
    """Plain SGD's learning rate."""
    seed: int = 0
    """Seed of the weights, the data and random-k's indices."""
    start_step: int | None = None
    """PowerSGD runs plain all-reduce for the first ``start_step`` steps, like torch's
    ``start_powerSGD_iter`` (which must be at least 2), fewer than ``steps``; only with
    ``powersgd`` (None there: :data:`DEFAULT_START_STEP`; else it stays None)."""
    compare_torch: bool = True
    """Also train a few steps with torch's own hook, where torch has one, and compare."""
    ddp_config: DdpConfig = field(init=False, repr=False, compare=False)
    """The data-parallel run the hook plugs into, built once by the check (:meth:`ddp`)."""

    def _check(self) -> list[str]:
        p = Problems()
        n = self._field(p, "world_size", check_int, 1)
        if n is not None and BATCH % n:
            sizes = ", ".join(str(d) for d in range(1, BATCH + 1) if BATCH % d == 0)
            valid = _("a divisor of the {model}'s batch of {rows} rows ({sizes})")
            p.add(bad_value("world_size", n, valid.format(model=MODEL, rows=BATCH, sizes=sizes)))
        method = self._field(p, "method", check_choice, METHODS)
        if method is not None:
            self._check_method_options(p, method)
        feedback = self._field(p, "error_feedback", check_bool)
        if feedback is True and method == "none":
            others = ", ".join(m for m in METHODS if m != "none")
            valid = _(
                "False with method='none': nothing is dropped, so there is no error to feed back"
                " (use it with {others})"
            )
            p.add(bad_value("error_feedback", True, valid.format(others=others)))
        steps = self._field(p, "steps", check_int, 1, MAX_STEPS)
        self._field(p, "lr", check_positive)
        self._field(p, "seed", check_seed)
        if method == "powersgd":
            self._check_start_step(p, steps)
        self._field(p, "compare_torch", check_bool)
        if not p:
            # Its ranks are not lined up before each step: the all-reduce synchronises them
            # anyway, and a barrier per step costs a latency the lesson's 200-step runs would feel.
            ddp = DdpConfig(
                self.world_size,
                model=MODEL,
                steps=self.steps,
                lr=self.lr,
                seed=self.seed,
                line_up=False,
            )
            object.__setattr__(self, "ddp_config", ddp)
        return p.lines

    def _check_method_options(self, p: Problems, method: Method) -> None:
        """``ratio``, ``rank`` and ``start_step``: checked (their default set where None) under
        the methods they belong to, refused under the others, where they would mean nothing."""
        own = {"ratio": method in SPARSE, "rank": method == "powersgd"}
        own["start_step"] = own["rank"]
        why = {
            "ratio": _("only topk and randk keep a fraction of the entries"),
            "rank": _("only powersgd has a rank"),
            "start_step": _("only powersgd starts compressing after some steps"),
        }
        for name, belongs in own.items():
            if not belongs and getattr(self, name) is not None:
                p.add(conflicts(name, getattr(self, name), "method", method, why[name]))
        if own["ratio"]:
            if self.ratio is None:
                object.__setattr__(self, "ratio", DEFAULT_RATIO)
            self._field(p, "ratio", check_ratio)
        if own["rank"]:
            if self.rank is None:
                object.__setattr__(self, "rank", DEFAULT_POWERSGD_RANK)
            if self._field(p, "rank", check_int, 1, MAX_POWERSGD_RANK) is None:
                p.amend(
                    _(
                        ": above it no weight of the {model} is worth compressing ((n + m) r x"
                        " {rate} >= n m, torch's min_compression_rate)"
                    ).format(model=MODEL, rate=MIN_COMPRESSION_RATE)
                )

    def _check_start_step(self, p: Problems, steps: int | None) -> None:
        """PowerSGD's ``start_step``, below ``steps``: from ``start_step = steps`` on, every step
        is a plain all-reduce and the run, labelled powersgd, would compress nothing."""
        given = self.start_step is not None
        if not given:
            object.__setattr__(self, "start_step", DEFAULT_START_STEP)
        start = self._field(p, "start_step", check_int, 0, MAX_STEPS)
        if start is not None and steps is not None and start >= steps and not given:
            valid = _(
                "at least {least} with {method_name}='powersgd': its first {start} steps "
                "({start_name}, default {start}) are plain all-reduces; give more steps or a "
                "smaller {start_name}"
            ).format(
                least=start + 1,
                method_name=spelling("method"),
                start=start,
                start_name=spelling("start_step"),
            )
            p.add(bad_value("steps", steps, valid))
        elif start is not None and steps is not None and start >= steps:
            valid = _(
                "an integer in [0, {top}]: the first {start} steps are plain all-reduces, so a run"
                " of {steps_name}={steps} would never compress"
            )
            valid = valid.format(
                top=steps - 1, start=start, steps_name=spelling("steps"), steps=steps
            )
            p.add(bad_value("start_step", start, valid))

    @property
    def dims(self) -> tuple[int, ...]:
        return DDP_MODELS[MODEL].dims

    def ddp(self) -> DdpConfig:
        """The data-parallel run the hook plugs into (DDP's default buckets, overlap)."""
        return self.ddp_config

    @property
    def label(self) -> str:
        """``topk 1% + EF``, ``powersgd r=2``, ``fp16``: how tables and legends name the run."""
        text = self.method
        if self.method in SPARSE:
            text += f" {self.ratio * 100:g}%"
        if self.method == "powersgd":
            text += f" r={self.rank}"
        return text + (" + EF" if self.error_feedback else "")


def kept(d: int, ratio: float) -> int:
    """Entries top-k and random-k keep of a bucket of ``d``: ``max(1, round(ratio d))``."""
    return max(1, round(ratio * d))


def param_shapes(dims: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """Shapes of an MLP's parameters by ``nn.Sequential`` name: ``2i.weight`` is (d_out, d_in)."""
    out: dict[str, tuple[int, ...]] = {}
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=False)):
        out[f"{2 * i}.weight"], out[f"{2 * i}.bias"] = (d_out, d_in), (d_out,)
    return out


def powersgd_split(shapes: list[tuple[int, ...]], rank: int) -> tuple[int, int, int]:
    """Elements of a bucket PowerSGD all-reduces: (uncompressed, P, Q). A gradient viewed as
    ``n x m`` is compressed when ``(n + m) r' * 2 < n m`` with ``r' = min(n, m, r)``."""
    u = p = q = 0
    for s in shapes:
        n = s[0]
        m = math.prod(s[1:]) if len(s) > 1 else 1
        r = min(n, m, rank)
        if (n + m) * r * MIN_COMPRESSION_RATE < n * m:
            p, q = p + n * r, q + m * r
        else:
            u += n * m
    return u, p, q


def wire_bytes_per_step(config: CompressConfig) -> float:
    """Bytes one rank sends per step, averaged over ranks and steps (ring all-reduce:
    ``2(N-1)/N`` of the buffer; ring all-gather: ``N-1`` pieces; buffers under ``N`` elements
    are padded to ``N``). The trace of a run counts the same number."""
    n = config.world_size
    ar = 2 * (n - 1) / n  # ring all-reduce: fraction of the buffer each rank sends
    shapes = param_shapes(config.dims)
    dense = compressed = 0.0
    for bucket in config.ddp().buckets():
        d = sum(math.prod(shapes[name]) for name in bucket.params)
        dense += ar * 4 * d
        m = config.method
        k = kept(d, config.ratio) if m in SPARSE else 0
        if m in CASTS:
            compressed += ar * 2 * max(d, n)
        elif m == "topk":
            compressed += (n - 1) * 8 * k  # int32 index + fp32 value per entry
        elif m == "randk":
            compressed += ar * 4 * max(k, n)
        elif m == "sign":
            compressed += (n - 1) * (math.ceil(d / 8) + 4)
        elif m == "powersgd":
            parts = powersgd_split([shapes[name] for name in bucket.params], config.rank)
            compressed += ar * 4 * sum(max(x, n) for x in parts)
        else:
            compressed += ar * 4 * d
    if config.method == "powersgd":  # plain all-reduce for the first start_step steps
        plain = min(config.start_step, config.steps)
        return (plain * dense + (config.steps - plain) * compressed) / config.steps
    return compressed


def dense_bytes_per_step(config: CompressConfig) -> float:
    """What DDP's uncompressed fp32 all-reduce sends per rank per step: ``2(N-1)/N * 4 Psi``."""
    n = config.world_size
    return 2 * (n - 1) / n * 4 * config.ddp().psi


def messages_per_step(config: CompressConfig) -> float:
    """Messages one rank sends per step, averaged over steps: a ring all-reduce ``2(N-1)`` per
    bucket (PowerSGD: three of them), a ring all-gather ``N-1``."""
    n, buckets = config.world_size, len(config.ddp().buckets())
    ring = 2 * (n - 1) * buckets
    if config.method in ("topk", "sign"):
        return (n - 1) * buckets
    if config.method == "powersgd":
        plain = min(config.start_step, config.steps)
        return (plain * ring + (config.steps - plain) * 3 * ring) / config.steps
    return ring
