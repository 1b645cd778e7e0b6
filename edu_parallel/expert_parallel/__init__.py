"""Expert parallelism, executed: a top-k mixture-of-experts layer whose tokens travel by all-to-all.

* ``experts.py``: the experts and router weights, seeded; ``router.py``: top-k gating and
  capacity; ``dispatch.py``: the all-to-all exchanges (variable splits, GShard's padded buffer);
  ``layer.py``: the layer, its single-process reference and the job.
* ``config.py``: :class:`MoEConfig`, a run's options checked once where it starts and passed down
  unchanged (pure Python); ``formulas.py``: capacity and bytes per exchange (pure Python).
* ``report.py``: a run checked against one process, traffic read off the trace (:func:`run_moe`,
  :func:`run_moe_config`); ``tables.py``: runs side by side as DataFrames, bytes beside the
  formulas.

Imports ``core/``, ``plans/``, ``engine/``, ``models/``, ``memory/`` and ``comm/``. Names load on
first use, so the config and the formulas import without torch.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "ExpertBank": "experts",
    "MoEParams": "experts",
    "init_moe": "experts",
    "make_tokens": "experts",
    "Routing": "router",
    "route": "router",
    "capacity_positions": "router",
    "exchange": "dispatch",
    "AllToAll": "dispatch",
    "moe_layer": "layer",
    "moe_reference": "layer",
    "moe_job": "layer",
    "MoEConfig": "config",
    "DISPATCHES": "config",
    "DEFAULTS": "formulas",
    "expert_capacity": "formulas",
    "balanced_dispatch_bytes": "formulas",
    "padded_dispatch_bytes": "formulas",
    "all_to_one_dropped": "formulas",
    "MoEReport": "report",
    "run_moe": "report",
    "run_moe_config": "report",
    "format_moe": "report",
    "moe_routing_stats": "report",
    "moe_runner": "report",
    "bytes_into": "tables",
    "skew_table": "tables",
    "dispatch_table": "tables",
    "experts_table": "tables",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
