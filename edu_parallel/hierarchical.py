"""Hierarchical all-reduce: reduce inside each node, all-reduce between nodes, broadcast back.

Ranks are ``nodes x gpus_per_node`` (node-major, as :class:`~edu_parallel.topology.Topology`
numbers them); local rank 0 of each node is its *leader*. The buffer is cut into ``K = nodes``
chunks, and the plan has three phases:

1. ``intra-reduce``: a pipelined chain inside every node, from local rank ``g-1`` down to the
   leader: at step ``t`` local rank ``g-1-p`` sends chunk ``t-p`` to local rank ``g-2-p``, which
   adds it. ``g + K - 2`` steps (for ``g > 1``), one message of ``D/K`` per rank per step. NCCL's
   trees are chains inside a node, pipelined the same way (NCCL ``src/graph/trees.cc``).
2. ``inter-allreduce``: a ring all-reduce among the ``K`` leaders over the slow link:
   ``2(K-1)`` steps of ``D/K`` (Patarasuk & Yuan 2009).
3. ``intra-broadcast``: the chain in reverse, copying: ``g + K - 2`` steps.

Only one rank per node crosses the slow link, ``2(K-1)/K · D`` in all; the cost is
``2(g+K-2)·(α_intra + D/(K·B_intra)) + 2(K-1)·(α_inter + D/(K·B_inter))``, see
:func:`edu_parallel.costmodel.predict` (``"hierarchical"``), equal to the retimed trace of this
plan with a topology. Horovod's hierarchical all-reduce and NCCL's tree (chain in the node,
tree between nodes) follow the same split (Thakur, Rabenseifner & Gropp 2005 discuss the
two-level version of each MPICH collective for SMP clusters).

The plan does not fit ``plan(world_size)`` (it needs the node count), so it is not in
``allreduce.ALGOS``; :func:`run_hierarchical` runs it on a real cluster of pretend nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import check_choice, check_int
from .inputs import PATTERNS, numel_for
from .metrics import algbw_gbps, busbw_gbps
from .plan import Plan, Step, Transfer
from .ring import MAX_PLAN_RANKS
from .trace import Trace
from .units import DTYPES, INTEGER_DTYPES, check_dtype, parse_size


def _check_shape(nodes: int, gpus_per_node: int) -> tuple[int, int]:
    k = check_int("nodes", nodes, 1, MAX_PLAN_RANKS)
    g = check_int("gpus_per_node", gpus_per_node, 1, MAX_PLAN_RANKS)
    if k * g > MAX_PLAN_RANKS:
        raise ValueError(f"nodes * gpus_per_node = {k} * {g} = {k * g} is not valid: expected at most {MAX_PLAN_RANKS} ranks")  # fmt: skip
    return k, g


def _chain_steps(k: int, g: int, phase: str, up: bool) -> list[Step]:
    """Pipelined chains in every node. ``up``: local g-1 -> ... -> 0, reducing; else 0 -> g-1, copying."""
    steps = []
    for t in range(g + k - 2 if g > 1 else 0):
        transfers = []
        for node in range(k):
            base = node * g
            for p in range(g - 1):  # hop p of the chain, counted from its start
                chunk = t - p
                if 0 <= chunk < k:
                    src, dst = (g - 1 - p, g - 2 - p) if up else (p, p + 1)
                    transfers.append(Transfer(base + src, base + dst, chunk, "reduce" if up else "copy"))  # fmt: skip
        steps.append(Step(phase, tuple(transfers)))
    return steps


def _leader_ring_steps(k: int, g: int) -> list[Step]:
    """Ring all-reduce among the leaders ``0, g, 2g, ...``: reduce-scatter then all-gather."""
    leader = [node * g for node in range(k)]
    rs = [
        Step("inter-allreduce", tuple(Transfer(leader[i], leader[(i + 1) % k], (i - s) % k, "reduce") for i in range(k)))
        for s in range(k - 1)
    ]  # fmt: skip
    ag = [
        Step("inter-allreduce", tuple(Transfer(leader[i], leader[(i + 1) % k], (i + 1 - s) % k, "copy") for i in range(k)))
        for s in range(k - 1)
    ]  # fmt: skip
    return rs + ag


def hierarchical_allreduce_plan(nodes: int, gpus_per_node: int) -> Plan:
    """Chain reduce in each node, ring all-reduce among leaders, chain broadcast; ``K`` chunks."""
    k, g = _check_shape(nodes, gpus_per_node)
    steps = (
        _chain_steps(k, g, "intra-reduce", up=True)
        + _leader_ring_steps(k, g)
        + _chain_steps(k, g, "intra-broadcast", up=False)
    )
    return Plan("hierarchical_allreduce", "all_reduce", k * g, k, tuple(steps))


def hierarchical_job(ctx: Any, nodes: int, nbytes: int, dtype: str, pattern: str, seed: int) -> dict[str, Any]:  # fmt: skip
    """On one rank: input, builtin ``dist.all_reduce`` reference (untraced), then the plan, traced."""
    import torch
    import torch.distributed as dist

    from .execute import run_plan, same_result
    from .inputs import make_input
    from .units import torch_dtype

    plan = hierarchical_allreduce_plan(nodes, ctx.world_size // nodes)
    numel = numel_for(nbytes, dtype)
    x = torch.from_numpy(make_input(ctx.rank, numel, dtype, pattern, seed)).to(ctx.device, torch_dtype(dtype))  # fmt: skip
    with ctx.tracer.paused():
        reference = x.clone()
        dist.all_reduce(reference)
    ctx.barrier()
    start = ctx.tracer.now()
    run_plan(ctx, plan, x)
    end = ctx.tracer.now()
    matches = same_result(x, reference, ctx.world_size, exact=dtype in INTEGER_DTYPES)
    return {"start": start, "end": end, "matches_builtin": matches}


@dataclass
class HierarchicalReport:
    """One run of the hierarchical all-reduce on pretend nodes."""

    nodes: int
    gpus_per_node: int
    nbytes: int
    dtype: str
    matches_builtin: bool
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    per_rank_sent_bytes: list[int]
    trace: Trace = field(repr=False)
    plan: Plan = field(repr=False)


def run_hierarchical(cluster: Any, nodes: int, size: int | str = "1MiB", dtype: str = "float32",
                     pattern: str = "random", seed: int = 0, trace: bool = True) -> HierarchicalReport:  # fmt: skip
    """Run the hierarchical all-reduce on ``cluster`` split into ``nodes`` pretend nodes and check
    it against ``dist.all_reduce``. ``nodes`` must divide ``cluster.world_size``."""
    from .retime import LINKS
    from .topology import Topology

    n = cluster.world_size
    shape = Topology.split(n, nodes, LINKS["nvlink4-h100"])  # validates nodes against the ranks
    nbytes = parse_size(size)
    check_dtype(dtype)
    check_choice("pattern", pattern, PATTERNS)
    seed = check_int("seed", seed, 0)
    out = cluster.run(hierarchical_job, shape.nodes, nbytes, dtype, pattern, seed, trace=trace)
    plan = hierarchical_allreduce_plan(shape.nodes, shape.gpus_per_node)
    real_bytes = numel_for(nbytes, dtype) * DTYPES[dtype]
    out.trace.meta.update({"concept": plan.name, "collective": "all_reduce", "nbytes": real_bytes,
                           "dtype": dtype, "plan": plan.to_text(), "world_size": n,
                           "nodes": shape.nodes, "gpus_per_node": shape.gpus_per_node})  # fmt: skip
    time_s = max(max(r["end"] - r["start"] for r in out.results), 1e-9)
    return HierarchicalReport(
        nodes=shape.nodes, gpus_per_node=shape.gpus_per_node, nbytes=real_bytes, dtype=dtype,
        matches_builtin=all(r["matches_builtin"] for r in out.results), time_s=time_s,
        algbw_gbps=algbw_gbps(real_bytes, time_s), busbw_gbps=busbw_gbps("all_reduce", n, real_bytes, time_s),
        per_rank_sent_bytes=list(out.trace.sent_bytes()) if trace else [], trace=out.trace, plan=plan,
    )  # fmt: skip
