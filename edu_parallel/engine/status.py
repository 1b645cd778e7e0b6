"""What a rank publishes in shared memory while it runs, and the one home of its layout.

A :class:`~edu_parallel.engine.cluster.Cluster` gives each rank one slot of :data:`STATUS_BYTES`
in a shared buffer (``multiprocessing.RawArray``). The rank writes, the parent reads, without a
message or a lock::

    [ text: TEXT_BYTES, NUL-terminated | beats: int64 | done: int64 | total: int64 ]

* the text: what the rank does now ("zero stage 1 step 3: backward"), so that a rank that hangs
  or dies is named with its step (:func:`write_status`);
* beats: how many times it wrote the text, its pulse: the watchdog reads a rank whose counters
  change as a rank making progress (:func:`read_pulse`);
* done and total: how far the job is, from ``ctx.progress(done, total)`` (:func:`write_progress`),
  the command line's progress bar. Both 0: the job has not said.

Counters are little-endian int64. A reader may see a write half done: a text cut short or a
counter one step behind, harmless for a status and a bar.
"""

from __future__ import annotations

import struct
from typing import Any

TEXT_BYTES = 152  # the text's bytes, NUL-terminated
_BEATS = struct.Struct("<q")  # at TEXT_BYTES
_PROGRESS = struct.Struct("<qq")  # (done, total), after the beats
_COUNTERS = struct.Struct("<qqq")  # (beats, done, total), read at once
STATUS_BYTES = TEXT_BYTES + _COUNTERS.size  # one rank's slot
_WRAP = 1 << 63


def write_status(buf: Any, rank: int, text: str) -> None:
    """Publish ``text`` as rank ``rank``'s status and count one beat (:func:`read_pulse`)."""
    data = text.encode("utf-8", "replace")[: TEXT_BYTES - 1]
    start = rank * STATUS_BYTES
    buf[start : start + len(data) + 1] = data + b"\0"
    (beats,) = _BEATS.unpack_from(buf, start + TEXT_BYTES)
    _BEATS.pack_into(buf, start + TEXT_BYTES, (beats + 1) % _WRAP)


def read_status(buf: Any, rank: int) -> str:
    raw = bytes(buf[rank * STATUS_BYTES : rank * STATUS_BYTES + TEXT_BYTES])
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def write_progress(buf: Any, rank: int, done: int, total: int) -> None:
    """Publish that rank ``rank`` has done ``done`` of its job's ``total`` steps (one
    ``struct.pack_into``: jobs call it once per step)."""
    _PROGRESS.pack_into(buf, rank * STATUS_BYTES + TEXT_BYTES + _BEATS.size, done, total)


def read_progress(buf: Any, rank: int) -> tuple[int, int]:
    """Rank ``rank``'s ``(done, total)``; ``(0, 0)`` when its job has not said."""
    done, total = _PROGRESS.unpack_from(buf, rank * STATUS_BYTES + TEXT_BYTES + _BEATS.size)
    return done, total


def clear_progress(buf: Any, world_size: int) -> None:
    """Every rank's ``(done, total)`` back to ``(0, 0)``: before a job, while the ranks idle."""
    for rank in range(world_size):
        write_progress(buf, rank, 0, 0)


def read_pulse(buf: Any, rank: int) -> tuple[int, int, int]:
    """Rank ``rank``'s counters, ``(beats, done, total)``: a value that changes is a rank making
    progress (a published step, a message, a collective, a ``ctx.progress``)."""
    beats, done, total = _COUNTERS.unpack_from(buf, rank * STATUS_BYTES + TEXT_BYTES)
    return beats, done, total
