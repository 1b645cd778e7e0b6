"""The failure lab (lesson 16): each failure of a distributed job made to happen on real ranks.

* ``config.py``: the lab's cases as data, and :class:`LabCase`, one case checked once (torch-free);
  ``cases.py``: the lab's cases (a killed rank, a skipped collective, a sleeping or stopped rank,
  mismatched collectives and sizes, a send/recv deadlock, a straggler, a timeout too short for the
  work), :func:`provoke` runs one with a chosen culprit on a
  :class:`~edu_parallel.engine.cluster.Cluster` and returns the engine's
  :class:`~edu_parallel.core.diagnosis.Diagnosis`;
* ``deadlock.py``: a send/recv exchange that deadlocks, and its two fixes (even ranks send first;
  ``batch_isend_irecv``);
* ``checksums.py``: a rank that diverges (another seed), caught by comparing parameter checksums;
* ``torch_tools.py``: torch's own tools where they run on gloo (``monitored_barrier``,
  ``TORCH_DISTRIBUTED_DEBUG=DETAIL``'s collective fingerprint); ``gpu_tools.py``: what the NCCL
  flight recorder and ``NCCL_DEBUG=INFO`` would show on GPUs, as text, marked not run here;
* ``report.py``: the evidence of every rank in one table, and every case of the lab in one run.

Imports ``core/``, ``plans/``, ``engine/``, ``models/``, ``memory/`` and ``comm/``. Names load on
first use (torch is imported then).
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "CASES": "config",
    "EXPECTED": "config",
    "LabCase": "config",
    "check_case": "config",
    "Provoked": "cases",
    "provoke": "cases",
    "provoke_case": "cases",
    "ORDERS": "deadlock",
    "exchange": "deadlock",
    "run_exchange": "deadlock",
    "param_checksum": "checksums",
    "compare_checksums": "checksums",
    "run_divergence": "checksums",
    "monitored_barrier_text": "torch_tools",
    "fingerprint_text": "torch_tools",
    "GPU_TOOLS": "gpu_tools",
    "gpu_tools_table": "gpu_tools",
    "ExchangeResult": "deadlock",
    "DivergenceReport": "checksums",
    "MISMATCHES": "torch_tools",
    "evidence_table": "report",
    "lab_table": "report",
    "run_lab": "report",
    "CaseReport": "report",
    "run_case": "report",
    "format_case": "report",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
