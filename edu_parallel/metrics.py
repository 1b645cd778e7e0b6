"""Bandwidth as nccl-tests reports it (doc/PERFORMANCE.md in NVIDIA/nccl-tests).

``algbw = S / t``: bytes of the user's buffer over elapsed time. ``busbw = algbw * factor``: the
rate the busiest link had to sustain, comparable with the hardware's peak bandwidth, where the
factor counts how much of ``S`` every rank must move for that collective on ``n`` ranks.
Bandwidth is in GB/s = 1e9 bytes/s, as nccl-tests prints it.
"""

from __future__ import annotations

from .errors import check_choice, check_int, check_positive

# nccl-tests PERFORMANCE.md: factor per collective, as a function of the rank count n.
BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' busbw/algbw factor, e.g. ``2(n-1)/n`` for all-reduce."""
    check_choice("collective", collective, BUS_FACTORS)
    return BUS_FACTORS[collective](check_int("world_size", world_size, 1))


def algbw_gbps(nbytes: int, time_s: float) -> float:
    """Algorithm bandwidth in GB/s: ``S / t``."""
    return nbytes / check_positive("time_s", time_s) / 1e9


def busbw_gbps(collective: str, world_size: int, nbytes: int, time_s: float) -> float:
    """Bus bandwidth in GB/s: ``algbw * factor(collective, n)``."""
    return algbw_gbps(nbytes, time_s) * bus_factor(collective, world_size)
