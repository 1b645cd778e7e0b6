"""Simulate a plan on thousands of virtual ranks in well under a second, with numpy only.

:func:`edu_parallel.models.simulation.simulate` records one :class:`~edu_parallel.core.trace.Event`
per send, recv and reduce (about five million for a 1024-rank ring all-reduce) and
:func:`edu_parallel.models.retiming.retime` replays them one by one. :func:`simulate_fast` computes
the same numbers straight from the columns of a :class:`~edu_parallel.plans.arrays.PlanArrays`:

* bytes sent and received per rank (total, per phase), steps per phase, messages per rank: equal
  to the ``Trace`` summaries of ``simulate(plan, nbytes, dtype, with_data=False)[0]``;
* with a :class:`~edu_parallel.models.retiming.CostModel`: ``time_s``, equal bit for bit (same float
  operations) to ``retime(that trace, model).duration``, and ``finish_s`` per rank.

The time model is retime's, applied to a plan. Per rank, the steps it takes part in run one after
another; a step's sends and recvs are posted when the rank's previous step ends (0 for the first).
A message of ``S`` bytes takes ``alpha + S / bandwidth`` (``model.link``, or with a topology the
intra- or inter-node link) on the sender's outgoing and the receiver's incoming port; it starts once
both ranks posted it and both ports are free, in order of (ready time, src, dst, chunk). Once
all its recvs of the step are in, a rank runs its reductions one after another, ``S / reduce_Bps``
each; its step ends when all that is done. A port only ever carries messages of its rank's current
step, so steps are timed one at a time from the ranks' clocks:

* a step where each rank sends at most one message and receives at most one (ring steps) is timed
  for all ranks at once: ``start = max(clock[src], clock[dst])``;
* any other step (the naive root's fan-in and fan-out) is replayed message by message with the
  same port rules, in Python, without Event objects.

With a topology, messages queue on ``Topology.ports`` (a rank's own port inside a node, a NIC
across nodes), as in retime; when a NIC serves two ranks that both use it, a port carries several
ranks' steps and :func:`simulate_fast` times with the event path (``timed_by == "events"``).

Both give retime's times bit for bit for every plan unless a message takes zero time: retime
then orders events of one instant by creation, which columns do not record. So when a message
could take zero time (``alpha_s = 0`` and an empty chunk, or one too short to move the clock),
:func:`simulate_fast` times with the event path instead (``SimSummary.timed_by == "events"``).
The :data:`~edu_parallel.models.topology.LINKS` presets all have ``alpha_s > 0``: they use the
columns.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..core.errors import bad_value, check_int
from ..core.inputs import numel_for
from ..core.units import DTYPES, check_dtype
from ..plans.arrays import OP_REDUCE, PlanArrays
from ..plans.plan import Plan
from .retiming import CostModel, retime
from .simulation import simulate

EXACT_FLOAT_SUM = 2**53  # integer sums below this are exact in float64 (np.bincount weights)


@dataclass(frozen=True, eq=False)
class SimSummary:
    """What a simulation of a plan sums up to; arrays hold one entry per rank (int64 bytes).

    The methods return plain lists and dicts shaped like the :class:`~edu_parallel.core.trace.Trace`
    summaries of the same name, so both paths compare with ``==``.
    """

    name: str
    collective: str
    world_size: int
    nbytes: int  # each rank's buffer, rounded down to whole elements (as the trace's meta)
    dtype: str
    chunk_bytes: np.ndarray
    sent: np.ndarray
    recv: np.ndarray
    sent_by_phase: dict[str, np.ndarray]
    recv_by_phase: dict[str, np.ndarray]
    steps_by_phase: dict[str, int]
    messages: np.ndarray
    time_s: float | None = None  # modelled duration; None without a cost model
    finish_s: np.ndarray | None = None  # when each rank's last step ends
    cost_model: dict[str, Any] | None = None
    timed_by: str | None = None  # "columns", or "events" when some message may take zero time

    def sent_bytes(self, per_phase: bool = False) -> list[int] | dict[str, list[int]]:
        """Bytes each rank sent: a list per rank, or ``{phase: list}`` (as ``Trace.sent_bytes``)."""
        return _lists(self.sent_by_phase) if per_phase else self.sent.tolist()

    def recv_bytes(self, per_phase: bool = False) -> list[int] | dict[str, list[int]]:
        """Bytes each rank received: a list per rank, or ``{phase: list}``."""
        return _lists(self.recv_by_phase) if per_phase else self.recv.tolist()

    def steps_per_phase(self) -> dict[str, int]:
        """How many steps with at least one transfer each phase took."""
        return dict(self.steps_by_phase)

    def message_counts(self) -> list[int]:
        """Messages each rank sent."""
        return self.messages.tolist()

    def to_json_dict(self) -> dict[str, Any]:
        """Everything as JSON-ready lists, dicts, ints and floats (``json.dumps`` takes it)."""
        return {
            "name": self.name,
            "collective": self.collective,
            "world_size": self.world_size,
            "nbytes": self.nbytes,
            "dtype": self.dtype,
            "chunk_bytes": self.chunk_bytes.tolist(),
            "sent_bytes": self.sent_bytes(),
            "recv_bytes": self.recv_bytes(),
            "sent_bytes_per_phase": self.sent_bytes(per_phase=True),
            "recv_bytes_per_phase": self.recv_bytes(per_phase=True),
            "steps_per_phase": self.steps_per_phase(),
            "message_counts": self.message_counts(),
            "time_s": self.time_s,
            "finish_s": None if self.finish_s is None else self.finish_s.tolist(),
            "cost_model": self.cost_model,
            "timed_by": self.timed_by,
        }


def _lists(by_phase: dict[str, np.ndarray]) -> dict[str, list[int]]:
    return {p: v.tolist() for p, v in by_phase.items()}


def chunk_bytes_for(num_chunks: int, nbytes: int, dtype: str = "float32") -> np.ndarray:
    """Bytes of each chunk, as :func:`~edu_parallel.models.simulation.simulate` cuts the buffer: the
    first ``numel % num_chunks`` chunks hold one element more (``chunk_bounds``)."""
    numel = numel_for(nbytes, dtype)
    base, extra = divmod(numel, num_chunks)
    sizes = base + (np.arange(num_chunks, dtype=np.int64) < extra)
    return sizes * DTYPES[dtype]


def _sum_by(keys: np.ndarray, row_bytes: np.ndarray, size: int, total: int) -> np.ndarray:
    """Exact int64 sums of ``row_bytes`` grouped by ``keys`` in ``[0, size)``."""
    if total < EXACT_FLOAT_SUM:  # every partial sum is an integer below 2**53: exact
        return np.bincount(keys, weights=row_bytes, minlength=size).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, keys, row_bytes)
    return out


def _contended_step(
    clock: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    chunk: np.ndarray,
    msg_s: np.ndarray,
    comp_s: np.ndarray,
    ports: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    """Time one step message by message with retime's port rules; update ``clock`` in place.
    ``ports``: each message's outgoing and incoming port (default: its ranks')."""
    s, d, c = src.tolist(), dst.tolist(), chunk.tolist()
    po, pi = (s, d) if ports is None else (ports[0].tolist(), ports[1].tolist())
    msg, comp = msg_s.tolist(), comp_s.tolist()
    ready_t = np.maximum(clock[src], clock[dst]).tolist()
    m = len(s)
    arrivals = sorted(range(m), key=lambda k: (ready_t[k], s[k], d[k], c[k], k))
    end = [0.0] * m
    ends: list[tuple[float, int]] = []
    ready: list[tuple[float, int, int, int, int]] = []
    busy_out: set[int] = set()
    busy_in: set[int] = set()
    p = 0
    while p < m or ends:
        now = min(ready_t[arrivals[p]] if p < m else math.inf, ends[0][0] if ends else math.inf)
        while ends and ends[0][0] == now:
            k = heapq.heappop(ends)[1]
            busy_out.discard(po[k])
            busy_in.discard(pi[k])
        while p < m and ready_t[arrivals[p]] == now:
            k = arrivals[p]
            heapq.heappush(ready, (now, s[k], d[k], c[k], k))
            p += 1
        blocked = []
        while ready:  # start every ready message whose two ports are free, in key order
            item = heapq.heappop(ready)
            k = item[-1]
            if po[k] in busy_out or pi[k] in busy_in:
                blocked.append(item)
                continue
            busy_out.add(po[k])
            busy_in.add(pi[k])
            end[k] = now + msg[k]
            heapq.heappush(ends, (end[k], k))
        for item in blocked:
            heapq.heappush(ready, item)
    last: dict[int, float] = {}
    reduced: dict[int, float] = {}  # a rank's last recv, then its reductions
    for k in range(m):
        last[s[k]] = max(last.get(s[k], -math.inf), end[k])
        last[d[k]] = max(last.get(d[k], -math.inf), end[k])
        reduced[d[k]] = max(reduced.get(d[k], -math.inf), end[k])
    for k in range(m):  # reductions one after another, in the step's order, once all recvs are in
        reduced[d[k]] = reduced[d[k]] + comp[k]
    for r, t in last.items():
        clock[r] = max(t, reduced.get(r, -math.inf))


def _message_s(arrays: PlanArrays, row_bytes: np.ndarray, model: CostModel) -> np.ndarray:
    """Each row's message time, on ``model.link`` or, with a topology, intra- or inter-node."""
    topology = getattr(model, "topology", None)
    if topology is None:
        return model.link.alpha_s + row_bytes / model.link.bandwidth_Bps
    topology.check_world_size(arrays.world_size, "world_size")
    g, intra, inter = topology.gpus_per_node, topology.intra, topology.inter
    return np.where(
        arrays.src // g == arrays.dst // g,
        intra.alpha_s + row_bytes / intra.bandwidth_Bps,
        inter.alpha_s + row_bytes / inter.bandwidth_Bps,
    )


def _ports(arrays: PlanArrays, model: CostModel) -> tuple[np.ndarray, np.ndarray] | None:
    """Each row's outgoing and incoming port, numbered as ``Topology.ports``; None when a NIC
    serves two ranks that use it (a port then carries several ranks' steps: events only)."""
    src, dst = arrays.src, arrays.dst
    topology = getattr(model, "topology", None)
    if topology is None:
        return src, dst
    n, g, c = arrays.world_size, topology.gpus_per_node, topology.nics_per_node
    same = src // g == dst // g
    out = np.where(same, src, n + (src // g) * c + (src % g) % c)
    into = np.where(same, dst, n + (dst // g) * c + (dst % g) % c)
    if c < g:
        for port, rank in ((out, src), (into, dst)):
            pairs = np.unique(np.stack([port[~same], rank[~same]]), axis=1)
            if pairs.size and np.bincount(pairs[0]).max() > 1:
                return None
    return out, into


def finish_times(arrays: PlanArrays, row_bytes: np.ndarray, model: CostModel) -> np.ndarray | None:
    """When each rank's last step ends under ``model`` (0 for ranks that never take part), or
    None when some message could take zero time or two ranks share a NIC that they use: then
    only the event path is exact."""
    clock = np.zeros(arrays.world_size)
    msg_s = _message_s(arrays, row_bytes, model)
    ports = _ports(arrays, model)
    if ports is None:
        return None
    if model.reduce_Bps:
        comp_s = np.where(arrays.op == OP_REDUCE, row_bytes / model.reduce_Bps, 0.0)
    else:
        comp_s = np.zeros(len(row_bytes))
    # No clock moves by less than the shortest message: the longest schedule is at most every
    # message and reduction one after another, and 2**-50 of that is above any clock's rounding.
    if len(msg_s) and not msg_s.min() * 2.0**50 > msg_s.sum() + comp_s.sum():
        return None
    offsets = arrays.step_offsets().tolist()
    src, dst = arrays.src, arrays.dst
    for a, b in zip(offsets[:-1], offsets[1:], strict=True):
        if a == b:
            continue
        s, d = src[a:b], dst[a:b]
        if np.bincount(s).max() <= 1 and np.bincount(d).max() <= 1:
            end = np.maximum(clock[s], clock[d]) + msg_s[a:b]
            clock[s] = end  # a sender's step ends with its one send...
            # ...or later, with its one recv and reduce (clock[d] is its send's end, or the start).
            clock[d] = np.maximum(clock[d], end + comp_s[a:b])
        else:
            step_ports = (ports[0][a:b], ports[1][a:b])
            _contended_step(clock, s, d, arrays.chunk[a:b], msg_s[a:b], comp_s[a:b], step_ports)
    return clock


def _time_by_events(
    arrays: PlanArrays, nbytes: int, dtype: str, model: CostModel
) -> tuple[np.ndarray, float]:
    """Per-rank finish times and duration from ``retime(simulate(plan))`` (slow, always exact)."""
    trace = retime(simulate(arrays.to_plan(), nbytes, dtype, with_data=False)[0], model)
    finish = np.zeros(arrays.world_size)
    for e in trace.events:
        finish[e.rank] = max(finish[e.rank], e.end)
    return finish, trace.duration


def simulate_fast(
    plan_or_arrays: Plan | PlanArrays,
    nbytes: int,
    dtype: str = "float32",
    model: CostModel | None = None,
) -> SimSummary:
    """Bytes, steps, messages and (with ``model``) modelled time of a plan, without events.

    Takes a :class:`Plan` (converted with :meth:`PlanArrays.from_plan`) or, for big world sizes,
    a :class:`PlanArrays` such as :func:`~edu_parallel.plans.arrays.ring_allreduce_arrays`.
    ``nbytes`` is each rank's buffer, cut into chunks as
    :func:`~edu_parallel.models.simulation.simulate` does. See the module docstring for the time
    model.
    """
    if isinstance(plan_or_arrays, Plan):
        arrays = PlanArrays.from_plan(plan_or_arrays)
    elif isinstance(plan_or_arrays, PlanArrays):
        arrays = plan_or_arrays
    else:
        raise bad_value("plan_or_arrays", type(plan_or_arrays).__name__, "a Plan or PlanArrays")
    check_int("nbytes", nbytes, 1)
    check_dtype(dtype)
    if model is not None and not isinstance(model, CostModel):
        raise bad_value("model", model, "a CostModel, e.g. cost_model('nvlink4-h100') or None")
    n = arrays.world_size
    chunk_bytes = chunk_bytes_for(arrays.num_chunks, nbytes, dtype)
    row_bytes = chunk_bytes[arrays.chunk]
    total = int(np.bincount(arrays.chunk, minlength=arrays.num_chunks) @ chunk_bytes)

    per_step = np.diff(arrays.step_offsets())
    busy_steps = np.flatnonzero(per_step).tolist()
    phase_ids: dict[str, int] = {}  # in order of first appearance, as the trace's dicts
    for i in busy_steps:
        phase_ids.setdefault(arrays.phases[i], len(phase_ids))
    step_phase = np.array([phase_ids.get(p, -1) for p in arrays.phases], dtype=np.int64)
    n_phases = len(phase_ids)
    row_phase = step_phase[arrays.step]
    steps = np.bincount(step_phase[busy_steps], minlength=n_phases).tolist()

    def by_phase(ranks: np.ndarray) -> dict[str, np.ndarray]:
        flat = _sum_by(row_phase * n + ranks, row_bytes, n_phases * n, total)
        return {p: flat[i * n : (i + 1) * n] for p, i in phase_ids.items()}

    finish, time_s, timed_by = None, None, None
    if model is not None:
        finish, timed_by = finish_times(arrays, row_bytes, model), "columns"
        if finish is not None:
            time_s = float(finish.max()) if arrays.num_rows else 0.0
        else:
            finish, time_s, timed_by = *_time_by_events(arrays, nbytes, dtype, model), "events"
    return SimSummary(
        name=arrays.name,
        collective=arrays.collective,
        world_size=n,
        nbytes=numel_for(nbytes, dtype) * DTYPES[dtype],
        dtype=dtype,
        chunk_bytes=chunk_bytes,
        sent=_sum_by(arrays.src, row_bytes, n, total),
        recv=_sum_by(arrays.dst, row_bytes, n, total),
        sent_by_phase=by_phase(arrays.src),
        recv_by_phase=by_phase(arrays.dst),
        steps_by_phase=dict(zip(phase_ids, steps, strict=True)),
        messages=np.bincount(arrays.src, minlength=n).astype(np.int64),
        time_s=time_s,
        finish_s=finish,
        timed_by=timed_by,
        cost_model=(
            None
            if model is None
            else {
                **asdict(model.link),
                "reduce_Bps": model.reduce_Bps,
                "compute_Bps": model.compute_Bps,
                **(
                    {"topology": asdict(model.topology)} if getattr(model, "topology", None) else {}
                ),
            }
        ),
    )
