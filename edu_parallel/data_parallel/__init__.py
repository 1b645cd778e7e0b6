"""Data parallelism, executed: plain DP and ZeRO stages 1-3 on real ranks, and PyTorch's FSDP2.

* ``training.py``: the tiny MLP, its data, Adam and the single-process reference every stage is
  checked against (bit for bit: the reference replays the ring's summation order).
* ``zero.py``: one rank's training step under DP or ZeRO-1/2/3, with a memory ledger in the trace;
  ``zero_report.py``: run a stage, check it, read memory and bytes off the trace (:func:`run_zero`).
* ``fsdp.py``: ``fully_shard`` on the ranks, its collectives recorded by the profiler;
  ``fsdp_report.py``: FSDP2 beside ZeRO-3 on the same cluster (:func:`run_fsdp`).

Imports ``core/``, ``plans/``, ``engine/``, ``models/``, ``memory/`` and ``comm/``. Names load on
first use.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "DEFAULT_DIMS": "training",
    "DEFAULT_MICROBATCH": "training",
    "check_dims": "training",
    "num_params": "training",
    "padded_numel": "training",
    "adam_update": "training",
    "reference_training": "training",
    "formula_model_state_bytes": "training",
    "train_stage": "zero",
    "zero_job": "zero",
    "ZeroReport": "zero_report",
    "check_zero_args": "zero_report",
    "memory_curves": "zero_report",
    "run_zero": "zero_report",
    "format_zero": "zero_report",
    "zero_runner": "zero_report",
    "FsdpUnavailableError": "fsdp",
    "GRANULARITIES": "fsdp",
    "require_fsdp2": "fsdp",
    "preload": "fsdp",
    "fsdp_job": "fsdp",
    "FsdpReport": "fsdp_report",
    "check_fsdp_args": "fsdp_report",
    "fsdp_padded_numel": "fsdp_report",
    "formula_sent_bytes": "fsdp_report",
    "run_fsdp": "fsdp_report",
    "format_fsdp": "fsdp_report",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
