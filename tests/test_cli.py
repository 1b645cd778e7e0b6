"""The command line: readable tables, JSON, one-line errors, torchrun, traces on disk."""

import json
from importlib import metadata

import pytest
from helpers import cli

from edu_parallel.core.trace import Trace

pytestmark = pytest.mark.multiprocess


def test_run_ring_json_has_the_documented_keys():
    out = cli("run", "ring", "--world-size", "3", "--size", "1KiB", "--dtype", "int64", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in (
        "concept",
        "world_size",
        "nbytes",
        "dtype",
        "per_rank_sent_bytes",
        "formula_sent_bytes",
        "matches_builtin",
        "steps",
        "time_s",
        "algbw_gbps",
        "busbw_gbps",
        "per_rank_recv_bytes",
        "algo",
    ):
        assert key in data
    assert data["world_size"] == 3 and data["nbytes"] == 1024 and data["dtype"] == "int64"
    assert data["matches_builtin"] is True and data["steps"] == 4 and data["algo"] == "ring"
    assert data["formula_sent_bytes"] == pytest.approx(2 * 2 / 3 * 1024)
    assert all(abs(s - data["formula_sent_bytes"]) < 1024 / 3 for s in data["per_rank_sent_bytes"])
    assert data["busbw_gbps"] == pytest.approx(data["algbw_gbps"] * 4 / 3)


def test_run_ddp_json_has_the_documented_keys():
    out = cli(
        "run",
        "ddp",
        "--world-size",
        "2",
        "--model",
        "deep",
        "--bucket-mb",
        "2",
        "--link",
        "ib-ndr-400",
        "--rows",
        "4096",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [b["bytes"] for b in data["buckets"]] == [2 * (2**20 + 2048)] * 4
    assert data["matches_reference"] and data["matches_torch_ddp_buckets"]
    assert data["per_rank_sent_bytes"] == [data["formula_sent_bytes"]] * 2
    assert data["messages_per_step"] == 4 * 2 * (2 - 1)
    for key in ("overlap_fraction_measured", "overlap_fraction_modelled", "step_time_s"):
        assert 0 <= data[key] < 60


def test_run_prints_a_step_table_and_writes_traces(tmp_path):
    trace, chrome = tmp_path / "t.json", tmp_path / "c.json"
    out = cli(
        "run",
        "allreduce",
        "--algo",
        "naive",
        "--world-size",
        "4",
        "--size",
        "4096",
        "--trace",
        str(trace),
        "--chrome-trace",
        str(chrome),
    )
    assert out.returncode == 0, out.stderr
    assert "matches dist.all_reduce: yes" in out.stdout and "busbw" in out.stdout
    assert "   0  reduce" in out.stdout and "   1  broadcast" in out.stdout
    t = Trace.load(trace)
    assert t.sent_bytes() == [3 * 4096, 4096, 4096, 4096]
    assert len(json.loads(chrome.read_text())["traceEvents"]) > len(t.events)


@pytest.mark.parametrize(
    "args,expected",
    [
        (
            ["run", "ring", "--world-size", "0"],
            "--world-size=0 is not valid: expected an integer in [1, 16]",
        ),
        (["run", "ring", "--world-size", "99"], "--world-size=99"),
        (["run", "ring", "--size", "0"], "size='0' is not valid"),
        (["run", "ring", "--size", "lots"], "size='lots' is not valid"),
        (
            ["run", "ring", "--dtype", "float8"],
            "dtype='float8' is not valid: expected one of float32",
        ),
        (["run", "ring", "--backend", "mpi"], "backend='mpi' is not valid"),
        (["run", "ring", "--backend", "nccl"], "CUDA device per rank"),
        (
            ["run", "allreduce", "--algo", "magic"],
            "algo='magic' is not valid: expected one of 'ring', 'naive'",
        ),
        (["run", "teleport"], "invalid choice: 'teleport'"),
        (["run", "ddp", "--bucket-mb", "0"], "bucket-mb=0.0 is not valid: expected a finite"),
        (["run", "ddp", "--accumulate", "0"], "accumulate=0 is not valid"),
        (["run", "ddp", "--world-size", "3"], "world_size=3 is not valid with accumulate=1"),
        (["run", "ddp", "--freeze", "3"], "freeze=3 is not valid: expected at most 2"),
        (["run", "ddp", "--link", "wifi"], "link='wifi' is not valid"),
        (["plan", "magic"], "algo='magic'"),
    ],
)
def test_errors_are_one_line_without_traceback(args, expected):
    out = cli(*args)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and expected in out.stderr and "Traceback" not in out.stderr
    assert out.stderr.startswith("error: ")


def test_plan_prints_text_and_grid():
    out = cli("plan", "ring", "--world-size", "3")
    assert out.returncode == 0
    assert out.stdout.startswith(
        "plan ring_allreduce all_reduce n=3 chunks=3\nreduce-scatter | 0>1:c0+"
    )
    assert "valid: it computes all_reduce in 4 steps" in out.stdout


def test_the_same_concept_runs_under_torchrun(tmp_path):
    trace = tmp_path / "tr.json"
    out = cli("run", "ring", "--size", "64KiB", "--json", "--trace", str(trace), torchrun=2)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1  # rank 0 reports, rank 1 stays quiet
    data = json.loads(lines[0])
    assert (
        data["world_size"] == 2
        and data["matches_builtin"]
        and data["per_rank_sent_bytes"] == [65536, 65536]
    )
    t = Trace.load(trace)
    assert t.meta["source"] == "torchrun" and {e.rank for e in t.events} == {0, 1}


@pytest.mark.parametrize(
    "args, key",
    [
        (["map", "--strategies", "dp,tp"], "runs"),
        (["fsdp", "--steps", "1"], "matches_zero3"),
        (["ddp", "--steps", "2"], "matches_torch_ddp_buckets"),
    ],
)
def test_concepts_of_several_jobs_run_under_torchrun(args, key):
    """Rank 1 must take part in every job of the concept, not stop after the first."""
    out = cli("run", *args, "--json", torchrun=2)
    ranks = [line for line in out.stderr.splitlines() if "rank" in line.lower()][:20]
    assert out.returncode == 0, "\n".join(ranks) + "\n...\n" + out.stderr[-2000:]
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    data = json.loads(line)
    assert data["world_size"] == 2 and key in data


def test_tour_runs_in_the_terminal_without_input():
    out = cli("tour", "--no-input", timeout=120)
    assert out.returncode == 0, out.stderr
    assert "matches dist.all_reduce: yes" in out.stdout
    assert "rank 1 raised" in out.stdout and "Answer:" in out.stdout
    assert "s5  all r0 [0123] [0123] [0123] [0123]" in out.stdout


def test_console_script_is_installed():
    scripts = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts")}
    assert scripts.get("edu-parallel") == "edu_parallel.app.cli:entry"


# ------------------------------------------------------------------ lesson 13: run compress
def test_run_compress_json_has_the_issue_keys():
    out = cli(
        "run",
        "compress",
        "--method",
        "powersgd",
        "--rank",
        "2",
        "--error-feedback",
        "--world-size",
        "2",
        "--steps",
        "10",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in (
        "wire_bytes_per_step",
        "compression_ratio",
        "final_loss",
        "steps_to_target",
        "matches_torch_hook",
    ):
        assert key in data
    assert data["wire_bytes_per_step"] == data["formula_wire_bytes"]
    assert data["compression_ratio"] == data["dense_bytes_per_step"] / data["wire_bytes_per_step"]
    assert data["matches_torch_hook"] is True and data["label"] == "powersgd r=2 + EF"
    assert data["steps_to_target"] is None and len(data["accuracies"]) == 10  # 10 steps: too few


def test_run_compress_prints_a_readable_report():
    out = cli("run", "compress", "--method", "topk", "--world-size", "2", "--steps", "3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("topk 1% on 2 ranks, 3 SGD steps")
    assert "no torch hook for this run" in out.stdout and "(formula 1,760 B)" in out.stdout


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--method", "topk", "--ratio", "0"], "ratio=0.0 is not valid: expected a number in"),
        (["--method", "randk", "--ratio", "1.5"], "ratio=1.5 is not valid"),
        (["--ratio", "0.1"], "ratio=0.1 is not valid: expected no value with --method='none'"),
        (["--method", "powersgd", "--rank", "0"], "rank=0 is not valid: expected an integer"),
        (["--method", "powersgd", "--rank", "64"], "rank=64 is not valid"),
        (["--method", "zip"], "method='zip' is not valid: expected one of 'none', 'fp16'"),
        (["--error-feedback"], "error-feedback=True is not valid: expected False with method="),
        (["--world-size", "3"], "--world-size=3 is not valid: expected a divisor of the"),
        (["--method", "powersgd", "--start-step", "-1"], "start-step=-1 is not valid"),
    ],
)
def test_run_compress_errors_are_one_line_before_any_process(args, expected):
    out = cli("run", "compress", *args, timeout=30)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and expected in out.stderr, out.stderr
    assert out.stderr.startswith("error: ") and "Traceback" not in out.stderr


# ------------------------------------------------------------------ lesson 14: run async
def test_run_async_json_has_the_issue_keys():
    out = cli(
        "run",
        "async",
        "--mode",
        "async-ps",
        "--straggler",
        "rank",
        "--distribution",
        "pareto",
        "--world-size",
        "3",
        "--steps",
        "12",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in (
        "samples_per_s",
        "staleness_histogram",
        "time_to_target_s",
        "final_loss",
        "replay_matches",
    ):
        assert key in data
    assert data["replay_matches"] is True and data["workers"] == 2
    assert sum(data["staleness_histogram"].values()) == data["applied"] == 12 * 2
    assert data["straggler"] == "worker 1, pareto 10 ms" and data["samples_per_s"] > 0


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["--straggler", "rank", "--straggler-rank", "4"],
            "straggler-rank=4 is not valid: expected an integer in [0, 3]",
        ),
        (
            ["--straggler", "rank", "--delay-ms", "-5"],
            "delay-ms=-5.0 is not valid: expected a number of milliseconds",
        ),
        (["--mode", "local-sgd", "--local-steps", "0"], "local-steps=0 is not valid"),
        (["--mode", "backup", "--backup", "4"], "backup=4 is not valid: expected an integer in"),
        (["--mode", "gossip"], "mode='gossip' is not valid: expected one of 'sync', 'async-ps'"),
        (["--straggler", "rank", "--distribution", "zipf"], "distribution='zipf' is not valid"),
        (["--steps", "0"], "steps=0 is not valid: expected an integer in [1, 2000]"),
        (["--straggler", "sometimes"], "straggler='sometimes' is not valid"),
    ],
)
def test_run_async_errors_are_one_line_before_any_process(args, expected):
    out = cli("run", "async", "--world-size", "4", *args, timeout=30)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and expected in out.stderr, out.stderr
    assert out.stderr.startswith("error: ") and "Traceback" not in out.stderr
