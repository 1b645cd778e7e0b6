"""Issue 37, the bad-input table: every case is one command line (or one API call) and what it
must give. A bad input gets exactly one ``error: ...`` line on stderr that names the option as it
was typed, exit status 2, no traceback, and no work started (no cluster, no file written); a
learner's file that loops, exits or exhausts memory at import gets one line naming why.

The command-line cases run in this process (``edu_parallel.app.cli.main``), with
``engine.Cluster`` replaced by a tripwire, so a case that reaches a cluster before refusing fails;
the cases that must see a real process (a hang, an exit, a child left behind) run in one.
``benchmarks/bench_reliability.py`` prints the table's counts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import child_pids, cli

from edu_parallel import Cluster
from edu_parallel.app import cli as cli_module
from edu_parallel.core.errors import WorkerError
from edu_parallel.core.i18n import language
from edu_parallel.core.workspace import WORKSPACE_VAR
from edu_parallel.engine import cluster as engine_cluster
from edu_parallel.engine import demos
from edu_parallel.pipeline_parallel.config import MAX_LAYERS

HUGE = "1" + "0" * 400  # a 401-digit number
NOT_NUMBERS = ["", "abc", "nan", "inf", "-inf", HUGE, "1e400", "\udcff"]  # the last: not UTF-8

# options that take a count (an integer with a floor and a ceiling), per command
COUNTS = {
    ("run", "ring"): ["--world-size", "--seed", "--servers"],
    ("run", "allgather"): ["--world-size", "--seed"],
    ("run", "ddp"): ["--world-size", "--accumulate", "--steps", "--seed", "--rows"],
    ("run", "zero"): ["--world-size", "--stage", "--steps", "--seed"],
    ("run", "fsdp"): ["--world-size", "--steps", "--seed"],
    ("run", "tp"): ["--world-size", "--batch", "--seq", "--hidden", "--ffn", "--seed"],
    ("run", "moe"): ["--world-size", "--experts", "--top-k", "--tokens", "--hidden", "--seed"],
    ("run", "pipeline"): [
        "--world-size",
        "--stages",
        "--microbatches",
        "--chunks",
        "--hidden",
        "--microbatch-size",
        "--seed",
        "--layers",
    ],
    ("run", "3d"): [
        "--dp",
        "--tp",
        "--pp",
        "--layers",
        "--hidden",
        "--heads",
        "--batch",
        "--seq",
        "--microbatches",
        "--seed",
    ],
    ("run", "compress"): ["--world-size", "--rank", "--steps", "--seed", "--start-step"],
    ("run", "async"): ["--world-size", "--steps", "--rows", "--seed"],
    ("run", "async", "--mode", "local-sgd"): ["--local-steps"],  # H means nothing elsewhere
    ("run", "map"): ["--world-size", "--layers", "--hidden", "--batch", "--seq", "--seed"],
    ("plan", "ring"): ["--world-size"],
    ("bench", "collectives"): ["--world-size"],
    ("tour", "--no-input"): ["--world-size"],
    ("figure", "--out", "x.png"): ["--world-size"],
}
# options that take a real number
REALS = {
    ("run", "ring"): ["--timeout"],
    ("run", "ddp"): ["--lr", "--timeout"],
    ("run", "zero"): ["--lr"],
    ("run", "fsdp"): ["--lr"],
    ("run", "moe"): ["--capacity-factor", "--skew"],
    ("run", "pipeline"): ["--t-f", "--t-b", "--t-w", "--t-comm"],
    ("run", "compress"): ["--ratio", "--lr"],
    ("run", "async"): ["--lr", "--target"],
    ("run", "async", "--straggler", "rank"): ["--delay-ms"],  # a delay needs a straggler
    ("export", "--html", "site"): ["--timeout"],
}
# options that take one name of a list
NAMES = {
    ("run", "ring"): ["--algo", "--dtype", "--pattern", "--backend"],
    ("run", "ddp"): ["--model", "--sync"],
    ("run", "fsdp"): ["--granularity"],
    ("run", "tp"): ["--mode", "--dtype", "--rule"],
    ("run", "moe"): ["--dispatch"],
    ("run", "pipeline"): ["--schedule"],
    ("run", "compress"): ["--method"],
    ("run", "async"): ["--mode", "--straggler"],
    ("run", "async", "--straggler", "rank"): ["--distribution"],
    ("run", "map"): ["--strategies"],
    ("bench", "collectives"): ["--collective", "--dtype"],
}
# options that take a byte size
SIZES = {
    ("run", "ring"): ["--size"],
    ("run", "allgather"): ["--size"],
    ("bench", "collectives"): ["--min-size", "--max-size"],
}
# values a count option may rightly take (a seed of 10^9 is a seed; dp = -1 takes the rest)
ACCEPTED = {("--seed", "1000000000"), ("--dp", "-1"), ("--rows", "1000000000")}


def _cases() -> list[tuple[list[str], str]]:
    cases = []
    for table, values in (
        (COUNTS, [*NOT_NUMBERS, "-1", "0.5", "1000000000"]),
        (REALS, [*NOT_NUMBERS, "-1"]),
        (NAMES, ["", "nope", "RING!"]),
        (SIZES, [*NOT_NUMBERS, "0", "-1", "1XB", "2GiB"]),
    ):
        for command, options in table.items():
            for option in options:
                cases += [
                    ([*command, option, v], option) for v in values if (option, v) not in ACCEPTED
                ]
    return cases


CASES = _cases()


class Tripwire(Exception):
    pass


@pytest.fixture
def no_work(monkeypatch):
    """A case that starts a cluster's processes before refusing is a failure (the Cluster's own
    checks of its arguments run first, as they do for a learner)."""

    def started(*_a, **_k):
        raise Tripwire("a cluster was started before the input was refused")

    monkeypatch.setattr(engine_cluster.Cluster, "_start", started)


def _id(argv: list[str]) -> str:
    return " ".join(argv).replace(HUGE, "1e400-digits").encode("ascii", "backslashreplace").decode()


@pytest.mark.parametrize("argv, named", CASES, ids=[_id(a) for a, _ in CASES])
def test_a_bad_value_gets_one_line_naming_the_option(
    argv, named, no_work, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # nothing may be written; if it is, it is written here
    code = cli_module.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert named in err, f"the error does not name {named} as typed: {err}"
    assert "Traceback" not in err
    assert not list(tmp_path.iterdir()), "a refused command wrote a file"


# ------------------------------------------------- options that mean nothing where they are given
# (command line, the options it names): an option the run would silently ignore is refused, and
# the line names it and the option that decides (core.errors.needs / conflicts)
PLANNER = ["planner", "--layers", "2", "--hidden", "64", "--nodes", "1", "--global-batch", "8"]
COMBINATIONS = [
    (["run", "ddp", "--no-overlap", "--sync", "per-param"], ["--no-overlap", "--sync"]),
    (  # the default --start-step (2) is not the user's: the line names --steps
        ["run", "compress", "--method", "powersgd", "--steps", "2"],
        ["--steps=2", "at least 3", "--start-step, default 2"],
    ),
    (["run", "ddp", "--no-overlap", "--sync", "overlap"], ["--no-overlap", "--sync"]),
    (["run", "ddp", "--flops", "1e15"], ["--flops", "--link"]),
    (["run", "ddp", "--rows", "4096"], ["--rows", "--link"]),
    (["run", "ddp", "--flops", "1e15", "--rows", "64"], ["--flops", "--rows", "--link"]),
    (["run", "compress", "--ratio", "0.1"], ["--ratio", "--method"]),
    (["run", "compress", "--method", "powersgd", "--ratio", "0.1"], ["--ratio", "--method"]),
    (["run", "compress", "--method", "fp16", "--rank", "2"], ["--rank", "--method"]),
    (["run", "compress", "--method", "topk", "--rank", "2"], ["--rank", "--method"]),
    (["run", "compress", "--method", "randk", "--start-step", "3"], ["--start-step", "--method"]),
    (
        ["run", "compress", "--method", "powersgd", "--steps", "5", "--start-step", "10"],
        ["--start-step", "--steps", "never compress"],
    ),
    (
        ["run", "compress", "--method", "powersgd", "--steps", "5", "--start-step", "5"],
        ["--start-step", "--steps", "never compress"],
    ),
    (["run", "async", "--straggler-rank", "1"], ["--straggler-rank", "--straggler"]),
    (
        ["run", "async", "--straggler", "random", "--straggler-rank", "1"],
        ["--straggler-rank", "--straggler"],
    ),
    (["run", "async", "--mode", "sync", "--backup", "1"], ["--backup", "--mode"]),
    (["run", "async", "--mode", "local-sgd", "--backup", "2"], ["--backup", "--mode"]),
    (  # 2^16 - 1 passes float16's 65504: every algorithm would give inf
        ["run", "ring", "--world-size", "16", "--dtype", "float16", "--pattern", "powers_of_two"],
        ["--dtype='float16'", "65535", "--world-size <= 15", "--pattern"],
    ),
    (  # every rank draws the whole batch: 8 GiB per rank at the three largest values
        [
            "run",
            "pipeline",
            "--hidden",
            "1024",
            "--microbatch-size",
            "1024",
            "--microbatches",
            "512",
        ],
        ["--microbatches x --microbatch-size x --hidden=536870912", "8 GiB in float64"],
    ),
    (  # the reference keeps every block's activations: 32 blocks on 16 stages
        ["run", "pipeline", "--world-size", "16", "--hidden", "1024", "--microbatch-size", "1024"]
        + ["--microbatches", "16"],
        ["--microbatches x --microbatch-size x --hidden x --layers=536870912", "8 GiB in float64"],
    ),
    (  # the step's work: OOM-killed at 23 GiB before the bound
        ["run", "3d", "--pp", "4", "--layers", "32", "--hidden", "128", "--batch", "256"]
        + ["--seq", "256", "--microbatches", "4"],
        ["--batch x --seq x --layers x (4 hidden + heads seq)=3221225472", "at most 134,217,728"],
    ),
    (  # the reference runs every expert on every token: 8.4 GiB before the bound, even k = 1
        ["run", "moe", "--world-size", "16", "--experts", "64", "--tokens", "1024"]
        + ["--hidden", "256", "--top-k", "1"],
        ["--world-size x --tokens x --experts x --hidden=268435456", "1 GiB"],
    ),
    (  # a padded buffer sized by a capacity factor of 100: 18 GiB before the bound
        ["run", "moe", "--world-size", "16", "--experts", "64", "--tokens", "64", "--hidden"]
        + ["256", "--dispatch", "padded", "--capacity-factor", "100"],
        ["--world-size x --experts x --capacity-factor x --hidden=", "capacity C = 200"],
    ),
    (
        [
            "planner",
            "--model",
            "llama3-8b",
            "--vocab",
            "1000",
            "--nodes",
            "1",
            "--global-batch",
            "8",
        ],
        ["--vocab=1000", "omitted with --model"],
    ),
    (
        [
            "planner",
            "--model",
            "llama3-8b",
            "--arch",
            "llama",
            "--nodes",
            "1",
            "--global-batch",
            "8",
        ],
        ["--arch='llama'", "omitted with --model"],
    ),
    (["run", "async", "--mode", "sync", "--local-steps", "8"], ["--local-steps=8", "--mode"]),
    (["run", "async", "--delay-ms", "20"], ["--delay-ms=20.0", "--straggler='none'"]),
    (["run", "async", "--distribution", "pareto"], ["--distribution='pareto'", "--straggler"]),
    # model, nccl, memory, planner, moe
    (["model", "all_to_all", "--algo", "tree"], ["--algo", "all_to_all", "allreduce (ring"]),
    (["model", "all_gather", "--algo", "Ring"], ["--algo", "all_gather", "nccl (Tree"]),
    (["model", "nccl", "--system", "dgx-h100", "--world-size", "3"], ["--world-size", "--system"]),
    (["model", "nccl", "--system", "dgx-h100", "--nodes", "2"], ["--nodes", "--system"]),
    (["model", "nccl", "--system", "dgx-h100", "--link", "nvlink3"], ["--link", "--system"]),
    (["model", "nccl", "--system", "2x8-a100-hdr", "--arch", "hopper"], ["--arch", "--system"]),
    (["model", "allreduce", "--system", "dgx-h100"], ["--system", "allreduce"]),
    (["model", "allreduce", "--proto", "LL"], ["--proto", "allreduce"]),
    (["model", "all_gather", "--arch", "ampere"], ["--arch", "all_gather"]),
    (["model", "allreduce", "--collective", "all_gather"], ["--collective", "allreduce"]),
    (["model", "nccl", "--alpha", "1e-6"], ["--alpha", "nccl"]),
    (["model", "nccl", "--nics", "2", "--nodes", "2", "--world-size", "16"], ["--nics", "nccl"]),
    (["model", "nccl", "--reduce-gbps", "100"], ["--reduce-gbps", "nccl"]),
    (["model", "allreduce", "--inter-link", "eth-25g"], ["--inter-link", "--nodes"]),
    (["model", "nccl", "--inter-link", "eth-25g"], ["--inter-link", "--nodes"]),
    (
        ["memory", "--params", "7e9", "--zero", "3", "--no-zero-init"],
        ["--no-zero-init", "--convention"],
    ),
    (
        ["memory", "--params", "7e9", "--largest-layer-params", "1e8"],
        ["--largest-layer-params", "--convention"],
    ),
    (
        [
            "memory",
            "--params",
            "7e9",
            "--gpus",
            "8",
            "--zero",
            "2",
            "--convention",
            "deepspeed",
            "--no-zero-init",
        ],
        ["--no-zero-init", "--zero"],
    ),
    (
        ["memory", "--params", "7e9", "--gpus", "8", "--gpus-per-node", "4"],
        ["--gpus-per-node", "--convention"],
    ),
    (["memory", "--params", "7e9", "--sequence-parallel"], ["--sequence-parallel", "--model"]),
    (["memory", "--params", "7e9", "--seq", "4096"], ["--seq", "--model"]),
    (["memory", "--params", "7e9", "--micro-batch", "2"], ["--micro-batch", "--model"]),
    (["memory", "--params", "7e9", "--recompute", "full"], ["--recompute", "--model"]),
    (["memory", "--model", "llama3-8b", "--sequence-parallel"], ["--sequence-parallel", "--tp"]),
    (
        [*PLANNER, "--heads", "32", "--kv-heads", "3", "--arch", "llama"],
        ["--kv-heads", "--heads", "1, 2, 4, 8, 16, 32"],
    ),
    (
        [*PLANNER, "--heads", "4", "--kv-heads", "8", "--arch", "bare"],
        ["--kv-heads", "--heads", "1, 2, 4)"],
    ),
    ([*PLANNER, "--heads", "4", "--kv-heads", "2"], ["--kv-heads", "--arch"]),
    (["run", "moe", "--capacity-factor", "1e-300"], ["--capacity-factor", ">= 2.51e-10"]),
    (
        [
            "run",
            "moe",
            "--world-size",
            "2",
            "--tokens",
            "1",
            "--experts",
            "64",
            "--top-k",
            "1",
            "--capacity-factor",
            "1e-9",
        ],
        ["--capacity-factor", ">= 6.41e-08"],
    ),
]


@pytest.mark.parametrize("argv, named", COMBINATIONS, ids=[_id(a) for a, _ in COMBINATIONS])
def test_an_option_that_means_nothing_where_it_is_given_is_refused(
    argv, named, no_work, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code = cli_module.main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(option in err for option in named), f"the error does not name {named}: {err}"
    assert not list(tmp_path.iterdir()), "a refused command wrote a file"


# ----------------------------------------------------------------- output paths that refuse
@pytest.mark.parametrize(
    "argv, named",
    [
        (["run", "ring", "--trace", "/proc/x.json"], "--trace="),
        (["run", "ring", "--trace", "/sys/x.json"], "--trace="),
        (["run", "ring", "--chrome-trace", "/proc/x.json"], "--chrome-trace="),
        (["figure", "--out", "/proc/x.png"], "--out="),
        (["figure", "--out", "/proc/x.svg"], "--out="),
        (["export", "--html", "/proc/x"], "--html="),
        (["lab", "--dir", "/proc/nope", "--no-browser"], "--dir="),
        (["lab", "--dir", "/sys/x", "--no-browser"], "--dir="),
        (["run", "ring", "--trace", "t.json", "--chrome-trace", "./t.json"], "--chrome-trace="),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_path_the_system_refuses_is_named_before_any_work(argv, named, no_work, capsys):
    assert cli_module.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and named in err, err


def test_a_write_that_fails_after_the_run_keeps_the_result_and_names_the_option():
    out = cli("run", "ring", "--world-size", "2", "--size", "1KiB", "--trace", "/dev/full")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "busbw" in out.stdout  # the run's report came first
    assert out.stderr.startswith("error: --trace='/dev/full'") and "No space left" in out.stderr


# ---------------------------------------------------------- learner files that misbehave
LEARNER_FILES = {
    "loop.py": ("while True:\n    pass\n", "did not finish loading within 4 s: it loops at line 1"),
    "exit7.py": ("import os\nos._exit(7)\n", "ended the process while loading (exit status 7)"),
    "memory.py": ("x = bytearray(10**13)\n", "ran out of memory while loading"),
    "syntax.py": ("def my_ring_allreduce(ctx, x)\n", "syntax.py line 1:"),
    "missing.py": ("import no_such_module_here\n", "ModuleNotFoundError"),
    "bom.py": ("\ufeffdef ring_allreduce(ctx, x):\n    return x\n", "defines no function"),
    "latin1.py": (b"x = '\xe9'\n", "latin1.py line 1:"),
}


@pytest.mark.parametrize("name", sorted(LEARNER_FILES))
def test_a_learner_file_that_misbehaves_at_import_gets_one_verdict(name, tmp_path):
    source, expected = LEARNER_FILES[name]
    path = tmp_path / name
    if isinstance(source, bytes):
        path.write_bytes(source)
    else:
        path.write_text(source, encoding="utf-8")
    before = set(child_pids())
    out = cli(
        "exercise", "check", "03", str(path), timeout=60, env=_workspace(tmp_path)
    )  # hang guard
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert out.stdout.startswith("FAIL ") and expected in out.stdout, out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    assert set(child_pids()) <= before


def _workspace(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, WORKSPACE_VAR: str(tmp_path / "workspace")}


# ------------------------------------------------------------------ the API and the CLI
@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(world_size=float("inf")), "world_size=inf is not valid"),
        (dict(world_size=2, start_method="forkserver"), "expected one of 'auto', 'fork', 'spawn'"),
        (dict(world_size=2, timeout=1e-6), "expected a number of seconds in [0.1, 86400]"),
        (dict(world_size=2, timeout=float("nan")), "expected a number of seconds in [0.1,"),
        (dict(world_size=2, progress="bar"), "progress='bar' is not valid: expected a function"),
    ],
)
def test_a_cluster_refuses_bad_arguments_in_one_line(kwargs, expected):
    with pytest.raises(ValueError) as err:
        Cluster(**kwargs)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_an_argument_that_cannot_travel_is_named_and_a_nested_cluster_is_refused():
    with Cluster(2, timeout=20) as c:
        with pytest.raises(TypeError, match=r"argument 1 of the job \(lock\) cannot be sent"):
            c.run(demos.hello, threading.Lock())
        with pytest.raises(TypeError, match=r"argument lock= of the job \(lock\)"):
            c.run(demos.hello, lock=threading.Lock())
        with pytest.raises(WorkerError, match="a Cluster cannot start inside a job"):
            c.run(start_a_cluster)
        assert c.run(demos.hello).results[1]["rank"] == 1  # and the next job runs


def receives_into_a_larger_buffer(ctx) -> float:
    """Rank 0 sends 16 floats at step 3; rank 1 receives into 32: gloo completes it silently."""
    import torch

    if ctx.rank == 0:
        ctx.send(torch.ones(16), 1, step=3)
        return 0.0
    buf = torch.zeros(32)
    ctx.recv(buf, 0, step=3)
    return float(buf.sum())


@pytest.mark.parametrize("trace", [True, False], ids=["traced", "untraced"])
def test_a_message_received_into_a_buffer_of_another_size_is_named(trace):
    from edu_parallel.engine.matching import MessageSizeError

    with Cluster(2, timeout=20) as c:
        with pytest.raises(MessageSizeError) as info:
            c.run(receives_into_a_larger_buffer, trace=trace)
        assert (info.value.rank, info.value.step) == (1, 3)
        assert str(info.value).startswith(
            "rank 1 received a message of 64 B from rank 0 at step 3 into a buffer of 128 B"
        )
        out = c.run(demos.empty, trace=trace)  # the cluster goes on
        assert out.results == [None, None] and out.trace.events == []


def start_a_cluster(ctx) -> None:
    Cluster(2)


def start_a_sleep(ctx) -> int:
    return subprocess.Popen(["sleep", "300"]).pid


def test_what_a_job_starts_ends_with_the_cluster():
    with Cluster(2, timeout=20) as c:
        pids = c.run(start_a_sleep).results
    time.sleep(0.2)
    alive = [p for p in pids if _running(p)]
    assert not alive, f"the jobs' sleeps outlived the cluster: {alive}"


def _killed_parent(then: str, check=None, **env: str) -> str:
    """A parent process that starts ``c = Cluster(2)``, runs ``then`` (which prints one line),
    and is killed by SIGKILL once it has (after ``check(line)``, while it still runs): that
    line."""
    code = f"from edu_parallel import Cluster\nc = Cluster(2, timeout=20)\n{then}\n"
    parent = subprocess.Popen(
        [sys.executable, "-c", code + "import time; time.sleep(300)\n"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    line = parent.stdout.readline().strip()
    if check is not None:
        check(line)
    parent.kill()
    parent.wait(10)
    return line


def test_the_store_of_a_killed_parent_is_removed_when_the_next_cluster_starts(tmp_path):
    """A parent killed by SIGKILL cannot remove its FileStore folder; the next start does (its
    owner is dead), and leaves a living owner's folder alone."""
    from edu_parallel.engine.store import make_store_dir

    def made_here(line: str) -> None:
        assert Path(line).is_dir() and Path(line).parent == tmp_path

    store = Path(_killed_parent("print(c._store_dir, flush=True)", made_here, TMPDIR=str(tmp_path)))
    assert store.is_dir()  # left behind: nobody could remove it
    live = Path(make_store_dir(str(tmp_path)))  # this process's own: its owner runs
    old = tmp_path / "edu-parallel-store-x"  # a name without an owner: not ours to judge
    old.mkdir()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("TMPDIR", str(tmp_path))
            mp.setattr("tempfile.tempdir", None)  # tempfile reads TMPDIR again
            with Cluster(2, timeout=20) as c:
                assert c.run(demos.empty).results == [None, None]
        assert not store.exists() and old.is_dir() and live.is_dir()
        assert not [p for p in tmp_path.iterdir() if p not in (live, old)]  # c's own is gone
    finally:
        live.rmdir()


def test_what_a_job_starts_ends_when_its_parent_is_killed(tmp_path):
    """The parent killed with SIGKILL cannot close its cluster: each rank then ends its own
    process group, the rank and the job's ``sleep``, within a second or so."""

    def all_running(line: str) -> None:
        pids = [int(p) for p in line.split()]
        assert len(pids) == 4 and all(_running(p) for p in pids)

    said = _killed_parent(
        "from test_bad_inputs import start_a_sleep\n"
        "print(*c.pids, *c.run(start_a_sleep).results, flush=True)",
        all_running,
        PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]),
    )
    pids = [int(p) for p in said.split()]
    deadline = time.monotonic() + 10  # a hang guard: they go within about 0.2 s
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _running(p)], "ranks or their jobs' sleeps outlived the parent"


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie is dead: only its exit status is left


@pytest.mark.parametrize(
    "argv", [["memory", "--params", "7e9"], ["plan", "ring"], ["model", "allreduce"]]
)
def test_a_reader_that_leaves_the_pipe_gets_no_traceback(argv):
    """``edu-parallel memory | head -1``: the reader closes the pipe before the program writes;
    the program ends with 141 (128 + SIGPIPE, as a shell says) and says nothing more."""
    child = subprocess.Popen(
        [sys.executable, "-m", "edu_parallel", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    child.stdout.close()  # the reader is gone before the first line
    err = child.stderr.read().decode()
    assert child.wait(60) == 141 and err == "", err


def test_version_prints_the_installed_version():
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("edu-parallel 0.")
    assert cli_module.package_version() in out.stdout


@pytest.mark.parametrize(
    "argv, named",
    [
        (
            ["run", "ring", "--world-size", "16", "--size", "1GiB"],
            "--size='1GiB' needs about 48 GiB",
        ),
        (["run", "allgather", "--world-size", "16", "--size", "1GiB"], "--size='1GiB' needs"),
        (["run", "alltoall", "--world-size", "16", "--size", "1GiB"], "--size='1GiB' needs"),
        (
            ["bench", "collectives", "--world-size", "16", "--min-size", "1", "--max-size", "1GiB"],
            "--max-size='1GiB' needs about 48 GiB on 16 ranks",
        ),
        (
            [
                "run",
                "tp",
                "--world-size",
                "16",
                "--hidden",
                "8192",
                "--ffn",
                "32768",
                "--seq",
                "16",
            ],
            "--hidden=8192, --ffn=32768 need about",
        ),
        (  # every rank its 32 blocks of (1024, 1024); the reference all 512, and their gradients
            ["run", "pipeline", "--world-size", "16", "--layers", "512", "--hidden", "1024"],
            "--layers=512, --hidden=1024, --microbatches=8, --microbatch-size=4 need about",
        ),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_a_largest_run_that_cannot_fit_is_refused_with_what_it_needs(
    argv, named, no_work, capsys, monkeypatch
):
    """On this CI's machine (24 GiB), before any process starts: the figure it would need."""
    from edu_parallel.comm import memory

    monkeypatch.setattr(memory, "free_memory_bytes", lambda: 24 << 30)
    assert cli_module.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and named in err, err
    assert "this machine has 24 GiB free" in err


def test_the_largest_pipeline_is_refused_one_past_it_and_runs_at_it(no_work, capsys):
    assert cli_module.main(["run", "pipeline", "--layers", str(MAX_LAYERS + 1)]) == 2
    assert f"--layers={MAX_LAYERS + 1} is not valid" in capsys.readouterr().err
    out = cli("run", "pipeline", "--stages", "2", "--layers", str(MAX_LAYERS), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["layers"] == MAX_LAYERS


# ----------------------------------------------------------------- a sample in Chinese
UNTRANSLATED = {"None", "float"}  # Python's own words (a type's name) that a message quotes
ZH_SAMPLE = CASES[:: max(1, len(CASES) // 30)][:30]


@pytest.mark.parametrize("argv, named", ZH_SAMPLE, ids=[_id(a) for a, _ in ZH_SAMPLE])
def test_a_sample_of_the_table_reads_in_chinese(argv, named, no_work, capsys):
    with language("zh"):
        code = cli_module.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("错误") and named in err, err
    # without the command as typed, values, options and numbers
    prose = re.sub(r"edu-parallel[^:：]*[:：]|'[^']*'|--[a-z-]+|\d\S*", " ", err)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in prose), err
    english = [w for w in re.findall(r"[A-Za-z]{4,}", prose) if w not in UNTRANSLATED]
    assert not english, f"English left in the Chinese message: {english}: {err}"
