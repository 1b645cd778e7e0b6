"""Retime a trace with an alpha-beta cost model: the same causal graph, timed as a link would.

A laptop with two cores cannot show how a run overlaps on eight GPUs, but the trace records what
every rank did and who waited for whom. :func:`retime` replays that graph in a deterministic
discrete-event simulation where one message of ``S`` bytes takes ``alpha + S / bandwidth``
(Hockney's model) and every rank has one outgoing and one incoming port (full duplex): messages
sharing a port queue up, so a root that receives from everyone shows its serialization.

Rules (per rank, events in program order = recorded ``start``, then index):

* consecutive send/recv/compute events with the same non-None ``step`` are one group: its sends
  and recvs are posted together when the group starts, its compute events run one after another
  once all its recvs are in, and the group ends when all of that is done. Events with step None
  are groups of their own. A group starts when the rank's previous group ends (the first at 0);
* a message starts once both its send and its recv are posted and both ports are free (ready
  messages start in order of (ready time, src, dst, tag)); its send and recv get its interval;
* the k-th ``collective`` event of every rank is one collective, starting when the last rank
  posts it, lasting :func:`collective_time`;
* ``memory`` and ``mark`` events take no time: inside a group at the group's start, else at the
  rank's clock between groups.

With a :class:`~edu_parallel.models.topology.Topology` in the model, a message from ``src`` to
``dst`` takes ``topology.link(src, dst)``'s time (intra- or inter-node) and queues on
``topology.ports(src, dst)`` instead of the ranks' ports: inside a node the ranks' own ports on the
intra-node link, across nodes a NIC of each node (NIC ``j`` serves local ranks ``l % nics == j``),
so ranks that share a NIC wait for each other and a rank can send inside and across nodes at once.
Collectives use ``model.link``.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.errors import bad_value, check_choice, check_int, check_non_negative, check_positive
from ..core.trace import Event, Trace
from .topology import LINKS, Link, Topology

_P2P = ("send", "recv", "compute")


@dataclass(frozen=True)
class CostModel:
    """A link, plus optional compute rates: ``reduce`` compute events take ``nbytes / reduce_Bps``,
    other compute events ``nbytes / compute_Bps`` (None: they take no time). With ``topology`` (a
    :class:`~edu_parallel.models.topology.Topology`) each message uses ``topology.link(src, dst)``.
    """

    link: Link
    reduce_Bps: float | None = None
    compute_Bps: float | None = None
    topology: Topology | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.link, Link):
            raise bad_value("link", self.link, "a Link, e.g. LINKS['nvlink4-h100']")
        for name in ("reduce_Bps", "compute_Bps"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_positive(name, getattr(self, name)))
        if self.topology is not None:
            if not isinstance(self.topology, Topology):
                raise bad_value(
                    "topology",
                    self.topology,
                    "None or a Topology(nodes, gpus_per_node, intra, inter)",
                )

    def message_s(self, src: int, dst: int, nbytes: float) -> float:
        """One message: on ``topology.link(src, dst)`` with a topology, else on ``link``."""
        link = self.link if self.topology is None else self.topology.link(src, dst)
        return link.message_s(nbytes)

    def compute_s(self, event: Event) -> float:
        rate = self.reduce_Bps if event.op == "reduce" else self.compute_Bps
        return abs(event.nbytes) / rate if rate else 0.0


def cost_model(
    name_or_link: Any, reduce_Bps: float | None = None, compute_Bps: float | None = None
) -> CostModel:
    """A :class:`CostModel` from a preset name of :data:`LINKS`, a :class:`Link`, or a
    :class:`~edu_parallel.models.topology.Topology` (its :meth:`bottleneck` link times collectives).
    """
    if isinstance(name_or_link, Topology):
        return CostModel(name_or_link.bottleneck(), reduce_Bps, compute_Bps, name_or_link)
    if not isinstance(name_or_link, Link):
        name_or_link = LINKS[check_choice("name_or_link", name_or_link, LINKS)]
    return CostModel(name_or_link, reduce_Bps, compute_Bps)


def collective_time(op: str, world_size: int, nbytes: float, model: CostModel) -> float:
    """Time of one built-in collective on ``n`` ranks, ``S = nbytes`` (each rank's buffer; for
    all_gather the gathered output), ring algorithms of Thakur, Rabenseifner & Gropp (2005),
    "Optimization of Collective Communication Operations in MPICH":

    * all_reduce: ``2(n-1) alpha + 2(n-1)/n S/bw`` (+ ``(n-1)/n S/reduce_Bps``), as
      :func:`ring_allreduce_time`;
    * all_gather: ``(n-1) alpha + (n-1)/n S/bw``; reduce_scatter the same (+ the reduce term);
    * broadcast, reduce: a pipelined ring, approximated by ``(n-1) alpha + S/bw`` (the pipeline
      fill costs latency only; compute of a reduce is assumed hidden in the pipeline);
    * barrier: ``ceil(log2 n) alpha`` (dissemination); any other op: ``alpha + S/bw``.

    One rank moves nothing: 0 for every op.
    """
    n = check_int("world_size", world_size, 1)
    a, bw, s = model.link.alpha_s, model.link.bandwidth_Bps, float(nbytes)
    if n == 1:
        return 0.0
    red = (n - 1) / n * s / model.reduce_Bps if model.reduce_Bps else 0.0
    if op == "all_reduce":
        return ring_allreduce_time(n, s, model)
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) * a + (n - 1) / n * s / bw + (red if op == "reduce_scatter" else 0.0)
    if op in ("broadcast", "reduce"):
        return (n - 1) * a + s / bw
    if op == "barrier":
        return math.ceil(math.log2(n)) * a
    return a + s / bw


def ring_allreduce_time(world_size: int, nbytes: float, model: CostModel) -> float:
    """Ring all-reduce of ``D`` bytes on ``N`` ranks: ``2(N-1) (alpha + (D/N)/bw)``, plus
    ``(N-1) (D/N)/reduce_Bps`` when reduces cost time (Patarasuk & Yuan 2009; Thakur et al. 2005).
    """
    n = check_int("world_size", world_size, 1)
    c = check_non_negative("nbytes", nbytes) / n
    t = 2 * (n - 1) * (model.link.alpha_s + c / model.link.bandwidth_Bps)
    return t + ((n - 1) * c / model.reduce_Bps if model.reduce_Bps else 0.0)


def naive_allreduce_time(world_size: int, nbytes: float, model: CostModel) -> float:
    """Naive all-reduce: the root receives ``N-1`` messages of ``D`` bytes one after another on
    its incoming port, reduces them, then sends ``N-1`` on its outgoing port:
    ``2(N-1) (alpha + D/bw)``, plus ``(N-1) D/reduce_Bps`` when reduces cost time."""
    n = check_int("world_size", world_size, 1)
    d = check_non_negative("nbytes", nbytes)
    t = 2 * (n - 1) * model.link.message_s(d)
    return t + ((n - 1) * d / model.reduce_Bps if model.reduce_Bps else 0.0)


@dataclass
class _Group:
    kind: str  # "p2p", "collective" or "instant"
    members: list[int]
    step: int | None = None
    instants: list[int] = field(default_factory=list)  # zero-time events inside a p2p group
    left: int = 0  # messages of the group not finished
    recvs_left: int = 0
    compute_end: float = 0.0


def _groups(events: list[Event]) -> dict[int, list[_Group]]:
    order: dict[int, list[int]] = defaultdict(list)
    for i, e in enumerate(events):
        order[e.rank].append(i)
    out: dict[int, list[_Group]] = {}
    for r in sorted(order):
        groups: list[_Group] = []
        cur: _Group | None = None
        loose: list[int] = []
        for i in sorted(order[r], key=lambda i: (events[i].start, i)):
            e = events[i]
            if e.kind in _P2P:
                if cur is not None and e.step is not None and e.step == cur.step:
                    cur.instants += loose
                else:
                    groups += [_Group("instant", [j]) for j in loose]
                    cur = _Group("p2p", [], e.step)
                    groups.append(cur)
                cur.members.append(i)
                loose = []
            elif e.kind == "collective":
                groups += [_Group("instant", [j]) for j in loose] + [_Group("collective", [i])]
                cur, loose = None, []
            else:
                loose.append(i)
        out[r] = groups + [_Group("instant", [j]) for j in loose]
    return out


def _check_matched(events: list[Event]) -> None:
    balance: Counter = Counter()
    for e in events:
        if e.kind in ("send", "recv"):
            key = (e.rank, e.peer, e.tag) if e.kind == "send" else (e.peer, e.rank, e.tag)
            balance[key] += 1 if e.kind == "send" else -1
    for (src, dst, tag), d in sorted(balance.items(), key=str):
        if d > 0:
            raise ValueError(
                f"trace is not valid for retime: {d} send(s) r{src}->r{dst} tag {tag} have no"
                f" matching recv on rank {dst}"
            )
        if d < 0:
            raise ValueError(
                f"trace is not valid for retime: {-d} recv(s) on rank {dst} from r{src} tag {tag}"
                f" have no matching send on rank {src}"
            )


def retime(trace: Trace, model: CostModel) -> Trace:
    """The trace with every event timed by ``model`` (seconds from 0); see the module docstring.

    Returns a new trace (same events, order, snapshots and meta, plus ``retimed_with``,
    ``time_unit="s"``, ``source="retime"``, ``retimed_from`` and ``cost_model``). Raises
    ValueError for unmatched messages or collectives, or a graph that deadlocks under these rules.
    """
    if not isinstance(model, CostModel):
        raise bad_value("model", model, "a CostModel, e.g. cost_model('nvlink4-h100')")
    events = trace.events
    if model.topology is not None:
        model.topology.check_world_size(trace.world_size, "trace.world_size")
    _check_matched(events)
    index = {id(e): i for i, e in enumerate(events)}
    msgs = [(index[id(s)], index[id(r)]) for s, r in trace.matched_transfers()]
    msg_of = {i: m for m, pair in enumerate(msgs) for i in pair}
    topo = model.topology
    port_of = [
        (events[s].rank, events[r].rank)
        if topo is None
        else topo.ports(events[s].rank, events[r].rank)
        for s, r in msgs
    ]
    posted = [0] * len(msgs)
    groups = _groups(events)
    colls = {r: [g.members[0] for g in gs if g.kind == "collective"] for r, gs in groups.items()}
    colls = {r: c for r, c in colls.items() if c}
    if len({len(c) for c in colls.values()}) > 1:
        counts = ", ".join(f"rank {r}: {len(c)}" for r, c in colls.items())
        raise ValueError(
            "trace is not valid for retime: ranks record different numbers of collective events"
            f" ({counts})"
        )
    for k, ks in enumerate(zip(*colls.values(), strict=True)):
        if len({events[i].op for i in ks}) > 1:
            raise ValueError(
                f"trace is not valid for retime: collective #{k} has different ops on different"
                f" ranks: {sorted({events[i].op for i in ks})}"
            )
    coll_k = {i: k for c in colls.values() for k, i in enumerate(c)}
    coll_posted: dict[int, list[int]] = defaultdict(list)

    times: list[tuple[float, float]] = [(0.0, 0.0)] * len(events)
    at = dict.fromkeys(groups, 0)  # current group per rank
    heap: list[tuple[float, int, str, int]] = []
    ready: list[tuple[float, int, int, int, int]] = []
    busy_out: set[int] = set()
    busy_in: set[int] = set()
    seq = 0

    def push(t: float, what: str, x: int) -> None:
        nonlocal seq
        heapq.heappush(heap, (t, seq, what, x))
        seq += 1

    def run_computes(g: _Group, t: float) -> None:
        for i in g.members:
            if events[i].kind == "compute":
                times[i] = (t, t := t + model.compute_s(events[i]))
        g.compute_end = t

    def start_group(r: int, t: float) -> None:
        if at[r] == len(groups[r]):
            return
        g = groups[r][at[r]]
        if g.kind == "instant":
            times[g.members[0]] = (t, t)
            push(t, "done", r)
        elif g.kind == "collective":
            k = coll_k[g.members[0]]
            coll_posted[k].append(r)
            if len(coll_posted[k]) == len(colls):
                ks = [colls[q][k] for q in coll_posted[k]]
                s = max(events[i].nbytes for i in ks)
                end = t + collective_time(events[ks[0]].op, len(colls), s, model)
                for q, i in zip(coll_posted[k], ks, strict=True):
                    times[i] = (t, end)
                    push(end, "done", q)
        else:
            for i in g.instants:
                times[i] = (t, t)
            comm = [i for i in g.members if events[i].kind != "compute"]
            g.left, g.recvs_left = len(comm), sum(events[i].kind == "recv" for i in comm)
            for i in comm:
                m = msg_of[i]
                posted[m] += 1
                if posted[m] == 2:
                    s, rv = events[msgs[m][0]], events[msgs[m][1]]
                    heapq.heappush(ready, (t, s.rank, rv.rank, -1 if s.tag is None else s.tag, m))
            if g.recvs_left == 0:
                run_computes(g, t)
            if g.left == 0:
                push(g.compute_end, "done", r)

    def end_message(m: int, t: float) -> None:
        s_i, r_i = msgs[m]
        src, dst = events[s_i].rank, events[r_i].rank
        busy_out.discard(port_of[m][0])
        busy_in.discard(port_of[m][1])
        times[r_i] = (times[s_i][0], t)
        times[s_i] = times[r_i]
        for rank, is_recv in ((src, False), (dst, True)):
            g = groups[rank][at[rank]]
            g.left -= 1
            if is_recv:
                g.recvs_left -= 1
                if g.recvs_left == 0:
                    run_computes(g, t)
            if g.left == 0:
                push(max(t, g.compute_end), "done", rank)

    for r in groups:
        push(0.0, "start", r)
    while heap:
        now = heap[0][0]
        while heap and heap[0][0] == now:
            _, _, what, x = heapq.heappop(heap)
            if what == "end":
                end_message(x, now)
            else:
                if what == "done":
                    at[x] += 1
                start_group(x, now)
        blocked = []
        while ready:  # start every ready message whose two ports are free, in key order
            item = heapq.heappop(ready)
            _, src, dst, _, m = item
            out_port, in_port = port_of[m]
            if out_port in busy_out or in_port in busy_in:
                blocked.append(item)
                continue
            busy_out.add(out_port)
            busy_in.add(in_port)
            times[msgs[m][0]] = (now, now)
            push(now + model.message_s(src, dst, events[msgs[m][0]].nbytes), "end", m)
        for item in blocked:
            heapq.heappush(ready, item)

    stuck = [r for r, gs in groups.items() if at[r] < len(gs)]
    if stuck:
        where = "; ".join(
            f"rank {r} at {events[groups[r][at[r]].members[0]].line()}" for r in stuck
        )
        raise ValueError(
            "trace cannot be retimed: it deadlocks when each group's sends wait for their recvs"
            f" ({where}); give events that overlap the same step"
        )
    return trace.with_times(
        times,
        retimed_with=model.link.name,
        time_unit="s",
        source="retime",
        retimed_from=trace.meta.get("source"),
        cost_model={
            **asdict(model.link),
            "reduce_Bps": model.reduce_Bps,
            "compute_Bps": model.compute_Bps,
            **({"topology": asdict(model.topology)} if model.topology is not None else {}),
        },
    )


def per_rank_busy(trace: Trace) -> list[float]:
    """Seconds (or trace time units) each rank spent in send/recv/collective/compute events,
    overlapping events counted once. ``trace.duration - busy`` is the rank's idle time."""
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for e in trace.events:
        if e.kind in ("send", "recv", "collective", "compute"):
            spans[e.rank].append((e.start, e.end))
    busy = [0.0] * trace.world_size
    for r, iv in spans.items():
        end = -math.inf
        for a, b in sorted(iv):
            if b > end:
                busy[r] += b - max(a, end)
                end = b
    return busy
