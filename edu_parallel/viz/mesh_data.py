"""Who talks to whom in a 3D run, and when: the rank-to-rank transfers of its trace, by dimension.

:func:`mesh_data` reads a :class:`~edu_parallel.parallel_3d.report.Report3D` (or its
``to_json_dict()`` and its :class:`~edu_parallel.core.trace.Trace`) and returns a :class:`MeshData`:
one :class:`Transfer` per rank, peer and event, counted as
:mod:`edu_parallel.parallel_3d.measure` counts a rank's bytes, so that the bytes a rank sends to
its peers add up to the report's ``per_rank_sent_bytes_by_group`` (checked here):

* PP: each ``send`` event is one message from a stage to the next (forward) or previous
  (backward) stage of the same pipeline;
* TP and DP (the expert-DP groups' gradient all-reduce included): a collective moves data round
  its group's ring (the byte model of :func:`edu_parallel.core.metrics.ring_sent_bytes`, Patarasuk
  and Yuan 2009): the rank at place k of the group sends its ring share to the rank at place k+1;
* EP: an all-to-all reaches every other rank of its EP group, with the bytes its split mark
  recorded per peer.

The event's end is when its bytes count as moved: a collective's, the matching receive's for a
send (an ``isend`` ends when its sender waits on it, often much later), a split mark's time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ..core.dims import ParallelDims
from ..core.errors import bad_value
from ..core.i18n import N_, _
from ..core.metrics import ring_sent_bytes
from ..core.schema import SPLITS_MARK
from ..core.trace import Trace
from ..parallel_3d.measure import GROUP_TYPES, group_kinds

# How each dimension's edges are drawn, in the figure's words.
EDGE_RULES = {  # translated where shown: _(EDGE_RULES[dim])
    "tp": N_("ring neighbours of each TP group"),
    "pp": N_("stage k → k+1 of each pipeline"),
    "dp": N_("ring neighbours of each DP (and expert-DP) group"),
    "ep": N_("all pairs of each EP group"),
}
REPORT_KEYS = ("dims", "per_rank_sent_bytes_by_group", "per_rank_messages_by_group")


@dataclass(frozen=True)
class Transfer:
    """``src`` sent ``nbytes`` to ``dst`` in dimension ``dim`` at time ``time`` (s)."""

    dim: str
    src: int
    dst: int
    nbytes: float
    time: float


@dataclass(frozen=True)
class MeshData:
    """A 3D run's degrees, report (plain data) and transfers, in time order."""

    dims: ParallelDims
    report: dict[str, Any]
    transfers: tuple[Transfer, ...]

    @property
    def shown_dims(self) -> tuple[str, ...]:
        """The dimensions whose groups have more than one rank."""
        return tuple(k for k in GROUP_TYPES if getattr(self.dims, k) > 1)

    def groups(self, dim: str) -> list[list[int]]:
        return self.dims.groups(dim)

    def span(self) -> tuple[float, float]:
        """First and last transfer time (0, 0 without transfers)."""
        times = [t.time for t in self.transfers]
        return (min(times), max(times)) if times else (0.0, 0.0)

    def edges(self, dim: str, until: float | None = None) -> dict[tuple[int, int], dict[str, Any]]:
        """``(a, b)`` with ``a < b`` -> ``{"bytes", "messages", "sent": {src: bytes}}`` of the
        transfers of ``dim`` up to time ``until`` (None: all); every pair that ever talks is
        listed, with 0 before it does."""
        out: dict[tuple[int, int], dict[str, Any]] = {}
        for t in self.transfers:
            if t.dim != dim:
                continue
            pair = (min(t.src, t.dst), max(t.src, t.dst))
            e = out.setdefault(
                pair, {"bytes": 0.0, "messages": 0, "sent": dict.fromkeys(pair, 0.0)}
            )
            if until is None or t.time <= until:
                e["bytes"] += t.nbytes
                e["messages"] += 1
                e["sent"][t.src] += t.nbytes
        return out

    def sent(self, dim: str) -> list[float]:
        """Bytes each rank sent in ``dim``, from the transfers."""
        out = [0.0] * self.dims.world_size
        for t in self.transfers:
            if t.dim == dim:
                out[t.src] += t.nbytes
        return out


def report_dict(report: Any, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """A 3D report as plain data (a Report3D, or its ``to_json_dict()``) that has ``keys``."""
    data = report.to_json_dict() if hasattr(report, "to_json_dict") else report
    if not isinstance(data, dict) or any(k not in data for k in REPORT_KEYS + keys):
        raise bad_value("report", type(report).__name__, _("a Report3D or its to_json_dict()"))
    return data


def _dims(data: dict[str, Any]) -> ParallelDims:
    d = data["dims"]
    try:
        return ParallelDims(d["world_size"], d["dp"], d["tp"], d["pp"], d["ep"])
    except (KeyError, TypeError) as exc:
        raise bad_value("report['dims']", d, "{world_size, dp, tp, pp, ep}") from exc


def _where(e: Any) -> str:
    return _("trace: rank {rank} {op} at t={t}s").format(
        rank=e.rank, op=e.op or e.kind, t=f"{e.start:.6f}"
    )


def _transfers(trace: Trace, dims: ParallelDims) -> list[Transfer]:
    kinds = group_kinds(dims)
    ep_groups = {tuple(g) for g in dims.groups("ep")} if dims.ep > 1 else set()
    arrived: dict[tuple[Any, ...], list[float]] = defaultdict(list)  # (src, dst, tag) -> recv ends
    for e in trace.events:
        if e.kind == "recv":
            arrived[(e.peer, e.rank, e.tag)].append(e.end)
    out: list[Transfer] = []
    for e in trace.events:
        if e.kind in ("send", "collective", "mark") and not 0 <= e.rank < dims.world_size:
            raise ValueError(
                _("{where}: rank outside the {n} ranks of the run").format(
                    where=_where(e), n=dims.world_size
                )
            )
        if e.kind == "send":
            a, b = dims.coords(e.rank), dims.coords(e.peer) if e.peer is not None else None
            if b is None or abs(a["pp"] - b["pp"]) != 1 or (a["dp"], a["tp"]) != (b["dp"], b["tp"]):
                raise ValueError(
                    _("{where}: send to rank {peer}, not a neighbour stage").format(
                        where=_where(e), peer=e.peer
                    )
                )
            ends = arrived[(e.rank, e.peer, e.tag)]
            out.append(
                Transfer("pp", e.rank, e.peer, float(e.nbytes), ends.pop(0) if ends else e.end)
            )
        elif e.kind == "collective":
            group = tuple((e.attrs or {}).get("group") or range(dims.world_size))
            if e.op.startswith("all_to_all"):
                if group not in ep_groups:
                    raise ValueError(
                        _("{where}: on ranks {ranks}, not an EP group").format(
                            where=_where(e), ranks=list(group)
                        )
                    )
                continue  # its bytes are its split mark's
            if group not in kinds or e.rank not in group:
                raise ValueError(
                    _("{where}: on ranks {ranks}, not a TP or DP group").format(
                        where=_where(e), ranks=list(group)
                    )
                )
            n, k = len(group), group.index(e.rank)
            nbytes = ring_sent_bytes(e.op, e.nbytes, n)
            out.append(Transfer(kinds[group], e.rank, group[(k + 1) % n], nbytes, e.end))
        elif e.kind == "mark" and e.op == SPLITS_MARK:
            a = e.attrs or {}
            peers = tuple(a.get("peers") or range(dims.world_size))
            if peers not in ep_groups:
                raise ValueError(
                    _("{where}: split mark over ranks {ranks}, not EP").format(
                        where=_where(e), ranks=list(peers)
                    )
                )
            for peer, nbytes in zip(peers, a["send_bytes"], strict=True):
                if peer != e.rank:
                    out.append(Transfer("ep", e.rank, peer, float(nbytes), e.start))
    return sorted(out, key=lambda t: t.time)


def mesh_data(report: Any, trace: Trace | None = None) -> MeshData:
    """The transfers of a 3D run: ``report`` a Report3D (its trace is used unless ``trace`` is
    given) or its ``to_json_dict()`` with ``trace``. Raises ValueError naming the first event
    that does not fit the run's mesh, or the first rank whose bytes disagree with the report."""
    data = report_dict(report)
    trace = trace if trace is not None else getattr(report, "trace", None)
    if not isinstance(trace, Trace):
        raise bad_value("trace", type(trace).__name__, _("the run's Trace (report.trace)"))
    dims = _dims(data)
    mesh = MeshData(dims, data, tuple(_transfers(trace, dims)))
    measured = data["per_rank_sent_bytes_by_group"]
    if len(measured) != dims.world_size:
        raise bad_value(
            "report",
            f"{len(measured)} ranks",
            _("{n} ranks, as dims").format(n=dims.world_size),
        )
    for dim in GROUP_TYPES:
        sent = mesh.sent(dim)
        for r, row in enumerate(measured):
            if abs(sent[r] - row.get(dim, 0.0)) > 0.5:
                raise ValueError(
                    _(
                        "trace and report disagree: rank {rank} sent {traced} B in"
                        " {dim} by the trace, {reported} B by the report"
                    ).format(
                        rank=r,
                        traced=f"{sent[r]:.0f}",
                        dim=dim.upper(),
                        reported=f"{row.get(dim, 0.0):.0f}",
                    )
                )
    return mesh
