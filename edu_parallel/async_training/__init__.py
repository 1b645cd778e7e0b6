"""Synchronous against asynchronous training with stragglers (lesson 14).

* ``config.py``: the validated :class:`AsyncConfig`, torch-free: regimes, worker convention,
  straggler delays;
* ``sgd.py``: synchronous and local SGD on the ranks; ``param_server.py``: the asynchronous and
  backup-worker parameter servers;
* ``replay_run.py``: the one-process replay of a run's recorded order of updates, bit for bit;
* ``report.py``: one run, measured (:func:`run_async`, or :func:`run_async_config` for a config
  built already); ``tables.py``: every regime under every straggler setting
  (:func:`compare_regimes`) and what a straggler costs (:func:`straggler_table`).

Trains the classifier of ``task/`` with DDP's model family (``data_parallel/``). Names load on
first use.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "straggler_table": "tables",
    "AsyncConfig": "config",
    "delay_s": "config",
    "sync_sgd": "sgd",
    "local_sgd": "sgd",
    "server_job": "param_server",
    "replay": "replay_run",
    "AsyncReport": "report",
    "Comparison": "tables",
    "run_async": "report",
    "run_async_config": "report",
    "compare_regimes": "tables",
    "format_async": "report",
    "async_runner": "report",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
