"""The result of the model-state calculator: bytes per GPU (and on the CPU), by category.

Shared by :mod:`edu_parallel.memory.model_states` (the ZeRO paper's and Megatron-LM's accounting)
and :mod:`edu_parallel.memory.conventions` (DeepSpeed's estimators). Pure data, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GB = 1e9  # the ZeRO paper's GB: 16 · 7.5e9 bytes = 120 GB


@dataclass(frozen=True)
class MemoryEstimate:
    """Model-state bytes per GPU (and per GPU's share of CPU memory), by category."""

    params: float
    gpus: int
    zero: int
    precision: str
    offload: str
    tp: int
    pp: int
    dp: int  # N, the data-parallel degree gpus / (tp·pp)
    params_per_gpu: float  # Ψ/(tp·pp): the model-parallel shard before ZeRO
    bytes_per_gpu: float
    cpu_bytes_per_gpu: float
    breakdown: dict[str, float] = field(default_factory=dict)  # GPU bytes by category
    cpu_breakdown: dict[str, float] = field(default_factory=dict)  # CPU bytes by category
    formula: str = ""
    convention: str = "zero-paper"  # one of conventions.CONVENTIONS
    # DeepSpeed's estimators give host memory per node; None for the other conventions
    cpu_bytes_per_node: float | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "gpus": self.gpus,
            "zero": self.zero,
            "precision": self.precision,
            "offload": self.offload,
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "params_per_gpu": self.params_per_gpu,
            "bytes_per_gpu": self.bytes_per_gpu,
            "cpu_bytes_per_gpu": self.cpu_bytes_per_gpu,
            "breakdown": dict(self.breakdown),
            "cpu_breakdown": dict(self.cpu_breakdown),
            "formula": self.formula,
            "convention": self.convention,
            "cpu_bytes_per_node": self.cpu_bytes_per_node,
        }
