"""All-reduce across nodes as libraries run it: rings that use every NIC.

Ranks are ``nodes x gpus_per_node`` (``K`` nodes of ``g``, node-major, as
:class:`~edu_parallel.models.topology.Topology` numbers them); local rank ``l`` of a node crosses
nodes through NIC ``l % nics``. Two plans:

:func:`hierarchical_allreduce_plan` (``g·K`` chunks: shard ``l`` of the buffer is chunks
``l·K .. l·K+K-1``):

1. ``intra-reduce-scatter``: a ring over the ``g`` local ranks of every node (all nodes at once);
   after ``g-1`` steps local rank ``l`` holds shard ``l`` summed over its node.
2. ``inter-allreduce``: local rank ``l`` of every node runs a ring all-reduce of shard ``l`` with
   local rank ``l`` of the other nodes, ``2(K-1)`` steps of ``S/(g·K)``, over its own NIC: the
   ``g`` rings run side by side, so every NIC of a rail-optimised node carries one.
3. ``intra-all-gather``: the ring of step 1 in reverse role, ``g-1`` steps copying the shards.

Each rank sends ``2(g-1)/g·S`` inside its node and ``2(K-1)/K·S/g`` across nodes
(:func:`hierarchical_bytes_formula`). This is the 2D-torus all-reduce of Mikami et al. 2018
("Massively Distributed SGD: ImageNet/ResNet-50 Training in a Flash", arXiv 1811.05233:
reduce-scatter along one dimension, all-reduce along the other, all-gather along the first),
Horovod's ``NCCLHierarchicalAllreduce`` (``horovod/common/ops/nccl_operations.cc``: NCCL
reduce-scatter, MPI all-reduce, NCCL all-gather) and the reduce-scatter / all-reduce / all-gather
split of Thakur, Rabenseifner & Gropp 2005 for SMP clusters. (Jia et al. 2018, arXiv 1807.11205,
call their scheme "hierarchical all-reduce" too, but theirs is the leader scheme below: reduce to
a master in each group, ring among the masters, broadcast.) NCCL reaches
the same per-NIC split with its channels (each ring enters and leaves a node on its own NIC) and
its NVLS-tree (intra-node NVLink SHARP reduce-scatter, one tree per NIC across nodes; NCCL 2.30.7
``src/graph/tuning.cc``, ``NCCL_ALGO_NVLS_TREE``). It replaces this package's earlier
"leader per node" scheme (chain reduce to local rank 0, ring among the leaders, chain broadcast),
which sent all ``2(K-1)/K·S`` inter-node bytes of a node through its leader's one NIC: one NIC of
eight on a DGX H100, with the other seven idle.

:func:`channel_ring_allreduce_plan` is the flat ring as NCCL runs it across nodes: ``C`` rings
(channels) side by side, each moving ``S/C``. Ring ``c`` visits every node's local ranks in the
order ``c, c+1, .., c-1`` (mod ``g``): it enters a node at local rank ``c`` (NIC ``c``) and leaves
from local rank ``c-1`` (NIC ``(c-1) % C``), so with ``C`` dividing ``g`` every NIC carries one
ring each way (NCCL ``src/graph/search.cc``: "NET n -> GPU a -> .. -> GPU x -> NET n").
``C = 1`` is :func:`~edu_parallel.plans.ring.ring_allreduce_plan`'s ring.

:func:`edu_parallel.models.cost.predict` (``"hierarchical"``, ``"ring"`` on a topology) gives both
times in closed form, equal to the retimed traces of these plans; neither plan fits
``plan(world_size)``, so neither is in :data:`edu_parallel.plans.algorithms.ALGOS`.
:func:`edu_parallel.comm.hierarchical.run_hierarchical` runs the first on a real cluster of
pretend nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import bad_combination, bad_value, check_int
from ..core.i18n import _
from .plan import MAX_PLAN_RANKS, Plan, Step, Transfer


def _check_shape(nodes: int, gpus_per_node: int) -> tuple[int, int]:
    k = check_int("nodes", nodes, 1, MAX_PLAN_RANKS)
    g = check_int("gpus_per_node", gpus_per_node, 1, MAX_PLAN_RANKS)
    if k * g > MAX_PLAN_RANKS:
        raise bad_combination(
            f"nodes * gpus_per_node = {k} * {g} = {k * g}",
            _("at most {n} ranks").format(n=MAX_PLAN_RANKS),
        )
    return k, g


def _rings(
    rings: Sequence[Sequence[int]],
    pieces: Sequence[Sequence[Sequence[int]]],
    phase: str,
    reduce: bool,
    shift: int = 0,
) -> list[Step]:
    """Rings side by side, one step per ring step. Ring ``i`` visits ranks ``rings[i]``; its
    ``L`` pieces are ``pieces[i][j]`` (each a tuple of plan chunks). Reduce-scatter (``reduce``):
    at step ``s`` position ``p`` sends piece ``(p - s + shift) mod L`` to position ``p+1``, which
    adds it, so position ``p`` ends with piece ``(p + 1 + shift) mod L`` summed; all-gather: it
    sends piece ``(p + 1 + shift - s) mod L``, which overwrites (Patarasuk & Yuan 2009)."""
    length = len(rings[0]) if rings else 0
    steps = []
    for s in range(length - 1):
        transfers = []
        for ring, piece in zip(rings, pieces, strict=True):
            for p, src in enumerate(ring):
                j = (p - s + shift if reduce else p + 1 + shift - s) % length
                dst = ring[(p + 1) % length]
                op = "reduce" if reduce else "copy"
                transfers += [Transfer(src, dst, chunk, op) for chunk in piece[j]]
        steps.append(Step(phase, tuple(transfers)))
    return steps


def hierarchical_allreduce_plan(nodes: int, gpus_per_node: int) -> Plan:
    """Reduce-scatter in each node, all-reduce of shard ``l`` among local ranks ``l`` across
    nodes, all-gather in each node; ``g·K`` chunks (see the module docstring)."""
    k, g = _check_shape(nodes, gpus_per_node)
    local_rings = [[node * g + i for i in range(g)] for node in range(k)]
    shards = [[tuple(range(loc * k, (loc + 1) * k)) for loc in range(g)]] * k
    # shift -1: local rank l ends the reduce-scatter holding shard l
    rs = _rings(local_rings, shards, "intra-reduce-scatter", True, shift=-1)
    ag = _rings(local_rings, shards, "intra-all-gather", False, shift=-1)
    cross_rings = [[node * g + loc for node in range(k)] for loc in range(g)]
    cross_pieces = [[(loc * k + j,) for j in range(k)] for loc in range(g)]
    inter = _rings(cross_rings, cross_pieces, "inter-allreduce", True) + _rings(
        cross_rings, cross_pieces, "inter-allreduce", False
    )
    return Plan("hierarchical_allreduce", "all_reduce", k * g, g * k, tuple(rs + inter + ag))


def channel_ring_allreduce_plan(nodes: int, gpus_per_node: int, channels: int = 1) -> Plan:
    """``channels`` ring all-reduces side by side, each on its ``1/channels`` of the buffer
    (chunks ``c·n .. c·n+n-1``), ring ``c`` entering every node at local rank ``c``."""
    k, g = _check_shape(nodes, gpus_per_node)
    n = k * g
    c = check_int("channels", channels, 1)
    if g % c:
        divisors = ", ".join(str(d) for d in range(1, g + 1) if g % d == 0)
        raise bad_value(
            "channels", c, f"a divisor of gpus_per_node={g} ({divisors}): one ring per NIC"
        )
    rings = [[node * g + (ch + i) % g for node in range(k) for i in range(g)] for ch in range(c)]
    pieces = [[(ch * n + j,) for j in range(n)] for ch in range(c)]
    steps = _rings(rings, pieces, "reduce-scatter", True) + _rings(
        rings, pieces, "all-gather", False
    )
    return Plan("channel_ring_allreduce", "all_reduce", n, c * n, tuple(steps))


def hierarchical_bytes_formula(nodes: int, gpus_per_node: int, nbytes: float) -> dict[str, float]:
    """Bytes each rank of :func:`hierarchical_allreduce_plan` sends: ``2(g-1)/g·S`` inside its node
    and ``2(K-1)/K·S/g`` across nodes (a buffer that ``g·K`` chunks divide evenly)."""
    k, g = _check_shape(nodes, gpus_per_node)
    s = nbytes
    return {"intra": 2 * (g - 1) / g * s, "inter": 2 * (k - 1) / k * s / g}
