"""What a concept function sees on each rank: :class:`RankContext`.

A concept function has the signature ``fn(ctx, *args)``. ``ctx`` wraps the ``torch.distributed``
group (made by a :class:`~edu_parallel.engine.cluster.Cluster` or by ``torchrun``) and records every
send, receive, collective, compute step and memory change into ``ctx.tracer``. The same function
runs unchanged in a persistent local pool and under ``torchrun`` on a real cluster.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from ..core.errors import bad_value
from ..core.i18n import _
from ..core.trace import Event
from .messages import RankOutput
from .recording import SEGMENT_TAGS, Pending, TracedWork, Tracer

# torch.distributed's names for the collectives a job calls through ``ctx.collective``. torch 2.13
# deprecates all_gather_into_tensor / reduce_scatter_tensor for the same calls named *_single.
ALL_REDUCE = "all_reduce"
ALL_GATHER = "all_gather_single" if hasattr(dist, "all_gather_single") else "all_gather_into_tensor"
REDUCE_SCATTER = (
    "reduce_scatter_single" if hasattr(dist, "reduce_scatter_single") else "reduce_scatter_tensor"
)
ALL_TO_ALL = "all_to_all_single"


class RankContext:
    """One rank's view: ``rank``, ``world_size``, ``device``, ``backend`` and traced
    communication."""

    def __init__(
        self, rank: int, world_size: int, backend: str, device: torch.device, tracer: Tracer
    ):
        self.rank = rank
        self.world_size = world_size
        self.backend = backend
        self.device = device
        self.tracer = tracer

    def __repr__(self) -> str:
        return (
            f"RankContext(rank={self.rank}, world_size={self.world_size}, "
            f"backend={self.backend!r}, device={self.device})"
        )

    # ---------------------------------------------------------------- point to point
    def isend(
        self,
        tensor: torch.Tensor,
        dst: int,
        *,
        tag: int = 0,
        step: int | None = None,
        phase: str | None = None,
        chunk: int | None = None,
        segment_bytes: int = 0,
    ) -> Pending:
        """Post a non-blocking send of ``tensor`` to ``dst`` and record one ``send`` event.

        ``step`` and ``phase`` default to the enclosing :meth:`step` block's. With
        ``segment_bytes > 0`` the tensor travels as pieces of at most that size (the receiver
        must use the same value); the trace still shows one message."""
        step, phase = self._label(step, phase)
        self.tracer.where(_where(_("{phase} step {step}: send to rank {peer}"), dst, step, phase))
        ev = self._event("send", "isend", dst, tensor, tag, step, phase, chunk)
        return self._post(dist.isend, tensor, dst, tag, segment_bytes, ev)

    def irecv(
        self,
        tensor: torch.Tensor,
        src: int,
        *,
        tag: int = 0,
        op: str = "copy",
        step: int | None = None,
        phase: str | None = None,
        chunk: int | None = None,
        segment_bytes: int = 0,
    ) -> Pending:
        """Post a non-blocking receive into ``tensor`` from ``src``; ``op`` says what the
        caller will do with the data ("reduce" or "copy")."""
        step, phase = self._label(step, phase)
        self.tracer.where(_where(_("{phase} step {step}: recv from rank {peer}"), src, step, phase))
        ev = self._event("recv", op, src, tensor, tag, step, phase, chunk)
        return self._post(dist.irecv, tensor, src, tag, segment_bytes, ev)

    def _label(self, step: int | None, phase: str | None) -> tuple[int | None, str | None]:
        """An event's step and phase: the ones given, else the enclosing step block's."""
        return (self.tracer.step if step is None else step), (phase or self.tracer.phase)

    @contextlib.contextmanager
    def step(self, step: int, phase: str | None = None) -> Iterator[None]:
        """Mark a block as step ``step`` (of ``phase``): the sends, receives and collectives inside
        it carry that step, and the buffer given to :meth:`watch` is copied into the trace when
        the block ends, so the step grid shows what each rank held after each step."""
        outer = self.tracer.step, self.tracer.phase
        self.tracer.step, self.tracer.phase = int(step), phase
        try:
            yield
        finally:
            if self.tracer.watched is not None:
                self.tracer.snapshot(int(step), phase, self.tracer.watched)
            self.tracer.step, self.tracer.phase = outer

    def progress(self, done: int, total: int) -> None:
        """Say that this rank has done ``done`` of its job's ``total`` steps (a training loop
        calls it once per step). On a :class:`~edu_parallel.engine.cluster.Cluster` the parent
        reads it while the job runs (the command line draws the slowest rank's as a bar), and
        it counts as progress for the watchdog; under torchrun it does nothing. It costs about
        a microsecond and records no event."""
        try:
            d, t = operator.index(done), operator.index(total)
        except TypeError:
            d = t = -1
        if not 0 <= d <= t < 1 << 63:
            valid = _("integers with 0 <= done <= total < 2**63, not total={total!r}")
            raise bad_value("done", done, valid.format(total=total))
        self.tracer.progress(d, t)

    def watch(self, tensor: torch.Tensor) -> None:
        """Copy ``tensor`` into the trace now (as the input, step -1) and after every
        :meth:`step` block (small buffers only: see ``snapshot_limit``)."""
        self.tracer.watched = tensor
        self.tracer.snapshot(-1, None, tensor)

    def _event(
        self,
        kind: str,
        op: str,
        peer: int,
        tensor: torch.Tensor,
        tag: int,
        step: int | None,
        phase: str | None,
        chunk: int | None,
    ) -> Event:
        return Event(
            kind=kind,
            rank=self.rank,
            op=op,
            peer=peer,
            step=step,
            phase=phase,
            chunk=chunk,
            nbytes=nbytes_of(tensor),
            start=self.tracer.now(),
            end=0.0,
            tag=tag,
        )

    def _post(
        self, post: Any, tensor: torch.Tensor, peer: int, tag: int, segment_bytes: int, ev: Event
    ) -> Pending:
        try:
            index = operator.index(peer)  # ints, numpy ints; not floats or tensors of many
        except TypeError:
            index = -1
        if isinstance(peer, bool) or not 0 <= index < self.world_size or index == self.rank:
            raise bad_value(
                "dst" if ev.kind == "send" else "src",
                peer,
                _("another rank of this group: 0..{last}, not {rank} itself").format(
                    last=self.world_size - 1, rank=self.rank
                ),
            )
        flight = self.tracer.flight
        entry = (
            flight.p2p(ev.kind, index, tag, dtype_name(tensor), tensor.numel())
            if flight is not None
            else -1
        )
        if segment_bytes <= 0 or nbytes_of(tensor) <= segment_bytes:
            return Pending(
                [post(tensor, peer, tag=tag)],
                [tensor],
                self.tracer.add(ev),
                self.tracer,
                entry=entry,
            )
        views = list(torch.split(tensor, max(1, segment_bytes // tensor.element_size())))
        if len(views) > SEGMENT_TAGS:
            raise bad_value(
                "segment_bytes",
                segment_bytes,
                _("at most {n} segments per message").format(n=SEGMENT_TAGS),
            )
        works = [post(v, peer, tag=tag * SEGMENT_TAGS + k) for k, v in enumerate(views)]
        return Pending(works, views, self.tracer.add(ev), self.tracer, entry=entry)

    def wait_all(self, pending: list[Pending]) -> None:
        """Wait for every posted send and receive."""
        for p in pending:
            self.tracer.where(
                _where(
                    _("{phase} step {step}: waiting on {kind} with rank {peer}"),
                    p.event.peer,
                    p.event.step,
                    p.event.phase,
                    kind=p.event.kind,
                )
            )
            p.wait()

    def send(self, tensor: torch.Tensor, dst: int, **kw: Any) -> None:
        self.wait_all([self.isend(tensor, dst, **kw)])

    def recv(self, tensor: torch.Tensor, src: int, **kw: Any) -> None:
        self.wait_all([self.irecv(tensor, src, **kw)])

    # ---------------------------------------------------------------- collectives
    def collective(
        self,
        name: str,
        tensor: torch.Tensor,
        *args: Any,
        step: int | None = None,
        phase: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Call ``torch.distributed.<name>(tensor, ...)`` and record a ``collective`` event;
        with a ``group=`` its global ranks are recorded as ``attrs["group"]``.

        With ``async_op=True`` the event is marked ``attrs["async"]`` and the returned handle's
        ``wait()`` closes it, so its span runs from the launch to the wait.

        The rank's flight record (``flight.py``) counts it per group; on a cluster whose jobs
        check collectives, a blocking one waits until the group's ranks have entered it and
        raises :class:`~edu_parallel.engine.flight.CollectiveMismatch` if they disagree on the
        operation, dtype or element count, before gloo sees it."""
        step, phase = self._label(step, phase)
        self.tracer.where(
            _("{name} ({phase}, step {step})").format(
                name=name, phase=phase or _("no phase"), step=step
            )
        )
        group = kwargs.get("group")
        ranks = dist.get_process_group_ranks(group) if group is not None else None
        is_async = bool(kwargs.get("async_op"))
        flight, entry = self.tracer.flight, -1
        if flight is not None:
            entry = flight.collective(name, ranks, dtype_name(tensor), numel_of(tensor))
            if not is_async:
                flight.block(entry)
                if self.tracer.check:
                    flight.agree(entry)
        start = self.tracer.now()
        out = getattr(dist, name)(tensor, *args, **kwargs)
        if flight is not None and not is_async:
            flight.done(entry)
        nbytes = nbytes_of(tensor)
        attrs: dict[str, Any] = {"async": True} if is_async else {}
        if ranks is not None:  # the global ranks it ran on (default: the world)
            attrs["group"] = ranks
        ev = self.record(
            "collective", name, start, step=step, phase=phase, nbytes=nbytes, attrs=attrs or None
        )
        return TracedWork(out, ev, self.tracer, entry) if is_async and out is not None else out

    def barrier(self) -> None:
        """An untraced barrier (to line ranks up before timing); the flight record counts it."""
        self.tracer.where("barrier")
        flight = self.tracer.flight
        entry = flight.collective("barrier", None, "", 0) if flight is not None else -1
        if flight is not None:
            flight.block(entry)
        dist.barrier()
        if flight is not None:
            flight.done(entry)

    # ---------------------------------------------------------------- compute, memory, marks
    def record(
        self, kind: str, op: str, start: float, end: float | None = None, **fields: Any
    ) -> Event:
        """Record an event of this rank from ``start`` to ``end`` (default: now); ``fields`` are
        the other :class:`~edu_parallel.core.trace.Event` fields (step, phase, nbytes, attrs...).
        For what the engine does not see itself: a collective a library issued, a measured span."""
        end = self.tracer.now() if end is None else end
        return self.tracer.add(
            Event(kind=kind, rank=self.rank, op=op, start=start, end=end, **fields)
        )

    @contextlib.contextmanager
    def compute(
        self,
        op: str,
        nbytes: int = 0,
        *,
        step: int | None = None,
        phase: str | None = None,
        chunk: int | None = None,
    ) -> Iterator[None]:
        """Time the block as a ``compute`` event."""
        start = self.tracer.now()
        yield
        self.record("compute", op, start, step=step, phase=phase, chunk=chunk, nbytes=nbytes)

    def record_compute(
        self,
        op: str,
        nbytes: int,
        start: float,
        end: float,
        *,
        step: int | None = None,
        phase: str | None = None,
        chunk: int | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        """Record a ``compute`` event whose span the caller measured (``attrs``: extra labels)."""
        extra = dict(attrs) if attrs else None
        fields = {"step": step, "phase": phase, "chunk": chunk, "nbytes": nbytes, "attrs": extra}
        self.record("compute", op, start, end, **fields)

    def memory(
        self, category: str, delta_bytes: int, *, step: int | None = None, phase: str | None = None
    ) -> None:
        """Record a memory change of ``delta_bytes`` (negative when freed) in ``category``."""
        t = self.tracer.now()
        op = "alloc" if delta_bytes >= 0 else "free"
        attrs = {"category": category}
        self.record(
            "memory", op, t, t, step=step, phase=phase, nbytes=int(delta_bytes), attrs=attrs
        )

    def mark(self, label: str, **attrs: Any) -> None:
        """A zero-length event naming a moment of the run."""
        t = self.tracer.now()
        self.record("mark", label, t, t, attrs=attrs or None)


def nbytes_of(t: torch.Tensor) -> int:
    """Bytes of a tensor's elements."""
    return t.numel() * t.element_size()


def dtype_name(t: torch.Tensor | list[torch.Tensor]) -> str:
    """``float32`` for ``torch.float32``: what a flight record entry names (of a list of
    tensors, its first's)."""
    first = t[0] if isinstance(t, (list, tuple)) and t else t
    return str(getattr(first, "dtype", "")).removeprefix("torch.")


def numel_of(t: torch.Tensor | list[torch.Tensor]) -> int:
    """Elements of a tensor, or of a list of tensors together."""
    if isinstance(t, (list, tuple)):
        return sum(x.numel() for x in t)
    return t.numel()


def _where(message: str, peer: int | None, step: int | None, phase: str | None, **more: Any) -> str:
    """``message`` (translated: ``{phase} step {step}: send to rank {peer}``) for the rank's
    published step, with ``no phase`` where the step has none."""
    return message.format(phase=phase or _("no phase"), step=step, peer=peer, **more)


def rank_output(ctx: RankContext, result: Any) -> RankOutput:
    """A job's return value (tensors detached and moved to the CPU) with the rank's record."""
    tracer = ctx.tracer
    return RankOutput(to_cpu(result), tracer.events, tracer.snapshots, tracer.messages)


def to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor in it detached and on the CPU (lists, tuples and dicts walked)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(o) for o in obj)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    return obj
