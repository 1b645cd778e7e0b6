"""Rabenseifner's all-reduce: recursive-halving reduce-scatter, recursive-doubling all-gather.

Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication Operations in MPICH"
§4 (all-reduce for long messages, after Rabenseifner 1997). The buffer is cut into ``N`` chunks,
``N`` a power of two.

* **Reduce-scatter by recursive halving.** At distance ``d = N/2, N/4, ..., 1`` rank ``r`` pairs
  with ``r XOR d``. Before the step, ``r`` is responsible for the aligned block of ``2d`` chunks
  that contains chunk ``r``; it sends the half that contains chunk ``r XOR d`` to its partner,
  which adds it, and keeps the other half. After ``log2 N`` steps rank ``r`` holds chunk ``r``
  summed over all ranks. Each rank sends ``D/2 + D/4 + ... + D/N = (N-1)/N·D``.
* **All-gather by recursive doubling.** At distance ``d = 1, 2, ..., N/2`` rank ``r`` sends the
  finished block of ``d`` chunks that contains chunk ``r`` to ``r XOR d``, which copies it: the
  reduce-scatter in reverse, another ``(N-1)/N·D``.

So every rank sends and receives ``2(N-1)/N·D`` (the ring's volume, bandwidth-optimal) in
``2·log2 N`` steps (the tree's latency). The price: partners are far apart (distance ``N/2`` in the
first step), which a ring's neighbour-only traffic avoids, and ``N`` must be a power of two (MPICH
first folds the extra ranks into a power of two; this course keeps the pure algorithm). The naive
version beside it is the ring (:mod:`edu_parallel.plans.ring`), same bytes, ``2(N-1)`` steps.
"""

from __future__ import annotations

from ..core.dims import ParallelDims
from ..core.errors import bad_value, check_int
from .plan import MAX_PLAN_RANKS, Plan, Step, Transfer

MAX_POWER_OF_TWO = 1 << (MAX_PLAN_RANKS.bit_length() - 1)  # the largest power of two <= max ranks


def check_power_of_two(name: str, value: int) -> int:
    """Return ``value`` if it is a power of two up to the maximum, else raise a ValueError."""
    valid = f"a power of two: 1, 2, 4, 8, ..., {MAX_POWER_OF_TWO}"
    try:
        n = check_int(name, value, 1, MAX_POWER_OF_TWO)
    except ValueError:
        raise bad_value(name, value, valid) from None
    if n & (n - 1):
        raise bad_value(name, value, valid + " (recursive halving pairs rank r with r XOR 2^i)")
    return n


def _block(r: int, size: int) -> range:
    """The aligned block of ``size`` chunks that contains chunk ``r``."""
    start = r - r % size
    return range(start, start + size)


def rabenseifner_allreduce_plan(world_size: int | ParallelDims) -> Plan:
    """Recursive halving then recursive doubling: ``2·log2 N`` steps, ``N`` chunks. A run's
    validated :class:`~edu_parallel.core.dims.ParallelDims` still has to be a power of two."""
    if isinstance(world_size, ParallelDims):
        world_size = world_size.world_size
    n = check_power_of_two("world_size", world_size)
    steps: list[Step] = []
    d = n // 2
    while d >= 1:  # reduce-scatter: send the half your partner is responsible for
        ts = (Transfer(r, r ^ d, k, "reduce") for r in range(n) for k in _block(r ^ d, d))
        steps.append(Step("reduce-scatter", tuple(ts)))
        d //= 2
    d = 1
    while d < n:  # all-gather: send the finished block you hold
        ts = (Transfer(r, r ^ d, k, "copy") for r in range(n) for k in _block(r, d))
        steps.append(Step("all-gather", tuple(ts)))
        d *= 2
    return Plan("rabenseifner_allreduce", "all_reduce", n, n, tuple(steps))


def rabenseifner_bytes_formula(world_size: int, nbytes: int) -> dict[str, list[float]]:
    """Bytes each rank sends and receives: ``2(N-1)/N·D``, like the ring."""
    n = check_power_of_two("world_size", world_size)
    per_rank = [2 * (n - 1) / n * nbytes] * n
    return {"sent": per_rank, "recv": list(per_rank)}
