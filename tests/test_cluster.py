"""The persistent engine: jobs, failures that name the rank and step, no orphans."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from helpers import child_pids

from edu_parallel import Cluster, ClusterClosedError, JobTimeoutError, WorkerError
from edu_parallel.engine import demos

pytestmark = pytest.mark.multiprocess


def test_runs_many_jobs_on_the_same_processes(cluster4):
    first = cluster4.run(demos.hello)
    second = cluster4.run(demos.hello)
    assert [h["rank"] for h in first.results] == [0, 1, 2, 3]
    assert {h["world_size"] for h in first.results} == {4}
    assert [h["pid"] for h in first.results] == [h["pid"] for h in second.results] == cluster4.pids
    assert cluster4.start_method == "fork" and cluster4.backend == "gloo"


def test_traced_job_records_sends_and_collectives(cluster4):
    out = cluster4.run(demos.traced_hello, 64)
    assert out.results == [6 * 16.0] * 4  # every rank got its left neighbour's 16 floats; summed
    sends = out.trace.select("send")
    assert sorted((e.rank, e.peer) for e in sends) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert all(e.nbytes == 64 and e.end >= e.start for e in sends)
    assert len(out.trace.select("collective")) == 4
    assert len(out.trace.matched_transfers()) == 4


def test_a_raising_rank_is_named_at_once_and_the_cluster_goes_on():
    """A WorkerError, not a JobTimeoutError: the failure is reported as it happens, while the
    other ranks still wait for it in the all-reduce (how long that takes: benchmarks/)."""
    with Cluster(4, timeout=20) as c:
        with pytest.raises(WorkerError) as info:
            c.run(demos.raise_on, 2)
        err = info.value
        assert err.rank == 2 and "rank 2 raised" in str(err) and "about to all-reduce" in err.where
        assert "RuntimeError: rank 2 failed on purpose" in err.remote_traceback
        assert len(c.run(demos.hello).results) == 4 and c.restarts == 1


def test_a_killed_rank_is_named():
    with Cluster(3, timeout=10) as c:  # named before the others' all-reduce times out
        with pytest.raises(
            WorkerError, match=r"rank 1 died \(killed by SIGKILL\).*computing before"
        ) as info:
            c.run(demos.die_on, 1)
        assert info.value.rank == 1
        assert [h["rank"] for h in c.run(demos.hello).results] == [0, 1, 2]


def test_a_hang_times_out_naming_the_ranks_that_did_not_finish():
    with Cluster(4, timeout=2) as c:
        with pytest.raises(JobTimeoutError) as info:
            c.run(demos.skip_collective, 3)
        assert "timed out after 2 s" in str(info.value)
        assert info.value.ranks == [0, 1, 2]
        assert "all_reduce" in info.value.where[0]
        found = info.value.diagnosis  # from the flight records: rank 3 skipped the collective
        assert (found.kind, found.culprits) == ("missing", (3,))
        assert "rank 3 never entered all_reduce #1 (group world)" in str(info.value)
        assert "rank 3 finished the job before its first operation" in str(info.value)
        assert info.value.lines == {}  # ranks waiting in the collective: no line of their own
        assert c.run(demos.hello, timeout=5).results[3]["rank"] == 3


def steps_slowly(ctx, steps: int, seconds: float) -> int:
    """``steps`` steps of ``seconds`` each, with a message between ranks in each: progress."""
    import torch

    for s in range(steps):
        with ctx.step(s):
            time.sleep(seconds)
            ctx.collective("all_reduce", torch.ones(1))
    return steps


def test_the_watchdog_lets_a_run_that_progresses_go_on_and_stops_one_that_stalls():
    """Without the watchdog a job must end within ``timeout``; with it (the command line's
    runs), a job that keeps stepping runs past it and one that stops stepping is stopped
    ``timeout`` seconds after its last step, named as a stall."""
    with Cluster(2, timeout=1) as c:
        with pytest.raises(JobTimeoutError, match="timed out after 1 s"):
            c.run(steps_slowly, 6, 0.3)
    with Cluster(2, timeout=1, watchdog=True) as c:
        t0 = time.monotonic()
        assert c.run(steps_slowly, 6, 0.3).results == [6, 6]  # 1.8 s, past the timeout
        assert time.monotonic() - t0 > 1.5
        with pytest.raises(JobTimeoutError, match="made no progress for 1 s") as info:
            c.run(demos.sleep, 30)
        assert info.value.ranks == [0, 1] and "sleeping 30" in info.value.where[0]
    with pytest.raises(ValueError, match="watchdog='yes' is not valid"):
        Cluster(2, watchdog="yes")


def spin_on(ctx, rank: int) -> None:
    while ctx.rank == rank:
        pass


def test_a_rank_that_loops_is_probed_for_its_line():
    with Cluster(2, timeout=2) as c:
        with pytest.raises(JobTimeoutError) as info:
            c.run(spin_on, 1)
        line = spin_on.__code__.co_firstlineno + 1
        assert info.value.ranks == [1]
        assert info.value.lines == {1: f"{__file__}:{line} in spin_on"}
        assert info.value.diagnosis.kind == "slow"  # busy on its core: working, not stuck
        assert f"at {__file__}:{line} in spin_on: while ctx.rank == rank:" in str(info.value)


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt, as in a kernel or a terminal, even where this run
    inherited it ignored (a shell's background job starts with SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_interrupt_stops_the_workers_and_the_next_run_restarts(ctrl_c_raises):
    with Cluster(2, timeout=20) as c:
        old = c.pids
        timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            c.run(demos.sleep, 30)
        assert not c.alive and all(pid not in child_pids() for pid in old)
        assert [h["pid"] for h in c.run(demos.hello).results] != old


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def _tcp_sockets() -> list[tuple[str, str, str]]:
    """(local address hex, state hex, inode) of every TCP socket of this machine."""
    rows = []
    for name in ("tcp", "tcp6"):
        lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        rows += [(f[1].split(":")[0], f[3], f[9]) for f in (line.split() for line in lines)]
    return rows


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1, as /proc shows


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")
def test_no_socket_of_a_cluster_leaves_loopback():
    """The rendezvous is a FileStore (no listener); gloo's pairs listen and connect on 127.0.0.1."""
    with Cluster(4) as c:
        c.run(demos.hello)  # every pair of ranks has connected
        mine = set().union(*(_socket_inodes(pid) for pid in [os.getpid(), *c.pids]))
        sockets = [s for s in _tcp_sockets() if s[2] in mine]
        assert sockets, "the ranks' gloo sockets should be visible"
        listening = [s for s in sockets if s[1] == "0A"]
        assert all(addr in LOOPBACK for addr, _, _ in sockets), sockets
        assert listening and all(addr in LOOPBACK for addr, _, _ in listening)
        store = Path(c._store_dir)
        assert store.is_dir() and store.stat().st_mode & 0o777 == 0o700
    assert not store.exists()  # removed with the cluster


def test_closed_cluster_says_so():
    c = Cluster(2)
    c.close()
    with pytest.raises(ClusterClosedError, match="create a new one"):
        c.run(demos.hello)


def test_functions_that_workers_cannot_import_are_refused(cluster2):
    with pytest.raises(ValueError, match="fn=.*importable module"):
        cluster2.run(lambda ctx: 1)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"world_size": 0}, r"world_size=0 is not valid: expected an integer in \[1, 16\]"),
        ({"world_size": 17}, r"world_size=17"),
        (
            {"world_size": 2, "backend": "mpi"},
            r"backend='mpi' is not valid: expected one of 'auto', 'gloo', 'nccl'",
        ),
        (
            {"world_size": 2, "backend": "nccl"},
            r"backend='nccl' is not valid: .*CUDA device per rank",
        ),
        ({"world_size": 2, "timeout": 0}, r"timeout=0 is not valid"),
        ({"world_size": 2, "start_method": "thread"}, r"start_method='thread'"),
    ],
)
def test_bad_arguments_name_parameter_and_range(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Cluster(**kwargs)


def test_fifty_create_close_cycles_leave_no_children():
    before = set(child_pids())
    for _ in range(50):
        with Cluster(2) as c:
            assert len(c.pids) == 2
    assert set(child_pids()) - before == set()
