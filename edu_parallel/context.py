"""What a concept function sees on each rank: :class:`RankContext`.

A concept function has the signature ``fn(ctx, *args)``. ``ctx`` wraps the ``torch.distributed``
group (made by a :class:`~edu_parallel.cluster.Cluster` or by ``torchrun``) and records every
send, receive, collective, compute step and memory change into ``ctx.tracer``. The same function
runs unchanged in a persistent local pool and under ``torchrun`` on a real cluster.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from .trace import Event, Snapshot

SNAPSHOT_LIMIT = 4096  # bytes per rank: larger buffers are never copied into the trace


class Tracer:
    """Records one rank's events, with times in seconds since ``t0`` (``time.perf_counter``)."""

    def __init__(
        self,
        rank: int,
        t0: float | None = None,
        enabled: bool = True,
        snapshot_limit: int = SNAPSHOT_LIMIT,
        status: Callable[[str], None] | None = None,
    ):
        self.rank = rank
        self.t0 = time.perf_counter() if t0 is None else t0
        self.enabled = enabled
        self.snapshot_limit = snapshot_limit
        self.events: list[Event] = []
        self.snapshots: list[Snapshot] = []
        self._status = status

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def where(self, text: str) -> None:
        """Publish what this rank is doing now, so a hang or death can be reported by step."""
        if self._status is not None:
            self._status(text)

    def add(self, event: Event) -> Event:
        if self.enabled:
            self.events.append(event)
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

    def segments(self) -> Iterator[torch.Tensor]:
        for work, view in zip(self.works, self.views, strict=True):
            work.wait()
            yield view
        self._close()

    def wait(self) -> None:
        if not self.done:
            for work in self.works:
                work.wait()
            self._close()

    def _close(self) -> None:
        if not self.done:
            self.event.end = self.tracer.now()
            self.done = True


class RankContext:
    """One rank's view: ``rank``, ``world_size``, ``device``, ``backend`` and traced communication."""

    def __init__(
        self, rank: int, world_size: int, backend: str, device: torch.device, tracer: Tracer
    ):
        self.rank = rank
        self.world_size = world_size
        self.backend = backend
        self.device = device
        self.tracer = tracer

    def __repr__(self) -> str:
        return f"RankContext(rank={self.rank}, world_size={self.world_size}, backend={self.backend!r}, device={self.device})"

    # ---------------------------------------------------------------- point to point
    def isend(self, tensor: torch.Tensor, dst: int, *, tag: int = 0, step: int | None = None,
              phase: str | None = None, chunk: int | None = None, segment_bytes: int = 0) -> Pending:  # fmt: skip
        """Post a non-blocking send of ``tensor`` to ``dst`` and record one ``send`` event.

        With ``segment_bytes > 0`` the tensor travels as pieces of at most that size (the receiver
        must use the same value); the trace still shows one message."""
        self.tracer.where(_where("send to", dst, step, phase))
        ev = self._event("send", "isend", dst, tensor, tag, step, phase, chunk)
        return self._post(dist.isend, tensor, dst, tag, segment_bytes, ev)

    def irecv(self, tensor: torch.Tensor, src: int, *, tag: int = 0, op: str = "copy",
              step: int | None = None, phase: str | None = None, chunk: int | None = None,
              segment_bytes: int = 0) -> Pending:  # fmt: skip
        """Post a non-blocking receive into ``tensor`` from ``src``; ``op`` says what the
        caller will do with the data ("reduce" or "copy")."""
        self.tracer.where(_where("recv from", src, step, phase))
        ev = self._event("recv", op, src, tensor, tag, step, phase, chunk)
        return self._post(dist.irecv, tensor, src, tag, segment_bytes, ev)

    def _event(self, kind: str, op: str, peer: int, tensor: torch.Tensor, tag: int,
               step: int | None, phase: str | None, chunk: int | None) -> Event:  # fmt: skip
        return Event(
            kind,
            self.rank,
            op,
            peer,
            step,
            phase,
            chunk,
            _nbytes(tensor),
            self.tracer.now(),
            0.0,
            tag,
        )

    def _post(
        self, post: Any, tensor: torch.Tensor, peer: int, tag: int, segment_bytes: int, ev: Event
    ) -> Pending:
        if segment_bytes <= 0 or _nbytes(tensor) <= segment_bytes:
            return Pending(
                [post(tensor, peer, tag=tag)], [tensor], self.tracer.add(ev), self.tracer
            )
        views = list(torch.split(tensor, max(1, segment_bytes // tensor.element_size())))
        if len(views) > SEGMENT_TAGS:
            raise ValueError(
                f"segment_bytes={segment_bytes} is not valid: expected at most {SEGMENT_TAGS} segments per message"
            )
        works = [post(v, peer, tag=tag * SEGMENT_TAGS + k) for k, v in enumerate(views)]
        return Pending(works, views, self.tracer.add(ev), self.tracer)

    def wait_all(self, pending: list[Pending]) -> None:
        """Wait for every posted send and receive."""
        for p in pending:
            self.tracer.where(
                _where(f"waiting on {p.event.kind} with", p.event.peer, p.event.step, p.event.phase)
            )
            p.wait()

    def send(self, tensor: torch.Tensor, dst: int, **kw: Any) -> None:
        self.wait_all([self.isend(tensor, dst, **kw)])

    def recv(self, tensor: torch.Tensor, src: int, **kw: Any) -> None:
        self.wait_all([self.irecv(tensor, src, **kw)])

    # ---------------------------------------------------------------- collectives
    def collective(self, name: str, tensor: torch.Tensor, *args: Any, step: int | None = None,
                   phase: str | None = None, **kwargs: Any) -> Any:  # fmt: skip
        """Call ``torch.distributed.<name>(tensor, ...)`` and record a ``collective`` event."""
        self.tracer.where(f"{name} ({phase or 'no phase'}, step {step})")
        start = self.tracer.now()
        out = getattr(dist, name)(tensor, *args, **kwargs)
        self.tracer.add(
            Event(
                "collective",
                self.rank,
                name,
                None,
                step,
                phase,
                None,
                _nbytes(tensor),
                start,
                self.tracer.now(),
            )
        )
        return out

    def barrier(self) -> None:
        """An untraced barrier (used to line ranks up before timing)."""
        self.tracer.where("barrier")
        dist.barrier()

    # ---------------------------------------------------------------- compute and memory
    @contextlib.contextmanager
    def compute(self, op: str, nbytes: int = 0, *, step: int | None = None, phase: str | None = None,
                chunk: int | None = None) -> Iterator[None]:  # fmt: skip
        """Time the block as a ``compute`` event."""
        start = self.tracer.now()
        yield
        self.tracer.add(
            Event(
                "compute", self.rank, op, None, step, phase, chunk, nbytes, start, self.tracer.now()
            )
        )

    def record_compute(self, op: str, nbytes: int, start: float, end: float, *, step: int | None = None,
                       phase: str | None = None, chunk: int | None = None,
                       attrs: dict[str, Any] | None = None) -> None:  # fmt: skip
        """Record a ``compute`` event whose span the caller measured (``attrs``: extra labels)."""
        extra = dict(attrs) if attrs else None
        self.tracer.add(
            Event(
                "compute", self.rank, op, None, step, phase, chunk, nbytes, start, end, attrs=extra
            )
        )

    def memory(
        self, category: str, delta_bytes: int, *, step: int | None = None, phase: str | None = None
    ) -> None:
        """Record a memory change of ``delta_bytes`` (negative when freed) in ``category``."""
        t = self.tracer.now()
        self.tracer.add(Event("memory", self.rank, "alloc" if delta_bytes >= 0 else "free", None, step, phase,
                              None, int(delta_bytes), t, t, attrs={"category": category}))  # fmt: skip

    def mark(self, label: str, **attrs: Any) -> None:
        """A zero-length event naming a moment of the run."""
        t = self.tracer.now()
        self.tracer.add(Event("mark", self.rank, label, start=t, end=t, attrs=attrs or None))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _where(what: str, peer: int | None, step: int | None, phase: str | None) -> str:
    return f"{phase or 'no phase'} step {step}: {what} rank {peer}"
