"""NCCL's choice of (algorithm, protocol) per call, and how a user forces one.

:func:`nccl_choose` times every (algorithm, protocol) that NCCL would run on a
:class:`~edu_parallel.models.nccl.tuning.NcclSystem` with
:func:`~edu_parallel.models.nccl.tuning.nccl_time` and takes the least, as ``topoGetAlgoInfo``
does in NCCL 2.30.7 ``src/enqueue.cc``. ``nccl_algo`` / ``nccl_proto`` take the strings of the
environment variables ``NCCL_ALGO`` and ``NCCL_PROTO`` (NCCL docs, "Environment Variables";
``parseList`` in ``src/graph/tuning.cc``): a comma list to allow (``Ring,Tree``), ``^`` to exclude
(``^LL128``), and per-collective entries after ``;`` (``"ring;allreduce:tree"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.errors import bad_value, check_choice
from ...core.i18n import _
from ...core.units import format_bytes
from . import constants as K
from .systems import nccl_system
from .tuning import NcclSystem, NcclTime, nccl_entry, nccl_time

# NCCL's function names in NCCL_ALGO / NCCL_PROTO prefixes (ncclFuncStr)
_FUNC_NAMES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
}


def parse_nccl_list(text: str, elements: tuple[str, ...], coll: str, param: str) -> set[str]:
    """The elements ``text`` (an ``NCCL_ALGO`` / ``NCCL_PROTO`` value) enables for ``coll``."""
    if not isinstance(text, str) or not text.strip():
        raise bad_value(param, text, "e.g. 'Ring', 'Tree,Ring', '^LL128' or 'ring;allreduce:tree'")
    enabled = set(elements)
    for i, entry in enumerate(text.split(";")):
        prefix, _, items = entry.rpartition(":")
        if prefix and prefix.lower() not in _FUNC_NAMES:
            raise bad_value(param, text, f"prefixes among {', '.join(_FUNC_NAMES)}")
        if not prefix and i > 0:
            raise bad_value(param, text, "every entry after the first has a 'function:' prefix")
        if prefix and _FUNC_NAMES[prefix.lower()] != coll:
            continue
        negate = items.startswith("^")
        names = set()
        for item in items.lstrip("^").split(","):
            match = [e for e in elements if e.lower() == item.strip().lower()]
            if not match:
                raise bad_value(param, text, f"names among {', '.join(elements)}")
            names.add(match[0])
        enabled = set(elements) - names if negate else names
    return enabled


@dataclass(frozen=True)
class NcclChoice:
    """NCCL's pick, ``reason`` saying which terms decided, every runnable candidate's time, and
    the (algo, proto) pairs NCCL would not run here, with why."""

    algo: str
    proto: str
    time_us: float
    reason: str
    times: dict[tuple[str, str], NcclTime] = field(repr=False)
    excluded: dict[tuple[str, str], str] = field(repr=False)


def _us(t: float) -> str:
    return f"{t:.3g} µs" if t < 1000 else f"{t / 1000:.3g} ms"


def nccl_choose(
    coll: str,
    nbytes: float,
    system: NcclSystem | str,
    nccl_algo: str | None = None,
    nccl_proto: str | None = None,
) -> NcclChoice:
    """The (algorithm, protocol) NCCL's tuner runs for ``coll`` of ``nbytes`` on ``system`` (an
    :class:`NcclSystem`, or the name of a preset of :data:`NCCL_SYSTEMS`)."""
    check_choice("coll", coll, K.COLLECTIVES)
    system = nccl_system(system)
    algos = (
        set(K.ALGOS)
        if nccl_algo is None
        else parse_nccl_list(nccl_algo, K.ALGOS, coll, "nccl_algo")
    )
    protos = (
        set(K.PROTOS)
        if nccl_proto is None
        else parse_nccl_list(nccl_proto, K.PROTOS, coll, "nccl_proto")
    )
    times: dict[tuple[str, str], NcclTime] = {}
    excluded: dict[tuple[str, str], str] = {}
    for a in K.ALGOS:
        for p in K.PROTOS:
            if a not in algos or p not in protos:
                excluded[(a, p)] = "disabled by NCCL_ALGO/NCCL_PROTO"
                continue
            try:
                nccl_entry(coll, a, p, system)
            except ValueError as exc:
                excluded[(a, p)] = str(exc).split("one NCCL runs here: ")[-1]
                continue
            times[(a, p)] = nccl_time(coll, a, p, nbytes, system)
    if not times:
        why = sorted({w for w in excluded.values() if w != "disabled by NCCL_ALGO/NCCL_PROTO"})
        raise bad_value(
            "nccl_algo/nccl_proto",
            f"{nccl_algo}/{nccl_proto}",
            f"a choice that leaves NCCL an algorithm for {coll} on {system.describe()}"
            + (f" (what was allowed cannot run: {'; '.join(why)})" if why else ""),
        )
    ranked = sorted(times.values(), key=lambda t: t.time_us)  # ties: NCCL's order (stable)
    best = ranked[0]
    reason = (
        _(
            "{pair}: {size} {collective} on {ranks} ranks ({nodes} nodes) = latency {latency} +"
            " bytes/bandwidth {bandwidth} ({gbps} GB/s)"
        )
        if system.nodes != 1
        else _(
            "{pair}: {size} {collective} on {ranks} ranks ({nodes} node) = latency {latency} +"
            " bytes/bandwidth {bandwidth} ({gbps} GB/s)"
        )
    ).format(
        pair=f"{best.algo}/{best.proto}",
        size=format_bytes(nbytes),
        collective=coll,
        ranks=system.ranks,
        nodes=system.nodes,
        latency=_us(best.latency_us),
        bandwidth=_us(best.bandwidth_us),
        gbps=f"{best.bandwidth_gbps:.4g}",
    )
    if len(ranked) > 1:
        other = ranked[1]
        lat_wins = best.latency_us < other.latency_us
        bw_wins = best.bandwidth_us < other.bandwidth_us
        decides = (
            _("its lower latency decides")
            if lat_wins and not bw_wins
            else _("its higher bandwidth decides")
            if bw_wins and not lat_wins
            else _("both terms are lower")
        )
        reason = _(
            "{reason}; runner-up {pair} {time} (latency {latency}, bandwidth {bandwidth}):"
            " {decides}"
        ).format(
            reason=reason,
            pair=f"{other.algo}/{other.proto}",
            time=_us(other.time_us),
            latency=_us(other.latency_us),
            bandwidth=_us(other.bandwidth_us),
            decides=decides,
        )
    reason = _("{reason} ({source})").format(reason=reason, source=K.NCCL_SOURCE)
    return NcclChoice(best.algo, best.proto, best.time_us, reason, times, excluded)
