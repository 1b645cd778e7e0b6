"""Tensor parallelism, executed: Megatron's column- and row-parallel layers on real ranks.

* ``layers.py``: ``f`` (identity forward, all-reduce backward) and ``g`` (all-reduce forward,
  identity backward) as autograd functions, the column- and row-parallel ``nn.Linear``, the MLP
  block and sequence parallelism; every collective is traced in its pass.
* ``config.py``: :class:`TPConfig` and :class:`AttentionConfig`, a run's options checked once
  where it starts and passed down unchanged (pure Python); ``formulas.py``: the collectives and
  the bytes each layer sends (pure Python).
* ``job.py``: one rank's run of a layer; ``report.py``: the check against a dense layer, bytes
  from the trace (:func:`run_tp`, :func:`run_tp_config`); ``tables.py``: runs as DataFrames,
  bytes beside formulas.
* ``attention.py``: self-attention with its heads split over the ranks (Q, K, V column-parallel,
  the output projection row-parallel, ``f`` and ``g`` around them); ``attention_run.py``: its run
  on real ranks, checked against one process (:func:`run_tp_attention`,
  :func:`run_attention_config`).

Imports ``core/``, ``plans/``, ``engine/``, ``models/``, ``memory/`` and ``comm/``. Names load on
first use, so the configs and the formulas import without torch.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "column_parallel_linear": "layers",
    "row_parallel_linear": "layers",
    "megatron_mlp": "layers",
    "shard_linear": "layers",
    "dense_mlp": "layers",
    "f_then_linear": "layers",
    "linear_then_g": "layers",
    "TPConfig": "config",
    "AttentionConfig": "config",
    "MODES": "config",
    "RULES": "config",
    "expected_collectives": "formulas",
    "allreduce_message_bytes": "formulas",
    "tp_sent_bytes": "formulas",
    "sp_sent_bytes_per_pass": "formulas",
    "TPReport": "report",
    "tp_job": "job",
    "make_problem": "job",
    "dense_reference": "job",
    "run_tp": "report",
    "run_tp_config": "report",
    "format_tp": "report",
    "tp_runner": "report",
    "rule_table": "tables",
    "message_table": "tables",
    "pass_table": "tables",
    "pass_formula": "tables",
    "attention_heads": "attention",
    "tp_attention": "attention",
    "shard_attention": "attention",
    "dense_attention": "attention",
    "attention_sent_bytes": "formulas",
    "AttentionReport": "attention_run",
    "attention_job": "attention_run",
    "run_tp_attention": "attention_run",
    "run_attention_config": "attention_run",
    "format_attention": "attention_run",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
