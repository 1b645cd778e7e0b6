"""NCCL's tuning constants, copied from NCCL 2.30.7 (``src/graph/tuning.cc``, ``search.cc``).

NCCL (https://github.com/NVIDIA/nccl, tag ``v2.30.7-1``) predicts the time of every collective
call as ``latency + bytes / bandwidth`` for each algorithm and protocol, and runs the cheapest
(``ncclTopoTuneModel`` fills the tables, ``ncclTopoGetAlgoTime`` evaluates them,
``topoGetAlgoInfo`` in ``src/enqueue.cc`` takes the least). The numbers here are that file's
``ncclTunerConstantsDefaults``: base latencies and hardware latencies in µs, bandwidth caps in
GB/s, indexed ``[algorithm][protocol]`` in NCCL's order. :mod:`edu_parallel.models.nccl.tuning`
uses them.

Algorithms (``NCCL_ALGO``): Tree (double binary tree across nodes, chain inside), Ring,
CollNetDirect and CollNetChain (in-network reduction on InfiniBand SHARP switches, NCCL 2.14),
NVLS (NVLink SHARP: the NVSwitch reduces, Hopper and later, NCCL 2.17), NVLSTree (NVLS inside the
node, a tree across nodes, NCCL 2.18), PAT (parallel aggregated trees for all-gather and
reduce-scatter with one GPU per node, NCCL 2.23). Protocols (``NCCL_PROTO``): LL (8-byte stores of
4 data bytes + a 4-byte flag: lowest latency, half the bandwidth), LL128 (128-byte lines with 8
flag bytes, 120/128 of the bandwidth; needs NVLink, on by default from Volta), Simple (large
chunks and fences: full bandwidth, highest latency).
"""

from __future__ import annotations

NCCL_VERSION = "2.30.7"
NCCL_SOURCE = "NCCL 2.30.7, src/graph/tuning.cc, ncclTopoTuneModel and ncclTopoGetAlgoTime"

ALGOS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")  # NCCL order
PROTOS = ("LL", "LL128", "Simple")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
ARCHS = ("volta", "ampere", "hopper", "blackwell")  # NCCL_*_COMPCAP_IDX: sm70, sm80, sm90, sm100
COMPCAP = {"volta": 70, "ampere": 80, "hopper": 90, "blackwell": 100}
# the NCCL release each algorithm first appears in (tuning.cc at v2.12.7 .. v2.23.4)
ARRIVED = {
    "Tree": "2.4",
    "Ring": "1.x",
    "CollNetDirect": "2.14",
    "CollNetChain": "2.14",
    "NVLS": "2.17",
    "NVLSTree": "2.18",
    "PAT": "2.23",
}

# baseLatencies[algo][proto], µs
BASE_LATENCY = {
    "Tree": (6.8, 14.0, 8.4),
    "Ring": (6.6, 14.0, 8.4),
    "CollNetDirect": (0.0, 0.0, 0.0),
    "CollNetChain": (0.0, 0.0, 0.0),
    "NVLS": (0.0, 0.0, 0.0),
    "NVLSTree": (0.0, 0.0, 0.0),
    "PAT": (8.0, 8.0, 8.0),
}
# hwLatencies[hw][algo][proto], µs: a hop over NVLink, over PCIe, over the network
HW_LATENCY = {
    "nvlink": {
        "Tree": (0.6, 1.25, 4.0),
        "Ring": (0.6, 1.9, 3.4),
        "CollNetDirect": (0.0, 0.0, 3.7),
        "CollNetChain": (0.0, 0.0, 2.8),
        "NVLS": (0.0, 0.0, 25.0),
        "NVLSTree": (0.0, 0.0, 25.0),
        "PAT": (0.0, 0.0, 4.0),
    },
    "pci": {
        "Tree": (1.0, 1.9, 4.0),
        "Ring": (1.0, 2.5, 5.7),
        "CollNetDirect": (0.0, 0.0, 3.7),
        "CollNetChain": (0.0, 0.0, 2.8),
        "NVLS": (0.0, 0.0, 0.0),
        "NVLSTree": (0.0, 0.0, 0.0),
        "PAT": (0.0, 0.0, 4.0),
    },
    "net": {
        "Tree": (5.0, 8.5, 14.0),
        "Ring": (2.7, 4.0, 14.0),
        "CollNetDirect": (0.0, 0.0, 31.0),
        "CollNetChain": (0.0, 0.0, 30.0),
        "NVLS": (0.0, 0.0, 18.0),
        "NVLSTree": (0.0, 0.0, 20.9),
        "PAT": (0.0, 0.0, 14.0),
    },
}
# Caps in GB/s, [row][index2] with index2 = nNodes - 1 for 1 and 2 nodes, else 2.
# llMaxBws rows: one node: the GPU arch; several nodes: the CPU (0 Intel, 1 AMD).
LL_MAX_BW = {
    "volta": (39.0, 39.0, 20.4),
    "ampere": (87.7, 22.5, 19.0),
    "hopper": (141.0, 45.0, 35.0),
    "blackwell": (282.0, 90.0, 70.0),
}
LL_MAX_BW_BY_CPU = {"intel": LL_MAX_BW["volta"], "amd": LL_MAX_BW["ampere"]}
PER_CH_MAX_RING_LL128_BW = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 36.7),
    "blackwell": (40.0, 40.0, 40.0),
}
PER_CH_MAX_TREE_LL128_BW = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 29.0),
    "blackwell": (55.6, 31.67, 20.0),
}
PER_CH_MAX_TREE_BW = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (70.0, 42.8, 24.0),
}
PER_CH_MAX_NVLS_TREE_BW = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (0.0, 57.7, 45.5),
    "blackwell": (0.0, 96.0, 80.0),
}
NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}
# treeCorrectionFactor[proto][log2(bytes/64)]: trees miss the model at medium sizes
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    + (1.0,) * 5,
    (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9)
    + (0.9, 0.9, 1.0, 1.0, 1.0),
    (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7)
    + (0.7, 0.8, 0.9, 0.9, 0.9),
)
# getNetOverhead: µs per network post (x3 for Simple), by CPU vendor
NET_OVERHEAD = {"intel": 1.0, "amd": 2.0}
RING_PLATEAU = {True: 1.4, False: 1.9}  # ring/Simple latency factor across nodes, sm >= 80 or not
PAT_BW_FACTOR = 0.75
# ncclTopoTuneModel, Tree all-reduce: busBw = min(busBw * .92, nChannels * perChMaxTreeBw); then
# every algorithm but Ring, NVLS and NVLSTree: algbw = busBw * .5 ("Convert bus BW to algorithm BW")
TREE_BW_FACTOR = 0.92
TREE_ALGBW_RATIO = 0.5
TREE_PATTERN_FACTOR = 0.85  # a plain (unbalanced) tree, e.g. one GPU per node
MAX_DIRECT_ARITY = 7  # CollNet: at most 8 local GPUs
MAX_NVLS_ARITY = 32

# search.cc: the per-channel speeds the topology search tries, GB/s, fastest first
SPEEDS_INTRA = {
    "old": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
SPEEDS_INTER = {
    "old": (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
    + (2.4, 1.2, 0.24, 0.12),
    "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4)
    + (1.2, 0.24, 0.12),
    "blackwell": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0)
    + (12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
}
MAX_SEARCH_CHANNELS = 32  # MAXCHANNELS / 2: the search's channel limit
MAXCHANNELS = 2 * MAX_SEARCH_CHANNELS  # the most channels a communicator has (device.h)
