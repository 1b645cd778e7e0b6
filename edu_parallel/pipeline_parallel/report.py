"""Pipeline parallelism on real ranks: run a schedule, check the gradients, time the bubble.

:func:`run_pipeline` builds a schedule (GPipe, Huang et al. 2019, arXiv 1811.06965; 1F1B and
interleaved 1F1B, Narayanan et al. "Megatron-LM" 2021, arXiv 2104.04473; ZB-H1, Qi et al. 2023,
"Zero Bubble Pipeline Parallelism", arXiv 2401.10241), runs it on the first ``P`` ranks of a
cluster with :func:`~edu_parallel.pipeline_parallel.execute.pipeline_job`, and returns a
:class:`PipelineReport`:

* ``matches_reference``: every stage's weight gradients equal (``allclose``) those of the same
  model and batch trained on one process, so the schedule changes *when* work runs, not the maths;
* ``bubble_fraction_retimed``: the executed per-rank order (read back from the trace) retimed
  with ``t_f``, ``t_b``, ``t_w`` by :func:`~edu_parallel.pipeline_parallel.timing.time_schedule`;
  four ranks on two cores cannot show real parallel timing, so the wall-clock trace is kept but
  labelled measured, and the bubble comes from the retimed *executed* order;
* ``bubble_fraction_formula``: GPipe's share of total time ``(P-1)/(M+P-1)`` (ZB-H1 and
  interleaved: their papers' bubble in the same convention), with Megatron's ``(P-1)/M``
  (relative to ideal time) beside it (ERRATA E3: two conventions, one number);
* ``peak_activations_per_stage``: the most microbatches whose activations were alive at once on
  each stage, counted from the tensors kept during the run: GPipe ``M``, 1F1B ``min(P-i, M)`` on
  stage ``i`` (ERRATA E2: 1F1B takes the stash from O(M) to O(P), not to O(1)). "O(1)" holds in
  M only: stage 0 holds P microbatches of L/P layers each, L layers of one microbatch, the whole
  model's activations for one microbatch whatever P is (Korthikanti et al. 2022, arXiv 2205.05198,
  §4.2.3). ZB-H1 holds P on every stage: each W is deferred, and the stash lives until W.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..core.i18n import _
from ..core.trace import Trace
from ..core.width import MAX_TEXT_COLUMNS, fitted, wrap_text
from ..engine.executor import Executor
from .config import PipelineConfig
from .execute import pipeline_job
from .formulas import bubble_formula
from .model import grads_match, reference_grads
from .schedule import KINDS, Action
from .timing import Timeline, time_schedule

__all__ = [
    "PipelineReport",
    "execute_pipeline",
    "executed_orders",
    "format_pipeline",
    "pipeline_job",
    "run_pipeline",
]


@dataclass
class PipelineReport:
    """What a pipeline run shows: schedule, bubble (retimed and formula), memory, correctness."""

    schedule: str  # the schedule's name, e.g. "1f1b"
    stages: int  # P, ranks that take part
    microbatches: int  # M
    chunks: int  # v, model chunks per rank (virtual stages S = P * v)
    layers: int
    schedule_text: str  # Schedule.to_text(): the planned slot grid
    executed_orders: list[list[str]]  # per rank, the actions in the order they ran ("1F0")
    follows_schedule: bool  # executed orders == the schedule's rows without idle slots
    bubble_fraction_retimed: float  # retimed executed order, share of total time
    bubble_fraction_formula: float  # GPipe convention (share of total)
    bubble_relative_to_ideal_retimed: float  # Megatron convention (bubble / ideal)
    bubble_relative_to_ideal_formula: float
    formula: dict[str, Any]  # bubble_formula(): text, source, when it is exact
    peak_activations_per_stage: list[int]  # counted from live tensors during the run
    peak_activations_retimed: list[int]  # the same, read off the retimed timeline
    peak_activation_bytes_per_rank: list[int]  # bytes autograd saved, at the worst moment
    matches_reference: bool
    max_abs_err: float
    times: dict[str, float]  # t_f, t_b, t_w, t_comm used for the retimed timeline
    wall_s_per_rank: list[float]  # measured, on a shared machine: not parallel timing
    trace: Trace = field(repr=False)  # wall clock, measured
    timeline: Timeline = field(repr=False)  # retimed executed order

    @property
    def matches_builtin(self) -> bool:
        """The CLI's exit status reads this name: here it is the single-process check."""
        return self.matches_reference

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "concept": "pipeline",
            "schedule": self.schedule_text,
            "schedule_name": self.schedule,
            "stages": self.stages,
            "world_size": self.trace.meta.get("world_size", self.stages),
            "microbatches": self.microbatches,
            "chunks": self.chunks,
            "layers": self.layers,
            "executed_orders": self.executed_orders,
            "follows_schedule": self.follows_schedule,
            "bubble_fraction_retimed": self.bubble_fraction_retimed,
            "bubble_fraction_formula": self.bubble_fraction_formula,
            "bubble_relative_to_ideal_retimed": self.bubble_relative_to_ideal_retimed,
            "bubble_relative_to_ideal_formula": self.bubble_relative_to_ideal_formula,
            "formula": self.formula,
            "peak_activations_per_stage": self.peak_activations_per_stage,
            "peak_activations_retimed": self.peak_activations_retimed,
            "peak_activation_bytes_per_rank": self.peak_activation_bytes_per_rank,
            "matches_reference": self.matches_reference,
            "max_abs_err": self.max_abs_err,
            "times": self.times,
            "makespan_retimed": self.timeline.makespan,
            "wall_s_per_rank": self.wall_s_per_rank,
        }


def executed_orders(trace: Trace, num_ranks: int) -> list[list[Action]]:
    """Each rank's F/B/I/W compute events, by start time, as Actions: what really ran, in order."""
    orders: list[list[Action]] = [[] for _ in range(num_ranks)]
    events = sorted(trace.select("compute"), key=lambda e: (e.rank, e.start))  # stable
    for e in events:
        if e.op in KINDS and e.rank < num_ranks and e.attrs:
            orders[e.rank].append(Action(int(e.attrs["stage"]), e.op, int(e.attrs["microbatch"])))
    return orders


def run_pipeline(
    cluster: Executor,
    schedule: str = "1f1b",
    stages: int | None = None,
    microbatches: int = 8,
    chunks: int = 1,
    layers: int | None = None,
    hidden: int = 32,
    t_f: float | None = None,
    t_b: float | None = None,
    t_w: float | None = None,
    seed: int = 0,
    *,
    microbatch_size: int = 4,
    t_comm: float = 0.0,
    timeout: float | None = None,
) -> PipelineReport | None:
    """Run ``schedule`` with ``stages`` ranks (default: all), ``microbatches`` and ``chunks``.

    The model is ``layers`` seeded blocks ``Linear(hidden, hidden) + GeLU`` (default ``2 * P * v``),
    cut into ``P * v`` consecutive stages; stage ``s`` runs on rank ``s % P``; ranks ``>= P`` idle.
    ``t_f``, ``t_b``, ``t_w`` (per model chunk) retime the executed order: I costs ``t_b``, W
    ``t_w`` and a full backward B ``t_b + t_w``; each one left None takes
    :func:`~edu_parallel.pipeline_parallel.timing.default_times` (ZB-H1: the paper's t_f = t_b =
    t_w = 1; the others t_b = 2, t_w = 0). Under torchrun only rank 0 gets the report.

    Every argument is checked once, here, into a
    :class:`~edu_parallel.pipeline_parallel.config.PipelineConfig` (the executor's ranks bound
    ``stages``); :func:`execute_pipeline` runs it.
    """
    config = PipelineConfig(
        schedule,  # type: ignore[arg-type]
        stages,
        microbatches,
        chunks,
        layers,
        hidden,
        microbatch_size,
        seed,
        t_f,
        t_b,
        t_w,
        t_comm,
        world_size=cluster.world_size,
    )
    return execute_pipeline(cluster, config, timeout=timeout)


def execute_pipeline(
    executor: Executor, config: PipelineConfig, *, timeout: float | None = None
) -> PipelineReport | None:
    """Run the checked ``config`` on ``executor`` (built for its world size, as
    :func:`run_pipeline` and the CLI build it): the ranks and the one-process reference take it
    as it is, nothing is checked again. None on a non-zero rank under torchrun."""
    sched, layers, hidden = config.plan, config.layers, config.hidden
    microbatch_size, seed = config.microbatch_size, config.seed
    times = config.times
    t_f, t_b, t_w, t_comm = (times[k] for k in ("t_f", "t_b", "t_w", "t_comm"))
    text = sched.to_text()
    kw = {} if timeout is None else {"timeout": timeout}
    out = executor.run(pipeline_job, config, **kw)
    if out is None:  # a non-zero rank under torchrun
        return None
    results = out.results[: sched.num_ranks]
    trace = out.trace
    got = {s: g for r in results for s, g in r["grads"].items()}
    want = reference_grads(
        sched.num_stages, layers, hidden, sched.num_microbatches, microbatch_size, seed
    )
    err = max(
        (
            float((g - w).abs().max())
            for s in want
            if s in got
            for g, w in zip(got[s], want[s], strict=True)
        ),
        default=float("inf"),
    )
    orders = executed_orders(trace, sched.num_ranks)
    timeline = replace(time_schedule(orders, t_f, t_b, t_w, t_comm), name=sched.name)
    formula = bubble_formula(
        sched.name, sched.num_ranks, sched.num_microbatches, sched.chunks, t_f, t_b, t_w
    )
    share = timeline.bubble_fraction()
    peak = [0] * sched.num_stages
    for r in results:
        for s, n in r["peak_live"].items():
            peak[s] = n
    trace.meta.update(
        {
            "concept": "pipeline",
            "schedule": sched.name,
            "schedule_text": text,
            "clock": "measured",
            "stages": sched.num_ranks,
            "num_stages": sched.num_stages,
            "microbatches": sched.num_microbatches,
            "chunks": sched.chunks,
            "layers": layers,
            "hidden": hidden,
            "microbatch_size": microbatch_size,
        }
    )
    return PipelineReport(
        schedule=sched.name,
        stages=sched.num_ranks,
        microbatches=sched.num_microbatches,
        chunks=sched.chunks,
        layers=layers,
        schedule_text=text,
        executed_orders=[[a.text() for a in row] for row in orders],
        follows_schedule=orders == sched.orders(),
        bubble_fraction_retimed=share,
        bubble_fraction_formula=formula["share_of_total"],
        bubble_relative_to_ideal_retimed=share / (1 - share) if share < 1 else float("inf"),
        bubble_relative_to_ideal_formula=formula["relative_to_ideal"],
        formula=formula,
        peak_activations_per_stage=peak,
        peak_activations_retimed=timeline.peak_activations_per_stage(),
        peak_activation_bytes_per_rank=[r["peak_activation_bytes"] for r in results],
        matches_reference=grads_match(got, want),
        max_abs_err=err,
        times=times,
        wall_s_per_rank=[r["end"] - r["start"] for r in results],
        trace=trace,
        timeline=timeline,
    )


def _grid(timeline: Timeline, unit: float) -> list[str]:
    """The retimed timeline as text: one row per rank, one cell per ``unit`` of time, in blocks
    of as many cells as fit :data:`~edu_parallel.core.width.MAX_TEXT_COLUMNS` (a longer one
    continues below, after a line naming its first time).

    An action longer than one unit shows its label, then ``-`` cells; ``.`` is an idle unit."""
    width = max(len(s.action.text()) for s in timeline.spans) + 1
    cols = int(round(timeline.makespan / unit))
    rows = []
    for r in range(timeline.num_ranks):
        cells = ["." + " " * (width - 1)] * cols
        for s in timeline.spans:
            if s.rank == r:
                first, last = int(round(s.start / unit)), int(round(s.end / unit))
                for c in range(first, min(max(last, first + 1), cols)):
                    label = s.action.text() if c == first else "-" * (width - 1)
                    cells[c] = label.ljust(width)
        rows.append(cells)
    lead = max(len(f"r{r}  ") for r in range(timeline.num_ranks))
    fits = max(1, (MAX_TEXT_COLUMNS - lead) // width)
    per_block = -(-cols // -(-cols // fits)) if cols else fits  # the blocks as even as they go
    lines = []
    for start in range(0, cols, per_block):
        if start:  # a continuation: where in time it starts
            lines.append(f"{'':<{lead}}t = {start * unit:g}")
        for r, cells in enumerate(rows):
            lines.append(f"{f'r{r}':<{lead}}" + "".join(cells[start : start + per_block]).rstrip())
    return lines


@fitted
def format_pipeline(report: PipelineReport, max_columns: int = 60) -> str:
    """The CLI's text: retimed grid, bubble against the formula, peak activations, the check."""
    tl, f = report.timeline, report.formula
    yes, no = _("yes"), _("NO")
    lines = [
        _(
            "{schedule} pipeline: P={stages} ranks, M={microbatches} microbatches, v={chunks}"
            " chunk(s), {layers} Linear+GeLU blocks"
        ).format(
            schedule=report.schedule,
            stages=report.stages,
            microbatches=report.microbatches,
            chunks=report.chunks,
            layers=report.layers,
        ),
        "",
    ]
    t = report.times
    unit = min(x for x in (t["t_f"], t["t_b"], t["t_w"]) if x > 0)
    lines.append(
        _(
            "executed order, retimed with t_f={t_f} t_b={t_b} t_w={t_w} (one column = {unit};"
            " '.' = idle):"
        ).format(t_f=f"{t['t_f']:g}", t_b=f"{t['t_b']:g}", t_w=f"{t['t_w']:g}", unit=f"{unit:g}")
    )
    if tl.makespan / unit <= max_columns:
        lines += _grid(tl, unit)
    else:
        lines.append(
            "   "
            + _("({n} actions; too wide to draw, see report.timeline)").format(n=len(tl.spans))
        )
    lines.append(
        _("follows the schedule's order: {ok}").format(ok=yes if report.follows_schedule else no)
    )
    lines.append("")
    lines.append(
        _("bubble (share of total, GPipe):       retimed {retimed}   formula {formula}").format(
            retimed=f"{report.bubble_fraction_retimed:.4f}",
            formula=f"{report.bubble_fraction_formula:.4f}",
        )
    )
    lines.append(
        _("bubble (relative to ideal, Megatron): retimed {retimed}   formula {formula}").format(
            retimed=f"{report.bubble_relative_to_ideal_retimed:.4f}",
            formula=f"{report.bubble_relative_to_ideal_formula:.4f}",
        )
    )
    formula = _("formula: {formula}  [{source}; exact when {exact_when}]").format(
        formula=_(f["formula"]), source=f["source"], exact_when=_(f["exact_when"])
    )
    lines += wrap_text(formula, MAX_TEXT_COLUMNS, hanging="  ")
    lines.append("")
    lines.append(_("peak live microbatch activations per stage (counted during the run):"))
    lines.append(
        "  " + "  ".join(f"s{s}:{n}" for s, n in enumerate(report.peak_activations_per_stage))
    )
    lines.append(
        _("matches the single-process reference: {ok} (max |diff| {diff})").format(
            ok=yes if report.matches_reference else no, diff=f"{report.max_abs_err:.2e}"
        )
    )
    wall = " ".join(f"r{r}:{w * 1e3:.1f}ms" for r, w in enumerate(report.wall_s_per_rank))
    lines.append(
        _("wall clock per rank (measured, ranks share this machine's cores): {wall}").format(
            wall=wall
        )
    )
    return "\n".join(lines)


def pipeline_runner(cluster: Executor) -> Any:
    """``run(schedule, P, M, v=1, t_f, t_b, t_w) -> PipelineReport`` on ``cluster`` (P <= its
    world size; times None: ``default_times(schedule)``): the real-run hook of the pipeline
    widget and of the lesson's quiz."""

    def run(
        schedule: str,
        stages: int,
        microbatches: int,
        chunks: int = 1,
        t_f: float | None = None,
        t_b: float | None = None,
        t_w: float | None = None,
    ) -> PipelineReport | None:
        return run_pipeline(
            cluster, schedule, stages, microbatches, chunks, t_f=t_f, t_b=t_b, t_w=t_w
        )

    return run
