"""The strategy map: one tiny model trained one step under DP, TP, TP+SP, PP and EP, same ranks.

* ``formulas.py``: the model's sizes (:class:`MapConfig`) and the run (:class:`MapRun`: the
  strategies on N ranks), each checked once when built, and the bytes each strategy sends and
  holds (pure Python); ``model.py``: its weights, data and measuring tools;
* ``strategies.py``: one rank's step under each strategy, built from the parallelism folders;
* ``table.py``: a strategy's row per rank read off its trace; ``report.py``: every strategy run,
  checked against one process, tabulated (:func:`run_strategy_map`); ``tables.py``: trace
  beside formula as DataFrames (:func:`formula_table`, :func:`crossover_table`,
  :func:`message_table`, :func:`layer_crossover_table`);
* ``crossover.py``: when TP sends more bytes than DP, for an MLP block or a full transformer
  layer, with gradient accumulation (pure Python).

Imports the layers below it and ``data_parallel/``, ``tensor_parallel/``, ``expert_parallel/``,
``pipeline_parallel/``. Names load on first use, so the formulas import without torch.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "MapConfig": "formulas",
    "STRATEGIES": "formulas",
    "STRATEGY_NAMES": "formulas",
    "block_params": "formulas",
    "formula_sent_bytes": "formulas",
    "formula_param_bytes": "formulas",
    "strategy_job": "strategies",
    "StrategyMapReport": "report",
    "MapRun": "formulas",
    "check_strategies": "formulas",
    "measure": "table",
    "run_strategy_map": "report",
    "execute_strategy_map": "report",
    "format_strategy_map": "report",
    "map_runner": "report",
    "formula_table": "tables",
    "crossover_table": "tables",
    "message_table": "tables",
    "layer_crossover_table": "tables",
    "formula_messages": "formulas",
    "LAYER_KINDS": "crossover",
    "layer_param_count": "crossover",
    "tp_allreduces": "crossover",
    "step_sent_bytes": "crossover",
    "crossover_tokens": "crossover",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
