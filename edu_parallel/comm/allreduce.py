"""All-reduce as a concept to run: ring, naive, trees, parameter servers, Rabenseifner; measured.

:func:`~edu_parallel.plans.algorithms.plan_allreduce` checks a run's options once and builds its
plan once: an :class:`~edu_parallel.plans.algorithms.AllReduceRun`. :func:`allreduce_job` runs it on
every rank: it builds the rank's input, computes the reference with the builtin ``dist.all_reduce``
(untraced), then runs the plan, traced and timed. :func:`execute_allreduce` runs it on an executor
and returns an :class:`AllReduceReport`: bytes per rank from the trace against the formula, the
check against the builtin, and algbw/busbw by nccl-tests' definitions. :func:`run_allreduce` does
both in one call.

Memory: a rank holds its buffer (reduced in place), the builtin's result and one chunk of scratch,
within 3x the payload (:mod:`~edu_parallel.comm.memory`); the check runs a block at a time
(:func:`compare`) and only numbers travel back to the parent, never the buffers.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ..core.errors import check_choice
from ..core.i18n import N_, _
from ..core.metrics import algbw_gbps, busbw_gbps
from ..core.phases import phase_label
from ..core.trace import Trace
from ..core.units import INTEGER_DTYPES, format_bytes, torch_dtype
from ..core.width import fitted, ljust, rjust
from ..engine.context import RankContext
from ..engine.execute import release_scratch, run_plan, same_result
from ..engine.executor import Executor, in_torchrun
from ..plans.algorithms import (
    ALGOS,
    ALLREDUCE_FORMULA_TEXT,
    AllReduceRun,
    check_servers,
    formula_bytes,
    plan_allreduce,
)
from ..plans.layout import SEGMENT_BYTES, chunk_bytes, plan_meta
from ..plans.plan import Plan
from .memory import check_fits, peak_reset, peak_resident_bytes, resident_bytes

COMPARE_BLOCK = 1 << 16  # elements compared at a time: 512 KiB per float64 temporary


def allreduce_job(ctx: RankContext, run: AllReduceRun) -> dict[str, Any]:
    """On one rank: input, builtin reference (untraced), then the plan, traced and timed."""
    buf = run.buffer
    x = torch.from_numpy(buf.values(ctx.rank)).to(ctx.device, torch_dtype(buf.dtype))
    with ctx.tracer.paused():
        reference = x.clone()
        ctx.tracer.where("builtin dist.all_reduce (reference)")
        dist.all_reduce(reference)
    ctx.barrier()
    start = ctx.tracer.now()
    run_plan(ctx, run.plan, x, run.segment_bytes)
    end = ctx.tracer.now()
    matches, err = compare(x, reference, ctx.world_size, exact=buf.dtype in INTEGER_DTYPES)
    return {"start": start, "end": end, "matches_builtin": matches, "max_abs_err": err}


def compare(
    got: torch.Tensor, expected: torch.Tensor, world_size: int, exact: bool
) -> tuple[bool, float]:
    """:func:`~edu_parallel.engine.execute.same_result` and the largest absolute difference (in
    float64), a block of :data:`COMPARE_BLOCK` elements at a time: the same answer as on the whole
    tensors, with temporaries of one block instead of several copies of the payload."""
    matches, err = True, 0.0
    for a, b in zip(got.split(COMPARE_BLOCK), expected.split(COMPARE_BLOCK), strict=True):
        matches = matches and same_result(a, b, world_size, exact)
        err = max(err, float((a.double() - b.double()).abs().max()))
    return matches, err


def with_peak(job: Callable[..., Any], ctx: RankContext, *args: Any) -> tuple[Any, int | None]:
    """``job(ctx, *args)`` and the rise of this rank's resident set over it (high-water mark
    minus the resident size at the start), with no scratch kept from an earlier job, so the job
    pays for all it holds; None where the kernel cannot reset the mark (not Linux)."""
    release_scratch()
    gc.collect()  # an earlier job's garbage goes before the baseline, not during the job
    measured = peak_reset()
    before = resident_bytes() if measured else 0
    out = job(ctx, *args)
    return out, (peak_resident_bytes() - before if measured else None)


def allreduce_peak_job(ctx: RankContext, run: AllReduceRun) -> dict[str, Any]:
    """:func:`allreduce_job` with this rank's memory measured (:func:`with_peak`) as
    ``peak_bytes``."""
    out, peak = with_peak(allreduce_job, ctx, run)
    return {**out, "peak_bytes": peak}


@dataclass
class AllReduceReport:
    """The numbers a lesson and the CLI show for one all-reduce run."""

    algo: str
    world_size: int
    nbytes: int
    dtype: str
    per_rank_sent_bytes: list[int]
    per_rank_recv_bytes: list[int]
    per_phase_sent_bytes: dict[str, list[int]]
    formula_sent_bytes: list[float]
    matches_builtin: bool
    steps: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    trace: Trace = field(repr=False)
    plan: Plan = field(repr=False)
    servers: int | None = None  # parameter server: how many (None: the algorithm's default)
    formula_recv_bytes: list[float] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "concept": "allreduce",
            "algo": self.algo,
            "world_size": self.world_size,
            "nbytes": self.nbytes,
            "dtype": self.dtype,
            "per_rank_sent_bytes": self.per_rank_sent_bytes,
            "per_rank_recv_bytes": self.per_rank_recv_bytes,
            "per_phase_sent_bytes": self.per_phase_sent_bytes,
            "formula_sent_bytes": (
                self.formula_sent_bytes[0] if self.algo == "ring" else self.formula_sent_bytes
            ),
            "formula_sent_bytes_per_rank": self.formula_sent_bytes,
            "formula_recv_bytes_per_rank": self.formula_recv_bytes,
            "servers": self.servers,
            "matches_builtin": self.matches_builtin,
            "steps": self.steps,
            "steps_per_phase": self.plan.steps_per_phase(),
            "time_s": self.time_s,
            "algbw_gbps": self.algbw_gbps,
            "busbw_gbps": self.busbw_gbps,
        }


def execute_allreduce(
    executor: Executor, run: AllReduceRun, trace: bool = True
) -> AllReduceReport | None:
    """Run ``run`` on every rank of ``executor`` and measure it (None on torchrun's other ranks)."""
    out = executor.run(allreduce_job, run, trace=trace)
    if out is None:  # a non-zero rank under torchrun: rank 0 reports
        return None
    return report_from_run(out.results, out.trace, run, traced=trace)


def run_allreduce(
    cluster: Executor,
    size: int | str = "1MiB",
    dtype: str = "float32",
    algo: str = "ring",
    pattern: str = "random",
    seed: int = 0,
    trace: bool = True,
    segment_bytes: int = SEGMENT_BYTES,
    servers: int | None = None,
) -> AllReduceReport | None:
    """Run an all-reduce of ``size`` bytes per rank on ``cluster`` and measure it.

    ``cluster`` is a Cluster or a TorchrunExecutor (then only rank 0 gets a report, others None).
    ``pattern="powers_of_two"`` makes every partial sum readable as a set of ranks (animation).
    With ``trace=False`` nothing is recorded and the byte counts come from the plan.
    Messages above ``segment_bytes`` travel in pieces so reduction overlaps transfer; the trace
    still records one message per planned transfer. ``servers`` (``algo="ps"`` or
    ``"ps-sharded"`` only) sets how many ranks act as parameter servers.
    A ``size`` whose ranks would need more memory than this machine has free is refused before
    any rank allocates it (:func:`~edu_parallel.comm.memory.check_fits`; not under torchrun,
    whose ranks the launcher placed).
    """
    dims = getattr(cluster, "dims", cluster.world_size)  # a Cluster's dims: validated, trusted
    run = plan_allreduce(dims, size, dtype, algo, pattern, seed, segment_bytes, servers)
    if not in_torchrun():
        check_fits(run, run.plan.world_size, size)
    return execute_allreduce(cluster, run, trace)


def report_from_run(
    results: list[dict], trace: Trace, run: AllReduceRun, traced: bool = True
) -> AllReduceReport:
    """Build the report from per-rank job results and the merged trace (cluster or torchrun)."""
    plan, buf = run.plan, run.buffer
    n = plan.world_size
    trace.meta.update({**plan_meta(plan, buf.numel, buf.dtype, buf.pattern), "algo": run.algo})
    if traced:
        sent, recv = trace.sent_bytes(), trace.recv_bytes()
        counted = trace.sent_bytes(per_phase=True)
        per_phase = {p: counted.get(p, [0] * n) for p in plan.phases()}
    else:
        sizes = chunk_bytes(plan, buf.numel, buf.dtype)
        per_phase = plan.sent_bytes(sizes)
        sent = [sum(v[r] for v in per_phase.values()) for r in range(n)]
        recv = [0] * n
        for step in plan.steps:
            for t in step.transfers:
                recv[t.dst] += sizes[t.chunk]
    time_s = max(max(r["end"] - r["start"] for r in results), 1e-9)
    real = buf.real_bytes
    formula = formula_bytes(run.algo, n, real, run.servers)
    return AllReduceReport(
        algo=run.algo,
        world_size=n,
        nbytes=real,
        dtype=buf.dtype,
        per_rank_sent_bytes=list(sent),
        per_rank_recv_bytes=list(recv),
        per_phase_sent_bytes=dict(per_phase),
        formula_sent_bytes=formula["sent"],
        formula_recv_bytes=formula["recv"],
        servers=run.servers,
        matches_builtin=all(r["matches_builtin"] for r in results),
        steps=len(plan.steps),
        time_s=time_s,
        algbw_gbps=algbw_gbps(real, time_s),
        busbw_gbps=busbw_gbps("all_reduce", n, real, time_s),
        trace=trace,
        plan=plan,
    )


def step_table(trace: Trace) -> list[dict[str, Any]]:
    """One row per step: phase, transfers, bytes per transfer, measured wall time of the step."""
    rows: dict[int, dict[str, Any]] = {}
    for e in trace.events:
        if e.step is None or e.kind not in ("send", "recv", "compute"):
            continue
        row = rows.setdefault(
            e.step,
            {"step": e.step, "phase": e.phase, "transfers": [], "start": e.start, "end": e.end},
        )
        row["start"], row["end"] = min(row["start"], e.start), max(row["end"], e.end)
        if e.kind == "recv":
            row["transfers"].append((e.peer, e.rank, e.chunk, e.op, e.nbytes))
    out = []
    for step in sorted(rows):
        row = rows[step]
        row["transfers"].sort()
        row["wall_s"] = row["end"] - row["start"]
        out.append(row)
    return out


@fitted
def format_report(report: AllReduceReport, max_steps: int = 16) -> str:
    """The CLI's readable output: per-step table, then bytes against the formula, check,
    bandwidth. Columns are padded by display width (:mod:`edu_parallel.core.width`), so the
    Chinese headers line up too."""
    n, lines = report.world_size, []
    lines.append(
        _("{algo} all-reduce: {n} ranks, {size} per rank ({dtype})").format(
            algo=report.algo, n=n, size=format_bytes(report.nbytes), dtype=report.dtype
        )
    )
    lines.append("")
    head = [
        rjust(_("step"), 4) + " ",
        ljust(_("phase"), 15),
        ljust(_("transfers (src>dst chunk op)"), 44),
        rjust(_("bytes/msg"), 10),
        rjust(_("wall ms"), 8),
    ]
    lines.append(" ".join(head))
    rows = step_table(report.trace)
    for row in rows[:max_steps]:
        sym = {"reduce": "+", "copy": "="}
        text = " ".join(f"{s}>{d}:c{c}{sym.get(op, '?')}" for s, d, c, op, _b in row["transfers"])
        sizes = sorted({b for *_b, b in row["transfers"]})
        size = (
            format_bytes(sizes[0])
            if len(sizes) == 1
            else f"{format_bytes(sizes[0])}-{format_bytes(sizes[-1])}"
        )
        text = text if len(text) <= 44 else text[:41] + "..."
        lines.append(
            f"{row['step']:>4}  {ljust(phase_label(row['phase']), 15)} {text:<44} {size:>10}"
            f" {row['wall_s'] * 1e3:>8.3f}"
        )
    if len(rows) > max_steps:
        lines.append("   " + _("... {n} more steps").format(n=len(rows) - max_steps))
    lines.append("")
    phases = list(report.per_phase_sent_bytes)
    lines.append(
        rjust(_("rank"), 4)
        + "  "
        + "".join(rjust(phase_label(p), 16) for p in phases)
        + rjust(_("sent total"), 14)
        + rjust(_("formula"), 14)
    )
    for r in range(n):
        cells = "".join(f"{report.per_phase_sent_bytes[p][r]:>16,}" for p in phases)
        lines.append(
            f"{r:>4} "
            f" {cells}{report.per_rank_sent_bytes[r]:>14,}{report.formula_sent_bytes[r]:>14,.1f}"
        )
    formula = ALLREDUCE_FORMULA_TEXT.get(report.algo, N_("see the algorithm's module"))
    lines.append(
        _("formula: {formula}; uneven chunks differ from it by less than one chunk").format(
            formula=_(formula)
        )
    )
    lines.append(
        _("matches dist.all_reduce: {ok}").format(
            ok=_("yes") if report.matches_builtin else _("NO")
        )
    )
    lines.append(
        _(
            "time {ms} ms   algbw {algbw} GB/s   busbw {busbw} GB/s (algbw * 2(N-1)/N, nccl-tests)"
        ).format(
            ms=f"{report.time_s * 1e3:.3f}",
            algbw=f"{report.algbw_gbps:.4g}",
            busbw=f"{report.busbw_gbps:.4g}",
        )
    )
    return "\n".join(lines)


def cluster_runner(
    cluster: Executor,
    algo: str = "ring",
    dtype: str = "int64",
    pattern: str = "powers_of_two",
    servers: int | None = None,
) -> Callable[[int, int], Trace]:
    """``runner(world_size, nbytes) -> Trace`` on real ranks, for players and predict-then-run
    quizzes: ``cluster`` when the world size matches, else a short-lived cluster of that size
    (:meth:`~edu_parallel.engine.executor.Executor.sized`)."""
    check_choice("algo", algo, ALGOS)
    check_servers(algo, servers)

    def runner(world_size: int, nbytes: int) -> Trace:
        with cluster.sized(world_size) as ranks:
            return run_allreduce(ranks, nbytes, dtype, algo, pattern, servers=servers).trace

    return runner
