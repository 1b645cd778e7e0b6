"""Where each NCCL algorithm and protocol runs: the rules of NCCL 2.30.7.

Gathered from ``src/graph/tuning.cc`` (``ncclTopoTuneModel``: which (collective, algorithm,
protocol) get a bandwidth, ``ncclPatEnable``, the LL128 defaults, the CollNet/NVLS disables) and
``src/enqueue.cc`` (``updateCollCostTable``: NVLS needs NVLS support, NVLS across nodes needs
CollNet, at most 8 local GPUs for CollNet). :func:`why_not` returns the reason a pair does not run
on a system, or ``""`` when it does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.errors import bad_value, check_choice, check_int
from ...core.i18n import _
from ...core.width import fit
from ..topology import Topology
from . import constants as K


@dataclass(frozen=True)
class NcclSystem:
    """A cluster as NCCL's tuner sees it: a :class:`Topology` plus what the hardware can do.

    ``arch``: the GPU generation (volta, ampere, hopper, blackwell). ``nvswitch``: the node's GPUs
    meet in NVSwitches (DGX/HGX); with ``nvls`` (default: NVSwitch on Hopper or later) the switch
    reduces (NVLink SHARP). ``collnet``: the InfiniBand switches reduce (SHARP) and NCCL's CollNet
    plugin is loaded. ``nic_near_gpu``: each NIC sits on its GPU's PCIe switch (PXB/PXN), which
    LL128 needs across nodes. ``cpu``: intel or amd (network overhead, LL caps).
    ``nvlink``: the intra-node link is NVLink (default: its name says so), else PCIe.
    ``max_channels``: ``NCCL_MAX_NCHANNELS``, at most this many channels for the rings and trees
    (NVLS keeps its own, ``NCCL_NVLS_NCHANNELS``); None: as many as the topology search finds."""

    topology: Topology
    arch: str = "hopper"
    nvswitch: bool = False
    nvls: bool | None = None
    collnet: bool = False
    nic_near_gpu: bool = True
    cpu: str = "intel"
    nvlink: bool | None = None
    name: str = ""
    max_channels: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.topology, Topology):
            raise bad_value("topology", self.topology, "a Topology")
        check_choice("arch", self.arch, K.ARCHS)
        check_choice("cpu", self.cpu, tuple(K.NET_OVERHEAD))
        if self.nvlink is None:
            object.__setattr__(
                self, "nvlink", self.topology.intra.name.startswith(("nvlink", "nvswitch"))
            )
        if self.nvls is None:
            object.__setattr__(self, "nvls", self.nvswitch and K.COMPCAP[self.arch] >= 90)
        if self.nvls and not (self.nvswitch and K.COMPCAP[self.arch] >= 90):
            raise bad_value("nvls", self.nvls, "False unless nvswitch=True on hopper or later")
        if self.max_channels is not None:
            check_int("max_channels", self.max_channels, 1, K.MAXCHANNELS)

    @property
    def nodes(self) -> int:
        return self.topology.nodes

    @property
    def ranks(self) -> int:
        return self.topology.world_size

    @property
    def ppn(self) -> int:
        return self.topology.gpus_per_node

    def describe(self) -> str:
        caps = [self.arch]
        caps += [c for c, on in (("NVSwitch", self.nvswitch), ("NVLS", self.nvls)) if on]
        caps += ["IB SHARP"] if self.collnet else []
        name = self.name + ": " if self.name else ""
        listed = _(" ({caps})").format(caps=_(", ").join(caps))  # 、 between them in Chinese
        return fit(f"{name}{self.topology.describe()}{listed}")


def why_not(coll: str, algo: str, proto: str, s: NcclSystem) -> str:
    """Why NCCL would not run ``algo``/``proto`` for ``coll`` on ``s`` ('' when it would)."""
    if coll in ("broadcast", "reduce") and algo != "Ring":
        return _("broadcast and reduce run only on rings")
    if coll in ("all_gather", "reduce_scatter") and algo not in (
        "Ring",
        "PAT",
        "NVLS",
        "CollNetDirect",
    ):
        return _("all-gather/reduce-scatter run on Ring, PAT, NVLS or CollNetDirect")
    if coll == "all_reduce" and algo == "PAT":
        return _("PAT serves all-gather and reduce-scatter only")
    if algo in ("NVLS", "NVLSTree", "PAT", "CollNetDirect", "CollNetChain") and proto != "Simple":
        return _("{algo} runs only with the Simple protocol").format(algo=algo)
    if proto == "LL128" and not (s.nvlink or s.ppn == 1):
        return _("LL128 needs NVLink inside the node (off by default over PCIe)")
    if proto == "LL128" and s.nodes > 1 and not s.nic_near_gpu:
        return _("LL128 needs the NIC on the GPU's PCIe switch (PXB/PXN) across nodes")
    if algo in ("NVLS", "NVLSTree"):
        if not s.nvls:
            return _("NVLS needs NVSwitch with NVLink SHARP (Hopper or later)")
        if s.ppn < 2:
            return _("NVLS needs at least 2 GPUs on the NVSwitch")
        if algo == "NVLSTree" and s.nodes == 1:
            return _("NVLSTree is for several nodes (NVLS inside, a tree across)")
        if algo == "NVLS" and s.nodes > 1 and not s.collnet:
            return _("NVLS across nodes needs IB SHARP (CollNet); else NVLSTree")
        if coll != "all_reduce" and s.ppn > K.MAX_NVLS_ARITY:
            return _("NVLS all-gather/reduce-scatter: at most {n} GPUs per node").format(
                n=K.MAX_NVLS_ARITY
            )
    if algo in ("CollNetDirect", "CollNetChain"):
        if not s.collnet or s.nodes == 1:
            return _("CollNet needs IB SHARP switches (and the CollNet plugin) across nodes")
        if s.ppn > K.MAX_DIRECT_ARITY + 1:
            return _("CollNet: at most {n} GPUs per node").format(n=K.MAX_DIRECT_ARITY + 1)
        if algo == "CollNetDirect" and not s.nvswitch:
            return _("CollNetDirect needs an NVSwitch node")
    if (
        algo in ("NVLS", "CollNetDirect")
        and coll in ("all_gather", "reduce_scatter")
        and s.nodes > 1
        and s.ppn > s.topology.nics_per_node
    ):
        return _("{algo} all-gather/reduce-scatter across nodes needs one NIC per GPU").format(
            algo=algo
        )
    if algo == "PAT" and s.nodes != s.ranks:
        return _("PAT needs one GPU per node")
    return ""
