"""Each rank's flight record, in shared memory: what it issued, what it waits in, its heartbeat.

As torch's flight recorder keeps, per NCCL process group, a ring of the last collectives with a
sequence number, the operation, dtype and sizes, and their state (``TORCH_NCCL_TRACE_BUFFER_SIZE``,
``torch.distributed.flight_recorder``), every rank of a :class:`~edu_parallel.engine.cluster.
Cluster` writes, for each collective and send/receive issued through its ``RankContext``:

* an entry in a ring of the last :data:`RING`: kind, torch's name, dtype, element count, group
  (global ranks, as a bit mask), its number ``seq`` (per group for a collective, per peer for a
  send or a receive), issue time and completion time;
* how many collectives it entered per group and how many sends and receives it posted per peer;
* which entry its main thread waits in now;
* a heartbeat from a thread of its own every :data:`BEAT_S`: the time, the line the main thread
  runs (``file:line in function: source``, read from ``sys._current_frames()``: it answers even
  while the main thread is blocked inside gloo), and how busy its main thread was over the last
  second (:func:`demand_s`).

The parent reads every rank's record with :func:`read_record` when a job hangs or a rank dies, and
``core/diagnosis.py`` names the culprit. The rank writes, the parent reads: no message, no lock;
a reader may see a write half done, which the heartbeat corrects within :data:`BEAT_S`.

Layout of one rank's slot (little-endian)::

    [ header: beats, beat time, busy, entries, blocked index, job | line: LINE_BYTES
      | ring: RING x entry | groups: GROUPS x (mask, entered) | peers: MAX_RANKS x (sends, recvs) ]
"""

from __future__ import annotations

import contextlib
import linecache
import multiprocessing.process
import os
import struct
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from ..core.diagnosis import Op, RankRecord
from ..core.dims import MAX_LOCAL_WORLD_SIZE
from ..core.errors import EngineError

RING = 32  # entries kept per rank (torch's TORCH_NCCL_TRACE_BUFFER_SIZE: 2000 by default)
GROUPS = 16  # process groups a rank's record can count
MAX_RANKS = MAX_LOCAL_WORLD_SIZE
BEAT_S = 0.1  # the heartbeat thread's period
PUBLISH_BEATS = 5  # under torchrun, the slot goes to the store every 5 beats (0.5 s)
LINE_BYTES = 200
_HEAD = struct.Struct("<qddqqq")  # beats, beat time, busy, entries, blocked (-1: none), job
_ENTRY = struct.Struct(
    "<24s16sBxxxiqQqqdd"
)  # name, dtype, kind, peer, tag, mask, seq, numel, t0, t1
_GROUP = struct.Struct("<Qq")  # mask, entered
_PEER = struct.Struct("<qq")  # sends posted, receives posted
_KINDS = ("collective", "send", "recv")
_RING_AT = _HEAD.size + LINE_BYTES
_GROUPS_AT = _RING_AT + RING * _ENTRY.size
_PEERS_AT = _GROUPS_AT + GROUPS * _GROUP.size
FLIGHT_BYTES = _PEERS_AT + MAX_RANKS * _PEER.size
_ENTRIES_AT, _BLOCKED_AT, _JOB_AT = 24, 32, 40  # offsets of three header fields
_PACKAGE = os.path.dirname(os.path.dirname(__file__)) + os.sep  # edu_parallel/
_ENGINE = os.path.dirname(__file__) + os.sep  # edu_parallel/engine/
_BOOTSTRAP = multiprocessing.process.__file__  # where a rank's own frames begin
_LIBRARY = (  # where a frame is not the caller's own code
    _PACKAGE,
    os.path.dirname(torch.__file__) + os.sep,
    sysconfig.get_paths()["stdlib"] + os.sep,
    "<frozen",
)


class CollectiveMismatch(EngineError):
    """Raised on a rank by the check before a collective: the ranks of its group called it with
    different operations, dtypes or element counts (the parent names them all)."""


def mask_of(ranks: list[int] | tuple[int, ...]) -> int:
    out = 0
    for r in ranks:
        out |= 1 << r
    return out


def ranks_of(mask: int) -> tuple[int, ...]:
    return tuple(r for r in range(MAX_RANKS) if mask >> r & 1)


class FlightRecorder:
    """The writer of rank ``rank``'s slot in ``buf`` (a buffer of ``world_size`` slots)."""

    def __init__(self, buf: Any, rank: int, world_size: int):
        self.buf, self.rank, self.world_size = buf, rank, world_size
        self.base = rank * FLIGHT_BYTES
        self.world = tuple(range(world_size))
        self.job = 0
        self.reset(0)

    def reset(self, job: int) -> None:
        """A fresh record for job ``job``: numbers start again at 1 in every job. The job id is
        written last, so a peer that reads it sees the cleared record."""
        self.entries = 0
        self.groups: dict[int, tuple[int, int]] = {}  # mask -> (slot, entered)
        self.sends = [0] * self.world_size
        self.recvs = [0] * self.world_size
        start = self.base + _RING_AT
        self.buf[start : self.base + FLIGHT_BYTES] = bytes(FLIGHT_BYTES - _RING_AT)
        struct.pack_into("<qq", self.buf, self.base + _ENTRIES_AT, 0, -1)
        struct.pack_into("<q", self.buf, self.base + _JOB_AT, job)
        self.job = job

    # ------------------------------------------------------------ operations
    def collective(self, name: str, group: tuple[int, ...] | None, dtype: str, numel: int) -> int:
        """Count one collective of ``group`` (None: the world) and write its entry; returns the
        entry's index for :meth:`block` and :meth:`done`."""
        mask = mask_of(group if group is not None else self.world)
        slot, entered = self.groups.get(mask, (len(self.groups), 0))
        entered += 1
        if slot < GROUPS:
            self.groups[mask] = (slot, entered)
            _GROUP.pack_into(self.buf, self.base + _GROUPS_AT + slot * _GROUP.size, mask, entered)
        return self._entry(name, dtype, 0, -1, 0, mask, entered, numel)

    def p2p(self, kind: str, peer: int, tag: int, dtype: str, numel: int) -> int:
        """Count one posted send (``kind="send"``) or receive to or from ``peer``."""
        counts = self.sends if kind == "send" else self.recvs
        counts[peer] += 1
        _PEER.pack_into(
            self.buf, self.base + _PEERS_AT + peer * _PEER.size, self.sends[peer], self.recvs[peer]
        )
        return self._entry(kind, dtype, _KINDS.index(kind), peer, tag, 0, counts[peer], numel)

    def _entry(
        self, name: str, dtype: str, kind: int, peer: int, tag: int, mask: int, seq: int, n: int
    ) -> int:
        index = self.entries
        at = self.base + _RING_AT + (index % RING) * _ENTRY.size
        _ENTRY.pack_into(
            self.buf,
            at,
            name.encode()[:24],
            dtype.encode()[:16],
            kind,
            peer,
            tag,
            mask,
            seq,
            n,
            time.time(),
            0.0,
        )
        self.entries += 1
        struct.pack_into("<q", self.buf, self.base + _ENTRIES_AT, self.entries)
        return index

    def agree(self, index: int) -> None:
        """Before collective entry ``index`` is issued: compare it with the same number's entry
        of every rank of its group that has entered it already, and raise
        :class:`CollectiveMismatch` if one differs in operation, dtype or element count.

        Nobody waits: each rank writes its entry, then reads the others', so the last rank to
        arrive sees every signature and, on a mismatch, never enters gloo (where a mismatched
        collective aborts a rank, hangs, or returns a wrong answer). A rank that arrived earlier
        may be inside gloo already; the parent then names the mismatch from the records."""
        at = self.base + _RING_AT + (index % RING) * _ENTRY.size
        mine = _read_entry(self.buf, at)
        for q in mine.group:
            if q != self.rank:
                theirs = self._peer_entry(q, mine)
                if theirs is not None and theirs.signature() != mine.signature():
                    raise CollectiveMismatch(f"{mine.name} #{mine.seq}")

    def _peer_entry(self, q: int, mine: Op) -> Op | None:
        """Rank ``q``'s entry with ``mine``'s group and number in this job, if it has one."""
        base = q * FLIGHT_BYTES
        entries, _blocked, job = struct.unpack_from("<qqq", self.buf, base + _ENTRIES_AT)
        if job != self.job:
            return None
        for index in range(entries - 1, max(0, entries - RING) - 1, -1):
            op = _read_entry(self.buf, base + _RING_AT + (index % RING) * _ENTRY.size)
            if op.kind == "collective" and op.group == mine.group and op.seq == mine.seq:
                return op
        return None

    def block(self, index: int) -> None:
        """The main thread waits in entry ``index`` now."""
        struct.pack_into("<q", self.buf, self.base + _BLOCKED_AT, index)

    def done(self, index: int) -> None:
        """Entry ``index`` completed (and the main thread no longer waits in it)."""
        if self.entries - index <= RING:
            at = self.base + _RING_AT + (index % RING) * _ENTRY.size + _ENTRY.size - 8
            struct.pack_into("<d", self.buf, at, time.time())
        struct.pack_into("<q", self.buf, self.base + _BLOCKED_AT, -1)

    # ------------------------------------------------------------ heartbeat
    def start_heartbeat(self, publish: Callable[[bytes], None] | None = None) -> threading.Thread:
        """Start the thread that beats every :data:`BEAT_S` with the main thread's line;
        ``publish(slot)``, every :data:`PUBLISH_BEATS` beats, sends this rank's slot where the
        other ranks can read it (under torchrun: the launcher's store)."""
        main = threading.main_thread().ident
        args = (main, publish)
        thread = threading.Thread(target=self._beat, args=args, daemon=True, name="heartbeat")
        thread.start()
        return thread

    def slot(self) -> bytes:
        """This rank's slot, as :func:`read_record` reads it at this rank's place."""
        return bytes(self.buf[self.base : self.base + FLIGHT_BYTES])

    def _beat(self, main: int | None, publish: Callable[[bytes], None] | None = None) -> None:
        history: list[tuple[float, float]] = []  # (wall, main thread's demand for a core)
        beats = 0
        while True:
            now, cpu = time.time(), demand_s()
            history = [h for h in history if now - h[0] <= 1.0] + [(now, cpu)]
            span = now - history[0][0]
            busy = (cpu - history[0][1]) / span if span > 0.05 else 0.0
            frame = sys._current_frames().get(main) if main is not None else None
            line = frame_line(frame).encode("utf-8", "replace")[: LINE_BYTES - 1]
            at = self.base + _HEAD.size
            self.buf[at : at + len(line) + 1] = line + b"\0"
            beats += 1
            struct.pack_into("<qdd", self.buf, self.base, beats, now, max(0.0, busy))
            if publish is not None and beats % PUBLISH_BEATS == 1:
                with contextlib.suppress(Exception):  # a store gone at exit: nothing to tell
                    publish(self.slot())
            time.sleep(BEAT_S)


def demand_s() -> float:
    """Seconds the process's main thread has run on a core or waited, runnable, for one
    (Linux's ``/proc/self/schedstat``: its first two fields, in ns): a rank that computes on a
    machine busier than its cores counts as working, while one blocked in gloo or asleep accrues
    nothing. Elsewhere, the process's CPU time (``time.process_time``)."""
    try:
        with open("/proc/self/schedstat", "rb") as f:
            ran, waited = f.read().split()[:2]
        return (int(ran) + int(waited)) / 1e9
    except (OSError, ValueError):
        return time.process_time()


def user_frame_of(frame: FrameType | None) -> FrameType | None:
    """The innermost frame outside the package, torch and the standard library: the caller's own
    code (a learner's loop); else the innermost frame of the package's own job code (outside
    ``engine/``: a lesson's job, such as the failure lab's); None when there is neither.

    The walk stops at multiprocessing's bootstrap: a forked rank inherits its parent's frames
    (the notebook cell that started the cluster), which are not the job's."""
    fallback = None
    while frame is not None:
        name = frame.f_code.co_filename
        if name == _BOOTSTRAP:
            break
        if not name.startswith(_LIBRARY) and "site-packages" not in name:
            return frame
        if fallback is None and name.startswith(_PACKAGE) and not name.startswith(_ENGINE):
            fallback = frame
        frame = frame.f_back
    return fallback


def frame_line(frame: FrameType | None) -> str:
    """``file:line in function``, a newline and the line's source, of :func:`user_frame_of`
    ``frame``; "" when there is none."""
    found = user_frame_of(frame)
    if found is None:
        return ""
    code, lineno = found.f_code, found.f_lineno
    source = linecache.getline(code.co_filename, lineno).strip()
    name = code.co_filename  # the package's own files from its folder: edu_parallel/...
    shown = name[len(os.path.dirname(_PACKAGE[:-1])) + 1 :] if name.startswith(_PACKAGE) else name
    return f"{shown}:{lineno} in {code.co_name}\n{source}"


def read_slots(slots: dict[int, bytes], world_size: int) -> list[RankRecord]:
    """Every rank's record from the slots the ranks published (:meth:`FlightRecorder.slot`);
    a rank that published none has an empty record."""
    buf = bytearray(FLIGHT_BYTES * world_size)
    for r, data in slots.items():
        buf[r * FLIGHT_BYTES : (r + 1) * FLIGHT_BYTES] = data[:FLIGHT_BYTES]
    return [read_record(buf, r, world_size) for r in range(world_size)]


def read_record(buf: Any, rank: int, world_size: int) -> RankRecord:
    """Rank ``rank``'s record as :class:`~edu_parallel.core.diagnosis.RankRecord`."""
    base = rank * FLIGHT_BYTES
    beats, beat, busy, entries, blocked, _job = _HEAD.unpack_from(buf, base)
    raw = bytes(buf[base + _HEAD.size : base + _HEAD.size + LINE_BYTES])
    line, _sep, source = raw.split(b"\0", 1)[0].decode("utf-8", "replace").partition("\n")
    ops: list[Op] = []
    blocked_op = None
    for index in range(max(0, entries - RING), entries):
        op = _read_entry(buf, base + _RING_AT + (index % RING) * _ENTRY.size)
        ops.append(op)
        if index == blocked:
            blocked_op = op
    entered = {}
    for slot in range(GROUPS):
        mask, count = _GROUP.unpack_from(buf, base + _GROUPS_AT + slot * _GROUP.size)
        if mask:
            entered[ranks_of(mask)] = count
    peers = [_PEER.unpack_from(buf, base + _PEERS_AT + p * _PEER.size) for p in range(world_size)]
    return RankRecord(
        rank,
        tuple(ops),
        blocked_op,
        entered,
        tuple(p[0] for p in peers),
        tuple(p[1] for p in peers),
        line,
        source,
        beat if beats else 0.0,
        busy,
    )


def _read_entry(buf: Any, at: int) -> Op:
    name, dtype, kind, peer, tag, mask, seq, numel, t0, t1 = _ENTRY.unpack_from(buf, at)
    return Op(
        _KINDS[kind],  # type: ignore[arg-type]
        name.rstrip(b"\0").decode(),
        seq,
        dtype.rstrip(b"\0").decode(),
        numel,
        ranks_of(mask),
        peer,
        tag,
        t0,
        t1,
    )
