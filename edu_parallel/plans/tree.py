"""Tree all-reduce: reduce up a binary tree, broadcast back down; and NCCL's double binary tree.

**Single binary tree** (the naive tree). Heap numbering: rank ``r``'s parent is ``(r-1)//2``, its
children ``2r+1`` and ``2r+2``, root 0. In the reduce phase the deepest ranks send their buffer
to their parents, which add it; level by level the sum climbs to the root. In the broadcast phase
the root's sum is copied down, level by level. ``2·depth = 2·floor(log2 N)`` steps: the latency
advantage over the ring's ``2(N-1)`` (Thakur, Rabenseifner & Gropp 2005 §2, binomial/tree
algorithms). Every tree edge carries the whole buffer ``D`` once each way, so a rank moves
``D · (its number of tree neighbours)``: leaves ``D``, inner ranks ``3D``, the root ``2D``. The
busiest rank is not the root (that is the flat tree of :mod:`edu_parallel.plans.naive`, root
``(N-1)·D``) but every inner rank, at ``3D`` against the ring's ``2(N-1)/N·D < 2D``; and the
leaves, half the ranks, use a third of their links' capacity.

**Double binary tree** (NCCL ``src/graph/trees.cc``, ``ncclGetBtree`` / ``ncclGetDtree``). Tree 1
is NCCL's bit-twiddled binary tree with root 0: a rank's lowest set bit ``b`` gives its level;
its parent is ``(r ^ b) | (b << 1)`` (or ``r ^ b`` when that is out of range), its children
``r - b/2`` and ``r + b/2`` (the latter shrunk until in range); rank 0 has the single child
``2^ceil(log2 N) / 2``. In this tree every odd rank is a leaf. Tree 2 is tree 1 **mirrored**
(rank ``r`` plays ``N-1-r``) when N is even, or **shifted** by one (rank ``r`` plays ``r-1``)
when N is odd, so the odd ranks of tree 1 become inner ranks and vice versa. Each tree carries
half of the buffer (chunk 0 on tree 1, chunk 1 on tree 2; ``2·pipeline`` chunks when pipelined),
and both run at the same time. Consequence, checked in the tests: for even N every rank is a leaf
in one tree and an inner rank in at most the other; for odd N the same holds for every rank but
rank 0, which is tree 1's root with a single child and inner in tree 2. Either way no rank has
more than 4 tree neighbours in all, so no rank moves more than ``4 · D/2 = 2D`` each way, close to
the ring's ``2(N-1)/N·D`` (errata E5), in ``2·ceil(log2 N)`` steps.

**Pipelining** (``pipeline=p``): each tree's half is cut into ``p`` chunks. Rank ``v`` at depth
``d`` sends chunk ``j`` up at step ``j + H - d`` (``H``: the deepest level) and, in the broadcast
phase, receives chunk ``j`` at step ``j + d - 1``. Bytes per rank are unchanged; steps become
``2(H + p - 1)`` with messages ``p`` times smaller: the bandwidth term shrinks towards ``D·β``
per phase while the ``α`` terms grow. The default is ``p = 1``: whole halves, fewest steps.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.dims import ParallelDims
from ..core.errors import bad_value, check_int
from ..core.i18n import _
from .plan import Plan, Step, Transfer, plan_ranks

MAX_PIPELINE = 64  # chunks per tree


def heap_tree(world_size: int | ParallelDims) -> list[int]:
    """Parent of every rank in the heap-numbered binary tree (root 0 has parent -1)."""
    return _heap(plan_ranks(world_size))


def _heap(n: int) -> list[int]:
    return [-1] + [(r - 1) // 2 for r in range(1, n)]


def nccl_btree(world_size: int, rank: int) -> tuple[int, list[int]]:
    """``(parent, children)`` of ``rank`` in NCCL's binary tree (``ncclGetBtree``, trees.cc)."""
    n = world_size
    bit = 1
    while bit < n and not bit & rank:  # the lowest set bit of rank (for rank 0: >= n)
        bit <<= 1
    if rank == 0:
        return -1, ([bit >> 1] if n > 1 else [])
    up = (rank ^ bit) | (bit << 1)
    if up >= n:
        up = rank ^ bit
    low = bit >> 1
    down0 = rank - low if low else -1
    down1 = rank + low if low else -1
    while down1 >= n:  # shrink the second child into range, as trees.cc does
        down1 = rank + low if low else -1
        low >>= 1
    return up, [c for c in (down0, down1) if c != -1]


def double_binary_trees(world_size: int | ParallelDims) -> tuple[list[int], list[int]]:
    """Parents of every rank in NCCL's two trees (``ncclGetDtree``): tree 1, then tree 2, the
    mirror (even N: rank r plays N-1-r) or the shift (odd N: rank r plays r-1) of tree 1."""
    return _dtrees(plan_ranks(world_size))


def _dtrees(n: int) -> tuple[list[int], list[int]]:
    first = [nccl_btree(n, r)[0] for r in range(n)]
    if n % 2:
        up = [nccl_btree(n, (r - 1) % n)[0] for r in range(n)]
        second = [-1 if u == -1 else (u + 1) % n for u in up]
    else:
        up = [nccl_btree(n, n - 1 - r)[0] for r in range(n)]
        second = [-1 if u == -1 else n - 1 - u for u in up]
    return first, second


def children(parents: Sequence[int]) -> list[list[int]]:
    """Children of every rank, from a parent array."""
    out: list[list[int]] = [[] for _ in parents]
    for r, p in enumerate(parents):
        if p >= 0:
            out[p].append(r)
    return out


def depths(parents: Sequence[int]) -> list[int]:
    """Distance of every rank from its tree's root."""
    out: list[int] = []
    for r in range(len(parents)):
        d, v = 0, r
        while parents[v] >= 0:
            d, v = d + 1, parents[v]
            if d > len(parents):
                raise bad_value("parents", list(parents), _("a tree (this one has a cycle)"))
        out.append(d)
    return out


def tree_allreduce_steps(trees: Sequence[Sequence[int]], pipeline: int = 1) -> list[Step]:
    """Reduce up, then broadcast down, every tree at once; tree ``t`` carries chunks
    ``t*pipeline .. t*pipeline + pipeline - 1``, in order (see the module docstring)."""
    p = pipeline
    levels = [depths(parents) for parents in trees]
    height = max(max(d) for d in levels)
    span = height + p - 1 if height else 0
    up: list[list[Transfer]] = [[] for _ in range(span)]
    down: list[list[Transfer]] = [[] for _ in range(span)]
    for t, parents in enumerate(trees):
        for v, parent in enumerate(parents):
            if parent < 0:
                continue
            for j in range(p):
                up[j + height - levels[t][v]].append(Transfer(v, parent, t * p + j, "reduce"))
                down[j + levels[t][v] - 1].append(Transfer(parent, v, t * p + j, "copy"))
    return [Step("reduce", tuple(ts)) for ts in up] + [Step("broadcast", tuple(ts)) for ts in down]


def binary_tree_allreduce_plan(world_size: int | ParallelDims, pipeline: int = 1) -> Plan:
    """Single heap-numbered binary tree: ``2·floor(log2 N)`` steps with ``pipeline=1``."""
    n = plan_ranks(world_size)
    p = check_int("pipeline", pipeline, 1, MAX_PIPELINE)
    steps = tree_allreduce_steps([_heap(n)], p)
    return Plan("tree_allreduce", "all_reduce", n, p, tuple(steps))


def double_binary_tree_allreduce_plan(world_size: int | ParallelDims, pipeline: int = 1) -> Plan:
    """NCCL's double binary tree: each tree reduces and broadcasts half the buffer, together."""
    n = plan_ranks(world_size)
    p = check_int("pipeline", pipeline, 1, MAX_PIPELINE)
    steps = tree_allreduce_steps(list(_dtrees(n)), p)
    return Plan("double_tree_allreduce", "all_reduce", n, 2 * p, tuple(steps))


def _neighbours(parents: Sequence[int]) -> list[int]:
    kids = children(parents)
    return [len(kids[r]) + (parents[r] >= 0) for r in range(len(parents))]


def tree_bytes_formula(world_size: int, nbytes: int) -> dict[str, list[float]]:
    """Bytes each rank sends and receives: ``D`` per tree neighbour each way (leaf D, inner 3D,
    root 2D)."""
    per_rank = [float(nbytes * k) for k in _neighbours(heap_tree(world_size))]
    return {"sent": per_rank, "recv": list(per_rank)}


def double_tree_bytes_formula(world_size: int, nbytes: int) -> dict[str, list[float]]:
    """Bytes each rank sends and receives: ``D/2`` per neighbour in each tree, at most ``2D``."""
    first, second = (_neighbours(t) for t in double_binary_trees(world_size))
    per_rank = [nbytes / 2 * (a + b) for a, b in zip(first, second, strict=True)]
    return {"sent": per_rank, "recv": list(per_rank)}
