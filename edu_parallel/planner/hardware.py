"""The cluster the planner plans for: GPU presets and a validated :class:`ClusterSpec`.

A GPU is its memory (bytes of HBM) and its peak dense bf16 throughput (FLOP/s, without sparsity),
each from the vendor's datasheet named in ``source``. A cluster is ``nodes`` nodes of
``gpus_per_node`` GPUs, a link inside a node and a link between nodes
(:data:`~edu_parallel.models.topology.LINKS`; rail-optimised: each GPU has its own NIC, as in
NVIDIA's DGX H100 with 8 ConnectX-7 ports for 8 GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import Checked, bad_value, check_int, one_of
from ..models.cost import link_preset
from ..models.topology import MAX_TOPOLOGY_RANKS, Link, Topology


@dataclass(frozen=True)
class GPU:
    """``memory_bytes`` of HBM and ``peak_flops`` dense bf16 FLOP/s."""

    name: str
    memory_bytes: float
    peak_flops: float
    source: str = ""


GPUS: dict[str, GPU] = {
    g.name: g
    for g in (
        GPU(
            "h100",
            80e9,
            989e12,
            "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: 80 GB HBM3, BF16 Tensor Core"
            " 1,979 TFLOPS with sparsity = 989 TFLOPS dense",
        ),
        GPU(
            "h200",
            141e9,
            989e12,
            "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: 141 GB HBM3e, BF16 Tensor Core"
            " 1,979 TFLOPS with sparsity = 989 TFLOPS dense",
        ),
        GPU(
            "a100-80g",
            80e9,
            312e12,
            "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM: 80 GB HBM2e, BF16 Tensor Core"
            " 312 TFLOPS (624 with sparsity)",
        ),
        GPU(
            "a100-40g",
            40e9,
            312e12,
            "NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM: 40 GB HBM2, BF16 Tensor Core"
            " 312 TFLOPS (624 with sparsity)",
        ),
    )
}


def gpu_preset(name: Any) -> GPU:
    """A :data:`GPUS` preset by name, or the :class:`GPU` given."""
    if isinstance(name, GPU):
        return name
    if name not in GPUS:
        raise bad_value("gpu", name, one_of(map(repr, GPUS)))
    return GPUS[name]


@dataclass(frozen=True)
class ClusterSpec(Checked):
    """``nodes`` x ``gpus_per_node`` GPUs of kind ``gpu``; ``intra`` links the GPUs of a node,
    ``inter`` the nodes (preset names or :class:`~edu_parallel.models.topology.Link`). Every bad
    field is named in one ValueError."""

    nodes: int
    gpus_per_node: int
    gpu: Any = "h100"
    intra: Any = "nvlink4-h100"
    inter: Any = "ib-ndr-400"

    def _check(self) -> list[str]:
        out: list[str] = []

        def resolve(name: str, fn: Any) -> None:
            try:
                object.__setattr__(self, name, fn(getattr(self, name)))
            except ValueError as exc:
                out.append(str(exc))

        resolve("nodes", lambda v: check_int("nodes", v, 1))
        resolve("gpus_per_node", lambda v: check_int("gpus_per_node", v, 1))
        resolve("gpu", gpu_preset)
        for name in ("intra", "inter"):
            resolve(name, lambda v, n=name: v if isinstance(v, Link) else link_preset(v, n))
        if not out and self.nodes * self.gpus_per_node > MAX_TOPOLOGY_RANKS:
            out.append(
                str(
                    bad_value(
                        "nodes * gpus_per_node",
                        self.nodes * self.gpus_per_node,
                        f"at most {MAX_TOPOLOGY_RANKS} GPUs",
                    )
                )
            )
        return out

    @property
    def world_size(self) -> int:
        return self.nodes * self.gpus_per_node

    def topology(self) -> Topology:
        return Topology(self.nodes, self.gpus_per_node, self.intra, self.inter)

    def describe(self) -> str:
        return (
            f"{self.nodes} x {self.gpus_per_node} {self.gpu.name} ({self.world_size} GPUs),"
            f" intra {self.intra.name}, inter {self.inter.name}"
        )
