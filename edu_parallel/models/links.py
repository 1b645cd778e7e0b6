"""Links: Hockney's ``alpha + S / bandwidth`` per message, and datasheet presets.

:class:`Link` is one direction of a link; :data:`LINKS` holds named presets, each with the
datasheet it comes from in ``source``. :class:`~edu_parallel.models.topology.Topology` puts two of
them together (inside a node, between nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import bad_value, check_non_negative, check_positive


@dataclass(frozen=True)
class Link:
    """One direction of a link: ``alpha_s`` seconds per message, ``bandwidth_Bps`` bytes/s."""

    name: str
    alpha_s: float
    bandwidth_Bps: float
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise bad_value("name", self.name, "a non-empty string")
        object.__setattr__(self, "alpha_s", check_non_negative("alpha_s", self.alpha_s))
        bw = check_positive("bandwidth_Bps", self.bandwidth_Bps)
        object.__setattr__(self, "bandwidth_Bps", bw)

    def message_s(self, nbytes: float) -> float:
        """Hockney: ``alpha + nbytes / bandwidth``."""
        return self.alpha_s + nbytes / self.bandwidth_Bps


# Bandwidths are per direction, from the datasheets named in ``source``: NVIDIA H100 (NVLink 4,
# 900 GB/s = 450 GB/s each way), NVIDIA A100 (NVLink 3, 600 GB/s = 300 each way), PCI-SIG PCIe 5.0
# (32 GT/s x 16 lanes, 128b/130b = ~63 GB/s each way), NVIDIA ConnectX-7 (IB NDR 400 Gb/s =
# 50e9 B/s) and ConnectX-8 (IB XDR 800 Gb/s = 100e9 B/s). Latencies are order-of-magnitude
# assumptions (hardware plus library overhead per message, a few microseconds), not measurements.
LINKS: dict[str, Link] = {
    link.name: link
    for link in (
        Link(
            "nvlink4-h100",
            2e-6,
            450e9,
            "NVIDIA H100 datasheet: NVLink 4, 900 GB/s bidirectional per GPU",
        ),
        Link(
            "nvlink3-a100",
            2e-6,
            300e9,
            "NVIDIA A100 datasheet: NVLink 3, 600 GB/s bidirectional per GPU",
        ),
        Link(
            "pcie5-x16",
            3e-6,
            32e9 * 16 * 128 / 130 / 8,
            "PCI-SIG PCIe 5.0 base spec: 32 GT/s per lane, 128b/130b, x16",
        ),
        Link(
            "ib-ndr-400",
            5e-6,
            400e9 / 8,
            "NVIDIA ConnectX-7 datasheet: InfiniBand NDR 400 Gb/s per port",
        ),
        Link(
            "ib-xdr-800",
            5e-6,
            800e9 / 8,
            "NVIDIA ConnectX-8 datasheet: InfiniBand XDR 800 Gb/s per port",
        ),
        Link(
            "eth-25g",
            20e-6,
            25e9 / 8,
            "IEEE 802.3by 25GBASE-R: 25 Gb/s Ethernet per port, a common cloud NIC (TCP:"
            " tens of microseconds per message)",
        ),
    )
}
