"""The learning tasks that the data-parallel lessons train: one home, shared by DDP, ZeRO,
compression and asynchronous training.

* ``mlp.py``: the tiny MLP of lessons 05 and 06, its data, mixed-precision Adam and the
  single-process reference that every ZeRO stage is checked against (bit for bit: the reference
  replays the ring's summation order);
* ``classifier.py``: the classifier of lessons 11 and 12 (a linear teacher labels the data), its
  loss and its held-out score; ``targets.py``: what that task asks (learning rate, target accuracy,
  steps), torch-free so that the command line checks options with it before torch loads.

Imports ``core/``, ``plans/``, ``engine/``, ``models/``, ``memory/`` and ``comm/``. Names load on
first use.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "DEFAULT_DIMS": "mlp",
    "DEFAULT_MICROBATCH": "mlp",
    "check_dims": "mlp",
    "num_params": "mlp",
    "padded_numel": "mlp",
    "adam_update": "mlp",
    "reference_training": "mlp",
    "formula_model_state_bytes": "mlp",
    "evaluate": "classifier",
    "steps_to_target": "classifier",
    "TARGET_ACCURACY": "targets",
    "TARGET_STEPS": "targets",
    "TASK_LR": "targets",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
