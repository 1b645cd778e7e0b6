"""The parent's view of ``ctx.progress``: :class:`ProgressWatch` tells a callback how far the
slowest rank of a running job is.

A :class:`~edu_parallel.engine.cluster.Cluster` built with ``progress=callback`` clears every
rank's counters before a job, reads them while it waits for the ranks' replies, and calls
``callback(done, total)`` each time they change: ``done`` is the slowest rank's steps, ``total``
the most any rank has to take. A job may run several loops, each saying ``(step, steps)`` (a run,
then its reference): a rank whose counter starts again has finished a loop, and its steps add up,
so the bar grows (from ``999/1000`` to ``1003/2000``) and never goes back. While
the job runs ``done`` stays below ``total`` (another loop may follow); when it has ended on every
rank the callback hears ``(total, total)`` once. A job that never calls ``ctx.progress`` calls
nothing. The command line's callback is a ``tqdm`` bar (``comm.bench.ProgressBar``), which closes
when ``done == total``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .status import clear_progress, read_progress

Progress = Callable[[int, int], Any]  # callback(done, total)


class ProgressWatch:
    """One job's progress, read from the ranks' status slots (``status.py``)."""

    def __init__(self, status: Any, world_size: int, callback: Progress):
        self.status, self.world_size, self.callback = status, world_size, callback
        self.laps = [0] * world_size  # per rank: the steps of the loops it has finished
        self.seen: list[tuple[int, int]] = [(0, 0)] * world_size  # its last (done, total)
        self.shown: tuple[int, int] | None = None
        clear_progress(status, world_size)  # the ranks idle: the last job's counters go

    def steps(self) -> tuple[int, int] | None:
        """``(done, total)`` over the job so far: the slowest rank's steps and the most steps
        any rank has; None while no rank has said anything."""
        done, total = [], []
        for r in range(self.world_size):
            now = read_progress(self.status, r)
            if now[1] == 0:  # not said yet
                continue
            last = self.seen[r]
            if last[1] and (now[0] < last[0] or now[1] != last[1]):  # a new loop began
                self.laps[r] += last[1]
            self.seen[r] = now
            done.append(self.laps[r] + now[0])
            total.append(self.laps[r] + now[1])
        return (min(done), max(total)) if done else None

    def poll(self) -> None:
        """Call back if the job's steps changed; ``done`` stays below ``total`` until it ends."""
        now = self.steps()
        if now is not None and now[0] >= now[1]:
            now = (now[1] - 1, now[1])
        if now is not None and now != self.shown:
            self.shown = now
            self.callback(*now)

    def finish(self) -> None:
        """The job has ended on every rank: the callback hears ``(total, total)``, once."""
        now = self.steps()
        if now is not None:
            self.shown = (now[1], now[1])
            self.callback(*self.shown)


def watch_progress(status: Any, world_size: int, callback: Progress | None) -> ProgressWatch | None:
    """A job's :class:`ProgressWatch` for ``callback``; None without one."""
    return None if callback is None else ProgressWatch(status, world_size, callback)
