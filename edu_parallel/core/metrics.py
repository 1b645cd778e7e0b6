"""Bandwidth as nccl-tests reports it (doc/PERFORMANCE.md and src/*.cu in NVIDIA/nccl-tests).

``algbw = S / t``: bytes of the user's buffer over elapsed time. ``busbw = algbw * factor``: the
rate the busiest link had to sustain, comparable with the hardware's peak bandwidth, where the
factor counts how much of ``S`` every rank must move for that collective on ``n`` ranks.
Bandwidth is in GB/s = 1e9 bytes/s, as nccl-tests prints it.

:data:`BUS_FACTORS` is the one table of these factors; the run reports, the alpha-beta model and
the quizzes all read it. Each factor is the one in the ``*GetBw`` function of the nccl-tests
source file :data:`NCCL_TESTS_FILES` names (NVIDIA/nccl-tests, master of July 2026,
commit a0b82b2): ``doc/PERFORMANCE.md`` lists all-reduce, reduce-scatter, all-gather, broadcast,
reduce and all-to-all; ``src/gather.cu`` (``GatherGetBw``) and ``src/scatter.cu``
(``ScatterGetBw``) use ``(n-1)/n`` too, with ``S`` the root's whole buffer (count x nranks).
:func:`bus_factor_source` names the file and function. nccl-tests also times ``sendrecv.cu`` and
``hypercube.cu`` (factor 1, the hypercube's algbw counting ``(n-1)`` pieces), which the course does
not run.
"""

from __future__ import annotations

from .errors import bad_value, check_choice, check_int, check_positive

# collective -> (source file in NVIDIA/nccl-tests, the function that computes algbw and busbw)
NCCL_TESTS_FILES = {
    "all_reduce": ("src/all_reduce.cu", "AllReduceGetBw"),
    "all_gather": ("src/all_gather.cu", "AllGatherGetBw"),
    "reduce_scatter": ("src/reduce_scatter.cu", "ReduceScatterGetBw"),
    "all_to_all": ("src/alltoall.cu", "AlltoAllGetBw"),
    "broadcast": ("src/broadcast.cu", "BroadcastGetBw"),
    "reduce": ("src/reduce.cu", "ReduceGetBw"),
    "gather": ("src/gather.cu", "GatherGetBw"),
    "scatter": ("src/scatter.cu", "ScatterGetBw"),
}

# factor per collective, as a function of the rank count n
BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
}


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' busbw/algbw factor, e.g. ``2(n-1)/n`` for all-reduce."""
    check_choice("collective", collective, BUS_FACTORS)
    return BUS_FACTORS[collective](check_int("world_size", world_size, 1))


def bus_factor_source(collective: str) -> str:
    """Where :func:`bus_factor` of ``collective`` comes from: the nccl-tests file and function,
    e.g. ``"nccl-tests src/gather.cu GatherGetBw"``."""
    check_choice("collective", collective, BUS_FACTORS)
    path, func = NCCL_TESTS_FILES[collective]
    return f"nccl-tests {path} {func}"


def algbw_gbps(nbytes: int, time_s: float) -> float:
    """Algorithm bandwidth in GB/s: ``S / t``."""
    return nbytes / check_positive("time_s", time_s) / 1e9


def busbw_gbps(collective: str, world_size: int, nbytes: int, time_s: float) -> float:
    """Bus bandwidth in GB/s: ``algbw * factor(collective, n)``."""
    return algbw_gbps(nbytes, time_s) * bus_factor(collective, world_size)


def ring_sent_bytes(op: str, recorded_nbytes: int, world_size: int) -> float:
    """Bytes one rank sends in a ring ``op`` whose trace event recorded ``recorded_nbytes``.

    A ``collective`` event records the tensor it was called with: the whole buffer ``S`` for
    all-reduce and for the output of an all-gather, the output shard ``S/N`` for reduce-scatter.
    """
    n = world_size
    if op == "all_reduce":
        return 2 * (n - 1) / n * recorded_nbytes
    if op.startswith("reduce_scatter"):  # event size = output shard S/N; ring sends (N-1)/N S
        return (n - 1) * recorded_nbytes
    if op.startswith("all_gather"):  # event size = output S
        return (n - 1) / n * recorded_nbytes
    raise bad_value("op", op, "'all_reduce', 'reduce_scatter_*' or 'all_gather_*'")
