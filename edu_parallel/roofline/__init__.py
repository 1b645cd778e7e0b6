"""Bytes become time: the roofline of a training step, measured on the ranks and modelled.

* ``formulas.py``: compute ``W / F`` against communication ``m α + D / B``, the arithmetic
  intensity of DP and TP, the crossovers (pure Python);
* ``config.py``: :class:`SweepConfig`, the measured sweep's options, checked once;
* ``steps.py``: the rank side: data-parallel steps swept over the tokens per rank, with the
  matmul and all-reduce timings that give the formula its constants;
* ``sweep.py``: run the sweep and read it off the trace (:func:`run_sweep`, :class:`SweepReport`);
* ``strategies.py``: every strategy's step on this machine in time, from a run's bytes and
  messages; ``gpu.py``: the same on H100s, modelled with published rates;
* ``tables.py``: the numbers as DataFrames for the lesson.

References: the JAX Scaling Book (Austin et al. 2025, "How to Scale Your Model", chapters "All
About Rooflines" and "How to Think About GPUs"); Narayanan et al. 2021 (arXiv 2104.04473) for
tensor parallelism inside a node; NCCL's bus bandwidth as nccl-tests defines it
(``doc/PERFORMANCE.md``). Imports ``strategy_map/`` and the layers below it; names load on first
use, so the formulas import without torch.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "SweepConfig": "config",
    "StepTime": "formulas",
    "step_time": "formulas",
    "critical_intensity": "formulas",
    "dp_step_flops": "formulas",
    "dp_crossover_tokens": "formulas",
    "allreduce_time": "formulas",
    "crossover": "formulas",
    "tp_dp_time_crossover": "formulas",
    "ring_factor": "formulas",
    "strategy_flops": "strategies",
    "transfers": "strategies",
    "row_time": "strategies",
    "GpuRow": "gpu",
    "gpu_rows": "gpu",
    "dp_tokens": "gpu",
    "H100_FLOPS": "gpu",
    "sweep_job": "steps",
    "SweepReport": "sweep",
    "run_sweep": "sweep",
    "execute_sweep": "sweep",
    "read_sweep": "sweep",
    "sweep_runner": "sweep",
    "sweep_table": "tables",
    "strategy_time_table": "tables",
    "gpu_table": "tables",
    "crossover_time_table": "tables",
    "message_time_table": "tables",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
