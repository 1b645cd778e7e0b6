"""Hierarchical all-reduce: reduce inside each node, all-reduce between nodes, broadcast back.

Ranks are ``nodes x gpus_per_node`` (node-major, as :class:`~edu_parallel.models.topology.Topology`
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
:func:`edu_parallel.models.cost.predict` (``"hierarchical"``), equal to the retimed trace of this
plan with a topology. Horovod's hierarchical all-reduce and NCCL's tree (chain in the node,
tree between nodes) follow the same split (Thakur, Rabenseifner & Gropp 2005 discuss the
two-level version of each MPICH collective for SMP clusters).

The plan does not fit ``plan(world_size)`` (it needs the node count), so it is not in
:data:`edu_parallel.plans.algorithms.ALGOS`;
:func:`edu_parallel.comm.hierarchical.run_hierarchical` runs it on a real cluster of pretend nodes.
"""

from __future__ import annotations

from ..core.errors import check_int
from .plan import MAX_PLAN_RANKS, Plan, Step, Transfer


def _check_shape(nodes: int, gpus_per_node: int) -> tuple[int, int]:
    k = check_int("nodes", nodes, 1, MAX_PLAN_RANKS)
    g = check_int("gpus_per_node", gpus_per_node, 1, MAX_PLAN_RANKS)
    if k * g > MAX_PLAN_RANKS:
        raise ValueError(
            f"nodes * gpus_per_node = {k} * {g} = {k * g} is not valid: expected at most"
            f" {MAX_PLAN_RANKS} ranks"
        )
    return k, g


def _chain_steps(k: int, g: int, phase: str, up: bool) -> list[Step]:
    """Pipelined chains in every node. ``up``: local g-1 -> ... -> 0, reducing; else 0 -> g-1,
    copying."""
    steps = []
    for t in range(g + k - 2 if g > 1 else 0):
        transfers = []
        for node in range(k):
            base = node * g
            for p in range(g - 1):  # hop p of the chain, counted from its start
                chunk = t - p
                if 0 <= chunk < k:
                    src, dst = (g - 1 - p, g - 2 - p) if up else (p, p + 1)
                    transfers.append(
                        Transfer(base + src, base + dst, chunk, "reduce" if up else "copy")
                    )
        steps.append(Step(phase, tuple(transfers)))
    return steps


def _leader_ring_steps(k: int, g: int) -> list[Step]:
    """Ring all-reduce among the leaders ``0, g, 2g, ...``: reduce-scatter then all-gather."""
    leader = [node * g for node in range(k)]
    rs = [
        Step(
            "inter-allreduce",
            tuple(
                Transfer(leader[i], leader[(i + 1) % k], (i - s) % k, "reduce") for i in range(k)
            ),
        )
        for s in range(k - 1)
    ]
    ag = [
        Step(
            "inter-allreduce",
            tuple(
                Transfer(leader[i], leader[(i + 1) % k], (i + 1 - s) % k, "copy") for i in range(k)
            ),
        )
        for s in range(k - 1)
    ]
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
