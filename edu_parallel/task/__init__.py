"""The learning tasks that the data-parallel lessons train: one home, shared by DDP, ZeRO,
compression and asynchronous training.

* ``mlp.py``: the tiny seeded MLP of lessons 06 and 07 as one flat vector (its layer views,
  batches, 16-bit forward and backward), mixed-precision Adam, and the single-process reference
  that every ZeRO stage is checked against (bit for bit: the reference replays the ring's
  summation order); DDP's model family (``data_parallel/model.py``) is built from its weights;
* ``classifier.py``: the learning task of lessons 13 and 14 (a linear teacher labels Gaussian
  inputs), its loss and its held-out score; ``targets.py``: what that task asks (learning rate,
  target accuracy, steps), torch-free so that the command line checks options with it before
  torch loads;
* ``threads.py``: :func:`one_thread`, how the kernel computes a one-process reference (with one
  intra-op thread, as a rank does).

Below every parallelism: it imports only ``core/``, ``plans/`` and ``engine/`` (``mlp.py``'s
reference replays a ring plan). Names load on first use.
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
    "one_thread": "threads",
    "evaluate": "classifier",
    "steps_to_target": "classifier",
    "TARGET_ACCURACY": "targets",
    "TARGET_STEPS": "targets",
    "TASK_LR": "targets",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
