"""Memory estimates as tables (pandas DataFrames): bytes per GPU and the formula behind each.

The estimates come from :func:`~edu_parallel.memory.model_states.model_state_bytes` (ZeRO,
Rajbhandari et al. 2019, §3.1 and §5); :func:`conventions_table` sets the ZeRO paper's accounting
beside Megatron-LM's and DeepSpeed's (:mod:`edu_parallel.memory.conventions`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..core.i18n import N_
from ..core.shown import shown
from .conventions import CONVENTIONS, DEEPSPEED_STAGES, MEGATRON_STAGES, largest_module_params
from .model_states import GB, MemoryEstimate, model_state_bytes
from .presets import ModelShape

# (stage, offload) rows of conventions_table: every setup at least one convention covers
CONVENTION_SETUPS = ((0, "none"), (1, "none"), (2, "none"), (2, "optimizer"), (3, "none"))
CONVENTION_SETUPS += ((3, "optimizer"), (3, "all"))
COVERED = {
    "zero-paper": lambda zero, offload: True,
    "megatron": lambda zero, offload: zero in MEGATRON_STAGES and offload == "none",
    "deepspeed": lambda zero, offload: zero in DEEPSPEED_STAGES,
}


CONVENTION_HEADERS = (N_("zero-paper GB/GPU"), N_("megatron GB/GPU"), N_("deepspeed GB/GPU"))


def estimates_table(estimates: Mapping[str, MemoryEstimate]) -> pd.DataFrame:
    """One row per named estimate: GB per GPU (10^9 bytes), the bytes, and the formula."""
    rows = [
        {
            N_("setup"): name,
            N_("GB per GPU"): e.bytes_per_gpu / GB,
            N_("bytes per GPU"): e.bytes_per_gpu,
            N_("formula"): e.formula,
        }
        for name, e in estimates.items()
    ]
    return shown(pd.DataFrame(rows).set_index("setup"))


def conventions_table(
    shape: ModelShape, gpus: int, gpus_per_node: int | None = None
) -> pd.DataFrame:
    """GPU GB (1e9 B) of model states per GPU for ``shape`` on ``gpus`` data-parallel GPUs under
    each convention (columns) and each (ZeRO stage, offload) (rows); NaN where the convention's
    source has no number for that setup. DeepSpeed's host GB per node are a last column."""
    rows = []
    for zero, offload in CONVENTION_SETUPS:
        row: dict[str, object] = {
            N_("stage"): f"ZeRO-{zero}" if zero else "DP",
            N_("offload"): offload,
        }
        host = float("nan")
        for convention in CONVENTIONS:
            value = float("nan")
            if COVERED[convention](zero, offload):
                est = model_state_bytes(
                    shape.params,
                    gpus,
                    zero,
                    offload=offload,
                    convention=convention,
                    gpus_per_node=gpus_per_node,
                    largest_layer_params=largest_module_params(shape),
                )
                value = est.bytes_per_gpu / GB
                if est.cpu_bytes_per_node is not None:
                    host = est.cpu_bytes_per_node / GB
            row[f"{convention} GB/GPU"] = value  # shown translated: CONVENTION_HEADERS
        row[N_("deepspeed host GB/node")] = host
        rows.append(row)
    return shown(pd.DataFrame(rows).set_index(["stage", "offload"]), values=CONVENTION_HEADERS)
