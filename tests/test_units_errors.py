import pytest

from edu_parallel.core.errors import check_choice, check_int, check_positive
from edu_parallel.core.metrics import algbw_gbps, bus_factor, busbw_gbps
from edu_parallel.core.units import format_bytes, parse_size


@pytest.mark.parametrize(
    "text,expected",
    [
        ("4096", 4096),
        (4096, 4096),
        ("1KiB", 1024),
        ("1MiB", 1 << 20),
        ("64kib", 65536),
        ("1.5KiB", 1536),
        ("1KB", 1000),
        ("2 MiB", 2 << 20),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["0", 0, -5, "1.3B", "ten", "1XB", "2GiB", True, ""])
def test_parse_size_rejects_with_parameter_value_and_range(bad):
    with pytest.raises(ValueError) as info:
        parse_size(bad, name="size")
    msg = str(info.value)
    assert msg.startswith(f"size={bad!r} is not valid") and "1GiB" in msg and "\n" not in msg


def test_checks_name_parameter_value_and_range():
    with pytest.raises(
        ValueError, match=r"world_size=0 is not valid: expected an integer in \[1, 16\]"
    ):
        check_int("world_size", 0, 1, 16)
    with pytest.raises(ValueError, match=r"timeout=-1 is not valid"):
        check_positive("timeout", -1)
    with pytest.raises(
        ValueError, match=r"backend='mpi' is not valid: expected one of 'gloo', 'nccl'"
    ):
        check_choice("backend", "mpi", ["gloo", "nccl"])
    assert check_int("n", 3.0, 1) == 3
    with pytest.raises(ValueError):
        check_int("n", 2.5, 1)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 << 20) == "3 MiB"


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all_reduce", 4) == pytest.approx(1.5)
    assert bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor("reduce_scatter", 8) == pytest.approx(7 / 8)
    assert bus_factor("broadcast", 8) == 1.0
    assert algbw_gbps(2e9, 2.0) == pytest.approx(1.0)
    assert busbw_gbps("all_reduce", 8, 8e9, 1.0) == pytest.approx(8 * 2 * 7 / 8)
    with pytest.raises(ValueError, match="collective='allreduce'"):
        bus_factor("allreduce", 4)
