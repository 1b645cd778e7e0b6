"""The bytes of a run's collectives as a ring sends them, for the feedback's byte bars.

Shared by the exercises whose collectives are torch's builtins (a ZeRO-1 step, a bucketed
reducer): the trace holds one ``collective`` event per call, and the bars want the bytes each
rank puts on the wire for it (:func:`~edu_parallel.core.metrics.ring_sent_bytes`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..core.metrics import ring_sent_bytes
from ..core.trace import Event, Trace
from .feedback import bytes_figure


def ring_volume_trace(trace: Trace, label: Any) -> Trace:
    """``trace`` with each builtin collective replaced by one ``send`` event of the bytes a ring
    sends for it (:func:`~edu_parallel.core.metrics.ring_sent_bytes`), phase ``label(event, k)``
    (``k``: its index among the rank's collectives), so the byte bars can stack them."""
    n, events, seen = trace.world_size, [], {}
    for e in sorted(trace.events, key=lambda e: e.start):
        if e.kind != "collective" or not e.op.startswith(("all_reduce", "all_gather", "reduce_s")):
            continue
        k = seen[e.rank] = seen.get(e.rank, -1) + 1
        nbytes = int(ring_sent_bytes(e.op, e.nbytes, n))
        events.append(Event(kind="send", rank=e.rank, op="isend", phase=label(e, k), nbytes=nbytes))
    return Trace({**trace.meta, "world_size": n}, events)


def volume_figure(grade: Any, label: Any) -> Any:
    """The feedback's bytes per rank (yours beside the reference's) of each run's collectives,
    counted as a ring runs them and stacked by ``label(event, k)``."""
    ref = grade.reference_trace
    return bytes_figure(
        dataclasses.replace(
            grade,
            trace=ring_volume_trace(grade.trace, label),
            reference_trace=None if ref is None else ring_volume_trace(ref, label),
        )
    )
