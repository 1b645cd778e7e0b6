"""What one pipeline run executes, checked once: :class:`PipelineConfig`. Pure Python, no torch.

A schedule (GPipe, Huang et al. 2019, arXiv 1811.06965; 1F1B and interleaved 1F1B, Narayanan et
al. "Megatron-LM" 2021, arXiv 2104.04473; ZB-H1, Qi et al. 2023, arXiv 2401.10241) on ``P``
ranks with ``M`` microbatches and ``v`` model chunks per rank, the seeded model it trains and the
times that retime the executed order. The constructor checks every field at once (one
ValueError names each bad one) and builds the schedule's slot grid (:attr:`PipelineConfig.plan`)
once; the ranks (:func:`~edu_parallel.pipeline_parallel.execute.pipeline_job`), the one-process
reference and the report take the config and trust it (torchtitan's ``ParallelismConfig`` style:
check once, pass down).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import (
    Checked,
    Problems,
    bad_value,
    check_choice,
    check_int,
    check_non_negative,
    check_positive,
    check_seed,
    spelling,
)
from ..core.i18n import _
from ..core.units import DTYPES, format_bytes
from .builders import MAX_MICROBATCHES, SCHEDULES, ScheduleName, make_schedule
from .formulas import default_times
from .schedule import Schedule

# The model a few CPU ranks train in a lesson: hidden size h and rows per microbatch.
MAX_HIDDEN, MAX_MICROBATCH_SIZE = 1024, 1024
DTYPE = "float64"  # the pipeline's weights and activations (model.py), exact to ~1e-15
# M * mb * h: the batch every rank draws twice (inputs, targets), 128 MiB per copy in float64 at
# the limit, a teaching run on CPU (the largest M, mb and h together: 4 GiB per rank per copy)
MAX_BATCH_ELEMENTS = 1 << 24
# M * mb * h * layers: the activations the one-process reference saves for its backward (a block's
# input and its Linear's output per microbatch), 2 GiB in float64 at the limit
MAX_SAVED_ELEMENTS = 1 << 27
MAX_LAYERS = 512  # Linear+GeLU blocks of the whole model (a million ran past any timeout)


def stage_bounds(layers: int, num_stages: int) -> list[tuple[int, int]]:
    """Consecutive block ranges ``[lo, hi)`` per stage, as even as possible (earlier ones longer),
    for ``layers >= num_stages >= 1`` (checked once, by
    :func:`check_layers` in the run's config).

    >>> stage_bounds(5, 2)
    [(0, 3), (3, 5)]
    """
    base, extra = divmod(layers, num_stages)
    bounds, lo = [], 0
    for s in range(num_stages):
        hi = lo + base + (1 if s < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def check_layers(layers: Any, num_stages: int) -> int:
    """``layers`` must give every one of the ``num_stages`` stages at least one block."""
    return _blocks("layers", layers, num_stages)


def _blocks(name: str, layers: Any, num_stages: int) -> int:
    value = check_int(name, layers, 1, MAX_LAYERS)
    if value < num_stages:
        valid = _(
            "an integer >= {n}: one Linear+GeLU block per stage at least ({n} stages = stages"
            " * chunks)"
        )
        raise bad_value(name, layers, valid.format(n=num_stages))
    return value


@dataclass(frozen=True)
class PipelineConfig(Checked):
    """One pipeline run, checked when built; :attr:`plan` is its schedule, built once."""

    schedule: ScheduleName = "1f1b"
    """The schedule's name: one of SCHEDULES."""
    stages: int | None = None
    """P, the pipeline ranks, in [1, world_size]; stage s runs on rank s % P. None: world_size."""
    microbatches: int = 8
    """M, microbatches per step (interleaved: a multiple of P, Megatron-LM 2021 §2.2.2)."""
    chunks: int = 1
    """v, model chunks per rank (virtual stages P * v); more than 1 for ``interleaved`` only."""
    layers: int | None = None
    """Linear+GeLU blocks, at least one per virtual stage; None: 2 * P * v."""
    hidden: int = 32
    """Hidden size h of every block, in [1, MAX_HIDDEN]."""
    microbatch_size: int = 4
    """Rows per microbatch, in [1, MAX_MICROBATCH_SIZE]."""
    seed: int = 0
    """Seed of the weights and of the batch, >= 0."""
    t_f: float | None = None
    """Time of one forward F, > 0, to retime the executed order; None: default_times(schedule)."""
    t_b: float | None = None
    """Time of one input-gradient pass I, > 0 (a full backward B costs t_b + t_w); None: the
    schedule's default."""
    t_w: float | None = None
    """Time of one weight-gradient pass W, >= 0; None: the schedule's default."""
    t_comm: float = 0.0
    """Time of one send between ranks, >= 0, added to a dependency on another rank."""
    world_size: int | None = None
    """The executor's ranks (validated with it, trusted here): the bound of ``stages``. None: no
    bound (``stages`` must then be given)."""
    plan: Schedule = field(init=False, compare=False, repr=False)
    """The schedule's slot grid, built from the checked fields (not an argument)."""

    def _check(self) -> list[str]:
        p = Problems()
        name = self._field(p, "schedule", check_choice, SCHEDULES)
        ranks = self._stages(p)
        m = self._field(p, "microbatches", check_int, 1, MAX_MICROBATCHES)
        v = self._field(p, "chunks", check_int, 1)
        if name is not None and v is not None and name != "interleaved" and v != 1:
            valid = _(
                "1 for schedule={name!r} (only 'interleaved' puts several model chunks on a rank)"
            )
            p.add(bad_value("chunks", v, valid.format(name=name)))
        if name == "interleaved" and ranks is not None and m is not None and m % ranks:
            valid = _(
                "a multiple of stages={p} for schedule='interleaved' (Megatron-LM 2021 §2.2.2),"
                " e.g. {example}"
            )
            p.add(
                bad_value("microbatches", m, valid.format(p=ranks, example=ranks * -(-m // ranks)))
            )
        if ranks is not None and v is not None:
            layers = 2 * ranks * v if self.layers is None else self.layers
            value = p.check(_blocks, "layers", layers, ranks * v)
            if value is not None:
                object.__setattr__(self, "layers", value)
        h = self._field(p, "hidden", check_int, 1, MAX_HIDDEN)
        mb = self._field(p, "microbatch_size", check_int, 1, MAX_MICROBATCH_SIZE)
        if None not in (m, mb, h) and m * mb * h > MAX_BATCH_ELEMENTS:  # type: ignore[operator]
            named = " x ".join(spelling(n) for n in ("microbatches", "microbatch_size", "hidden"))
            valid = _(
                "at most {limit:,}: every rank and the one-process reference draw the whole batch,"
                " inputs and targets of (M, mb, h) each, {need} in {dtype}"
            ).format(
                limit=MAX_BATCH_ELEMENTS,
                need=format_bytes(2 * m * mb * h * DTYPES[DTYPE]),  # type: ignore[operator]
                dtype=DTYPE,
            )
            p.add(bad_value(named, m * mb * h, valid))  # type: ignore[operator]
        elif None not in (m, mb, h) and self.layers is not None and not p:
            saved = m * mb * h * self.layers  # type: ignore[operator]
            if saved > MAX_SAVED_ELEMENTS:
                names = ("microbatches", "microbatch_size", "hidden", "layers")
                named = " x ".join(spelling(n) for n in names)
                valid = _(
                    "at most {limit:,}: the one-process reference keeps every block's activations"
                    " of every microbatch for its backward, {need} in {dtype}"
                ).format(
                    limit=MAX_SAVED_ELEMENTS,
                    need=format_bytes(2 * saved * DTYPES[DTYPE]),
                    dtype=DTYPE,
                )
                p.add(bad_value(named, saved, valid))
        self._field(p, "seed", check_seed)
        self._times(p, name)
        if not p:  # every field checked: the schedule's grid, built once
            plan = make_schedule(name, ranks, m, v)  # type: ignore[arg-type]
            object.__setattr__(self, "plan", plan)
        return p.lines

    def _stages(self, p: Problems) -> int | None:
        """``stages`` (default: the world size) in [1, world_size], set on self."""
        top = self.world_size
        if self.stages is None:  # the executor's ranks, validated with it
            if top is None:
                p.add(bad_value("stages", None, _("an integer >= 1 (default: the world size)")))
            else:
                object.__setattr__(self, "stages", top)
            return top
        ranks = p.check(check_int, "stages", self.stages, 1)
        if ranks is not None and top is not None and ranks > top:
            valid = _(
                "an integer in [1, {n}]: stage s runs on rank s % stages, and this cluster has"
                " world_size={n} ranks"
            )
            p.add(bad_value("stages", ranks, valid.format(n=top)))
            return None
        if ranks is not None:
            object.__setattr__(self, "stages", ranks)
        return ranks

    def _times(self, p: Problems, name: str | None) -> None:
        """The retiming times; the ones left None take the schedule's defaults."""
        usual = None if name is None else default_times(name)
        checks = (("t_f", check_positive), ("t_b", check_positive), ("t_w", check_non_negative))
        for key, check in checks:
            if getattr(self, key) is None:
                if usual is None:  # the bad schedule is named already
                    continue
                object.__setattr__(self, key, usual[key])
            self._field(p, key, check)
        self._field(p, "t_comm", check_non_negative)

    @property
    def num_stages(self) -> int:
        """Virtual stages ``S = P * v``."""
        return self.plan.num_stages

    @property
    def times(self) -> dict[str, float]:
        """``{"t_f", "t_b", "t_w", "t_comm"}`` the executed order is retimed with."""
        return {k: float(getattr(self, k)) for k in ("t_f", "t_b", "t_w", "t_comm")}
