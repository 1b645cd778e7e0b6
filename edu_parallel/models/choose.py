"""Choose an all-reduce algorithm the way NCCL does: predict each candidate's time, take the least.

NCCL's tuner (``src/graph/tuning.cc``) keeps, per collective, algorithm and protocol, a latency
and a bandwidth, and picks the smallest ``latency + bytes / bandwidth`` for each call. The ring's
latency counts ``2(n-1)`` steps, the tree's ``2·log2`` levels, so tiny messages on many ranks go
to the tree; the ring moves the least data per rank (``2(n-1)/n·S``), so bandwidth-bound
messages go to the ring (errata E9: the choice is per message size and topology, not "tree for
cross-node, ring for large clusters"). :func:`choose_allreduce` does the same with
:func:`~edu_parallel.models.cost.predict`; :func:`crossover_size` finds where two algorithms cost
the same, by bisection. Formulas after Thakur, Rabenseifner & Gropp 2005. Given a
:class:`~edu_parallel.models.nccl.tuning.NcclSystem` instead, it answers with NCCL's own (algorithm,
protocol) from NCCL 2.30.7's tuning model (:func:`~edu_parallel.models.nccl.selection.nccl_choose`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import bad_value, check_int, one_of
from ..core.i18n import _
from ..core.units import format_bytes
from .cost import ALLREDUCE_ALGOS, NAME_ALIASES, Prediction, predict
from .nccl.selection import nccl_choose
from .nccl.tuning import NcclSystem
from .topology import Topology

CANDIDATES = ("ring", "tree", "double-tree")
CROSSOVER_RANGE = (1.0, float(1 << 50))  # 1 B .. 1 PiB


@dataclass(frozen=True)
class Choice:
    """The fastest candidate, why, and every candidate's predicted seconds (for an NCCL system:
    NCCL's algorithm, its protocol in ``proto``, times keyed ``"Ring/LL"``, no predictions)."""

    algo: str
    reason: str
    times: dict[str, float]
    predictions: dict[str, Prediction] = field(repr=False)
    proto: str = ""


def _micro(t: float) -> str:
    return f"{t * 1e6:.3g} µs" if t < 1e-3 else f"{t * 1e3:.3g} ms"


def choose_allreduce(
    nbytes: float,
    world_size: int,
    topology_or_link: Any,
    candidates: tuple[str, ...] | None = None,
    *,
    nccl_algo: str | None = None,
    nccl_proto: str | None = None,
) -> Choice:
    """The candidate with the least predicted time for ``nbytes`` per rank on ``world_size`` ranks.

    ``candidates`` default to ring, tree and double-tree, plus hierarchical when a
    :class:`~edu_parallel.models.topology.Topology` has several nodes of several ranks. With an
    :class:`~edu_parallel.models.nccl.tuning.NcclSystem`: NCCL's (algorithm, protocol), limited by
    ``nccl_algo`` / ``nccl_proto`` (the values of ``NCCL_ALGO`` / ``NCCL_PROTO``).
    """
    n = check_int("world_size", world_size, 1)
    if isinstance(topology_or_link, NcclSystem):
        return _nccl_choice(nbytes, n, topology_or_link, candidates, nccl_algo, nccl_proto)
    if nccl_algo is not None or nccl_proto is not None:
        raise bad_value(
            "nccl_algo/nccl_proto",
            f"{nccl_algo}/{nccl_proto}",
            "None unless an NcclSystem is given",
        )
    if candidates is None:
        candidates = CANDIDATES
        topo = topology_or_link
        if isinstance(topo, Topology) and topo.nodes > 1 and topo.gpus_per_node > 1:
            candidates += ("hierarchical",)
    names = [NAME_ALIASES.get(c, c) for c in candidates]
    if not names or any(c not in ALLREDUCE_ALGOS for c in names):
        raise bad_value(
            "candidates", candidates, "a non-empty tuple of " + ", ".join(ALLREDUCE_ALGOS)
        )
    preds = {c: predict(c, n, nbytes, topology_or_link) for c in names}
    ranked = sorted(names, key=lambda c: (preds[c].time_s, names.index(c)))
    best = preds[ranked[0]]
    head = (_("{name}: {size} on {n} ranks") if n != 1 else _("{name}: {size} on {n} rank")).format(
        name=best.name, size=format_bytes(best.nbytes), n=n
    )
    if n == 1 or len(ranked) == 1:
        return Choice(
            best.name,
            _("{head}: nothing to compare").format(head=head),
            {c: p.time_s for c, p in preds.items()},
            preds,
        )
    # compare with the ring when something else wins (the NCCL question), else with the runner-up
    other = preds["ring"] if best.name != "ring" and "ring" in preds else preds[ranked[1]]
    latency_bound = best.latency_s >= best.bandwidth_s + best.compute_s
    reason = (
        _(
            "{head} is latency-bound ({alpha} of α terms, {sb} of S/B terms); predicted {time}"
            " against {other}'s {other_time}."
        )
        if latency_bound
        else _(
            "{head} is bandwidth-bound ({alpha} of α terms, {sb} of S/B terms); predicted {time}"
            " against {other}'s {other_time}."
        )
    ).format(
        head=head,
        alpha=_micro(best.latency_s),
        sb=_micro(best.bandwidth_s),
        time=_micro(best.time_s),
        other=other.name,
        other_time=_micro(other.time_s),
    )
    if best.latency_s < other.latency_s:
        reason = _(
            "{reason} Its α terms are {best} against {other}: ring latency grows with n"
            " (2(n-1)·α), a tree's with log2 n (2⌈log2 n⌉·α; across nodes with log2 of the nodes,"
            " a chain inside each)"
        ).format(reason=reason, best=_micro(best.latency_s), other=_micro(other.latency_s))
    else:
        reason = _(
            "{reason} Its S/B terms are {best} against {other}: bandwidth-bound messages favour"
            " the algorithm that moves the least per rank, the ring's 2(n-1)/n·S"
        ).format(reason=reason, best=_micro(best.bandwidth_s), other=_micro(other.bandwidth_s))
    try:
        cross = crossover_size(n, topology_or_link, best.name, other.name)
        reason = _("{reason}; the two cross at {size}").format(
            reason=reason, size=format_bytes(cross)
        )
    except ValueError:
        pass
    reason = _(
        "{reason} (NCCL src/graph/tuning.cc picks per size from such a model; errata E9)"
    ).format(reason=reason)
    return Choice(best.name, reason, {c: p.time_s for c, p in preds.items()}, preds)


def _nccl_choice(
    nbytes: float,
    n: int,
    system: NcclSystem,
    candidates: tuple[str, ...] | None,
    nccl_algo: str | None,
    nccl_proto: str | None,
) -> Choice:
    system.topology.check_world_size(n)
    if candidates is not None:
        raise bad_value("candidates", candidates, "None with an NcclSystem (use nccl_algo)")
    c = nccl_choose("all_reduce", nbytes, system, nccl_algo, nccl_proto)
    times = {f"{a}/{p}": t.time_us * 1e-6 for (a, p), t in c.times.items()}
    return Choice(c.algo, c.reason, times, {}, c.proto)


def crossover_size(world_size: int, link: Any, a: str = "ring", b: str = "tree") -> float:
    """Bytes per rank where ``a`` and ``b`` have equal predicted time, by bisection between 1 B and
    1 PiB. Raises ValueError when one of them is faster at every size in that range."""
    n = check_int("world_size", world_size, 2)
    for param, value in (("a", a), ("b", b)):
        if NAME_ALIASES.get(value, value) not in ALLREDUCE_ALGOS:
            raise bad_value(param, value, one_of(ALLREDUCE_ALGOS))

    def gap(s: float) -> float:
        return predict(a, n, s, link).time_s - predict(b, n, s, link).time_s

    lo, hi = CROSSOVER_RANGE
    g_lo, g_hi = gap(lo), gap(hi)
    if g_lo == 0.0:
        return lo
    if (g_lo > 0) == (g_hi > 0) or g_hi == 0.0:
        faster = a if g_lo < 0 else b
        raise bad_value(
            "world_size",
            world_size,
            f"one where {a!r} and {b!r} cross between 1 B and 1 PiB (here {faster!r} is faster at"
            " every size)",
        )
    for _step in range(200):  # geometric bisection: sizes span 15 decades
        mid = (lo * hi) ** 0.5 if hi / lo > 4 else (lo + hi) / 2
        g_mid = gap(mid)
        if g_mid == 0.0:
            return mid
        if (g_mid > 0) == (g_lo > 0):
            lo, g_lo = mid, g_mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return (lo + hi) / 2
