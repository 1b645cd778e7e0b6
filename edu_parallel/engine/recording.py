"""What a rank records: the :class:`Tracer` of its events and snapshots, and the handles of
its communication in flight (:class:`Pending` for sends and receives, :class:`TracedWork` for an
asynchronous collective), which close their event's span when they complete.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.trace import SNAPSHOT_LIMIT, Event, Snapshot
from .flight import FlightRecorder


class Tracer:
    """Records one rank's events, with times in seconds since ``t0`` (``time.perf_counter``)."""

    def __init__(
        self,
        rank: int,
        t0: float | None = None,
        enabled: bool = True,
        snapshot_limit: int = SNAPSHOT_LIMIT,
        status: Callable[[str], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ):
        self.rank = rank
        self.t0 = time.perf_counter() if t0 is None else t0
        self.enabled = enabled
        self.snapshot_limit = snapshot_limit
        self.events: list[Event] = []
        self.snapshots: list[Snapshot] = []
        # an untraced job still keeps its sends and receives, to match their sizes after it
        self.messages: list[Event] = []
        self._untraced = not enabled
        self._status = status
        self._progress = progress
        self.step: int | None = None  # the current ``RankContext.step`` block, if any
        self.phase: str | None = None
        self.watched: torch.Tensor | None = None  # snapshotted at the end of each step block
        # the rank's flight record (flight.py; None under torchrun and in one process) and whether
        # each collective's signature is compared across its group before it is issued
        self.flight: FlightRecorder | None = None
        self.check = False

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def where(self, text: str) -> None:
        """Publish what this rank is doing now, so a hang or death can be reported by step."""
        if self._status is not None:
            self._status(text)

    def progress(self, done: int, total: int) -> None:
        """Publish how far this rank's job is (see ``RankContext.progress``); without a publisher
        (under torchrun) nothing."""
        if self._progress is not None:
            self._progress(done, total)

    def add(self, event: Event) -> Event:
        if self.enabled:
            self.events.append(event)
        elif self._untraced and event.kind in ("send", "recv"):  # not a paused block's
            self.messages.append(event)
        return event

    def snapshot(self, step: int, phase: str | None, tensor: torch.Tensor) -> None:
        """Keep a copy of ``tensor`` after ``step`` if it is small enough (see SNAPSHOT_LIMIT)."""
        if self.enabled and tensor.numel() * tensor.element_size() <= self.snapshot_limit:
            values = tensor.detach().to(
                "cpu", torch.float64 if tensor.is_floating_point() else torch.int64
            )
            self.snapshots.append(Snapshot(self.rank, step, phase, values.tolist()))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Record nothing inside the block (e.g. while verifying against a builtin)."""
        was, self.enabled = self.enabled, False
        try:
            yield
        finally:
            self.enabled = was


SEGMENT_TAGS = 4096  # a segmented message k of logical tag t travels with tag t * 4096 + k


@dataclass
class Pending:
    """A posted isend/irecv, possibly cut into segments that travel as separate messages.

    ``wait()`` completes it and closes its event's time span; ``segments()`` yields each segment's
    view as soon as it has arrived, so a receiver can add segment k while k+1 is on the wire.
    """

    works: list[Any]
    views: list[torch.Tensor]
    event: Event
    tracer: Tracer
    done: bool = field(default=False)
    entry: int = -1  # its flight record entry (flight.py), -1: none

    def segments(self) -> Iterator[torch.Tensor]:
        for work, view in zip(self.works, self.views, strict=True):
            self._block()
            work.wait()
            yield view
        self._close()

    def wait(self) -> None:
        if not self.done:
            self._block()
            for work in self.works:
                work.wait()
            self._close()

    def _block(self) -> None:
        if self.tracer.flight is not None and self.entry >= 0:
            self.tracer.flight.block(self.entry)

    def _close(self) -> None:
        if not self.done:
            self.event.end = self.tracer.now()
            self.done = True
            if self.tracer.flight is not None and self.entry >= 0:
                self.tracer.flight.done(self.entry)


class TracedWork:
    """The handle of an asynchronous collective: ``wait()`` waits and closes its event's span;
    everything else is the torch ``Work``'s."""

    def __init__(self, work: Any, event: Event, tracer: Tracer, entry: int = -1):
        self._work, self.event, self._tracer, self._entry = work, event, tracer, entry

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        flight = self._tracer.flight
        if flight is not None and self._entry >= 0:
            flight.block(self._entry)
        out = self._work.wait(*args, **kwargs)
        self.event.end = self._tracer.now()
        if flight is not None and self._entry >= 0:
            flight.done(self._entry)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)
