"""One validated description of a data-parallel run: :class:`DdpConfig`, and :class:`DdpRun`.

Built once where a run starts (:func:`~edu_parallel.data_parallel.report.run_ddp`, the command
line) and passed down unchanged: :class:`DdpConfig` to every rank's job and to the one-process
reference, :class:`DdpRun` (the config and what the parent does beside it) to
:func:`~edu_parallel.data_parallel.report.run_ddp_config`. Each constructor checks every field and
raises one ValueError that names each bad one (torchtitan's ``ParallelismConfig`` style: one
frozen object, a docstring under each field); the check also makes the bucket plan, once, and the
config carries it to the ranks as data. Nothing below checks the same values again.

The models are the seeded MLP family of the ZeRO lesson (:mod:`edu_parallel.task.mlp`):
``nn.Linear`` layers with ReLU between them, named as ``nn.Sequential`` names them
(``0.weight``, ``0.bias``, ``2.weight``, ...):

* ``mlp``: the ZeRO lesson's 3 layers of 16x16;
* ``deep``: 8 layers of 512x512, each weight exactly 1 MiB in fp32, so DDP's 1 MiB first bucket
  and its 25 MiB default are both visible;
* ``tied``: 4 layers of 16x16 whose first and last share one weight (like tied embeddings);
* ``classifier``: the learning task of lessons 13 and 14 (:mod:`edu_parallel.task.classifier`),
  32 -> 128 -> 128 -> 10 trained with cross-entropy on inputs a fixed linear teacher labels.

The global batch (``batch`` rows per optimizer step) is fixed by the model and split over ``N``
ranks and ``K`` accumulation micro-batches: ``batch / (N K)`` rows each, so every run of one model
computes the gradient of the same batch, whatever ``N`` and ``K`` are.

Formulas (Li et al. 2020, arXiv 2006.15704; ring all-reduce, Patarasuk & Yuan 2009): per optimizer
step every rank sends ``2(N-1)/N * Psi * itemsize`` bytes whatever the bucketing; the bucketing
changes the number of messages, ``2(N-1)`` per bucket.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..core.errors import (
    Checked,
    Problems,
    bad_value,
    check_bool,
    check_choice,
    check_int,
    check_positive,
    check_seed,
    needs,
)
from ..core.i18n import N_, _
from ..models.topology import LINKS
from .buckets import (
    ITEMSIZE,
    PER_PARAM_CAP_MB,
    PER_PARAM_LIMITS,
    BucketPlan,
    ParamSpec,
    assign_within,
    bucket_limits,
)

# the models of the family, by name (their shapes in DDP_MODELS)
ModelName = Literal["mlp", "deep", "tied", "classifier"]
MODELS: tuple[ModelName, ...] = get_args(ModelName)
# when the gradients are all-reduced: one parameter at a time after backward, one bucket at a
# time after backward, or one bucket at a time during backward as soon as it is full (DDP)
Sync = Literal["per-param", "bucketed", "overlap"]
SYNCS: tuple[Sync, ...] = get_args(Sync)
DEFAULT_SYNC: Sync = "overlap"  # DDP's own: each bucket all-reduced during backward
# the loss: MSE on random targets, or cross-entropy on the teacher's labels
Task = Literal["regress", "classify"]


@dataclass(frozen=True)
class ModelSpec:
    """A member of the MLP family: layer widths, global batch rows, tied first/last weight."""

    name: ModelName
    dims: tuple[int, ...]
    """Layer widths ``(d_in, h1, ..., d_out)``."""
    batch: int
    """Rows of the global batch of one optimizer step."""
    tied: bool = False
    """The last Linear uses the first one's weight (one Parameter)."""
    doc: str = ""
    """What the model is, for the command line's help (a gettext message, marked ``N_``)."""
    task: Task = "regress"
    """Its loss: one of ``Task``."""


DDP_MODELS: dict[ModelName, ModelSpec] = {
    s.name: s
    for s in (
        ModelSpec("mlp", (16, 16, 16, 16), 16, doc=N_("the ZeRO lesson's 3 layers of 16x16")),
        ModelSpec("deep", (512,) * 9, 128, doc=N_("8 layers of 512x512: 1 MiB per fp32 weight")),
        ModelSpec(
            "tied",
            (16,) * 5,
            16,
            tied=True,
            doc=N_("4 layers of 16x16, first and last weight shared"),
        ),
        ModelSpec(
            "classifier",
            (32, 128, 128, 10),
            64,
            task="classify",
            doc=N_(
                "32-128-128-10, cross-entropy on a linear teacher's 10 classes (lessons 13, 14)"
            ),
        ),
    )
}
MAX_ACCUMULATE = 64
MAX_STEPS = 1000
MAX_ROWS = 1 << 30  # rows per rank of the GPU model
DEFAULT_FLOPS_PER_S = 400e12  # the GPU model's compute rate: an H100's dense bf16, roughly
DTYPE = "float32"


def check_rows(name: str, value: Any) -> int:
    """``value`` as rows per rank in [1, :data:`MAX_ROWS`], else the one-line error."""
    return check_int(name, value, 1, MAX_ROWS)  # check_int refuses inf itself


@dataclass(frozen=True)
class DdpConfig(Checked):
    """What every rank runs; see the module doc."""

    world_size: int
    """Ranks N; the model's batch must split evenly into N K micro-batches."""
    model: ModelName = "mlp"
    """One of :data:`MODELS` (their shapes in :data:`DDP_MODELS`)."""
    bucket_cap_mb: float | None = None
    """DDP's ``bucket_cap_mb``: a size in MiB; None is DDP's default (25 MiB, 1 MiB first)."""
    sync: Sync = DEFAULT_SYNC
    """When the gradients are all-reduced: one of :data:`SYNCS` (see ``ddp.py``)."""
    accumulate: int = 1
    """Micro-batches K per optimizer step; the first K-1 run under ``no_sync``."""
    steps: int = 3
    """SGD steps, 1 to :data:`MAX_STEPS`."""
    lr: float = 0.01
    """SGD's learning rate, > 0."""
    seed: int = 0
    """Seed of the weights and of the batches, >= 0."""
    freeze: int = 0
    """The first ``freeze`` Linear layers need no gradient (not in any bucket)."""
    line_up: bool = True
    """A barrier before each step, so that the ranks' step times compare."""
    spec: ModelSpec = field(init=False, repr=False)
    """The model's shape: ``DDP_MODELS[model]`` (set by the check)."""
    plan: BucketPlan = field(init=False, repr=False, compare=False)
    """The buckets, made once by the check with DDP's rule (:meth:`buckets`)."""

    def _check(self) -> list[str]:
        p = Problems()
        n = self._field(p, "world_size", check_int, 1)
        model = self._field(p, "model", check_choice, MODELS)
        limits = p.check(lambda _name, mb: bucket_limits(mb), "bucket_cap_mb", self.bucket_cap_mb)
        if limits is None:
            p.amend(_(" (leave it out for DDP's default, 25 MiB with a 1 MiB first bucket)"))
        elif self.bucket_cap_mb is not None:
            object.__setattr__(self, "bucket_cap_mb", float(self.bucket_cap_mb))
        sync = self._field(p, "sync", check_choice, SYNCS)
        k = self._field(p, "accumulate", check_int, 1, MAX_ACCUMULATE)
        self._field(p, "steps", check_int, 1, MAX_STEPS)
        self._field(p, "lr", check_positive)
        self._field(p, "seed", check_seed)
        self._field(p, "line_up", check_bool)
        if model is None:
            return p.lines
        spec = DDP_MODELS[model]
        object.__setattr__(self, "spec", spec)
        layers = len(spec.dims) - 1
        if self._field(p, "freeze", check_int, 0, layers) == layers:
            valid = _(
                "at most {top}; with every layer of {model!r} frozen no parameter needs a gradient"
                " and there is nothing to reduce (DDP refuses such a model too)"
            )
            p.add(bad_value("freeze", self.freeze, valid.format(top=layers - 1, model=model)))
        if n is not None and k is not None and spec.batch % (n * k):
            fits = [m for m in range(1, spec.batch + 1) if spec.batch % (m * k) == 0]
            p.add(
                _(
                    "world_size={n} is not valid with accumulate={k}: the {model!r} model's batch"
                    " of {batch} rows splits evenly over world sizes {fits} (batch / (N K) rows"
                    " each)"
                ).format(
                    n=n,
                    k=k,
                    model=model,
                    batch=spec.batch,
                    fits=", ".join(map(str, fits)) or _("none"),
                )
            )
        if not p and sync is not None:
            caps = PER_PARAM_LIMITS if sync == "per-param" else limits
            object.__setattr__(self, "plan", assign_within(self.param_specs(), *caps))
        return p.lines

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
        return PER_PARAM_CAP_MB if self.sync == "per-param" else self.bucket_cap_mb

    def buckets(self) -> BucketPlan:
        """The bucket plan: DDP's rule with :attr:`effective_cap_mb`, made once by the check."""
        return self.plan

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
        return 2 * (self.world_size - 1) * len(self.plan)


@dataclass(frozen=True)
class DdpRun(Checked):
    """One run as the parent sees it: the ranks' :class:`DdpConfig`, the GPU what-if of
    :func:`~edu_parallel.data_parallel.overlap.gpu_retime`, torch's DDP beside, the comm hook.
    Build it with :meth:`of`, which says the problems of both configs together."""

    config: DdpConfig
    """What every rank runs (checked by its own constructor)."""
    link: str | None = None
    """Retime the trace for a GPU over this preset of ``LINKS``; None: no GPU model."""
    flops_per_s: float | None = None
    """The modelled GPU's compute rate, > 0; only with ``link`` (None there:
    :data:`DEFAULT_FLOPS_PER_S`, set by the check; without ``link`` it stays None)."""
    rows: int | None = None
    """Rows per rank the modelled layers compute, 1 to :data:`MAX_ROWS`; only with ``link``
    (None: the run's own)."""
    compare_torch: bool = True
    """Also train with torch's ``DistributedDataParallel`` on the same ranks and compare."""
    hook: Callable[..., None] | None = None
    """The communication hook ``hook(ctx, flat, step, bucket)`` (``ddp.CommHook``), a function
    of an importable module; None: :func:`~edu_parallel.data_parallel.ddp.allreduce_mean_hook`."""

    def _check(self) -> list[str]:
        p = Problems()
        if self.link is None:  # no GPU model: its compute rate and rows would mean nothing
            why = _("only the GPU model of a run retimed over a link reads it")
            for name in ("flops_per_s", "rows"):
                if getattr(self, name) is not None:
                    p.add(needs(name, getattr(self, name), "link", why))
        else:
            if self._field(p, "link", check_choice, LINKS) is None:
                p.amend(_(" (leave it out for no GPU model)"))
            if self.flops_per_s is None:
                object.__setattr__(self, "flops_per_s", DEFAULT_FLOPS_PER_S)
            self._field(p, "flops_per_s", check_positive)
            if self.rows is not None and self._field(p, "rows", check_rows) is None:
                p.amend(_(" (leave it out for the run's own rows)"))
        self._field(p, "compare_torch", check_bool)
        if self.hook is not None and not callable(self.hook):
            valid = _("None or a function hook(ctx, flat, step, bucket) of a module")
            p.add(bad_value("hook", self.hook, valid))
        return p.lines

    @classmethod
    def of(
        cls,
        world_size: int,
        *,
        link: str | None = None,
        flops_per_s: float | None = None,
        rows: int | None = None,
        compare_torch: bool = True,
        hook: Callable[..., None] | None = None,
        **options: Any,
    ) -> DdpRun:
        """The run of ``DdpConfig(world_size, **options)`` with these parent-side options: each
        field checked once, by its own config, and every problem of both said in one error."""
        p = Problems()
        config = try_build(p, DdpConfig, world_size, **options)
        run = try_build(p, cls, config, link, flops_per_s, rows, compare_torch, hook)
        p.raise_any()
        return run


def try_build(problems: Problems, make: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``make(*args, **kwargs)``, or None with the problems its check found recorded."""
    try:
        return make(*args, **kwargs)
    except ValueError as exc:
        problems.add(exc)
        return None
