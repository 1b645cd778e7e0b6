"""Collective semantics, from a run: every collective's plan on real ranks, checked against torch.

:func:`~edu_parallel.plans.collectives.plan_collective` checks a run's options once and builds its
plan once (a :class:`~edu_parallel.plans.collectives.CollectiveRun`). :func:`collective_job` runs it
on every rank: it builds the rank's buffer of ``D`` bytes, sets the inputs up the way the collective
defines them, computes the reference with the builtin ``torch.distributed`` collective (untraced),
then runs the plan of :data:`~edu_parallel.plans.collectives.COLLECTIVE_PLANS`, traced and timed,
and compares the chunks the collective defines. :func:`run_collective` runs it on a cluster and
returns a :class:`CollectiveReport`: bytes per rank against
:func:`~edu_parallel.plans.collectives.volume_formula`, the check, and algbw/busbw by nccl-tests'
definitions (doc/PERFORMANCE.md in NVIDIA/nccl-tests).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ..core.i18n import _
from ..core.metrics import algbw_gbps, bus_factor, bus_factor_source
from ..core.trace import Trace
from ..core.units import INTEGER_DTYPES, format_bytes, torch_dtype
from ..core.width import fitted, rjust
from ..engine.context import RankContext
from ..engine.execute import run_plan
from ..engine.executor import Executor
from ..plans.collectives import (
    CLI_NAMES,
    CollectiveRun,
    defined_chunks,
    plan_collective,
    volume_formula,
)
from ..plans.layout import SEGMENT_BYTES, chunk_bytes, plan_meta
from ..plans.plan import REDUCTIONS, ROOTED, Plan
from .allreduce import compare, with_peak

BUFFER_LIMIT = 4096  # bytes per rank: up to this, the result carries the buffers before and after


def _reference(name: str, x: Any, chunks: tuple, n: int, r: int, root: int) -> tuple[Any, str]:
    """The builtin's result on this rank, concatenated over :func:`defined_chunks`, and its name.

    torch 2.13 deprecates ``all_gather_into_tensor``/``reduce_scatter_tensor`` for the same calls
    named ``all_gather_single``/``reduce_scatter_single``; both work on gloo (checked), so the
    reduce-scatter reference is the builtin itself, not an all-reduce sliced."""
    part = x.numel() // n
    if name in ("all_reduce", "broadcast", "reduce"):
        out = x.clone()
        {
            "all_reduce": lambda: dist.all_reduce(out),
            "broadcast": lambda: dist.broadcast(out, root),
            "reduce": lambda: dist.reduce(out, root),
        }[name]()
        return (out if name != "reduce" or r == root else out[:0]), f"dist.{name}"
    if name in ("all_gather", "reduce_scatter"):
        new, old = {
            "all_gather": ("all_gather_single", "all_gather_into_tensor"),
            "reduce_scatter": ("reduce_scatter_single", "reduce_scatter_tensor"),
        }[name]
        call = new if hasattr(dist, new) else old
        if name == "all_gather":
            out = torch.empty_like(x)
            getattr(dist, call)(out, chunks[r].clone())
        else:
            out = torch.empty(part, dtype=x.dtype, device=x.device)
            getattr(dist, call)(out, x.clone())
        return out, f"dist.{call}"
    if name == "all_to_all":
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.clone())
        return out, "dist.all_to_all_single"
    if name == "gather":
        parts = [torch.empty(part, dtype=x.dtype, device=x.device) for _ in range(n)]
        dist.gather(chunks[r].clone(), parts if r == root else None, dst=root)
        return (torch.cat(parts) if r == root else x[:0]), "dist.gather"
    out = torch.empty(part, dtype=x.dtype, device=x.device)  # scatter
    dist.scatter(out, [c.clone() for c in chunks] if r == root else None, src=root)
    return out, "dist.scatter"


def collective_job(ctx: RankContext, run: CollectiveRun) -> dict[str, Any]:
    """On one rank: inputs per the collective, builtin reference (untraced), the plan (traced).

    Cells that are output only start at zero (all-gather and gather: every chunk but the rank's
    own; broadcast and scatter: the whole buffer of every rank but the root), so the buffers show
    what moved. Data movement is compared bit for bit, sums exactly for integers and with
    ``allclose`` for floats (another order of additions), on the chunks the collective defines.
    """
    n, r, name, root, buf = ctx.world_size, ctx.rank, run.collective, run.root, run.buffer
    plan = run.plan
    x = torch.from_numpy(buf.values(r)).to(ctx.device, torch_dtype(buf.dtype))
    chunks = torch.tensor_split(x, plan.num_chunks)  # views into x, shape [numel / chunks] each
    if name in ("all_gather", "gather"):
        for k, c in enumerate(chunks):
            if k != r:
                c.zero_()
    elif name in ("broadcast", "scatter") and r != root:
        x.zero_()
    before = x.clone() if buf.real_bytes <= BUFFER_LIMIT else None  # only a small one is shown
    with ctx.tracer.paused():
        ctx.tracer.where(f"builtin {name} (reference)")
        expected, reference = _reference(name, x, chunks, n, r, root)
    ctx.barrier()
    start = ctx.tracer.now()
    run_plan(ctx, plan, x, run.segment_bytes)
    end = ctx.tracer.now()
    defined = defined_chunks(name, r, root, plan.num_chunks)
    exact = buf.dtype in INTEGER_DTYPES or name not in REDUCTIONS
    matches, err, offset = True, 0.0, 0
    for k in defined:  # chunk by chunk, in blocks: no copy of the whole result is made
        part = expected[offset : offset + chunks[k].numel()]
        ok, diff = compare(chunks[k], part, n, exact)
        matches, err, offset = matches and ok, max(err, diff), offset + chunks[k].numel()
    out = {
        "start": start,
        "end": end,
        "matches_builtin": matches,
        "max_abs_err": err,
        "reference": reference,
        "defined": defined,
    }
    if before is not None:
        out["before"], out["after"] = before.double().tolist(), x.double().tolist()
    return out


def collective_peak_job(ctx: RankContext, run: CollectiveRun) -> dict[str, Any]:
    """:func:`collective_job` with this rank's memory measured
    (:func:`~edu_parallel.comm.allreduce.with_peak`) as ``peak_bytes``."""
    out, peak = with_peak(collective_job, ctx, run)
    return {**out, "peak_bytes": peak}


@dataclass
class CollectiveReport:
    """What a lesson and the CLI show for one run of a collective's plan."""

    collective: str
    world_size: int
    nbytes: int
    dtype: str
    root: int
    per_rank_sent_bytes: list[int]
    per_rank_recv_bytes: list[int]
    formula: dict[str, Any]
    matches_builtin: bool
    reference: str
    steps: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    bus_factor: float
    bus_factor_source: str
    defined: list[list[int]]  # [rank] -> chunks the collective defines there
    before: list[list[float]] | None  # [rank][element], small runs only
    after: list[list[float]] | None
    trace: Trace = field(repr=False)
    plan: Plan = field(repr=False)

    @property
    def concept(self) -> str:
        return {v: k for k, v in CLI_NAMES.items()}.get(self.collective, self.collective)

    @property
    def chunk_bounds(self) -> list[int]:
        return self.trace.meta["chunk_bounds"]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "concept": self.concept,
            "collective": self.collective,
            "algo": self.plan.name,
            "world_size": self.world_size,
            "nbytes": self.nbytes,
            "dtype": self.dtype,
            "root": self.root if self.collective in ROOTED else None,
            "per_rank_sent_bytes": self.per_rank_sent_bytes,
            "per_rank_recv_bytes": self.per_rank_recv_bytes,
            "formula_sent_bytes": self.formula["sent"],
            "formula_recv_bytes": self.formula["recv"],
            "formula": {k: self.formula[k] for k in ("sent_text", "recv_text", "convention")},
            "matches_builtin": self.matches_builtin,
            "reference": self.reference,
            "steps": self.steps,
            "num_chunks": self.plan.num_chunks,
            "time_s": self.time_s,
            "algbw_gbps": self.algbw_gbps,
            "busbw_gbps": self.busbw_gbps,
            "bus_factor": self.bus_factor,
            "bus_factor_source": self.bus_factor_source,
            "plan": self.plan.to_text(),
        }


def execute_collective(
    executor: Executor, run: CollectiveRun, trace: bool = True
) -> CollectiveReport | None:
    """Run ``run`` on every rank of ``executor`` (None on torchrun's other ranks)."""
    out = executor.run(collective_job, run, trace=trace)
    if out is None:
        return None
    return report_from_run(out.results, out.trace, run, trace)


def run_collective(
    cluster: Executor,
    name: str,
    size: int | str = "1MiB",
    dtype: str = "float32",
    pattern: str = "random",
    seed: int = 0,
    trace: bool = True,
    root: int = 0,
    segment_bytes: int = SEGMENT_BYTES,
) -> CollectiveReport | None:
    """Run collective ``name`` (a key of COLLECTIVE_PLANS, or a CLI name such as "allgather") on
    ``cluster`` with ``size`` bytes per rank, check it against torch and measure it.

    Sizes the builtin cannot cut into N equal parts raise a ValueError before anything runs. Under
    torchrun only rank 0 gets a report (others None). ``trace=False`` counts bytes from the plan."""
    dims = getattr(cluster, "dims", cluster.world_size)  # a Cluster's dims: validated, trusted
    run = plan_collective(dims, name, size, dtype, pattern, seed, root, segment_bytes)
    return execute_collective(cluster, run, trace)


def report_from_run(
    results: list[dict], trace: Trace, run: CollectiveRun, traced: bool = True
) -> CollectiveReport:
    """Build the report from per-rank job results and the merged trace."""
    plan, buf, name = run.plan, run.buffer, run.collective
    n, real = plan.world_size, buf.real_bytes
    trace.meta.update({**plan_meta(plan, buf.numel, buf.dtype, buf.pattern), "root": run.root})
    if traced:
        sent, recv = list(trace.sent_bytes()), list(trace.recv_bytes())
    else:
        sizes = chunk_bytes(plan, buf.numel, buf.dtype)
        sent, recv = [0] * n, [0] * n
        for step in plan.steps:
            for t in step.transfers:
                sent[t.src] += sizes[t.chunk]
                recv[t.dst] += sizes[t.chunk]
    time_s = max(max(r["end"] - r["start"] for r in results), 1e-9)
    factor = bus_factor(name, n)
    small = all("before" in r for r in results)
    return CollectiveReport(
        collective=name,
        world_size=n,
        nbytes=real,
        dtype=buf.dtype,
        root=run.root,
        per_rank_sent_bytes=sent,
        per_rank_recv_bytes=recv,
        formula=volume_formula(name, n, real, run.root),
        matches_builtin=all(r["matches_builtin"] for r in results),
        reference=results[0]["reference"],
        steps=len(plan.steps),
        time_s=time_s,
        algbw_gbps=algbw_gbps(real, time_s),
        busbw_gbps=algbw_gbps(real, time_s) * factor,
        bus_factor=factor,
        bus_factor_source=bus_factor_source(name),
        defined=[r["defined"] for r in results],
        before=[r["before"] for r in results] if small else None,
        after=[r["after"] for r in results] if small else None,
        trace=trace,
        plan=plan,
    )


def _cell(values: list[float], lo: int, hi: int) -> str:
    v = values[lo] if hi > lo else None
    text = "-" if v is None else f"{v:.3g}" if v != int(v) else str(int(v))
    return text + (".." if hi - lo > 1 else "")


@fitted
def format_collective(report: CollectiveReport, max_plan_lines: int = 12) -> str:
    """Text for the CLI: the plan, bytes per rank against the formula, check, bandwidth, and for
    small runs each chunk's first value before and after (``..``: more values follow)."""
    n, f = report.world_size, report.formula
    root = _(", root {root}").format(root=report.root) if report.collective in ROOTED else ""
    lines = [
        _("{plan} ({collective}): {n} ranks, {size} per rank ({dtype}){root}").format(
            plan=report.plan.name,
            collective=report.collective,
            n=n,
            size=format_bytes(report.nbytes),
            dtype=report.dtype,
            root=root,
        ),
        "",
    ]
    plan_lines = report.plan.to_text().splitlines()
    lines += plan_lines[: max_plan_lines + 1]
    if len(plan_lines) > max_plan_lines + 1:
        lines.append(_("... {n} more steps").format(n=len(plan_lines) - max_plan_lines - 1))
    head = [_("rank"), _("sent"), _("formula"), _("received"), _("formula")]
    lines += ["", " ".join(rjust(h, w) for h, w in zip(head, (4, 12, 12, 12, 12), strict=True))]
    for r in range(n):
        lines.append(
            f"{r:>4} {report.per_rank_sent_bytes[r]:>12,} {f['sent'][r]:>12,.1f} "
            f"{report.per_rank_recv_bytes[r]:>12,} {f['recv'][r]:>12,.1f}"
        )
    lines.append(
        _("formula: sent {sent}; received {received}").format(
            sent=_(f["sent_text"]), received=_(f["recv_text"])
        )
    )
    lines.append(
        _(
            "S = the larger of input and output per rank (nccl-tests doc/PERFORMANCE.md); "
            "uneven chunks differ by less than one chunk"
        )
    )
    if report.before is not None and report.after is not None:
        b = report.chunk_bounds
        lines.append("")
        lines.append(
            _("first value of each chunk, before -> after (* = defined by the collective)")
        )
        for r in range(n):
            cells = [_cell(report.before[r], b[k], b[k + 1]) for k in range(len(b) - 1)]
            done = [
                _cell(report.after[r], b[k], b[k + 1]) + ("*" if k in report.defined[r] else "")
                for k in range(len(b) - 1)
            ]
            lines.append(f"  r{r}: [{' '.join(cells)}] -> [{' '.join(done)}]")
    lines.append("")
    lines.append(
        _("matches {reference}: {ok}").format(
            reference=report.reference, ok=_("yes") if report.matches_builtin else _("NO")
        )
    )
    lines.append(
        _(
            "steps {steps}   time {ms} ms   algbw {algbw} GB/s   busbw {busbw} GB/s"
            " (algbw * {factor}, {source})"
        ).format(
            steps=report.steps,
            ms=f"{report.time_s * 1e3:.3f}",
            algbw=f"{report.algbw_gbps:.4g}",
            busbw=f"{report.busbw_gbps:.4g}",
            factor=f"{report.bus_factor:.4g}",
            source=report.bus_factor_source,
        )
    )
    return "\n".join(lines)


def collective_runner(cluster: Executor) -> Callable[[str, int, int], Trace]:
    """``runner(collective, world_size, nbytes) -> Trace`` on real ranks, for predict-then-run
    quizzes: ``cluster`` when the world size matches, else a short-lived one of that size."""

    def runner(collective: str, world_size: int, nbytes: int) -> Trace:
        with cluster.sized(world_size) as ranks:
            return run_collective(ranks, collective, nbytes).trace

    return runner
