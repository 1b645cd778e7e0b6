"""Our busbw factors against nccl-tests' own arithmetic, transcribed from its source files.

Source: NVIDIA/nccl-tests, master of July 2026 (commit a0b82b2260cf5152b9f8c061bbf7eaf0ba096432).
Every ``*GetBw(count, typesize, sec, &algBw, &busBw, nranks)`` below is the file's function,
transcribed line by line; ``count`` is the elements per rank piece the test passes to NCCL
(for gather, scatter, all-gather, reduce-scatter and all-to-all the per-peer piece; the
larger buffer holds ``count * nranks``). Our :func:`busbw_gbps` takes ``S`` = the larger buffer
per rank in bytes (doc/PERFORMANCE.md), so the two must agree for every rank count.
"""

from __future__ import annotations

import pytest

from edu_parallel.core.metrics import (
    BUS_FACTORS,
    NCCL_TESTS_FILES,
    algbw_gbps,
    bus_factor_source,
    busbw_gbps,
)


def gather_get_bw(count: int, typesize: int, sec: float, nranks: int) -> tuple[float, float]:
    # src/gather.cu lines 38-44, GatherGetBw
    base_bw = (count * nranks * typesize) / 1.0e9 / sec
    factor = (nranks - 1) / nranks
    return base_bw, base_bw * factor


def scatter_get_bw(count: int, typesize: int, sec: float, nranks: int) -> tuple[float, float]:
    # src/scatter.cu lines 34-40, ScatterGetBw
    base_bw = (count * nranks * typesize) / 1.0e9 / sec
    factor = (nranks - 1) / nranks
    return base_bw, base_bw * factor


def alltoall_get_bw(count: int, typesize: int, sec: float, nranks: int) -> tuple[float, float]:
    # src/alltoall.cu lines 48-54, AlltoAllGetBw
    base_bw = (count * nranks * typesize) / 1.0e9 / sec
    factor = (nranks - 1) / nranks
    return base_bw, base_bw * factor


def all_gather_get_bw(count: int, typesize: int, sec: float, nranks: int) -> tuple[float, float]:
    # src/all_gather.cu lines 38-44, AllGatherGetBw
    base_bw = (count * typesize * nranks) / 1.0e9 / sec
    factor = (nranks - 1) / nranks
    return base_bw, base_bw * factor


def reduce_scatter_get_bw(
    count: int, typesize: int, sec: float, nranks: int
) -> tuple[float, float]:
    # src/reduce_scatter.cu lines 37-43, ReduceScatterGetBw
    base_bw = (count * typesize * nranks) / 1.0e9 / sec
    factor = (nranks - 1) / nranks
    return base_bw, base_bw * factor


def all_reduce_get_bw(count: int, typesize: int, sec: float, nranks: int) -> tuple[float, float]:
    # src/all_reduce.cu lines 59-65, AllReduceGetBw (count = the whole buffer)
    base_bw = (count * typesize) / 1.0e9 / sec
    factor = (2 * (nranks - 1)) / nranks
    return base_bw, base_bw * factor


def broadcast_get_bw(count: int, typesize: int, sec: float, nranks: int) -> tuple[float, float]:
    # src/broadcast.cu lines 34-40, BroadcastGetBw
    base_bw = (count * typesize) / 1.0e9 / sec
    return base_bw, base_bw * 1


def reduce_get_bw(count: int, typesize: int, sec: float, nranks: int) -> tuple[float, float]:
    # src/reduce.cu lines 36-40, ReduceGetBw
    base_bw = (count * typesize) / 1.0e9 / sec
    return base_bw, base_bw


# collective -> (nccl-tests' GetBw, elements of the larger buffer per rank for a given count)
NCCL_TESTS = {
    "gather": (gather_get_bw, lambda count, n: count * n),
    "scatter": (scatter_get_bw, lambda count, n: count * n),
    "all_to_all": (alltoall_get_bw, lambda count, n: count * n),
    "all_gather": (all_gather_get_bw, lambda count, n: count * n),
    "reduce_scatter": (reduce_scatter_get_bw, lambda count, n: count * n),
    "all_reduce": (all_reduce_get_bw, lambda count, n: count),
    "broadcast": (broadcast_get_bw, lambda count, n: count),
    "reduce": (reduce_get_bw, lambda count, n: count),
}


@pytest.mark.parametrize("name", sorted(NCCL_TESTS))
@pytest.mark.parametrize("nranks", [2, 3, 4, 8, 16, 64])
def test_our_algbw_and_busbw_equal_nccl_tests(name: str, nranks: int) -> None:
    get_bw, elements = NCCL_TESTS[name]
    count, typesize, sec = 1 << 20, 4, 3.7e-4
    alg, bus = get_bw(count, typesize, sec, nranks)
    size = elements(count, nranks) * typesize  # S: the larger buffer per rank, in bytes
    assert algbw_gbps(size, sec) == pytest.approx(alg, rel=1e-12)
    assert busbw_gbps(name, nranks, size, sec) == pytest.approx(bus, rel=1e-12)


def test_gather_scatter_all_to_all_are_in_nccl_tests_with_factor_n_minus_1_over_n() -> None:
    """The lesson's claim, as numbers: nccl-tests has gather.cu and scatter.cu, factor (n-1)/n."""
    for name in ("gather", "scatter", "all_to_all"):
        path, func = NCCL_TESTS_FILES[name]
        assert bus_factor_source(name) == f"nccl-tests {path} {func}"
        assert BUS_FACTORS[name](8) == pytest.approx(7 / 8)
    assert set(NCCL_TESTS_FILES) == set(BUS_FACTORS) == set(NCCL_TESTS)
