"""Which rank is at fault when a job fails, and why: :func:`diagnose` and its :class:`Diagnosis`.

Every rank keeps a flight record (``engine/flight.py``), as torch's flight recorder does for NCCL:
each collective and point-to-point operation it issued, numbered per process group (``seq``), with
its dtype and element count, whether it completed, the operation its main thread waits in now,
how many operations it entered per group and per peer, and a heartbeat (the line its main thread
runs, how busy the process was). When a job hangs or a rank dies, the parent reads every rank's
record and :func:`diagnose` turns them into one finding, pure and testable without processes:

* ``mismatch``: ranks entered the same collective number of a group with another operation,
  dtype or element count (torch's ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` fingerprint check); it
  comes first, since gloo aborts a rank that meets one;
* ``dead``: a rank's process ended (the parent saw it exit);
* ``stopped``: a rank's process is stopped (SIGSTOP), or sends no heartbeat while the others do;
* ``deadlock``: ranks wait for each other in a cycle (both in ``recv`` from each other);
* ``missing``: ranks wait in an operation that a rank never entered, and that rank is idle in its
  own code (sleeping, waiting outside the group) or has finished the job;
* ``slow``: the awaited rank is still working (busy on a core, heartbeat fresh): a straggler,
  or a timeout too short for the work.

"Waits for": a rank in collective ``#k`` of group ``g`` waits for each rank of ``g`` that has
entered fewer than ``k`` collectives of ``g``; a rank in receive ``#j`` from ``p`` waits for ``p``
while ``p`` has posted fewer than ``j`` sends to it (and the same for a send that has not
completed). The culprit is where that relation ends; a cycle in it is a deadlock. Text:
``diagnosis_text.py``. References: PyTorch's flight recorder (``torch.distributed.
flight_recorder``, its ``fr_trace`` analyser matches entries by ``collective_seq_id`` per group);
Chandy, Misra and Haas, "Distributed deadlock detection", ACM TOCS 1983 (the wait-for graph).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["dead", "stopped", "mismatch", "deadlock", "missing", "slow"]
State = Literal["finished", "waiting", "working", "idle", "stopped", "dead"]
KINDS: tuple[Kind, ...] = ("dead", "stopped", "mismatch", "deadlock", "missing", "slow")
UNEVEN = frozenset({"all_to_all", "all_to_all_single"})  # ranks may pass different sizes
BUSY = 0.5  # a rank that used at least half a core over the last second is working, not idle
SILENT_S = 1.0  # a heartbeat older than this, while the rank's process exists, is a stopped rank


@dataclass(frozen=True)
class Op:
    """One operation a rank issued, as its flight record keeps it."""

    kind: Literal["collective", "send", "recv"]
    name: str
    """torch's name: ``all_reduce``, ``all_gather_single``, ``send``, ``recv``..."""
    seq: int
    """A collective's number in its group, from 1; a send's number among this rank's sends to
    ``peer`` (a receive's among its receives from ``peer``), from 1."""
    dtype: str
    numel: int
    group: tuple[int, ...] = ()
    """A collective's global ranks; () for a send or a receive."""
    peer: int = -1
    tag: int = 0
    entered: float = 0.0
    """Wall time (``time.time()``) it was issued."""
    done: float = 0.0
    """Wall time it completed; 0: not yet."""

    def signature(self) -> tuple[str, str, int]:
        """What ranks must agree on to run the same collective: operation, dtype, elements
        (-1 for an all-to-all, whose splits may differ by rank)."""
        return (self.name, self.dtype, -1 if self.name in UNEVEN else self.numel)


@dataclass(frozen=True)
class RankRecord:
    """What one rank's flight record says (read by ``engine/flight.py``)."""

    rank: int
    ops: tuple[Op, ...] = ()
    """Its last operations, oldest first (a ring of the last few)."""
    blocked: Op | None = None
    """The operation its main thread waits in now, if any."""
    entered: Mapping[tuple[int, ...], int] = field(default_factory=dict)
    """Collectives entered, per group (global ranks)."""
    sends: tuple[int, ...] = ()
    """Sends posted to each rank."""
    recvs: tuple[int, ...] = ()
    """Receives posted from each rank."""
    line: str = ""
    """Where its main thread is: ``file:line in function`` of its own code."""
    source: str = ""
    """The source text of that line, when the rank could read it."""
    beat: float = 0.0
    """Wall time of its last heartbeat (0: none yet)."""
    busy: float = 0.0
    """Share of one core its process used over the last second."""


@dataclass(frozen=True)
class RankState:
    """The evidence about one rank in a :class:`Diagnosis`."""

    rank: int
    state: State
    op: Op | None = None
    """The operation it waits in (``waiting``), else None."""
    last: Op | None = None
    """The last operation it completed."""
    line: str = ""
    source: str = ""
    waited_s: float = 0.0
    """How long it has waited in ``op``."""
    silent_s: float = 0.0
    """Seconds since its last heartbeat."""
    busy: float = 0.0
    waits_for: tuple[int, ...] = ()
    exitcode: int | None = None
    ops: tuple[Op, ...] = ()
    """Its last operations, oldest first (the flight record's ring): a timeline's spans."""


@dataclass(frozen=True)
class Diagnosis:
    """One finding: its ``kind``, the ``culprits`` and the evidence of every rank (``ranks``).

    ``op``: the operation the culprits are at fault for (the one never entered, the mismatched
    one); ``cycles``: each cycle of a deadlock, its ranks in wait order; ``sides``: for a
    mismatch, the ranks of each signature."""

    kind: Kind
    culprits: tuple[int, ...]
    ranks: tuple[RankState, ...]
    op: Op | None = None
    cycles: tuple[tuple[int, ...], ...] = ()
    sides: tuple[tuple[tuple[int, ...], Op], ...] = ()
    timeout_s: float = 0.0
    now: float = 0.0
    """Wall time of the reading: where an operation still waiting ends on a timeline."""

    def rank(self, r: int) -> RankState:
        return self.ranks[r]


def diagnose(
    records: list[RankRecord],
    now: float,
    *,
    finished: frozenset[int] = frozenset(),
    dead: Mapping[int, int | None] | None = None,
    stopped: frozenset[int] = frozenset(),
    timeout_s: float = 0.0,
) -> Diagnosis:
    """The finding for a job whose ranks left ``records``; ``finished``: ranks that returned;
    ``dead``: ranks whose process ended, with exit codes; ``stopped``: ranks whose process the
    system reports stopped. ``now``: wall time of the reading."""
    dead = dict(dead or {})
    silent = {
        r.rank
        for r in records
        if r.rank not in finished and r.rank not in dead and r.beat and now - r.beat > SILENT_S
    }
    stopped = frozenset(stopped) | frozenset(silent)
    waits = {r.rank: _waits_for(r, records) for r in records}
    states = tuple(_state(r, now, finished, dead, stopped, waits[r.rank]) for r in records)

    def found(kind: Kind, culprits: list[int] | tuple[int, ...], **more: object) -> Diagnosis:
        culprits = tuple(sorted(culprits))
        return Diagnosis(kind, culprits, states, timeout_s=timeout_s, now=now, **more)

    clash = _mismatch(records)  # first: gloo aborts a rank that meets a mismatched collective
    if clash is not None:
        sides, op = clash
        culprits = [r for ranks, _ in sides[1:] for r in ranks]
        return found("mismatch", culprits, op=op, sides=sides)
    if dead:
        return found("dead", list(dead), op=_awaited(records, list(dead)))
    if stopped:
        return found("stopped", list(stopped), op=_awaited(records, list(stopped)))
    cycles = _cycles(waits)
    if cycles:
        return found("deadlock", [r for c in cycles for r in c], cycles=tuple(map(tuple, cycles)))
    sinks = _sinks(waits)
    if not sinks:  # nobody waits for anybody the record knows: the ranks still at work
        sinks = [s.rank for s in states if s.state in ("working", "idle")]
    working = [r for r in sinks if states[r].state == "working"]
    kind: Kind = "slow" if working and len(working) == len(sinks) else "missing"
    return found(kind, sinks, op=_awaited(records, sinks))


def _waits_for(r: RankRecord, records: list[RankRecord]) -> tuple[int, ...]:
    """The ranks ``r``'s blocked operation waits for (see the module docstring)."""
    op = r.blocked
    if op is None or op.done:
        return ()
    if op.kind == "collective":
        return tuple(q for q in op.group if records[q].entered.get(op.group, 0) < op.seq)
    peer = records[op.peer]
    if op.kind == "recv":
        posted = peer.sends[r.rank] if r.rank < len(peer.sends) else 0
    else:
        posted = peer.recvs[r.rank] if r.rank < len(peer.recvs) else 0
    return (op.peer,) if posted < op.seq else ()


def _state(
    r: RankRecord,
    now: float,
    finished: frozenset[int],
    dead: Mapping[int, int | None],
    stopped: frozenset[int],
    waits: tuple[int, ...],
) -> RankState:
    last = next((op for op in reversed(r.ops) if op.done), None)
    state: State
    if r.rank in dead:
        state = "dead"
    elif r.rank in stopped:
        state = "stopped"
    elif r.rank in finished:
        state = "finished"
    elif r.blocked is not None and not r.blocked.done:
        state = "waiting"
    else:
        state = "working" if r.busy >= BUSY else "idle"
    op = r.blocked if state in ("waiting", "stopped", "dead") and r.blocked else None
    return RankState(
        r.rank,
        state,
        op,
        last,
        r.line,
        r.source,
        waited_s=max(0.0, now - op.entered) if op is not None and op.entered else 0.0,
        silent_s=max(0.0, now - r.beat) if r.beat else 0.0,
        busy=r.busy,
        waits_for=waits,
        exitcode=dead.get(r.rank),
        ops=r.ops,
    )


def _mismatch(
    records: list[RankRecord],
) -> tuple[tuple[tuple[tuple[int, ...], Op], ...], Op] | None:
    """The first collective (by group and number) that ranks entered with different signatures:
    each signature's ranks (the lowest rank's side first) and that side's operation."""
    by_key: dict[tuple[tuple[int, ...], int], dict[int, Op]] = {}
    for r in records:
        for op in r.ops:
            if op.kind == "collective":
                by_key.setdefault((op.group, op.seq), {})[r.rank] = op
    for (_group, _seq), ops in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        sigs: dict[tuple[str, str, int], list[int]] = {}
        for rank, op in sorted(ops.items()):
            sigs.setdefault(op.signature(), []).append(rank)
        if len(sigs) > 1:
            sides = sorted(sigs.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
            out = tuple((tuple(ranks), ops[ranks[0]]) for _sig, ranks in sides)
            return out, out[0][1]
    return None


def _cycles(waits: Mapping[int, tuple[int, ...]]) -> list[list[int]]:
    """The cycles of the wait-for graph, each in wait order from its lowest rank, or []."""
    out: list[list[int]] = []
    taken: set[int] = set()
    for start in sorted(waits):
        path, seen = [start], {start}
        while True:
            nxt = [q for q in waits.get(path[-1], ()) if waits.get(q)]
            if not nxt or path[-1] in taken:
                break
            q = nxt[0]
            if q in seen:
                loop = path[path.index(q) :]
                if not set(loop) & taken:
                    low = loop.index(min(loop))
                    out.append(loop[low:] + loop[:low])
                    taken |= set(loop)
                break
            path.append(q)
            seen.add(q)
    return out


def _sinks(waits: Mapping[int, tuple[int, ...]]) -> list[int]:
    """The ranks waited for that wait for nobody themselves: where the waiting ends."""
    awaited = {q for qs in waits.values() for q in qs}
    return sorted(q for q in awaited if not waits.get(q))


def _awaited(records: list[RankRecord], culprits: list[int]) -> Op | None:
    """The operation the other ranks wait in for ``culprits``: the first blocked one that waits
    for one of them."""
    for r in records:
        op = r.blocked
        if op is not None and not op.done and set(_waits_for(r, records)) & set(culprits):
            return op
    return None
