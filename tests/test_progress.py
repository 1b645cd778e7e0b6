"""Long runs are not silent: a job says how far it is (``ctx.progress``), the parent reads it while
the job runs (``Cluster(progress=...)``), and the command line draws it as one bar on a terminal's
stderr, and nothing on a pipe."""

from __future__ import annotations

import os
import time

import pytest

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
