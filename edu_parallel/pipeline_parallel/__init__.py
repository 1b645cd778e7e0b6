"""Pipeline parallelism: schedules as data, timed by a model and executed on real ranks.

* ``schedule.py``: :class:`Action` (``"1F0"``; F, B, I, W: torch.distributed.pipelining's names) and
  :class:`Schedule`, with a text form and a validator that reports every problem;
  ``builders.py``: GPipe, 1F1B, interleaved 1F1B and ZB-H1.
* ``timing.py``: a schedule timed event by event, its bubble and stashed activations;
  ``formulas.py``: the bubble formulas (pure Python).
* ``config.py``: a run's :class:`PipelineConfig`, checked once and passed down (pure Python);
  ``memory.py``: what a run holds per rank and in the calling process, from its config (the
  command line refuses what this machine cannot hold);
* ``model.py``, ``execute.py``: the seeded model cut into stages, and one rank executing its row;
  ``report.py``: a run with gradients checked against one process (:func:`run_pipeline` builds
  the config, :func:`execute_pipeline` runs it);
  ``tables.py``: runs and timed schedules as DataFrames, measured beside the formulas;
  ``torch_order.py``: a schedule as torch.distributed.pipelining's pipeline order (and its CSV),
  checked by torch's own validator.

Imports ``core/``, ``plans/``, ``engine/``, ``models/``, ``memory/`` and ``comm/``. Names load on
first use, so schedules and timing import without torch.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "KINDS": "schedule",
    "Action": "schedule",
    "Schedule": "schedule",
    "BACKWARD_KINDS": "schedule",
    "dependencies": "schedule",
    "completeness": "schedule",
    "validate_schedule": "schedule",
    "explain_schedule": "schedule",
    "SCHEDULES": "builders",
    "build_schedule": "builders",
    "make_schedule": "builders",
    "run_orders": "builders",
    "INTERLEAVED_RULES": "builders",
    "interleaved_warmup": "builders",
    "Span": "timing",
    "Timeline": "timing",
    "time_schedule": "timing",
    "gpipe_bubble": "formulas",
    "megatron_bubble": "formulas",
    "interleaved_bubble": "formulas",
    "bubble_formula": "formulas",
    "default_times": "formulas",
    "PipelineConfig": "config",
    "check_layers": "config",
    "stage_bounds": "config",
    "make_batch": "model",
    "microbatch_loss": "model",
    "reference_grads": "model",
    "pipeline_job": "execute",
    "PipelineReport": "report",
    "execute_pipeline": "report",
    "executed_orders": "report",
    "run_pipeline": "report",
    "format_pipeline": "report",
    "pipeline_runner": "report",
    "bubble_table": "tables",
    "comm_table": "tables",
    "to_torch_order": "torch_order",
    "from_torch_order": "torch_order",
    "to_torch_csv": "torch_order",
    "from_torch_csv": "torch_order",
    "torch_check": "torch_order",
    "torch_format": "torch_order",
    "mock_stages": "torch_order",
    "torch_interleaved": "torch_order",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
