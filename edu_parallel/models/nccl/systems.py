"""Named clusters for NCCL's tuning model (:class:`~edu_parallel.models.nccl.tuning.NcclSystem`).

Each preset is a :class:`~edu_parallel.models.topology.Topology` of :data:`LINKS` presets plus
what its hardware can do, after the vendors' descriptions:

* ``dgx-h100``: one DGX H100, 8 H100 on 4 NVSwitch chips (NVLink 4, NVLink SHARP), 8 ConnectX-7
  NDR ports (NVIDIA DGX H100 user guide);
* ``8x8-h100-ndr``: 8 such nodes, rail-optimised (GPU ``i`` of every node on NDR rail ``i``,
  NVIDIA DGX SuperPOD reference architecture), no in-network reduction;
* ``8x8-h100-ndr-sharp``: the same with Quantum-2 switches running SHARP (CollNet, NVLS across
  nodes);
* ``2x8-a100-hdr``: 2 DGX A100 (NVLink 3 through NVSwitch, no NVLS before Hopper), 8 HDR ports;
* ``4x1-pcie-25gbe``: 4 cloud VMs of one PCIe GPU each, one 25 GbE NIC on the host bridge (no
  LL128 across nodes: the NIC is not on the GPU's PCIe switch).
"""

from __future__ import annotations

from ...core.errors import bad_value, one_of
from ...core.i18n import _
from ..links import LINKS
from ..topology import Topology
from .tuning import NcclSystem


def _dgx(nodes: int) -> Topology:
    return Topology(nodes, 8, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"], nics_per_node=8)


NCCL_SYSTEMS: dict[str, NcclSystem] = {
    s.name: s
    for s in (
        NcclSystem(_dgx(1), "hopper", nvswitch=True, name="dgx-h100"),
        NcclSystem(_dgx(8), "hopper", nvswitch=True, name="8x8-h100-ndr"),
        NcclSystem(_dgx(8), "hopper", nvswitch=True, collnet=True, name="8x8-h100-ndr-sharp"),
        NcclSystem(
            Topology(2, 8, LINKS["nvlink3-a100"], LINKS["ib-hdr-200"], nics_per_node=8),
            "ampere",
            nvswitch=True,
            name="2x8-a100-hdr",
        ),
        NcclSystem(
            Topology(4, 1, LINKS["pcie4-x16"], LINKS["eth-25g"], nics_per_node=1),
            "ampere",
            nic_near_gpu=False,
            nvlink=False,
            name="4x1-pcie-25gbe",
        ),
    )
}


def nccl_system(system: NcclSystem | str) -> NcclSystem:
    """``system`` itself, or the preset of :data:`NCCL_SYSTEMS` it names."""
    if isinstance(system, NcclSystem):
        return system
    if not isinstance(system, str) or system not in NCCL_SYSTEMS:
        valid = one_of(NCCL_SYSTEMS)
        if not isinstance(system, str):
            valid = _("an NcclSystem or {valid}").format(valid=valid)
        raise bad_value("system", system, valid)
    return NCCL_SYSTEMS[system]
