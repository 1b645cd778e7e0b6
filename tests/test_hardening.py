"""Issue 17, the inputs that used to give a traceback, a hang or a silently wrong answer: each now
gets one line naming the option, the value and the valid range, before any work starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from helpers import cli, free_port  # the command run as a learner runs it, in a subprocess

from edu_parallel import Cluster
from edu_parallel.app.paths import check_output_file
from edu_parallel.core.errors import MAX_TIMEOUT_S, check_int, check_timeout
from edu_parallel.core.inputs import Buffer
from edu_parallel.core.units import MAX_SIZE, parse_size

HUGE = "1" + "0" * 400


def one_line_error(out, expected):
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    assert expected in out.stderr and "Traceback" not in out.stderr, out.stderr


# ------------------------------------------------------------------ in-process checks
def test_sizes_of_hundreds_of_digits_are_refused_not_overflowed():
    for text in (HUGE, HUGE + "KiB", "1e400", f"{MAX_SIZE + 1}"):
        with pytest.raises(ValueError, match="expected a byte count > 0 and <= 1GiB"):
            parse_size(text)
    assert parse_size(f"{MAX_SIZE}") == MAX_SIZE


@pytest.mark.parametrize(
    "value", [1e9, 1e308, float("inf"), float("nan"), 0, 1e-6, 0.09, -1, True, "soon"]
)
def test_timeouts_are_bounded(value):
    with pytest.raises(ValueError, match=r"expected a number of seconds in \[0\.1, 86400\]"):
        check_timeout("timeout", value)
    assert check_timeout("timeout", MAX_TIMEOUT_S) == MAX_TIMEOUT_S


def test_a_cluster_refuses_a_bool_and_an_endless_timeout_before_starting():
    with pytest.raises(ValueError, match="world_size=True is not valid"):
        Cluster(True)
    with pytest.raises(ValueError, match="timeout=1000000000.0 is not valid"):
        Cluster(2, timeout=1e9)
    with pytest.raises(ValueError, match="expected an integer"):
        check_int("n", False, 0)


@pytest.mark.parametrize(
    "nbytes, dtype, such",
    [(3, "float32", "4 or 8"), (6, "float32", "4 or 8"), (12, "int64", "8 or 16")],
)
def test_a_size_that_is_not_whole_elements_is_refused_with_the_nearest_sizes(nbytes, dtype, such):
    with pytest.raises(ValueError) as err:
        Buffer(nbytes, dtype)
    assert f"size={nbytes} is not valid" in str(err.value) and such in str(err.value)
    assert Buffer(8, dtype).numel * Buffer(8, dtype).itemsize == 8


def test_output_paths_are_checked(tmp_path):
    assert check_output_file(tmp_path / "run.json", "--trace") == tmp_path / "run.json"
    cases = [
        ("", "--trace='' is not valid: expected a file name"),
        (str(tmp_path), "expected a file, not a folder"),
        (str(tmp_path / "missing" / "x.json"), "does not exist"),
    ]
    for path, expected in cases:
        with pytest.raises(ValueError, match=expected.replace("(", r"\(")):
            check_output_file(path, "--trace")
    with pytest.raises(ValueError, match="a file name ending in .png"):
        check_output_file(tmp_path / "figure", "--out", (".png",))
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="read-only"):
            check_output_file(locked / "x.json", "--trace")


def test_a_file_another_rank_makes_or_removes_during_the_check_is_neither_refused_nor_removed(
    tmp_path, monkeypatch
):
    """Under torchrun every rank checks --trace at once: one rank's probe file appears and
    disappears under the others. Both orders are played here, deterministically: the sibling's
    file appears after this check found none, then goes after this check found it."""
    out = tmp_path / "run.json"
    real_open = os.open
    looks = []

    def sibling(path, flags, *args):  # os.open of the target without O_CREAT: "is it there?"
        if Path(path) == out and not flags & os.O_CREAT:
            looks.append(flags)
            if len(looks) == 1:  # missing when looked at, then made by the sibling
                out.write_text("rank 1's probe")
                raise FileNotFoundError(path)
            if len(looks) == 2:  # the sibling removes its probe: missing again
                out.unlink()
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", sibling)
    assert check_output_file(out, "--trace") == out
    assert len(looks) == 2 and not out.exists()  # looked again; created, then removed, its own
    looks.clear()

    def made_and_kept(path, flags, *args):
        if Path(path) == out and not flags & os.O_CREAT and not looks:
            looks.append(flags)
            out.write_text("rank 1's trace")
            raise FileNotFoundError(path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", made_and_kept)
    assert check_output_file(out, "--trace") == out
    assert out.read_text() == "rank 1's trace"  # not removed: it is not the checker's


def test_an_existing_output_is_opened_for_writing_without_being_changed(tmp_path):
    out = tmp_path / "run.json"
    out.write_text("kept")
    assert check_output_file(out, "--trace") == out and out.read_text() == "kept"
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # no reader: opening it for writing must not block the check
    assert check_output_file(fifo, "--trace") == fifo


# ------------------------------------------------------------------ the command line
@pytest.mark.parametrize(
    "args, expected",
    [
        (["run", "ring", "--size", HUGE], "expected a byte count > 0 and <= 1GiB"),
        (["model", "allreduce", "--size", HUGE], "expected a byte count > 0 and <= 1GiB"),
        (["run", "ring", "--timeout", "1e9"], "timeout=1000000000.0 is not valid"),
        (["run", "ring", "--timeout", "1e308"], "expected a number of seconds in [0.1, 86400]"),
        (["run", "ring", "--world-size", "4", "--size", "3"], "such as 4 or 8"),
        (["run", "ring", "--size", "6"], "size=6 is not valid: expected a whole number of float32"),
        (["run", "ring", "--size", "1KiB", "--trace", ""], "--trace='' is not valid"),
        (["run", "ring", "--size", "1KiB", "--trace", "/"], "expected a file, not a folder"),
        (["run", "ring", "--chrome-trace", "/no/such/dir/t.json"], "/no/such/dir does not exist"),
        (["figure", "--out", "/tmp"], "--out='/tmp' is not valid: expected a file, not a folder"),
        (["figure", "--out", "/no/such/dir/f.png"], "does not exist"),
        (["figure", "--out", "picture"], "expected a file name ending in .png, .svg, .pdf"),
        (["plan", "ring", "--world-size", "4096"], "expected an integer in [1, 256] for `plan`"),
        (["run", "zero", "--stage", "4", "--steps", "0"], "1, 2, 3; --steps=0 is not valid"),
        (["run", "tp", "--mode", "row", "--gather-output"], "--gather-output=True is not valid"),
        (["run", "moe", "--top-k", "9", "--tokens", "0"], "--top-k=9 is not valid: expected an"),
    ],
)
def test_bad_inputs_get_one_line_before_any_work(args, expected):
    out = cli(*args)
    one_line_error(out, expected)
    assert out.stdout == ""  # refused up front: no run printed anything


def test_a_bad_trace_path_does_not_cost_the_run(tmp_path):
    """The path is checked first: nothing ran, nothing was written."""
    out = cli("run", "ring", "--size", "1KiB", "--trace", str(tmp_path / "no" / "t.json"))
    one_line_error(out, "does not exist")
    assert out.stdout == "" and not list(tmp_path.iterdir())


def test_one_rank_has_no_bandwidth_rather_than_an_infinite_one():
    text = cli("model", "allreduce", "--world-size", "1")
    assert text.returncode == 0 and "algbw      n/a" in text.stdout and "inf" not in text.stdout
    data = json.loads(cli("model", "allreduce", "--world-size", "1", "--json").stdout)
    assert data["algbw_gbps"] is None and data["time_s"] == 0


def test_plan_at_its_largest_world_size_prints_a_summary_not_the_grid():
    for algo in ("ring", "rabenseifner", "double-tree"):
        out = cli("plan", algo, "--world-size", "256")  # the grid would take minutes
        assert out.returncode == 0, out.stderr
        assert "is valid: it computes all_reduce" in out.stdout and len(out.stdout) < 1000
    small = cli("plan", "ring", "--world-size", "32").stdout
    assert "r31" in small and "reduce-scatter |" in small  # the full text and grid up to 32


def test_a_stale_torchrun_environment_is_named_within_the_timeout():
    env = dict(os.environ, RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1")
    env["MASTER_PORT"] = str(free_port())  # nobody serves the rendezvous there
    out = cli("run", "ring", "--size", "1KiB", "--timeout", "2", env=env)  # not a hang
    one_line_error(out, "could not join the torchrun group at 127.0.0.1:")
    assert "unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT" in out.stderr


def test_a_partial_torchrun_environment_runs_locally_and_says_so():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "MASTER_ADDR", "MASTER_PORT")}
    out = cli("run", "ring", "--size", "1KiB", "--world-size", "2", env={**env, "WORLD_SIZE": "2"})
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("note: WORLD_SIZE set without the other torchrun variables")
    assert "2 ranks" in out.stdout


@pytest.mark.parametrize(
    "dtype, pattern, n, fits",
    [("float16", "powers_of_two", 16, True), ("float16", "powers_of_two", 15, False)]
    + [("bfloat16", "powers_of_two", 16, False), ("float16", "rank", 16, False)],
)
def test_a_pattern_whose_sum_overflows_its_dtype_is_refused_before_the_run(dtype, pattern, n, fits):
    """The exact sum of a deterministic pattern is known up front (2^N - 1, N(N-1)/2): past the
    dtype's largest value every algorithm gives inf, so the run is refused, not reported as a
    mismatch with dist.all_reduce."""
    from edu_parallel.core.inputs import LARGEST, Buffer
    from edu_parallel.plans.algorithms import plan_allreduce

    total = Buffer(64, dtype, pattern).total(n)
    assert (total > LARGEST[dtype]) is fits
    if fits:
        with pytest.raises(ValueError, match=r"world_size <= 15"):
            plan_allreduce(n, 64, dtype, pattern=pattern)
    else:
        assert plan_allreduce(n, 64, dtype, pattern=pattern).plan.world_size == n
    assert LARGEST["float16"] == 65504 and LARGEST["bfloat16"] == float(
        torch.finfo(torch.bfloat16).max
    )
