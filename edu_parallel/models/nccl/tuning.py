"""NCCL's own tuning model: the (algorithm, protocol) NCCL runs for a collective, and why.

Follows NCCL 2.30.7 (``src/graph/tuning.cc``: ``ncclTopoTuneModel`` builds a latency (µs) and a
bus bandwidth (GB/s) per collective, algorithm and protocol; ``ncclTopoGetAlgoTime`` returns
``latency + bytes / (1000·bandwidth)`` µs; ``topoGetAlgoInfo`` in ``src/enqueue.cc`` runs the
least). Constants in :mod:`~edu_parallel.models.nccl.constants`. Learning from that code:

* ring latency: ``base + (2(n-1) - 2(K-1))·intra + 2(K-1)·inter`` over ``K`` nodes;
* tree latency: ``base + 2·((ppn-1)·intra + ⌊log2 K⌋·inter)``: it grows with log2 of the
  **nodes** (inside a node the tree is a chain);
* bandwidth: channels × per-channel bandwidth, cut per protocol (LL: half, capped; LL128: 92 %,
  capped per channel; tree 92 % capped per channel), then turned into algorithm bandwidth.

What NCCL measures (its topology search, ``search.cc`` ``ncclTopoCompute``) is approximated from
the :class:`~edu_parallel.models.topology.Topology`: across nodes, one channel per NIC
(``topology.nics_per_node``, a rail-optimised node), each at the fastest search speed that fits
its NIC and the GPU's share of the intra-node link; inside one node, channels at the fastest
speed that fits the intra-node link; then ``ncclTopoDupChannels``' doubling. So the cross-node
bus bandwidth is bounded by NICs × per-NIC bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...core.errors import bad_value, check_choice, check_non_negative
from . import constants as K
from .rules import NcclSystem, why_not


@dataclass(frozen=True)
class NcclGraph:
    """One algorithm's channels as the search would find them: ``channels`` × per-channel GB/s."""

    channels: int
    bw_intra: float
    bw_inter: float
    hw_intra: str  # "nvlink" or "pci"


def _fastest(speeds: tuple[float, ...], cap: float) -> float:
    return next((s for s in speeds if s <= cap), speeds[-1])


def _speeds(arch: str, table: dict[str, tuple[float, ...]]) -> tuple[float, ...]:
    return table["blackwell" if arch == "blackwell" else "hopper" if arch == "hopper" else "old"]


def nccl_graph(system: NcclSystem, algo: str) -> NcclGraph | None:
    """Channels and per-channel bandwidth (GB/s) for ``algo``; None where NCCL finds no graph."""
    topo, arch = system.topology, system.arch
    intra = topo.intra.bandwidth_Bps / 1e9  # one GPU's intra-node bandwidth, one direction
    nic = topo.inter.bandwidth_Bps / 1e9
    hw = "nvlink" if system.nvlink else "pci"
    nics = topo.nics_per_node
    if algo in ("NVLS", "NVLSTree"):
        if not system.nvls or system.ppn < 2:
            return None
        ch = system.ppn if system.nodes == 1 else min(nics, system.ppn)
        s_intra = _fastest(_speeds(arch, K.SPEEDS_INTRA), intra / system.ppn)
        s_inter = s_intra if system.nodes == 1 else _fastest(_speeds(arch, K.SPEEDS_INTER), nic)
        return NcclGraph(ch, s_intra, s_inter, "nvlink")  # NVLS graphs are never doubled
    if system.nodes == 1:
        speed = _fastest(_speeds(arch, K.SPEEDS_INTRA), intra)
        ch = max(1, min(K.MAX_SEARCH_CHANNELS, int(intra // speed)))
    else:
        ch = nics
        cap = nic if system.ppn == 1 else min(nic, intra / ch)
        speed = _fastest(_speeds(arch, K.SPEEDS_INTER), cap)
    # ncclTopoDupChannels: double the channels (halving each) on fast links
    if speed >= 25.0 and not (K.COMPCAP[arch] > 80 and speed < 50.0 and ch > 4):
        dup = min(2 * ch, K.MAX_SEARCH_CHANNELS)
        speed, ch = speed / math.ceil(dup / ch), dup
    if system.max_channels is not None:  # NCCL_MAX_NCHANNELS: fewer channels, each as fast
        ch = min(ch, system.max_channels)
    return NcclGraph(ch, speed, speed, hw)


@dataclass(frozen=True)
class NcclEntry:
    """One (algorithm, protocol)'s model: latency (µs) and bandwidth (GB/s, algorithm bw)."""

    algo: str
    proto: str
    latency_us: float
    bandwidth_gbps: float
    channels: int


def nccl_entry(coll: str, algo: str, proto: str, system: NcclSystem) -> NcclEntry:
    """``ncclTopoTuneModel`` for one (coll, algo, proto): raises ValueError naming why NCCL would
    not run it on ``system``."""
    check_choice("coll", coll, K.COLLECTIVES)
    check_choice("algo", algo, K.ALGOS)
    check_choice("proto", proto, K.PROTOS)
    if system.ranks < 2:
        raise bad_value("system", system.describe(), "at least 2 ranks (one rank moves nothing)")
    why = why_not(coll, algo, proto, system)
    g = nccl_graph(system, algo)  # PAT runs on the tree graph, alike here
    if why or g is None:
        raise bad_value("algo", f"{algo}/{proto}", f"one NCCL runs here: {why or 'no graph'}")
    s, arch, p = system, system.arch, K.PROTOS.index(proto)
    n, nodes, ppn = s.ranks, s.nodes, s.ppn
    i2 = min(nodes, 3) - 1
    nsteps = {"all_reduce": 2 * (n - 1), "all_gather": n - 1, "reduce_scatter": n - 1}.get(coll, n)
    ll_max = (K.LL_MAX_BW[arch] if nodes == 1 else K.LL_MAX_BW_BY_CPU[s.cpu])[i2]
    collnet = algo.startswith("CollNet")
    bw = g.bw_intra if nodes <= 2 or collnet else g.bw_inter
    if algo in ("NVLS", "NVLSTree"):
        intra = g.bw_intra * K.NVLS_EFFICIENCY[arch] * (g.channels - 1) / g.channels
        intra *= 2.0 if coll == "all_reduce" else (ppn - 1) / ppn
        inter = g.bw_inter * (2 if nodes <= 2 and algo == "NVLSTree" else 1)
        tree_cap = K.PER_CH_MAX_NVLS_TREE_BW[arch][i2] if algo == "NVLSTree" else math.inf
        bw = min(intra, inter, tree_cap)
    bus = g.channels * bw
    if algo == "Ring" and proto == "LL":
        bus = min(ll_max, bus * 0.5)
    if algo == "Ring" and proto == "LL128":
        bus = min(bus * 0.92, g.channels * K.PER_CH_MAX_RING_LL128_BW[arch][i2])
    if algo == "Tree" and coll == "all_reduce":
        bus = min(bus * K.TREE_BW_FACTOR, g.channels * K.PER_CH_MAX_TREE_BW[arch][i2])
    if algo == "Tree" and proto == "LL":
        bus = min(bus / 3.8, ll_max)
    if algo == "Tree" and proto == "LL128":
        factor = 7.0 / 9.0 if nodes == 1 else 120.0 / 128.0
        bus = min(bus * factor, g.channels * K.PER_CH_MAX_TREE_LL128_BW[arch][i2])
    if algo == "Tree" and ppn == 1:  # search.cc: one GPU per node makes a plain TREE pattern
        bus *= K.TREE_PATTERN_FACTOR
    if algo == "PAT":
        bus *= K.PAT_BW_FACTOR
    if algo == "CollNetDirect":
        if coll in ("all_gather", "reduce_scatter"):
            bus = ppn * min(g.bw_intra, g.bw_inter * 0.9)
        else:  # all GPUs need a local NIC for full speed
            ratio = ppn / g.channels
            bus /= ratio - (ratio - 1) / 2
            bus *= 0.85 if K.COMPCAP[arch] >= 90 else 1.0
    if not (algo != "Ring" and coll in ("all_gather", "reduce_scatter")):  # bus bw -> algo bw
        bus *= n / nsteps if algo in ("Ring", "NVLS", "NVLSTree") else K.TREE_ALGBW_RATIO
    # latency
    lat = K.BASE_LATENCY[algo][p]
    intra_lat = K.HW_LATENCY[g.hw_intra][algo][p]
    inter_lat = K.HW_LATENCY["net"]["Tree" if ppn == 1 else algo][p]  # graph latencyInter: 0
    if algo == "Ring":
        if coll in ("broadcast", "reduce"):  # sameChannels: one hop's latency
            lat += K.HW_LATENCY[g.hw_intra if nodes == 1 else "net"][algo][p]
        else:
            overhead = K.NET_OVERHEAD[s.cpu] * (3 if proto == "Simple" else 1) if nodes > 1 else 0
            intra_lat = max(intra_lat, overhead)
            inter_steps = 0 if nodes == 1 else (2 if coll == "all_reduce" else 1) * (nodes - 1)
            lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat
    elif algo == "Tree":
        lat += 2 * ((ppn - 1) * intra_lat + _log2i(nodes) * inter_lat)
    elif algo == "CollNetDirect":
        lat += 2 * (min(1, ppn - 1) * intra_lat + (ppn - 1) * 0.4) + inter_lat
    elif algo == "CollNetChain":
        lat += 2 * (ppn - 1) * intra_lat + inter_lat
    elif algo == "NVLS":
        lat = intra_lat + (inter_lat if nodes > 1 else 0.0)
    elif algo == "NVLSTree":
        lat += intra_lat + 2 * _log2i(nodes) * inter_lat
    elif algo == "PAT":
        lat += _log2i(nodes) * (inter_lat / 3.5) + n * 2.8
    return NcclEntry(algo, proto, lat, bus, g.channels)


def _log2i(x: int) -> int:
    """NCCL's ``log2i``: floor(log2 x)."""
    return max(int(x).bit_length() - 1, 0)


@dataclass(frozen=True)
class NcclTime:
    """``ncclTopoGetAlgoTime``: ``latency_us`` (after the ring plateau factor) + bytes/bandwidth."""

    algo: str
    proto: str
    time_us: float
    latency_us: float
    bandwidth_us: float
    bandwidth_gbps: float


def nccl_time(coll: str, algo: str, proto: str, nbytes: float, system: NcclSystem) -> NcclTime:
    """NCCL's predicted time of one call: ``nbytes`` is NCCL's ``nBytes`` (all-reduce, broadcast,
    reduce: the buffer; all-gather: the gathered output; reduce-scatter: the input)."""
    size = check_non_negative("nbytes", nbytes, "a finite number of bytes >= 0")
    e = nccl_entry(coll, algo, proto, system)
    bw, lat = e.bandwidth_gbps, e.latency_us
    log_size = _log2i(int(size) >> 6) if int(size) >= 64 else -1
    if algo == "Tree" and coll == "all_reduce" and 0 <= log_size < 23:
        bw *= K.TREE_CORRECTION[K.PROTOS.index(proto)][log_size]
    if algo == "NVLSTree" and coll == "all_reduce" and 0 <= log_size < 24:
        if K.COMPCAP[system.arch] >= 100:  # on x86 hosts
            bw *= K.TREE_CORRECTION[K.PROTOS.index(proto)][log_size]
    ring_ch = nccl_graph(system, "Ring").channels  # comm->nChannels
    if algo == "Ring" and proto == "Simple" and system.nodes > 1 and coll == "all_reduce":
        if size / (ring_ch * system.ranks) >= 64:  # "plateau effect of ring"
            lat *= K.RING_PLATEAU[K.COMPCAP[system.arch] >= 80]
    bw_us = size / (1000 * bw)
    return NcclTime(algo, proto, lat + bw_us, lat, bw_us, bw)
