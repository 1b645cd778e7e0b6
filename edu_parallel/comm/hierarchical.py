"""Hierarchical all-reduce on real ranks grouped into pretend nodes, checked against torch.

The plan is :func:`edu_parallel.plans.hierarchical.hierarchical_allreduce_plan` (ring
reduce-scatter in each node, every local rank all-reduces its shard across nodes over its own NIC,
ring all-gather in each node: the 2D-torus all-reduce of Mikami et al. 2018, Horovod's hierarchical
all-reduce); :func:`run_hierarchical` runs it on
a cluster whose ranks are split into ``nodes`` equal groups, compares the result with
``dist.all_reduce`` and counts the bytes each rank sent inside its node and across nodes, beside
:func:`~edu_parallel.plans.hierarchical.hierarchical_bytes_formula` (``2(g-1)/g·S`` and
``2(K-1)/K·S/g``). Its retimed trace with a two-level
:class:`~edu_parallel.models.topology.Topology` equals :func:`edu_parallel.models.cost.predict`
(``"hierarchical"``) for any number of NICs per node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ..core.i18n import _
from ..core.inputs import Buffer
from ..core.metrics import algbw_gbps, busbw_gbps
from ..core.trace import Trace
from ..core.units import INTEGER_DTYPES, torch_dtype
from ..engine.context import RankContext
from ..engine.execute import run_plan, same_result
from ..engine.executor import Executor
from ..models.topology import LINKS, Topology, sent_by_link_class
from ..plans.hierarchical import hierarchical_allreduce_plan, hierarchical_bytes_formula
from ..plans.layout import plan_meta
from ..plans.plan import Plan


def hierarchical_job(ctx: RankContext, plan: Plan, buffer: Buffer) -> dict[str, Any]:
    """On one rank: input, builtin ``dist.all_reduce`` reference (untraced), then the plan,
    traced."""
    x = torch.from_numpy(buffer.values(ctx.rank)).to(ctx.device, torch_dtype(buffer.dtype))
    with ctx.tracer.paused():
        reference = x.clone()
        dist.all_reduce(reference)
    ctx.barrier()
    start = ctx.tracer.now()
    run_plan(ctx, plan, x)
    end = ctx.tracer.now()
    exact = buffer.dtype in INTEGER_DTYPES
    return {
        "start": start,
        "end": end,
        "matches_builtin": same_result(x, reference, ctx.world_size, exact),
    }


@dataclass
class HierarchicalReport:
    """One run of the hierarchical all-reduce on pretend nodes. ``per_rank_intra_bytes`` and
    ``per_rank_inter_bytes``: bytes each rank sent inside its node and across nodes, counted from
    the trace; ``formula_bytes``: :func:`hierarchical_bytes_formula` for this run."""

    nodes: int
    gpus_per_node: int
    nbytes: int
    dtype: str
    matches_builtin: bool
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    per_rank_sent_bytes: list[int]
    per_rank_intra_bytes: list[int]
    per_rank_inter_bytes: list[int]
    formula_bytes: dict[str, float]
    trace: Trace = field(repr=False)
    plan: Plan = field(repr=False)


def run_hierarchical(
    cluster: Executor,
    nodes: int,
    size: int | str = "1MiB",
    dtype: str = "float32",
    pattern: str = "random",
    seed: int = 0,
    trace: bool = True,
) -> HierarchicalReport | None:
    """Run the hierarchical all-reduce on ``cluster`` split into ``nodes`` pretend nodes and check
    it against ``dist.all_reduce``. ``nodes`` must divide ``cluster.world_size``."""
    n = cluster.world_size
    shape = Topology.split(n, nodes, LINKS["nvlink4-h100"])  # validates nodes against the ranks
    buffer = Buffer(size, dtype, pattern, seed)
    plan = hierarchical_allreduce_plan(shape.nodes, shape.gpus_per_node)
    out = cluster.run(hierarchical_job, plan, buffer, trace=trace)
    if out is None:  # a non-zero rank under torchrun
        return None
    out.trace.meta.update(
        {
            **plan_meta(plan, buffer.numel, buffer.dtype, buffer.pattern),
            "nodes": shape.nodes,
            "gpus_per_node": shape.gpus_per_node,
        }
    )
    time_s = max(max(r["end"] - r["start"] for r in out.results), 1e-9)
    real = buffer.real_bytes
    intra, inter = sent_by_link_class(out.trace, shape) if trace else ([], [])
    return HierarchicalReport(
        nodes=shape.nodes,
        gpus_per_node=shape.gpus_per_node,
        nbytes=real,
        dtype=dtype,
        matches_builtin=all(r["matches_builtin"] for r in out.results),
        time_s=time_s,
        algbw_gbps=algbw_gbps(real, time_s),
        busbw_gbps=busbw_gbps("all_reduce", n, real, time_s),
        per_rank_sent_bytes=list(out.trace.sent_bytes()) if trace else [],
        per_rank_intra_bytes=intra,
        per_rank_inter_bytes=inter,
        formula_bytes=hierarchical_bytes_formula(shape.nodes, shape.gpus_per_node, real),
        trace=out.trace,
        plan=plan,
    )


def hierarchical_runner(cluster: Executor) -> Callable[[int, int], Trace]:
    """``runner(nodes, nbytes) -> Trace``: the hierarchical all-reduce on ``cluster``'s real ranks
    split into ``nodes`` pretend nodes, checked against ``dist.all_reduce`` (a mismatch raises),
    for lesson 05's predict-then-run question."""

    def runner(nodes: int, nbytes: int) -> Trace:
        report = run_hierarchical(cluster, nodes, nbytes)
        if not report.matches_builtin:
            raise RuntimeError(_("the hierarchical all-reduce differs from dist.all_reduce"))
        return report.trace

    return runner
