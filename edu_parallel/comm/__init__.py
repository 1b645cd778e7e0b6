"""Communication, run for real: collectives and all-reduce algorithms on the ranks, measured.

* ``allreduce.py``: any all-reduce plan of ``plans/`` on real ranks, checked against
  ``dist.all_reduce``, bytes against the formula, algbw/busbw (:func:`run_allreduce`).
* ``collective.py``: the other seven collectives the same way (:func:`run_collective`).
* ``hierarchical.py``: the two-level all-reduce on pretend nodes (:func:`run_hierarchical`).
* ``memory.py``: what an all-reduce holds per rank (the ring: within 3x its payload), the check
  that a size fits this machine's free memory, and a rank's own peak (torch-free).
* ``compare.py``: real runs for the traffic table of ``models/traffic.py``.
* ``bench.py``, ``bench_jobs.py``: an nccl-tests-style sweep; ``calibration.py``: this machine's
  alpha and beta from a ping-pong.
* ``tables.py``: those runs as DataFrames, counted bytes and times beside the formulas.

Imports ``core/``, ``plans/``, ``engine/`` and ``models/``. Names load on first use.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "AllReduceReport": "allreduce",
    "execute_allreduce": "allreduce",
    "run_allreduce": "allreduce",
    "allreduce_job": "allreduce",
    "allreduce_peak_job": "allreduce",
    "PEAK_FACTOR": "memory",
    "bytes_per_rank": "memory",
    "check_fits": "memory",
    "format_report": "allreduce",
    "step_table": "allreduce",
    "cluster_runner": "allreduce",
    "CollectiveReport": "collective",
    "execute_collective": "collective",
    "run_collective": "collective",
    "collective_job": "collective",
    "format_collective": "collective",
    "collective_runner": "collective",
    "HierarchicalReport": "hierarchical",
    "run_hierarchical": "hierarchical",
    "sent_by_link_class": "hierarchical",
    "hierarchical_runner": "hierarchical",
    "cluster_traffic_runner": "compare",
    "bench_collectives": "bench",
    "check_sweep_fits": "bench",
    "check_collectives": "bench",
    "format_bench": "bench",
    "progress_bar": "bench",
    "ProgressBar": "bench",
    "size_sweep": "bench",
    "time_allreduce": "bench_jobs",
    "ping_pong": "bench_jobs",
    "time_reduce": "bench_jobs",
    "ring_shift": "bench_jobs",
    "DEFAULT_SIZES": "calibration",
    "calibrate": "calibration",
    "fit_alpha_beta": "calibration",
    "measure_ping_pong": "calibration",
    "measure_reduce_Bps": "calibration",
    "builtin_table": "tables",
    "volume_table": "tables",
    "ring_volume_table": "tables",
    "phase_table": "tables",
    "bandwidth_table": "tables",
    "calibration_table": "tables",
    "topology_table": "tables",
    "link_class_table": "tables",
    "nics_table": "tables",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
