"""Links: Hockney's ``alpha + S / bandwidth`` per message, and datasheet presets.

:class:`Link` is one direction of a link; :data:`LINKS` holds named presets, each with the
datasheet it comes from in ``source``, whether it joins GPUs inside a node or nodes (``scope``),
and what the alpha-beta model leaves out (``note``). :class:`~edu_parallel.models.topology.Topology`
puts two of them together (inside a node, between nodes); :mod:`.fabrics` builds rail-optimised
clusters from them.

Bandwidths are **per direction**, the rate one message can use. Datasheets quote NVLink and
Infinity Fabric *bidirectional per GPU* (half of it each way), network ports in Gb/s per direction
(divide by 8), PCIe in GT/s per lane (x16 lanes, 128b/130b line code up to Gen5; Gen6 uses FLIT
mode, quoted here before its FLIT/FEC overhead). :data:`ARITHMETIC` keeps each preset's datasheet
figure and the arithmetic that turns it into bytes/s; ``tests/test_links.py`` recomputes them.
Latencies (``alpha_s``) are order-of-magnitude assumptions (hardware plus library overhead per
message, microseconds), not measurements.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import bad_value, check_non_negative, check_positive, one_of
from ..core.i18n import N_

SCOPES = ("", "intra-node", "inter-node")


@dataclass(frozen=True)
class Link:
    """One direction of a link: ``alpha_s`` seconds per message, ``bandwidth_Bps`` bytes/s.

    ``scope``: "intra-node" (GPU to GPU in a server), "inter-node" (a NIC port) or "" (unsaid);
    ``note``: what the model leaves out (in-switch reduction, one link per peer). A preset's
    ``source`` is a gettext message (marked ``N_``): a report shows it through ``_()``."""

    name: str
    alpha_s: float
    bandwidth_Bps: float
    source: str = ""
    scope: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise bad_value("name", self.name, "a non-empty string")
        object.__setattr__(self, "alpha_s", check_non_negative("alpha_s", self.alpha_s))
        bw = check_positive("bandwidth_Bps", self.bandwidth_Bps)
        object.__setattr__(self, "bandwidth_Bps", bw)
        if self.scope not in SCOPES:
            raise bad_value("scope", self.scope, one_of(map(repr, SCOPES)))

    def message_s(self, nbytes: float) -> float:
        """Hockney: ``alpha + nbytes / bandwidth``."""
        return self.alpha_s + nbytes / self.bandwidth_Bps


INTRA, INTER = "intra-node", "inter-node"
GB = 1e9  # bandwidths in GB/s = 1e9 B/s, as datasheets and nccl-tests quote them
PCIE_128B130B = 128 / 130  # PCIe 3.0-5.0 line code

# name -> (the datasheet's figure, how it becomes bytes/s per direction). The presets below compute
# their bandwidth with the same arithmetic.
ARITHMETIC: dict[str, tuple[str, str]] = {
    "nvlink3-a100": (N_("600 GB/s bidirectional per GPU (12 links)"), "600e9 / 2"),
    "nvlink4-h100": (N_("900 GB/s bidirectional per GPU (18 links)"), "900e9 / 2"),
    "nvlink5-b200": (N_("1.8 TB/s bidirectional per GPU (18 links x 100 GB/s)"), "1.8e12 / 2"),
    "nvswitch-h100": (N_("900 GB/s per GPU, any GPU to any GPU (4 NVSwitch chips)"), "900e9 / 2"),
    "pcie4-x16": (N_("16 GT/s per lane, x16, 128b/130b"), "16e9 * 16 * 128/130 / 8"),
    "pcie5-x16": (N_("32 GT/s per lane, x16, 128b/130b"), "32e9 * 16 * 128/130 / 8"),
    "pcie6-x16": (N_("64 GT/s per lane, x16, PAM4 + FLIT (raw)"), "64e9 * 16 / 8"),
    "ib-hdr-200": (N_("200 Gb/s per port"), "200e9 / 8"),
    "ib-ndr-400": (N_("400 Gb/s per port"), "400e9 / 8"),
    "ib-xdr-800": (N_("800 Gb/s per port"), "800e9 / 8"),
    "roce-400g": (N_("400 Gb/s Ethernet per port"), "400e9 / 8"),
    "xgmi-mi300x": (N_("128 GB/s bidirectional per Infinity Fabric link"), "128e9 / 2"),
    "xgmi-mi300x-gpu": (N_("7 links x 128 GB/s bidirectional per GPU"), "7 * 128e9 / 2"),
    "eth-25g": (N_("25 Gb/s per port"), "25e9 / 8"),
}

NVLS_NOTE = N_(
    "NVLS (NVLink SHARP, NCCL 2.17+): the NVSwitch reduces and multicasts, so an all-reduce "
    "sends about S and receives about S per GPU instead of a ring's 2(n-1)/n S each way; NCCL "
    "picks it with NCCL_ALGO=NVLS (the model here times a ring)"
)
XGMI_NOTE = N_(
    "fully connected 8-GPU mesh: one link per peer, so one message between two GPUs gets one "
    "link's bandwidth; RCCL runs several rings over different links to use all seven"
)

LINKS: dict[str, Link] = {
    link.name: link
    for link in (
        Link(
            "nvlink4-h100",
            2e-6,
            900 * GB / 2,
            N_("NVIDIA H100 datasheet: NVLink 4, 900 GB/s bidirectional per GPU"),
            INTRA,
        ),
        Link(
            "nvlink3-a100",
            2e-6,
            600 * GB / 2,
            N_("NVIDIA A100 datasheet: NVLink 3, 600 GB/s bidirectional per GPU"),
            INTRA,
        ),
        Link(
            "nvlink5-b200",
            2e-6,
            1800 * GB / 2,
            N_(
                "NVIDIA B200 / NVLink page: NVLink 5, 18 links x 100 GB/s = 1.8 TB/s bidirectional"
                " per GPU"
            ),
            INTRA,
        ),
        Link(
            "nvswitch-h100",
            2e-6,
            900 * GB / 2,
            N_(
                "NVIDIA DGX H100 user guide: 4 third-generation NVSwitch chips, 900 GB/s NVLink per"
                " GPU between any two GPUs"
            ),
            INTRA,
            NVLS_NOTE,
        ),
        Link(
            "pcie4-x16",
            3e-6,
            16e9 * 16 * PCIE_128B130B / 8,
            N_("PCI-SIG PCIe 4.0 base spec: 16 GT/s per lane, 128b/130b, x16"),
            INTRA,
        ),
        Link(
            "pcie5-x16",
            3e-6,
            32e9 * 16 * PCIE_128B130B / 8,
            N_("PCI-SIG PCIe 5.0 base spec: 32 GT/s per lane, 128b/130b, x16"),
            INTRA,
        ),
        Link(
            "pcie6-x16",
            3e-6,
            64e9 * 16 / 8,
            N_(
                "PCI-SIG PCIe 6.0 base spec: 64 GT/s per lane (PAM4, FLIT mode), x16 = 256 GB/s"
                " bidirectional before FLIT/FEC overhead"
            ),
            INTRA,
        ),
        Link(
            "ib-hdr-200",
            5e-6,
            200e9 / 8,
            N_("NVIDIA ConnectX-6 datasheet: InfiniBand HDR 200 Gb/s per port"),
            INTER,
        ),
        Link(
            "ib-ndr-400",
            5e-6,
            400e9 / 8,
            N_("NVIDIA ConnectX-7 datasheet: InfiniBand NDR 400 Gb/s per port"),
            INTER,
        ),
        Link(
            "ib-xdr-800",
            5e-6,
            800e9 / 8,
            N_("NVIDIA ConnectX-8 datasheet: InfiniBand XDR 800 Gb/s per port"),
            INTER,
        ),
        Link(
            "roce-400g",
            8e-6,
            400e9 / 8,
            N_(
                "NVIDIA ConnectX-7 datasheet / Spectrum-X: 400GbE with RoCE v2 (RDMA over Converged"
                " Ethernet) per port"
            ),
            INTER,
            N_(
                "RDMA over UDP/IP: needs a lossless or congestion-controlled Ethernet fabric (PFC,"
                " ECN; Spectrum-X adaptive routing); alpha assumed a little above InfiniBand's"
            ),
        ),
        Link(
            "xgmi-mi300x",
            3e-6,
            128e9 / 2,
            N_(
                "AMD Instinct MI300X data sheet: 128 GB/s peak bidirectional per Infinity Fabric"
                " link; ROCm docs (conceptual/gpu-arch/mi300.md): 7 links per GPU, fully connected"
                " 8-GPU mesh"
            ),
            INTRA,
            XGMI_NOTE,
        ),
        Link(
            "xgmi-mi300x-gpu",
            3e-6,
            7 * 128e9 / 2,
            N_(
                "AMD Instinct MI300X data sheet: 7 GPU-to-GPU Infinity Fabric links x 128 GB/s ="
                " 896 GB/s bidirectional per GPU (ROCm docs, mi300.md)"
            ),
            INTRA,
            N_(
                "all seven links at once: what RCCL's several rings reach together, not one message"
            ),
        ),
        Link(
            "eth-25g",
            20e-6,
            25e9 / 8,
            N_(
                "IEEE 802.3by 25GBASE-R: 25 Gb/s Ethernet per port, a common cloud NIC (TCP:"
                " tens of microseconds per message)"
            ),
            INTER,
        ),
    )
}
