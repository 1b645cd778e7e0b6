"""``edu-parallel run failure``: a failure of the lab provoked from the command line, on a local
cluster and under ``torchrun --standalone --nproc-per-node 2``, and its culprit named; bad options
get one line before any process starts."""

from __future__ import annotations

import json
import time

import pytest
from helpers import cli

pytestmark = pytest.mark.multiprocess


def report(out) -> dict:
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    return json.loads(line)


def test_a_skipped_collective_is_named_on_a_local_cluster():
    t0 = time.perf_counter()
    out = cli(
        "run",
        "failure",
        "--case",
        "skips_collective",
        "--culprit",
        "1",
        "--world-size",
        "3",
        "--timeout",
        "1",
        "--json",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    data = report(out)
    assert (data["kind"], data["culprits"], data["diagnosed"]) == ("missing", [1], True)
    assert data["job_failed"] and data["expected"] == "missing"
    assert [r["state"] for r in data["ranks"]] == ["waiting", "finished", "waiting"]
    assert data["ranks"][0]["waits_for"] == [1] and data["ranks"][0]["op"].startswith(
        "all_reduce #3"
    )
    assert "rank 1 never entered all_reduce #3" in data["message"]
    assert time.perf_counter() - t0 < 60  # a hang guard: the run ends with its diagnosis


def test_a_deadlock_is_named_as_its_cycle_in_the_text_form():
    out = cli(
        "run",
        "failure",
        "--case",
        "deadlock",
        "--culprit",
        "0",
        "--world-size",
        "2",
        "--timeout",
        "1",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    said = " ".join(out.stdout.split())  # the paragraph is wrapped to the terminal's width
    assert "diagnosed as planted: deadlock, rank 0" in said
    assert "rank 0 waits in recv #1 from rank 1" in said


def test_a_skipped_collective_is_named_under_torchrun():
    out = cli(
        "run",
        "failure",
        "--case",
        "skips_collective",
        "--culprit",
        "1",
        "--timeout",
        "2",
        "--json",
        torchrun=2,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    data = report(out)  # rank 0 reports, rank 1 stays quiet
    assert (data["world_size"], data["kind"], data["culprits"]) == (2, "missing", [1])
    assert "rank 1 never entered all_reduce #3 (group world)" in data["message"]
    assert data["ranks"][1]["state"] == "finished"


@pytest.mark.parametrize(
    "args, match",
    [
        (["--case", "nope"], "error: --case='nope' is not valid: expected one of 'killed'"),
        (["--culprit", "4"], "error: --culprit=4 is not valid: expected an integer in [0, 3]"),
        (
            ["--case", "mismatched_sizes", "--world-size", "2"],
            "error: --world-size=2 is not valid: expected at least 3 ranks for case",
        ),
    ],
)
def test_bad_options_get_one_line_before_any_process_starts(args, match):
    t0 = time.perf_counter()
    out = cli("run", "failure", *args)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(match), out.stderr
    assert time.perf_counter() - t0 < 30
