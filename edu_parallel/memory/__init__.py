"""The memory calculator: bytes per GPU of model states, activations and communication.

Pure arithmetic, no torch; every function returns bytes and the formula it used, with its source.

* ``model_states.py``: parameters, gradients and optimizer states under ZeRO stages 0-3, with CPU
  offload, tensor and pipeline parallelism (Rajbhandari et al. 2019, §3.1, §5); the largest model
  that fits. ``estimate.py``: its result, :class:`MemoryEstimate`.
* ``conventions.py``: the ZeRO paper's, Megatron-LM's and DeepSpeed's accounting of the same
  states (``convention=``); DeepSpeed's estimators reproduced to the byte.
* ``activations.py``: activation memory of transformer layers (Korthikanti et al. 2022 for GPT,
  Llama's own terms: SwiGLU, grouped-query attention, RMSNorm, no dropout).
* ``communication.py``: data-parallel and ZeRO bytes per training step (ZeRO §7.2, ring volumes).
* ``presets.py``: GPT-2, 7.5B and Llama-3 shapes, their parameter counts computed from the shape.
* ``tables.py``: named estimates side by side as a DataFrame (:func:`estimates_table`).

Imports only ``core/``. The ZeRO runs of ``data_parallel/`` are checked against these formulas.
"""

from __future__ import annotations

from .activations import (
    ActivationEstimate,
    activation_bytes,
    activation_estimate,
    mlp_activation_sbh,
    shape_activation_estimate,
)
from .communication import (
    CommEstimate,
    comm_bytes_per_step,
    comm_estimate,
    fsdp_collectives_per_step,
)
from .conventions import (
    CONVENTIONS,
    deepspeed_zero2,
    deepspeed_zero3,
    largest_module_params,
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
from .tables import conventions_table, estimates_table

__all__ = [
    "CONVENTIONS",
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
    "conventions_table",
    "count_params",
    "deepspeed_zero2",
    "deepspeed_zero3",
    "estimates_table",
    "fsdp_collectives_per_step",
    "get_preset",
    "largest_model_that_fits",
    "largest_module_params",
    "mlp_activation_sbh",
    "model_state_bytes",
    "shape_activation_estimate",
]
