"""Closed forms on a two-level :class:`~edu_parallel.models.topology.Topology` (nodes of ranks).

Used by :func:`~edu_parallel.models.cost.predict`; each equals the retimed trace of its plan
(``tests/test_hierarchical_nics.py``, ``tests/test_costmodel.py``):

* :func:`channel_ring_terms`: the flat ring run as NCCL runs it across nodes, one channel (ring)
  per NIC, each moving ``S/C`` (NCCL 2.30.7 ``src/graph/search.cc`` ``ncclTopoSearchRecNet``;
  ``tuning.cc``: ``busBw = nChannels * bw``);
* :func:`hierarchical_terms`: reduce-scatter in the node, each local rank's shard all-reduced across
  nodes on its own NIC, all-gather in the node
  (:func:`~edu_parallel.plans.hierarchical.hierarchical_allreduce_plan`);
* :func:`double_tree_nodes`: NCCL's tree latency, a chain in the node and log2 of the nodes.

``Terms`` is the shared result: α terms, S/B terms, γ terms and the formula as text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.i18n import N_
from .topology import Topology


@dataclass(frozen=True)
class Terms:
    latency: float
    bandwidth: float
    compute: float
    formula: str
    gamma: str = ""  # the γ term as text, shown when reductions cost time


# The formulas whose text holds words: gettext messages (marked N_), shown through _() by the
# command line (the JSON keeps them as written here)
# the 0.92 of DOUBLE_TREE_NODES is nccl/constants.py TREE_BW_FACTOR (tests/test_costmodel.py checks)
DOUBLE_TREE_NODES = N_("2·((g-1)·α₁ + ⌊log2 K⌋·α₂) + 2·S/(0.92·B), K nodes of g ranks")
HIERARCHICAL = N_(
    "2(g-1)·(K·α₁ + S/(g·B₁)) + 2(K-1)·r·(α₂ + S/(g·K·B₂)), K nodes of g ranks, r = g/NICs"
    " ranks per NIC"
)
HIERARCHICAL_GAMMA = N_("((g-1)/g + (K-1)/(g·K))·S·γ, less what hides behind a shared NIC")
CHANNEL_RING = N_(
    "2(n-1)·max(m·(α₁ + S/(C·n·B₁)), α₂ + S/(C·n·B₂)), C = NICs per node rings,"
    " m = C-1 if C = g else C"
)
WORDED_FORMULAS = (DOUBLE_TREE_NODES, HIERARCHICAL, HIERARCHICAL_GAMMA, CHANNEL_RING)


def double_tree_nodes(topo: Topology, flat: Terms) -> Terms:
    # NCCL 2.30.7 tuning.cc ncclTopoTuneModel, Tree: 2·((nRanks/nNodes-1)·intraLat +
    # log2i(nNodes)·interLat): a chain inside each node, the double binary tree across nodes, so
    # the latency grows with log2 of the nodes, not of the ranks
    G, levels = topo.gpus_per_node, topo.nodes.bit_length() - 1
    latency = 2 * ((G - 1) * topo.intra.alpha_s + levels * topo.inter.alpha_s)
    return Terms(latency, flat.bandwidth, flat.compute, DOUBLE_TREE_NODES, flat.gamma)


def hierarchical_terms(topo: Topology, S: float, g: float) -> Terms:
    # plans.hierarchical.hierarchical_allreduce_plan, g·K chunks of c = S/(g·K), one message each:
    # (a) ring reduce-scatter in every node, g-1 steps of K messages on each rank's intra port;
    # (b) g rings across nodes, 2(K-1) steps of one message per rank, r = g/nics ranks per NIC
    #     queueing on it; (c) ring all-gather in every node, as (a)
    K, G, r = topo.nodes, topo.gpus_per_node, topo.gpus_per_node // topo.nics_per_node
    a1, B1, a2, B2 = (
        topo.intra.alpha_s,
        topo.intra.bandwidth_Bps,
        topo.inter.alpha_s,
        topo.inter.bandwidth_Bps,
    )
    c = S / (G * K)
    intra, inter = 2 * (G - 1) * K, 2 * (K - 1) * r  # messages on the busiest port
    latency = intra * a1 + inter * a2
    bandwidth = intra * c / B1 + inter * c / B2
    # a reduce-scatter step of (b) lasts max(r·T₂, T₂ + c·γ): while the NIC serves the other r-1
    # ranks, a rank adds what it received, so only what exceeds (r-1)·T₂ shows
    t2 = a2 + c / B2
    hidden = (K - 1) * min(c * g, (r - 1) * t2)
    compute = ((G - 1) * K + K - 1) * c * g - hidden
    return Terms(latency, bandwidth, compute, HIERARCHICAL, HIERARCHICAL_GAMMA)


def channel_ring_terms(topo: Topology, S: float, g: float) -> Terms:
    # plans.hierarchical.channel_ring_allreduce_plan: C = nics rings of S/C, 2(n-1) steps; per
    # step a rank sends one message of c = S/(C·n) per ring: m on its intra port (C-1 when every
    # rank leaves its node on one ring, C = g; else C), and every NIC carries one ring each way.
    # The step lasts as long as the busier of the two (NCCL tuning.cc: busBw = nChannels·bw).
    n, C, G = topo.world_size, topo.channels, topo.gpus_per_node
    c = S / (C * n)
    m = C - 1 if C == G else C
    steps = 2 * (n - 1)
    intra = (m * topo.intra.alpha_s, m * c / topo.intra.bandwidth_Bps)
    inter = (topo.inter.alpha_s, c / topo.inter.bandwidth_Bps)
    lat, bw = max(intra, inter, key=sum)
    return Terms(steps * lat, steps * bw, (n - 1) * C * c * g, CHANNEL_RING, "(n-1)/n·S·γ")
