"""Alpha-beta predictions: how long each all-reduce algorithm and each collective should take.

Hockney's model: one message of ``m`` bytes costs ``α + m/B`` (latency plus size over bandwidth);
a reduction costs ``γ = 1/reduce_Bps`` seconds per byte. :func:`predict` sums those terms the way
an algorithm pays them on ``n`` ranks with ``S`` bytes per rank, in the one-port, full-duplex
model of :func:`~edu_parallel.models.retiming.retime` (a rank sends one message and receives one at
a time):

    >>> p = predict("ring", 64, 1 << 30, "nvlink4-h100")
    >>> p.formula, p.latency_s, p.bandwidth_s, p.busbw_gbps

Formulas are those of Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective
Communication Operations in MPICH" (IJHPCA 19(1)), and of NCCL's tuner (NCCL 2.30.7
``src/graph/tuning.cc``: ring latency ``2(nRanks-1)`` steps, tree ``2·log2`` levels, tree algbw
``0.5·0.92·busBw``, the factors of :mod:`~edu_parallel.models.nccl.constants`).

How they relate to the retimed traces of this package's plans (``tests/test_costmodel.py``):
ring, naive, hierarchical, the ring all-gather and reduce-scatter, and the parameter server with
one server are equal to them; the binary tree is equal without reduction cost; the sharded
parameter server and Rabenseifner are lower bounds (retime's first-come port schedule can lose a
step to the optimum; the plan sends a block as one message per chunk); the double tree is NCCL's
pipelined model, which the unpipelined plan does not reach. Bandwidths follow nccl-tests.

Across nodes (a :class:`~edu_parallel.models.topology.Topology`), the ring runs as NCCL runs it:
one channel (ring) per NIC, each moving ``S/C`` and crossing nodes on its own NIC (NCCL 2.30.7
``src/graph/search.cc`` ``ncclTopoSearchRecNet``; ``tuning.cc``: ``busBw = nChannels * bw``), so
its bus bandwidth is bounded by ``NICs x inter`` and by ``intra``; its formula equals the retimed
:func:`~edu_parallel.plans.hierarchical.channel_ring_allreduce_plan`. ``"hierarchical"`` is the
reduce-scatter / per-NIC all-reduce / all-gather of
:func:`~edu_parallel.plans.hierarchical.hierarchical_allreduce_plan`, equal to its retimed trace
for any NIC count (``tests/test_hierarchical_nics.py``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..core.errors import bad_value, check_int, check_non_negative, check_positive, one_of
from ..core.i18n import N_, _
from ..core.metrics import bus_factor
from ..plans.collectives import CLI_NAMES
from ..plans.plan import COLLECTIVES
from .cost_topology import (
    WORDED_FORMULAS,
    Terms,
    channel_ring_terms,
    double_tree_nodes,
    hierarchical_terms,
)
from .nccl.constants import TREE_ALGBW_RATIO, TREE_BW_FACTOR
from .retiming import CostModel
from .topology import LINKS, MAX_TOPOLOGY_RANKS, Link, Topology

ALLREDUCE_ALGOS = ("ring", "naive", "tree", "double-tree", "ps", "rabenseifner", "hierarchical")
# the other collectives, each modelled by its one algorithm (rings, chains, direct exchanges)
OTHER_COLLECTIVES = tuple(c for c in COLLECTIVES if c != "all_reduce")
NAMES = ALLREDUCE_ALGOS + OTHER_COLLECTIVES
NAME_ALIASES = {
    "double_tree": "double-tree",
    "all_reduce": "ring",
    "allreduce": "ring",
    **{typed: name for typed, name in CLI_NAMES.items() if typed != name},  # "allgather", ...
}
LINK_ALIASES = {
    "nvlink4": "nvlink4-h100",
    "nvlink": "nvlink4-h100",
    "h100": "nvlink4-h100",
    "nvlink3": "nvlink3-a100",
    "a100": "nvlink3-a100",
    "pcie5": "pcie5-x16",
    "pcie": "pcie5-x16",
    "ib-ndr": "ib-ndr-400",
    "ndr": "ib-ndr-400",
    "ib-xdr": "ib-xdr-800",
    "xdr": "ib-xdr-800",
}
_CEIL_LOG2 = lambda n: (n - 1).bit_length()  # noqa: E731  ceil(log2 n) for n >= 1
ONE_RANK = N_("0 (one rank)")  # the formula of one rank: nothing moves
# every formula text with words in it, a gettext message each (see cost_topology.py)
FORMULA_MESSAGES = (ONE_RANK, *WORDED_FORMULAS)
# NCCL 2.30.7 src/graph/tuning.cc, Tree all-reduce: busBw = min(busBw * .92, nChannels *
# perChMaxTreeBw), algbw = busBw * .5 (one home: models/nccl/constants.py). The alpha-beta double
# tree keeps both factors and leaves out the rest of the tuner: the per-channel cap, the LL and
# LL128 protocol factors, x 0.85 for a plain tree pattern (one GPU per node) and the medium-size
# treeCorrectionFactor, all of which nccl/tuning.py computes.
TREE_BW_EFFICIENCY = TREE_BW_FACTOR


@dataclass(frozen=True)
class Prediction:
    """Predicted time of ``name`` on ``world_size`` ranks, ``nbytes`` per rank, split into the α
    terms (``latency_s``), the ``S/B`` terms (``bandwidth_s``) and the ``γ`` terms (``compute_s``).
    """

    name: str
    world_size: int
    nbytes: float
    link: str
    time_s: float
    latency_s: float
    bandwidth_s: float
    compute_s: float
    algbw_gbps: float
    busbw_gbps: float
    formula: str

    def to_json_dict(self) -> dict[str, Any]:
        """Plain JSON: infinite bandwidth (one rank, zero time) becomes None."""
        d = asdict(self)
        for k in ("algbw_gbps", "busbw_gbps"):
            d[k] = None if math.isinf(d[k]) else d[k]
        return d


def link_preset(name: str, param: str = "link") -> Link:
    """A preset of :data:`~edu_parallel.models.topology.LINKS` by name or short alias
    (``nvlink4``)."""
    key = LINK_ALIASES.get(name, name) if isinstance(name, str) else name
    if key not in LINKS:
        aliases = ", ".join(f"{a}={t}" for a, t in LINK_ALIASES.items())
        raise bad_value(
            param,
            name,
            _("{options} (aliases: {aliases})").format(options=one_of(LINKS), aliases=aliases),
        )
    return LINKS[key]


def tree_levels(world_size: int) -> int:
    """Whole-buffer messages on the critical path of one phase of the heap-numbered binary tree
    (children ``2r+1``, ``2r+2``) in the one-port model, where a parent takes its two children
    one after the other, the first ready first: ``floor(log2(n+1)) + floor(log2(2(n+1)/3)) - 1``.
    A full tree (``n+1`` a power of two) gives ``2·floor(log2 n)``: two messages per level."""
    m = check_int("world_size", world_size, 1) + 1
    return (m.bit_length() - 1) + ((2 * m // 3).bit_length() - 1) - 1


# ---------------------------------------------------------------- all-reduce algorithms
def _ring(n: int, S: float, a: float, B: float, g: float) -> Terms:
    # Patarasuk & Yuan 2009; Thakur et al. 2005 §4.4: reduce-scatter + all-gather, 2(n-1) steps of
    # S/n
    steps, chunk = 2 * (n - 1), S / n
    return Terms(
        steps * a, steps * chunk / B, (n - 1) * chunk * g, "2(n-1)·α + 2(n-1)/n·S/B", "(n-1)/n·S·γ"
    )


def _naive(n: int, S: float, a: float, B: float, g: float) -> Terms:
    # Flat tree: the root's one incoming port takes n-1 whole buffers, then its outgoing port sends
    # n-1
    messages = 2 * (n - 1)
    return Terms(
        messages * a, messages * S / B, (n - 1) * S * g, "2(n-1)·α + 2(n-1)·S/B", "(n-1)·S·γ"
    )


def _tree(n: int, S: float, a: float, B: float, g: float) -> Terms:
    # Binary tree reduce + broadcast, whole buffer per edge (Thakur et al. 2005 §4.2 tree
    # algorithms,
    # unpipelined); in the one-port model a parent serializes its two children: L messages per phase
    L = tree_levels(n)
    messages = 2 * L
    return Terms(
        messages * a,
        messages * S / B,
        L * S * g,
        "2L·α + 2L·S/B, L = ⌊log2(n+1)⌋ + ⌊log2(2(n+1)/3)⌋ - 1",
        "L·S·γ",
    )


def _double_tree(n: int, S: float, a: float, B: float, g: float) -> Terms:
    # NCCL 2.30.7 src/graph/tuning.cc: tree latency 2·log2(n)·lat; tree busBw = 0.92·busBw and
    # algbw = busBw/2 (pipelined, each tree S/2, every rank moves at most 2S each way: errata E5),
    # so 2·S/(0.92·B); an inner rank reduces 2 children x S/2
    depth = _CEIL_LOG2(n)
    bandwidth = S / (TREE_ALGBW_RATIO * TREE_BW_EFFICIENCY * B)
    text = f"2⌈log2 n⌉·α + {1 / TREE_ALGBW_RATIO:g}·S/({TREE_BW_EFFICIENCY:g}·B)"
    return Terms(2 * depth * a, bandwidth, S * g, text, "S·γ")


def _ps(n: int, S: float, a: float, B: float, g: float, k: int) -> Terms:
    # Li et al. 2014 (OSDI), k co-located servers each own S/k: a server's incoming port takes n-1
    # shards in the push, its outgoing port sends n-1 in the pull (k=1 is the naive all-reduce)
    messages, shard = 2 * (n - 1), S / k
    return Terms(
        messages * a,
        messages * shard / B,
        (n - 1) * shard * g,
        "2(n-1)·α + 2(n-1)/k·S/B",
        "(n-1)/k·S·γ",
    )


def _rabenseifner(n: int, S: float, a: float, B: float, g: float) -> Terms:
    # Thakur et al. 2005 §4.4: recursive halving + doubling, 2·lg p·α + 2(p-1)/p·S/B + (p-1)/p·S·γ;
    # for n not a power of two, fold to p = 2^⌊log2 n⌋ first and unfold after: + 2α + 2S/B + S·γ
    p = 1 << (n.bit_length() - 1)
    fold = 0 if p == n else 1
    latency = 2 * (p.bit_length() - 1) * a + 2 * fold * a
    bandwidth = 2 * (p - 1) / p * S / B + 2 * fold * S / B
    compute = (p - 1) / p * S * g + fold * S * g
    text = "2·log2 n·α + 2(n-1)/n·S/B" + (
        "; n not a power of two: p=2^⌊log2 n⌋, + 2α + 2S/B" if fold else ""
    )
    return Terms(latency, bandwidth, compute, text, "(p-1)/p·S·γ" + (" + S·γ" if fold else ""))


# ---------------------------------------------------------------- collectives (Thakur et al. 2005)
def _collective(name: str, n: int, S: float, a: float, B: float, g: float) -> Terms:
    """``S``: each rank's buffer (all_gather: the gathered output; gather/scatter: the root's)."""
    part = (n - 1) / n * S / B  # every rank but one holds S/n that must move
    if name == "all_gather":  # §4.1 ring: (p-1)α + (p-1)/p·nβ
        return Terms((n - 1) * a, part, 0.0, "(n-1)·α + (n-1)/n·S/B")
    if name == "reduce_scatter":  # §4.3 pairwise exchange / ring: + (p-1)/p·nγ
        return Terms((n - 1) * a, part, (n - 1) / n * S * g, "(n-1)·α + (n-1)/n·S/B", "(n-1)/n·S·γ")
    if name in ("broadcast", "reduce"):  # pipelined chain (NCCL ring; retime.collective_time)
        return Terms((n - 1) * a, S / B, 0.0, "(n-1)·α + S/B")
    if name == "all_to_all":  # §4.5 pairwise exchange: (p-1)α + (p-1)/p·nβ
        return Terms((n - 1) * a, part, 0.0, "(n-1)·α + (n-1)/n·S/B")
    # gather, scatter: §4 binomial tree, ⌈lg p⌉α + (p-1)/p·nβ
    return Terms(_CEIL_LOG2(n) * a, part, 0.0, "⌈log2 n⌉·α + (n-1)/n·S/B")


def _resolve(link: Any, reduce_Bps: float | None) -> tuple[Link | Topology, float | None]:
    if isinstance(link, CostModel):
        return (link.topology or link.link), (
            reduce_Bps if reduce_Bps is not None else link.reduce_Bps
        )
    if isinstance(link, str):
        return link_preset(link), reduce_Bps
    if isinstance(link, Link | Topology):
        return link, reduce_Bps
    raise bad_value(
        "link", link, "a Link, a Topology, a CostModel or a preset name such as 'nvlink4-h100'"
    )


def predict(
    name: str,
    world_size: int,
    nbytes: float,
    link: Any,
    *,
    reduce_Bps: float | None = None,
    servers: int | None = None,
    nodes: int | None = None,
) -> Prediction:
    """Predicted time of all-reduce algorithm or collective ``name`` (see :data:`NAMES`).

    ``link``: a :class:`Link`, a preset name (``"nvlink4-h100"``, alias ``"nvlink4"``), a
    :class:`~edu_parallel.models.topology.Topology` (the ring runs one channel per NIC, other flat
    algorithms use its bottleneck link, ``"hierarchical"`` its two levels and NICs) or a
    :class:`CostModel` (its topology or link, and its ``reduce_Bps``). ``reduce_Bps``: bytes/s of
    the reduction (None: free). ``servers``: parameter servers for ``"ps"`` (default 1;
    ``"ps-sharded"`` is ``"ps"`` with 2, as in ``allreduce.ALGOS``).
    ``nodes``: for ``"hierarchical"`` with a single link (both levels use it).
    """
    key = NAME_ALIASES.get(name, name) if isinstance(name, str) else name
    n = check_int("world_size", world_size, 1, MAX_TOPOLOGY_RANKS)
    if key == "ps-sharded":  # allreduce.ALGOS' two-server parameter server
        key, servers = "ps", min(2, n) if servers is None else servers
    if key not in NAMES:
        raise bad_value("name", name, one_of(NAMES))
    S = check_non_negative("nbytes", nbytes, "a finite number of bytes >= 0")
    where, reduce_Bps = _resolve(link, reduce_Bps)
    g = 1.0 / check_positive("reduce_Bps", reduce_Bps) if reduce_Bps is not None else 0.0
    if servers is not None and key != "ps":
        raise bad_value("servers", servers, f"None unless name is 'ps' (name={name!r})")
    if nodes is not None and key != "hierarchical":
        raise bad_value(
            "nodes",
            nodes,
            f"None unless name is 'hierarchical' (name={name!r}); pass a Topology to time a flat"
            " algorithm across nodes",
        )
    if isinstance(where, Topology):
        where.check_world_size(n)
        if nodes is not None and nodes != where.nodes:
            raise bad_value("nodes", nodes, f"None or the topology's {where.nodes}")
    if key == "hierarchical":
        if not isinstance(where, Topology):
            if nodes is None:
                raise bad_value(
                    "nodes",
                    nodes,
                    "the number of nodes (or pass a Topology as link) for 'hierarchical'",
                )
            where = Topology.split(n, nodes, where)
        terms = hierarchical_terms(where, S, g) if n > 1 else Terms(0.0, 0.0, 0.0, ONE_RANK)
    elif key == "ring" and isinstance(where, Topology) and where.nodes > 1 and n > 1:
        terms = channel_ring_terms(where, S, g)
    else:
        flat = where.bottleneck() if isinstance(where, Topology) else where
        a, B = flat.alpha_s, flat.bandwidth_Bps
        k = check_int("servers", 1 if servers is None else servers, 1, n)
        if n == 1:
            terms = Terms(0.0, 0.0, 0.0, ONE_RANK)
        elif key in OTHER_COLLECTIVES:
            terms = _collective(key, n, S, a, B, g)
        elif key == "ps":
            terms = _ps(n, S, a, B, g, k)
        else:
            terms = {
                "ring": _ring,
                "naive": _naive,
                "tree": _tree,
                "double-tree": _double_tree,
                "rabenseifner": _rabenseifner,
            }[key](n, S, a, B, g)
    if key == "double-tree" and isinstance(where, Topology) and where.nodes > 1 and n > 1:
        terms = double_tree_nodes(where, terms)  # tree latency: log2 of nodes
    formula = terms.formula + (f" + {terms.gamma}" if g and terms.gamma and n > 1 else "")
    time_s = terms.latency + terms.bandwidth + terms.compute
    algbw = S / time_s / 1e9 if time_s > 0 else math.inf
    factor = bus_factor("all_reduce" if key in ALLREDUCE_ALGOS else key, n)
    busbw = algbw * factor if n > 1 else 0.0  # one rank: nothing crosses a bus
    label = where.describe() if isinstance(where, Topology) else where.name
    return Prediction(
        key,
        n,
        S,
        label,
        time_s,
        terms.latency,
        terms.bandwidth,
        terms.compute,
        algbw,
        busbw,
        formula,
    )
