"""DP x TP x PP (x EP) together: one small transformer trained one step on a mesh of ranks.

* ``config.py``: the model and step sizes (:class:`Config3D`) and the run (:class:`Run3D`: the
  degrees, a ``ParallelDims`` validated with the model's shape, and the sizes), each checked once
  when built (one error names every bad factor); pure Python;
* ``mesh.py``: the TP and DP process groups of every rank (:func:`mesh_groups`);
* ``model.py``: weights, the layer under TP (``f``/``g``), the one-process reference;
* ``step.py``: one rank's step: its stage's layers, 1F1B across stages, DP all-reduce or ZeRO-1;
* ``measure.py``: per rank from the trace: memory, bytes and messages per group type, idle;
* ``memory.py``: what a step holds per rank and in the calling process, from the ``Run3D`` and
  what one layer saves (the command line refuses what this machine cannot hold);
* ``report.py``: :func:`run_3d` builds the ``Run3D``, :func:`execute_3d` runs it (trusted) and
  checks it against one process and the planner;
* ``tables.py``: per-rank and per-layout DataFrames (:func:`ranks_table`, :func:`layouts_table`).

Built from ``tensor_parallel/``, ``pipeline_parallel/``, ``expert_parallel/`` and the strategy
map's measuring tools. Names load on first use, so the config imports without torch.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "Config3D": "config",
    "Run3D": "config",
    "LAYOUTS": "config",
    "model_shape": "config",
    "mesh_groups": "mesh",
    "bytes_per_rank": "memory",
    "reference_bytes": "memory",
    "reference_step": "model",
    "step_job": "step",
    "GROUP_TYPES": "measure",
    "measure_3d": "measure",
    "bubble_fraction": "measure",
    "Report3D": "report",
    "run_3d": "report",
    "execute_3d": "report",
    "runner_3d": "report",
    "format_3d": "report",
    "ranks_table": "tables",
    "layouts_table": "tables",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
