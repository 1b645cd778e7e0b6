"""The memory calculator: bytes per GPU of model states, activations and communication.

Pure arithmetic, no torch; every function returns bytes and the formula it used, with its source.

* ``model_states.py``: parameters, gradients and optimizer states under ZeRO stages 0-3, with CPU
  offload, tensor and pipeline parallelism (Rajbhandari et al. 2019, §3.1, §5); the largest model
  that fits.
* ``activations.py``: activation memory of transformer layers (Korthikanti et al. 2022).
* ``communication.py``: data-parallel and ZeRO bytes per training step (ZeRO §7.2, ring volumes).
* ``presets.py``: GPT-2, 7.5B and Llama-3 shapes, their parameter counts computed from the shape.
* ``tables.py``: named estimates side by side as a DataFrame (:func:`estimates_table`).

Imports only ``core/``. The ZeRO runs of ``data_parallel/`` are checked against these formulas.
"""

from __future__ import annotations

from .activations import ActivationEstimate, activation_bytes, activation_estimate
from .communication import (
    CommEstimate,
    comm_bytes_per_step,
    comm_estimate,
    fsdp_collectives_per_step,
)
from .model_states import (
    GB,
    OFFLOAD_STAGES,
    OFFLOADS,
    PRECISIONS,
    RECOMPUTE,
    ZERO_STAGE_NAMES,
    ZERO_STAGES,
    MemoryEstimate,
    largest_model_that_fits,
    model_state_bytes,
)
from .presets import PRESETS, ModelShape, count_params, get_preset
from .tables import estimates_table

__all__ = [
    "GB",
    "OFFLOADS",
    "OFFLOAD_STAGES",
    "PRECISIONS",
    "PRESETS",
    "RECOMPUTE",
    "ZERO_STAGES",
    "ZERO_STAGE_NAMES",
    "ActivationEstimate",
    "CommEstimate",
    "MemoryEstimate",
    "ModelShape",
    "activation_bytes",
    "activation_estimate",
    "comm_bytes_per_step",
    "comm_estimate",
    "count_params",
    "estimates_table",
    "fsdp_collectives_per_step",
    "get_preset",
    "largest_model_that_fits",
    "model_state_bytes",
]
