"""Naive all-reduce: everyone sends everything to a root, the root adds and sends the sum back.

Same signature and result as the ring all-reduce. The root receives ``(N-1) * D`` bytes and sends
``(N-1) * D``; every other rank sends and receives ``D``. The root's link is the bottleneck, and its
load grows with ``N`` while the ring's stays below ``2D``.
"""

from __future__ import annotations

from ..core.dims import ParallelDims
from ..core.errors import check_int
from .plan import Plan, Step, Transfer, plan_ranks


def naive_allreduce_plan(world_size: int | ParallelDims, root: int = 0) -> Plan:
    """Two steps on one chunk: every rank reduces into ``root``, then ``root`` copies to all."""
    n = plan_ranks(world_size)
    root = check_int("root", root, 0, n - 1)
    others = [r for r in range(n) if r != root]
    steps: list[Step] = []
    if others:
        steps.append(Step("reduce", tuple(Transfer(r, root, 0, "reduce") for r in others)))
        steps.append(Step("broadcast", tuple(Transfer(root, r, 0, "copy") for r in others)))
    return Plan("naive_allreduce", "all_reduce", n, 1, tuple(steps), root=root)


def naive_sent_bytes_formula(world_size: int, nbytes: int, root: int = 0) -> list[float]:
    """Bytes each rank sends: ``(N-1) * D`` for the root, ``D`` for everyone else."""
    return [(world_size - 1) * nbytes if r == root else float(nbytes) for r in range(world_size)]
