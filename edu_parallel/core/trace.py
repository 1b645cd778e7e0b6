"""Traces: what a run actually did, event by event.

A :class:`Trace` holds the :class:`Event` list of a run (send, recv, collective, compute, memory,
mark), optional per-step buffer :class:`Snapshot` s for animation, and ``meta`` (concept, world
size, bytes, dtype, plan text...: the keys of :data:`edu_parallel.core.schema.META`, checked when a
trace is saved or loaded). It round-trips through JSON, exports Chrome-trace JSON that Perfetto
opens (one track per rank), prints one line per event, and summarises bytes per rank per phase.

This module is pure Python: renderers import it, and it never imports ``torch.distributed``.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import bad_value
from .schema import meta_problems

FORMAT_VERSION = 1
# Bytes per rank up to which a run copies its buffers into the trace as :class:`Snapshot` s (the
# engine's Tracer, the in-process simulation); larger runs carry none and renderers draw them
# symbolically, from ``meta["plan"]``. The one home of this limit: everyone imports it.
SNAPSHOT_LIMIT = 4096


@dataclass(slots=True, kw_only=True)
class Event:
    """One thing one rank did, built with keywords: ``Event(kind="send", rank=0, peer=1, ...)``.

    ``kind`` is one of :data:`~edu_parallel.core.schema.KINDS`.

    ``start``/``end`` are seconds since the job started (a clock shared by all ranks on one host).
    ``peer`` is the other rank of a send or recv; ``tag`` matches a send with its recv. For a recv,
    ``op`` says what was done with the data: ``"reduce"`` (added) or ``"copy"`` (overwritten).
    For memory events ``nbytes`` is the signed change and ``attrs["category"]`` what it is.
    """

    kind: str
    rank: int
    op: str = ""
    peer: int | None = None
    step: int | None = None
    phase: str | None = None
    chunk: int | None = None
    nbytes: int = 0
    start: float = 0.0
    end: float = 0.0
    tag: int | None = None
    attrs: dict[str, Any] | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        return cls(**d)

    def line(self) -> str:
        """One-line text form, e.g. ``r0 s1 reduce-scatter  send ->r1 c3 256 B  [0.000120,
        0.000180]``."""
        where = f"s{self.step}" if self.step is not None else "s-"
        phase = self.phase or "-"
        if self.kind == "send":
            what = f"send ->r{self.peer}"
        elif self.kind == "recv":
            what = f"recv <-r{self.peer} ({self.op})" if self.op else f"recv <-r{self.peer}"
        else:
            what = f"{self.kind} {self.op}".strip()
        chunk = f" c{self.chunk}" if self.chunk is not None else ""
        return (
            f"r{self.rank} {where} {phase:<15} {what}{chunk} {self.nbytes} B"
            f"  [{self.start:.6f}, {self.end:.6f}]"
        )


@dataclass(slots=True)
class Snapshot:
    """A rank's whole buffer after ``step`` (``step == -1``: the input, before any step)."""

    rank: int
    step: int
    phase: str | None
    values: list[float]


@dataclass
class Trace:
    """The record of one run: ``meta``, ``events`` and optional ``snapshots``."""

    meta: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)

    # ----------------------------------------------------------------- basic access
    @property
    def world_size(self) -> int:
        if "world_size" in self.meta:
            return int(self.meta["world_size"])
        ranks = {e.rank for e in self.events} | {s.rank for s in self.snapshots}
        return max(ranks) + 1 if ranks else 0

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def select(
        self,
        kind: str | Iterable[str] | None = None,
        rank: int | None = None,
        phase: str | None = None,
    ) -> list[Event]:
        """Events filtered by kind (one or several), rank and phase."""
        kinds = {kind} if isinstance(kind, str) else set(kind) if kind is not None else None
        return [
            e
            for e in self.events
            if (kinds is None or e.kind in kinds)
            and (rank is None or e.rank == rank)
            and (phase is None or e.phase == phase)
        ]

    def phases(self) -> list[str]:
        """Phase names in order of first appearance."""
        seen: dict[str, None] = {}
        for e in self.events:
            if e.phase is not None:
                seen.setdefault(e.phase, None)
        return list(seen)

    @property
    def duration(self) -> float:
        """Time from the first event's start to the last event's end."""
        if not self.events:
            return 0.0
        return max(e.end for e in self.events) - min(e.start for e in self.events)

    def merged(self, other: Trace) -> Trace:
        """A new trace with the events and snapshots of both (``meta`` of ``self``)."""
        return Trace(dict(self.meta), self.events + other.events, self.snapshots + other.snapshots)

    # ----------------------------------------------------------------- summaries
    def _bytes(self, kind: str, per_phase: bool) -> Any:
        n = self.world_size
        if not per_phase:
            total = [0] * n
            for e in self.events:
                if e.kind == kind:
                    total[e.rank] += e.nbytes
            return total
        out: dict[str, list[int]] = {}
        for e in self.events:
            if e.kind == kind:
                out.setdefault(e.phase or "-", [0] * n)[e.rank] += e.nbytes
        return out

    def sent_bytes(self, per_phase: bool = False) -> list[int] | dict[str, list[int]]:
        """Bytes each rank sent point-to-point: a list per rank, or ``{phase: list}``."""
        return self._bytes("send", per_phase)

    def recv_bytes(self, per_phase: bool = False) -> list[int] | dict[str, list[int]]:
        """Bytes each rank received point-to-point: a list per rank, or ``{phase: list}``."""
        return self._bytes("recv", per_phase)

    def steps_per_phase(self) -> dict[str, int]:
        """How many distinct steps each phase took (the latency terms)."""
        steps: dict[str, set[int]] = defaultdict(set)
        for e in self.events:
            if e.step is not None and e.kind in ("send", "recv", "collective"):
                steps[e.phase or "-"].add(e.step)
        return {p: len(s) for p, s in steps.items()}

    def message_counts(self) -> list[int]:
        """Messages each rank sent."""
        counts = Counter(e.rank for e in self.events if e.kind == "send")
        return [counts.get(r, 0) for r in range(self.world_size)]

    def matched_transfers(self) -> list[tuple[Event, Event]]:
        """Pairs (send, recv): the k-th send src->dst with a tag matches the k-th such recv.

        Raises ValueError when a send has no recv or the other way round.
        """
        sends: dict[tuple, list[Event]] = defaultdict(list)
        recvs: dict[tuple, list[Event]] = defaultdict(list)
        for e in self.events:
            if e.kind == "send":
                sends[(e.rank, e.peer, e.tag)].append(e)
            elif e.kind == "recv":
                recvs[(e.peer, e.rank, e.tag)].append(e)
        pairs = []
        for key in sends.keys() | recvs.keys():
            s, r = sends.get(key, []), recvs.get(key, [])
            if len(s) != len(r):
                src, dst, tag = key
                raise ValueError(
                    f"unmatched messages r{src}->r{dst} tag {tag}: {len(s)} sends, {len(r)} recvs"
                )
            pairs.extend(zip(s, r, strict=True))
        pairs.sort(key=lambda p: (p[0].start, p[0].rank, p[1].rank))
        return pairs

    def snapshot_grid(self) -> dict[tuple[int, int], list[float]]:
        """``{(rank, step): values}`` of the recorded snapshots."""
        return {(s.rank, s.step): s.values for s in self.snapshots}

    # ----------------------------------------------------------------- text and JSON
    def lines(self) -> list[str]:
        """One line per event, ordered by start time then rank."""
        return [e.line() for e in sorted(self.events, key=lambda e: (e.start, e.rank, e.end))]

    def to_dict(self) -> dict[str, Any]:
        self.check_meta()
        return {
            "format": "edu-parallel-trace",
            "version": FORMAT_VERSION,
            "meta": self.meta,
            "events": [e.to_dict() for e in self.events],
            "snapshots": [asdict(s) for s in self.snapshots],
        }

    def check_meta(self) -> Trace:
        """Return self if ``meta`` follows :data:`~edu_parallel.core.schema.META`, else raise a
        ValueError naming every bad key."""
        problems = meta_problems(self.meta)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        if d.get("format") != "edu-parallel-trace":
            raise bad_value("format", d.get("format"), "'edu-parallel-trace'")
        return cls(
            meta=dict(d.get("meta", {})),
            events=[Event.from_dict(e) for e in d.get("events", [])],
            snapshots=[Snapshot(**s) for s in d.get("snapshots", [])],
        ).check_meta()

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> Trace:
        return cls.from_dict(json.loads(text))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        return cls.from_json(Path(path).read_text())

    # ----------------------------------------------------------------- Chrome trace / Perfetto
    def to_chrome_trace(self) -> dict[str, Any]:
        """Chrome trace-event JSON (``ph: "X"`` complete events, microseconds): one track per rank,
        with flow arrows from each send to its matching recv. Open it in ui.perfetto.dev."""
        out = [_chrome("M", "process_name", 0, args={"name": self.meta.get("concept", "run")})]
        for r in range(self.world_size):
            out.append(_chrome("M", "thread_name", r, args={"name": f"rank {r}"}))
            out.append(_chrome("M", "thread_sort_index", r, args={"sort_index": r}))
        for e in self.events:
            name = e.op or e.kind
            if e.kind in ("send", "recv"):
                name = f"{e.kind} {'->' if e.kind == 'send' else '<-'}r{e.peer}"
            args = {k: v for k, v in e.to_dict().items() if k not in ("start", "end", "rank")}
            if e.kind == "memory":
                out.append(_chrome("i", name, e.rank, e.start, s="t", cat="memory", args=args))
            else:
                dur = max(e.end - e.start, 0.0) * 1e6
                out.append(
                    _chrome("X", name, e.rank, e.start, cat=e.phase or e.kind, dur=dur, args=args)
                )
        try:
            pairs = self.matched_transfers()
        except ValueError:
            pairs = []
        for i, (s, r) in enumerate(pairs):
            out.append(_chrome("s", "msg", s.rank, s.start, id=i, cat="flow"))
            out.append(_chrome("f", "msg", r.rank, r.end, id=i, cat="flow", bp="e"))
        return {
            "traceEvents": out,
            "displayTimeUnit": "ms",
            "otherData": {k: str(v) for k, v in self.meta.items()},
        }

    def save_chrome_trace(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_chrome_trace()))
        return path

    def with_times(self, times: list[tuple[float, float]], **meta: Any) -> Trace:
        """A copy whose i-th event has ``(start, end) = times[i]``; ``meta`` entries are added."""
        events = [replace(e, start=s, end=t) for e, (s, t) in zip(self.events, times, strict=True)]
        return Trace({**self.meta, **meta}, events, list(self.snapshots))


def _chrome(
    ph: str, name: str, tid: int, ts_s: float | None = None, **fields: Any
) -> dict[str, Any]:
    """One Chrome trace event on track ``tid`` (a rank) at ``ts_s`` seconds."""
    event: dict[str, Any] = {"ph": ph, "name": name, "pid": 0, "tid": tid}
    if ts_s is not None:
        event["ts"] = ts_s * 1e6
    return {**event, **fields}
