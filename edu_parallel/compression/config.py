"""One validated description of a gradient-compression run: :class:`CompressConfig`.

Torch-free, so that ``edu-parallel run compress`` checks every option before any process starts.
The run trains the ``classifier`` task (:mod:`edu_parallel.task.classifier`) with lesson 05's
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.errors import Checked, bad_value, check_int
from ..data_parallel.config import DDP_MODELS, MAX_STEPS, DdpConfig
from ..task.targets import TARGET_STEPS, TASK_LR

METHODS = ("none", "fp16", "bf16", "topk", "randk", "sign", "powersgd")
SPARSE = ("topk", "randk")  # the methods ``ratio`` applies to
CASTS = {"fp16": "float16", "bf16": "bfloat16"}
MIN_COMPRESSION_RATE = 2  # torch's PowerSGDState default: compress when (n+m) r * 2 < n m
MODEL = "classifier"


def max_powersgd_rank(dims: tuple[int, ...], rate: int = MIN_COMPRESSION_RATE) -> int:
    """The largest rank at which some weight of an MLP of ``dims`` is still compressed: the
    largest ``r`` with ``(n + m) r * rate < n m`` over its ``(d_out, d_in)`` weights."""
    best = 0
    for d_in, d_out in zip(dims[:-1], dims[1:], strict=False):
        n, m = d_out, d_in
        best = max(best, (n * m - 1) // ((n + m) * rate))
    return best


@dataclass(frozen=True)
class CompressConfig(Checked):
    """What every rank runs; see the module doc. ``ratio``: the fraction of entries top-k and
    random-k keep; ``rank``: PowerSGD's rank; ``start_step``: PowerSGD runs plain all-reduce for
    the first ``start_step`` steps, like torch's ``start_powerSGD_iter`` (at least 2 there)."""

    world_size: int
    method: str = "none"
    ratio: float = 0.01
    rank: int = 1
    error_feedback: bool = False
    steps: int = TARGET_STEPS
    lr: float = TASK_LR
    seed: int = 0
    start_step: int = 2

    def _check(self) -> list[str]:
        out: list[str] = []

        def attempt(fn, *args) -> None:  # noqa: ANN001 - a check_* function
            try:
                fn(*args)
            except (ValueError, TypeError) as exc:
                out.append(str(exc))

        if self.method not in METHODS:
            out.append(str(bad_value("method", self.method, "one of " + ", ".join(METHODS))))
        if isinstance(self.ratio, bool) or not isinstance(self.ratio, (int, float)):
            out.append(str(bad_value("ratio", self.ratio, "a number in (0, 1]")))
        elif not 0 < self.ratio <= 1:
            out.append(str(bad_value("ratio", self.ratio, "a number in (0, 1]: the kept fraction")))
        top = max_powersgd_rank(self.dims)
        try:
            check_int("rank", self.rank, 1, top)
        except ValueError:
            out.append(
                str(
                    bad_value(
                        "rank",
                        self.rank,
                        f"an integer in [1, {top}]: above it no weight of the {MODEL} is worth"
                        f" compressing ((n + m) r x {MIN_COMPRESSION_RATE} >= n m, torch's"
                        " min_compression_rate)",
                    )
                )
            )
        if not isinstance(self.error_feedback, bool):
            out.append(str(bad_value("error_feedback", self.error_feedback, "True or False")))
        attempt(check_int, "start_step", self.start_step, 0, MAX_STEPS)
        try:
            DdpConfig(self.world_size, model=MODEL, steps=self.steps, lr=self.lr, seed=self.seed)
        except ValueError as exc:  # compression has no accumulation: leave it out of the text
            out.append(str(exc).replace(" with accumulate=1", "").replace(" (N K)", " N"))
        if self.error_feedback is True and self.method == "none":
            out.append(
                "error_feedback=True is not valid with method='none': nothing is dropped, so there"
                " is no error to feed back (use it with fp16, bf16, topk, randk, sign, powersgd)"
            )
        return out

    @property
    def dims(self) -> tuple[int, ...]:
        return DDP_MODELS[MODEL].dims

    def ddp(self) -> DdpConfig:
        """The data-parallel run the hook plugs into (DDP's default buckets, overlap). Its ranks
        are not lined up before each step: the all-reduce synchronises them anyway, and a
        barrier per step costs a message latency the lesson's 200-step runs would feel."""
        return DdpConfig(
            self.world_size,
            model=MODEL,
            steps=self.steps,
            lr=self.lr,
            seed=self.seed,
            line_up=False,
        )

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
        m, k = config.method, kept(d, config.ratio)
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
