"""ZeRO-1/2/3 and PyTorch's FSDP2, executed on real ranks with a per-rank memory ledger.

* ``config.py``: :class:`ZeroConfig` and :class:`FsdpConfig`, each run's options checked once
  where it starts and passed down unchanged (torchtitan's ``ParallelismConfig`` style);
* ``stages.py``: one rank's training step under DP or ZeRO-1/2/3 (Rajbhandari et al. 2019), with
  every allocation and release of model state in the trace;
* ``report.py``: run a stage, check it against one process bit for bit, read memory and bytes off
  the trace (:func:`run_zero`, or :func:`run_zero_config` with a config);
* ``fsdp.py``: ``fully_shard`` on the ranks, its collectives recorded by the profiler;
  ``fsdp_report.py``: FSDP2 beside ZeRO-3 on the same cluster (:func:`run_fsdp`,
  :func:`run_fsdp_config`);
* ``tables.py``: the runs as DataFrames, counts beside formulas (:func:`zero_table`,
  :func:`fsdp_table`).

Trains the tiny MLP of ``task/mlp.py``. Imports the layers below ``task/``. Names load on first use.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "ZeroConfig": "config",
    "FsdpConfig": "config",
    "GRANULARITIES": "config",
    "train_stage": "stages",
    "zero_job": "stages",
    "ZeroReport": "report",
    "memory_curves": "report",
    "run_zero": "report",
    "run_zero_config": "report",
    "zero_table": "tables",
    "fsdp_table": "tables",
    "format_zero": "report",
    "zero_runner": "report",
    "FsdpUnavailableError": "fsdp",
    "require_fsdp2": "fsdp",
    "preload": "fsdp",
    "fsdp_job": "fsdp",
    "FsdpReport": "fsdp_report",
    "fsdp_padded_numel": "fsdp_report",
    "formula_sent_bytes": "fsdp_report",
    "run_fsdp": "fsdp_report",
    "run_fsdp_config": "fsdp_report",
    "format_fsdp": "fsdp_report",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
