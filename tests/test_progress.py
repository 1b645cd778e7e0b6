"""Long runs are not silent: a job says how far it is (``ctx.progress``), the parent reads it while
the job runs (``Cluster(progress=...)``), and the command line draws it as one bar on a terminal's
stderr, and nothing on a pipe."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import time

import pytest
from helpers import LOCALE_VARS, ROOT, cli

from edu_parallel import Cluster, WorkerError
from edu_parallel.engine import demos
from edu_parallel.engine.progress import ProgressWatch
from edu_parallel.engine.status import (
    STATUS_BYTES,
    read_progress,
    read_pulse,
    read_status,
    write_progress,
    write_status,
)

pytestmark = pytest.mark.multiprocess


def steps_then_waits(ctx, release: str, first: int, total: int) -> int:
    """``first`` steps, then wait until the file ``release`` exists (the test makes it once it
    has seen them), then the rest, up to ``total``."""
    for step in range(1, first + 1):
        ctx.progress(step, total)
    deadline = time.monotonic() + 60  # a hang guard: the test releases it within a poll or two
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            raise TimeoutError(f"nobody released {release}")
        time.sleep(0.01)
    for step in range(first + 1, total + 1):
        ctx.progress(step, total)
    return total


def test_the_parent_sees_a_running_jobs_steps_and_the_end(tmp_path):
    release = tmp_path / "release"
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if (done, total) == (3, 5):  # every rank has said 3 and waits: the job is running
            release.touch()

    with Cluster(2, timeout=60, progress=progress) as c:
        # the ranks go on only once the parent has seen (3, 5): it saw it while they ran
        assert c.run(steps_then_waits, str(release), 3, 5).results == [5, 5]
        assert release.exists() and seen[-1] == (5, 5)  # then the end, said once
        assert all(d < t for d, t in seen[:-1])  # below the total while it runs
        assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # never back
        seen.clear()
        assert len(c.run(demos.hello).results) == 2
        assert seen == []  # a job that never says: no call at all


def test_a_cluster_without_progress_runs_jobs_that_say_it():
    with Cluster(2, timeout=30) as c:
        assert c.run(steps_then_waits, os.devnull, 2, 4).results == [4, 4]


def test_a_bad_count_is_one_line_naming_the_rank():
    with Cluster(2, timeout=30) as c:
        with pytest.raises(WorkerError) as info:
            c.run(says_more_than_its_total)
        line = info.value.args[0]  # what the command line prints; the traceback follows it
        assert line.startswith("rank 1 raised") and "\n" not in line, line
        assert "done=6 is not valid: expected integers with 0 <= done <= total < 2**63" in line


def says_more_than_its_total(ctx) -> None:
    ctx.progress(1, 5)
    if ctx.rank == 1:
        ctx.progress(6, 5)


def test_the_counters_have_their_own_bytes_in_the_status_slot():
    buf = bytearray(STATUS_BYTES * 2)
    write_status(buf, 1, "x" * 500)  # cut to the text's bytes: never into the counters
    write_progress(buf, 1, 7, 9)
    write_status(buf, 1, "step 7")
    assert read_status(buf, 1) == "step 7" and read_progress(buf, 1) == (7, 9)
    assert read_pulse(buf, 1) == (2, 7, 9) and read_pulse(buf, 0) == (0, 0, 0)


def test_the_slowest_ranks_steps_add_up_over_a_jobs_loops():
    """A job that runs its loop, then a reference's: the bar grows, never goes back, and says
    the total only when the job has ended."""
    buf, seen = bytearray(STATUS_BYTES * 3), []
    write_progress(buf, 0, 4, 4)  # the last job's counters: cleared when a job starts
    watch = ProgressWatch(buf, 3, lambda d, t: seen.append((d, t)))
    watch.poll()
    assert seen == []
    write_progress(buf, 0, 3, 5)
    write_progress(buf, 1, 2, 5)  # rank 2 (a parameter server's worker) never says
    watch.poll()
    write_progress(buf, 0, 5, 5)
    write_progress(buf, 1, 5, 5)
    watch.poll()
    watch.poll()  # no change, no call
    write_progress(buf, 0, 1, 5)  # rank 0 starts the reference's loop
    watch.poll()
    write_progress(buf, 1, 2, 5)
    watch.poll()
    watch.finish()
    assert seen == [(2, 5), (4, 5), (5, 10), (6, 10), (10, 10)]


def _pty_run(*args: str, lang: str) -> tuple[int, str, str]:
    """``edu-parallel *args`` with stderr on a pseudo-terminal of 100 columns (a user's
    terminal) and stdout on a pipe: its status, stdout and what the terminal showed."""
    main, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in LOCALE_VARS}
    env["EDU_PARALLEL_LANG"] = lang
    child = subprocess.Popen(
        [sys.executable, "-m", "edu_parallel", *args],
        stdout=subprocess.PIPE,
        stderr=terminal,
        cwd=ROOT,
        env=env,
    )
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    out = child.stdout.read().decode()
    return child.wait(120), out, shown.decode()  # a hang guard


@pytest.mark.parametrize(
    "lang, desc", [("en", "steps (slowest rank): 100%"), ("zh", "步数（最慢的 rank）: 100%")]
)
def test_the_command_line_draws_one_bar_on_a_terminal(lang, desc):
    code, out, shown = _pty_run("run", "async", "--world-size", "2", "--steps", "4", lang=lang)
    assert code == 0, shown
    assert desc in shown and "4/4" in shown, shown
    assert shown.count("\n") == 1  # one bar, rewritten in place, ended by its newline
    assert "Traceback" not in shown and out  # the report on stdout


def test_a_pipe_gets_no_bar():
    out = cli("run", "async", "--world-size", "2", "--steps", "4")
    assert out.returncode == 0 and out.stderr == "", out.stderr


class FailingCluster:
    """A cluster whose job says one step of five, then a rank raises."""

    def __init__(self, dims, *args, progress=None, **kwargs):
        self.world_size, self.backend, self.timeout, self.progress = 2, "gloo", 30.0, progress

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def run(self, fn, *args, **kwargs):
        self.progress(1, 5)
        raise WorkerError("rank 1 raised during job sync_sgd, at: step 2: RuntimeError: boom", 1)


class RecordingBar:
    def __init__(self):
        self.calls: list[tuple] = []

    def __call__(self, done, total, label=""):
        self.calls.append((done, total))

    def close(self):
        self.calls.append("closed")


def test_a_run_that_fails_closes_its_bar_before_its_one_line_error(monkeypatch, capsys):
    from edu_parallel.app import cli as cli_module

    bar = RecordingBar()
    monkeypatch.setattr(cli_module, "run_bar", lambda: bar)
    monkeypatch.setattr(cli_module.engine, "Cluster", FailingCluster)
    assert cli_module.main(["run", "async", "--world-size", "2", "--steps", "4"]) == 2
    assert bar.calls == [(1, 5), "closed"]
    err = capsys.readouterr().err
    assert err.startswith("error: rank 1 raised") and err.count("\n") == 1, err
