"""A point-to-point message whose receive buffer is not its size, named after the job.

gloo matches the k-th send from rank ``src`` to rank ``dst`` with a tag to the k-th receive that
``dst`` posts from ``src`` with that tag, as MPI does. A receive buffer *larger* than the message
completes without a word, its tail unwritten: the job returns a wrong answer silently. (A buffer
smaller than the message aborts the receiving rank, which the cluster names as a death.) The
trace holds both sides, each with its bytes, in the order each rank posted them, so the parent
pairs them the same way after the job (:func:`first_size_mismatch`) and raises
:class:`MessageSizeError`, naming both ranks, the step and both sizes.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable

from ..core.errors import WorkerError
from ..core.i18n import _
from ..core.trace import Event


class MessageSizeError(WorkerError):
    """A receive was posted with another size than the message matched to it (``rank``: the
    receiving rank; ``step``: the receive's step)."""

    def __init__(self, message: str, rank: int, step: int | None, where: str = ""):
        super().__init__(message, rank, where)
        self.step = step


def first_size_mismatch(events: Iterable[Event]) -> MessageSizeError | None:
    """The first receive, in each rank's posting order, whose bytes differ from the send matched
    to it (the k-th of its source, destination and tag), or None."""
    events = list(events)
    sends: dict[tuple, deque[Event]] = defaultdict(deque)
    for e in events:
        if e.kind == "send":
            sends[(e.rank, e.peer, e.tag)].append(e)
    for e in events:
        if e.kind != "recv":
            continue
        queue = sends.get((e.peer, e.rank, e.tag))
        if not queue:
            continue  # a receive without a recorded send (an untraced sender): nothing to say
        sent = queue.popleft()
        if sent.nbytes != e.nbytes:
            at = _(" at step {step}").format(step=e.step) if e.step is not None else ""
            chunk = _(" (chunk {chunk})").format(chunk=e.chunk) if e.chunk is not None else ""
            message = _(
                "rank {rank} received a message of {sent} B from rank {peer}{at}{chunk} into a"
                " buffer of {size} B: sender and receiver disagree on its size, and the rest of"
                " the buffer was not written"
            ).format(rank=e.rank, sent=sent.nbytes, peer=e.peer, at=at, chunk=chunk, size=e.nbytes)
            where = _("step {step}: recv").format(step=e.step)
            return MessageSizeError(message, e.rank, e.step, where)
    return None
