"""`edu-parallel bench collectives`: an nccl-tests-style sweep, verified on every row."""

import io
import json

import pytest
from helpers import cli

from edu_parallel.comm.bench import ProgressBar, bench_collectives, format_bench, size_sweep
from edu_parallel.core.metrics import bus_factor


def test_size_sweep_follows_nccl_tests_b_e_f():
    assert size_sweep("1KiB", "64KiB", 4) == [1024, 4096, 16384, 65536]
    assert size_sweep(1000, 1000) == [1000]
    with pytest.raises(ValueError, match="max_size='1KiB'"):
        size_sweep("1MiB", "1KiB")
    with pytest.raises(ValueError, match="factor=1"):
        size_sweep(1024, 4096, 1)


@pytest.mark.multiprocess
def test_every_collective_row_is_verified_and_follows_the_bus_factor(cluster2):
    seen = []
    rows = bench_collectives(
        cluster2,
        None,
        [64, 1000],
        "int64",
        progress=lambda d, t, label: seen.append((d, t)),
        iters=1,
    )
    assert {r["collective"] for r in rows} == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "reduce",
        "all_to_all",
        "gather",
        "scatter",
    }
    assert all(r["verified"] for r in rows) and len(rows) == 16
    assert seen[-1] == (16, 16) and seen[0] == (0, 16)
    for r in rows:
        assert r["size"] % (2 * 8) == 0 and r["count"] == r["size"] // 8
        factor = (
            bus_factor(r["collective"], 2) if r["collective"] not in ("gather", "scatter") else 0.5
        )
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * factor)
    table = format_bench(rows)
    assert "# all_to_all, 2 ranks" in table and "WRONG" not in table


@pytest.mark.multiprocess
def test_cli_json_and_one_line_errors():
    sweep = ("--world-size", "2", "--collective", "all_gather", "--max-size", "4KiB", "--json")
    out = cli("bench", "collectives", *sweep)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["size"] for r in rows] == [1024, 4096] and all(r["verified"] for r in rows)
    bad = cli("bench", "collectives", "--collective", "allsum")
    assert (
        bad.returncode == 2 and bad.stderr.count("\n") == 1 and "collective='allsum'" in bad.stderr
    )


def test_progress_bar_is_one_tqdm_bar_per_sweep():
    out = io.StringIO()
    bar = ProgressBar("bench", out=out)
    for done in range(4):
        bar(done, 3, f"all_gather {done} B")
    text = out.getvalue()
    assert "bench: 100%" in text and "3/3" in text and "all_gather 3 B" in text
    assert bar.bar is None  # closed at done == total: the next sweep starts a new bar
    bar(0, 2, "again")
    assert bar.bar is not None and bar.bar.total == 2
    bar(2, 2, "done")
    assert out.getvalue().count("\n") == 2  # two bars, each closed on its own line
