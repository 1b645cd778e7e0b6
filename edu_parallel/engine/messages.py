"""What the parent and a worker say to each other over the worker's pipe, and what a job returns.

The parent sends :class:`Init` once (the rendezvous store's port), then one :class:`Job` per
``Cluster.run`` and finally :class:`Close`. A worker answers :class:`Ready` after joining the
process group, then :class:`Done` or :class:`Failed` for each job. Every message is a frozen
dataclass pickled whole: a field is read by name, never by position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.trace import Event, Snapshot


@dataclass(frozen=True)
class Init:
    """Join the process group through the ``FileStore`` at ``store_path`` (a private folder)."""

    store_path: str
    timeout_s: float  # the process group's timeout


@dataclass(frozen=True)
class Job:
    """Run ``fn(ctx, *args, **kwargs)``; trace it unless ``trace`` is False."""

    job_id: int
    fn: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    t0: float  # the parent's perf_counter at submission: every rank's clock starts here
    trace: bool
    snapshot_limit: int
    language: str = "en"  # the parent's: what the rank publishes and raises reads in it
    check: bool = False  # ranks compare each collective's signature before issuing it (flight.py)


@dataclass(frozen=True)
class Close:
    """Leave the process group and exit."""


@dataclass(frozen=True)
class Ready:
    """The worker joined the group."""

    pid: int


@dataclass(frozen=True)
class RankOutput:
    """What one rank's job produced: its return value (tensors moved to the CPU) and its record."""

    result: Any
    events: list[Event]
    snapshots: list[Snapshot]
    messages: list[Event] = field(default_factory=list)
    """An untraced job's sends and receives, kept only to match their sizes after the job
    (:func:`~edu_parallel.engine.matching.first_size_mismatch`); a traced job's are in
    ``events``."""


@dataclass(frozen=True)
class Done:
    """Job ``job_id`` finished on this rank."""

    job_id: int
    output: RankOutput


@dataclass(frozen=True)
class Failed:
    """Job ``job_id`` raised (``job_id == -1``: joining the group failed); ``where`` is the rank's
    last published step."""

    job_id: int
    traceback: str
    where: str
