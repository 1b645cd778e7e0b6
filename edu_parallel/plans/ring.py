"""Ring all-reduce: reduce-scatter, then all-gather, each rank talking only to its neighbours.

The buffer of ``D`` bytes is cut into ``N`` chunks. In the reduce-scatter phase, at step ``s`` rank
``r`` sends chunk ``(r - s) mod N`` to rank ``r + 1``, which adds it to its own copy; after ``N-1``
steps rank ``r`` holds chunk ``(r + 1) mod N`` summed over all ranks. In the all-gather phase the
finished chunks travel once more around the ring and overwrite (copy) the stale ones.

Each rank sends ``(N-1)/N * D`` bytes per phase and ``2(N-1)/N * D`` in all (Patarasuk & Yuan
2009; nccl-tests doc/PERFORMANCE.md uses ``2(n-1)/n`` as the all-reduce bus-bandwidth factor).
"""

from __future__ import annotations

from ..core.dims import ParallelDims
from .plan import Plan, Step, Transfer, plan_ranks


def ring_reduce_scatter_steps(world_size: int, phase: str = "reduce-scatter") -> list[Step]:
    """Step s: rank r sends chunk (r - s) mod N to r + 1, which adds it."""
    n = world_size
    return [
        Step(phase, tuple(Transfer(r, (r + 1) % n, (r - s) % n, "reduce") for r in range(n)))
        for s in range(n - 1)
    ]


def ring_all_gather_steps(
    world_size: int, first_chunk_offset: int = 1, phase: str = "all-gather"
) -> list[Step]:
    """Step s: rank r sends chunk (r + offset - s) mod N to r + 1, which overwrites its copy.

    After a ring reduce-scatter rank r holds chunk r + 1 finished, so the offset is 1; for a plain
    all-gather where rank r starts with chunk r, the offset is 0.
    """
    n = world_size
    return [
        Step(
            phase,
            tuple(
                Transfer(r, (r + 1) % n, (r + first_chunk_offset - s) % n, "copy") for r in range(n)
            ),
        )
        for s in range(n - 1)
    ]


def ring_allreduce_plan(world_size: int | ParallelDims) -> Plan:
    """The ring all-reduce as a plan: ``2(N-1)`` steps, ``N`` chunks, one transfer per rank per
    step."""
    n = plan_ranks(world_size)
    steps = ring_reduce_scatter_steps(n) + ring_all_gather_steps(n)
    return Plan("ring_allreduce", "all_reduce", n, n, tuple(steps))


def ring_sent_bytes_formula(world_size: int, nbytes: int) -> dict[str, float]:
    """Bytes each rank sends: ``(N-1)/N * D`` per phase, ``2(N-1)/N * D`` in all (errata E1)."""
    n, d = world_size, nbytes
    per_phase = (n - 1) / n * d
    return {"reduce-scatter": per_phase, "all-gather": per_phase, "total": 2 * per_phase}
