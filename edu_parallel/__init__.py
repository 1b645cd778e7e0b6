"""edu-parallel: distributed deep-learning training and communication, run for real.

N worker processes form a ``torch.distributed`` group and execute each concept from a plan; every
send, receive, collective, compute step and memory change is recorded in a trace that the
visualizers animate and the lessons measure.

    >>> from edu_parallel import Cluster, run_allreduce
    >>> with Cluster(4) as cluster:
    ...     report = run_allreduce(cluster, "1MiB")
    >>> report.per_rank_sent_bytes  # 2(N-1)/N * D each

Names are imported lazily, so ``import edu_parallel.viz`` (renderers) never imports
``torch.distributed``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Cluster": "cluster",
    "RunResult": "cluster",
    "RankContext": "context",
    "Trace": "trace",
    "Event": "trace",
    "Snapshot": "trace",
    "Plan": "plan",
    "Step": "plan",
    "Transfer": "plan",
    "PlanError": "plan",
    "validate": "plan",
    "explain": "plan",
    "ring_allreduce_plan": "ring",
    "ring_sent_bytes_formula": "ring",
    "naive_allreduce_plan": "naive",
    "run_plan": "execute",
    "run_allreduce": "allreduce",
    "AllReduceReport": "allreduce",
    "CostModel": "retime",
    "Link": "retime",
    "LINKS": "retime",
    "algbw_gbps": "metrics",
    "busbw_gbps": "metrics",
    "bus_factor": "metrics",
    "parse_size": "units",
    "format_bytes": "units",
    "WorkerError": "errors",
    "JobTimeoutError": "errors",
    "ClusterClosedError": "errors",
    "EngineError": "errors",
    "TorchrunExecutor": "launch",
    "COLLECTIVE_PLANS": "collectives",
    "volume_formula": "collectives",
    "run_collective": "collective_run",
    "CollectiveReport": "collective_run",
    "binary_tree_allreduce_plan": "tree",
    "double_binary_tree_allreduce_plan": "tree",
    "parameter_server_plan": "ps",
    "rabenseifner_allreduce_plan": "rabenseifner",
    "hierarchical_allreduce_plan": "hierarchical",
    "run_hierarchical": "hierarchical",
    "traffic_table": "compare",
    "predict": "costmodel",
    "Prediction": "costmodel",
    "Topology": "topology",
    "calibrate": "calibrate",
    "choose_allreduce": "choose",
    "crossover_size": "choose",
    "simulate_fast": "fast_sim",
    "PlanArrays": "plan_arrays",
    "bench_collectives": "bench",
    "run_fsdp": "fsdp_report",
    "FsdpReport": "fsdp_report",
    "run_strategy_map": "strategy_map_report",
    "StrategyMapReport": "strategy_map_report",
    "run_tp": "tp_run",
    "TPReport": "tp_run",
    "column_parallel_linear": "tp",
    "row_parallel_linear": "tp",
    "megatron_mlp": "tp",
    "shard_linear": "tp",
    "run_moe": "moe_run",
    "MoEReport": "moe_run",
    "init_moe": "moe",
    "moe_layer": "moe",
    "moe_reference": "moe",
}

__all__ = sorted([*_EXPORTS, "retime", "simulate"])

# These two functions share their module's name, and importing a submodule sets the package
# attribute to the module; importing them here (both are pure Python, no torch) keeps the function.
from .retime import retime as retime  # noqa: E402
from .simulate import simulate as simulate  # noqa: E402


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'edu_parallel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
