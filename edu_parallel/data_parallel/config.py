"""One validated description of a data-parallel training run: :class:`DdpConfig`.

Built once where a run starts (:func:`~edu_parallel.data_parallel.report.run_ddp`, the CLI)
and passed down to every rank; its constructor checks every field and raises one ValueError that
names each bad one. The models are the seeded MLP family of the ZeRO lesson
(:mod:`edu_parallel.task.mlp`): ``nn.Linear`` layers with ReLU between them, named as
``nn.Sequential`` names them (``0.weight``, ``0.bias``, ``2.weight``, ...):

* ``mlp``: the ZeRO lesson's 3 layers of 16x16;
* ``deep``: 8 layers of 512x512, each weight exactly 1 MiB in fp32, so DDP's 1 MiB first bucket
  and its 25 MiB default are both visible;
* ``tied``: 4 layers of 16x16 whose first and last share one weight (like tied embeddings);
* ``classifier``: the learning task of lessons 11 and 12 (:mod:`edu_parallel.task.classifier`),
  32 -> 128 -> 128 -> 10 trained with cross-entropy on inputs a fixed linear teacher labels.

The global batch (``batch`` rows per optimizer step) is fixed by the model and split over ``N``
ranks and ``K`` accumulation micro-batches: ``batch / (N K)`` rows each, so every run of one model
computes the gradient of the same batch, whatever ``N`` and ``K`` are.

Formulas (Li et al. 2020, arXiv 2006.15704; ring all-reduce, Patarasuk & Yuan 2009): per optimizer
step every rank sends ``2(N-1)/N * Psi * itemsize`` bytes whatever the bucketing; the bucketing
changes the number of messages, ``2(N-1)`` per bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.errors import Checked, bad_value, check_int, check_positive
from ..models.topology import LINKS
from .buckets import ITEMSIZE, ParamSpec, assign_buckets, bucket_limits


@dataclass(frozen=True)
class ModelSpec:
    """A member of the MLP family: layer widths, global batch rows, tied first/last weight."""

    name: str
    dims: tuple[int, ...]
    batch: int
    tied: bool = False
    doc: str = ""
    task: str = "regress"  # "regress": MSE on random targets; "classify": the teacher's labels


DDP_MODELS = {
    "mlp": ModelSpec("mlp", (16, 16, 16, 16), 16, doc="the ZeRO lesson's 3 layers of 16x16"),
    "deep": ModelSpec("deep", (512,) * 9, 128, doc="8 layers of 512x512: 1 MiB per fp32 weight"),
    "tied": ModelSpec(
        "tied", (16,) * 5, 16, tied=True, doc="4 layers of 16x16, first and last weight shared"
    ),
    "classifier": ModelSpec(
        "classifier",
        (32, 128, 128, 10),
        64,
        task="classify",
        doc="32-128-128-10, cross-entropy on a linear teacher's 10 classes (lessons 11, 12)",
    ),
}
# when the gradients are all-reduced: one parameter at a time after backward, one bucket at a
# time after backward, or one bucket at a time during backward as soon as it is full (DDP)
SYNCS = ("per-param", "bucketed", "overlap")
MAX_ACCUMULATE = 64
MAX_STEPS = 1000
DTYPE = "float32"


@dataclass(frozen=True)
class DdpConfig(Checked):
    """What every rank runs; see the module doc. ``bucket_cap_mb=None`` is DDP's default."""

    world_size: int
    model: str = "mlp"
    bucket_cap_mb: float | None = None
    sync: str = "overlap"
    accumulate: int = 1
    steps: int = 3
    lr: float = 0.01
    seed: int = 0
    freeze: int = 0  # the first ``freeze`` Linear layers need no gradient (not in any bucket)
    line_up: bool = True  # a barrier before each step, so that the ranks' step times compare
    spec: ModelSpec = field(init=False, repr=False)

    def _check(self) -> list[str]:
        out: list[str] = []

        def attempt(name: str, fn, *args) -> None:  # noqa: ANN001 - a check_* function
            try:
                object.__setattr__(self, name, fn(name, getattr(self, name), *args))
            except ValueError as exc:
                out.append(str(exc))

        attempt("world_size", check_int, 1)
        if self.model not in DDP_MODELS:
            out.append(str(bad_value("model", self.model, "one of " + ", ".join(DDP_MODELS))))
        if self.bucket_cap_mb is not None:
            try:
                bucket_limits(self.bucket_cap_mb)
                object.__setattr__(self, "bucket_cap_mb", float(self.bucket_cap_mb))
            except ValueError as exc:
                out.append(f"{exc} (None: DDP's default, 25 MiB with a 1 MiB first bucket)")
        if self.sync not in SYNCS:
            out.append(str(bad_value("sync", self.sync, "one of " + ", ".join(SYNCS))))
        attempt("accumulate", check_int, 1, MAX_ACCUMULATE)
        attempt("steps", check_int, 1, MAX_STEPS)
        attempt("lr", lambda n, v: check_positive(n, v))
        attempt("seed", check_int, 0)
        if not isinstance(self.line_up, bool):
            out.append(str(bad_value("line_up", self.line_up, "True or False")))
        if out or self.model not in DDP_MODELS:
            return out
        spec = DDP_MODELS[self.model]
        object.__setattr__(self, "spec", spec)
        layers = len(spec.dims) - 1
        try:
            check_int("freeze", self.freeze, 0, layers)
        except ValueError as exc:
            out.append(str(exc))
        if not out and self.freeze == layers:
            out.append(
                f"freeze={self.freeze} is not valid: expected at most {layers - 1}; with every"
                f" layer of {self.model!r} frozen no parameter needs a gradient and there is"
                " nothing to reduce (DDP refuses such a model too)"
            )
        share = self.world_size * self.accumulate
        if spec.batch % share:
            fits = [n for n in range(1, spec.batch + 1) if spec.batch % (n * self.accumulate) == 0]
            out.append(
                f"world_size={self.world_size} is not valid with accumulate={self.accumulate}:"
                f" the {self.model!r} model's batch of {spec.batch} rows splits evenly over"
                f" world sizes {', '.join(map(str, fits)) or 'none'} (batch / (N K) rows each)"
            )
        return out

    # ---------------------------------------------------------------- derived
    @property
    def microbatch(self) -> int:
        """Rows per rank per micro-batch: ``batch / (N K)``."""
        return self.spec.batch // (self.world_size * self.accumulate)

    def param_specs(self) -> list[ParamSpec]:
        """Parameters that need a gradient, in registration order (a tied weight once)."""
        return [p for p, trained in self.all_params() if trained]

    def all_params(self) -> list[tuple[ParamSpec, bool]]:
        """Every distinct parameter in registration order, with whether it is trained."""
        out = []
        dims = self.spec.dims
        last = len(dims) - 2
        for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=False)):
            trained = i >= self.freeze
            if not (self.spec.tied and i == last):  # the tied last weight is layer 0's
                out.append((ParamSpec(f"{2 * i}.weight", d_in * d_out, DTYPE), trained))
            out.append((ParamSpec(f"{2 * i}.bias", d_out, DTYPE), trained))
        return out

    @property
    def effective_cap_mb(self) -> float | None:
        """The ``bucket_cap_mb`` DDP is given: ``per-param`` is a cap below any parameter's size
        (``int(1e-9 MiB)`` = 0 bytes in DDP, 1 byte here), so every parameter is its own bucket."""
        return 1e-9 if self.sync == "per-param" else self.bucket_cap_mb

    def buckets(self):  # noqa: ANN201 - a BucketPlan
        """The bucket plan: DDP's rule with :attr:`effective_cap_mb`."""
        return assign_buckets(self.param_specs(), self.effective_cap_mb)

    @property
    def psi(self) -> int:
        """Trained parameters (a tied weight counted once)."""
        return sum(p.numel for p in self.param_specs())

    def bytes_per_step(self) -> float:
        """``2(N-1)/N * Psi * itemsize``: what each rank sends per optimizer step."""
        n = self.world_size
        return 2 * (n - 1) / n * self.psi * ITEMSIZE[DTYPE]

    def messages_per_step(self) -> int:
        """Ring messages each rank sends per optimizer step: ``2(N-1)`` per bucket."""
        return 2 * (self.world_size - 1) * len(self.buckets())


MAX_ROWS = 1 << 30  # rows per rank of the GPU model


def check_ddp_args(
    world_size: int,
    link: str | None = None,
    flops_per_s: float = 400e12,
    rows: int | None = None,
    **options: object,
) -> DdpConfig:
    """The run's :class:`DdpConfig` and its GPU-model options, checked together before anything
    runs: one ValueError naming every bad option. ``link``: None or a preset of ``LINKS``;
    ``flops_per_s`` > 0; ``rows``: None (the run's rows) or an integer in [1, 2^30]."""
    problems = []
    try:
        config = DdpConfig(world_size, **options)
    except ValueError as exc:
        problems.append(str(exc))
    if link is not None and link not in LINKS:
        problems.append(str(bad_value("link", link, "None or one of " + ", ".join(LINKS))))
    try:
        check_positive("flops_per_s", flops_per_s)
    except ValueError as exc:
        problems.append(str(exc))
    if rows is not None:
        try:
            if isinstance(rows, float) and rows != int(rows):
                raise bad_value("rows", rows, f"None or an integer in [1, {MAX_ROWS}]")
            check_int("rows", int(rows) if isinstance(rows, float) else rows, 1, MAX_ROWS)
        except (ValueError, OverflowError):
            problems.append(str(bad_value("rows", rows, f"None or an integer in [1, {MAX_ROWS}]")))
    if problems:
        raise ValueError("; ".join(problems))
    return config
