"""edu-parallel: distributed deep-learning training and communication, run for real.

N worker processes form a ``torch.distributed`` group and execute each concept from a plan; every
send, receive, collective, compute step and memory change is recorded in a trace that the
visualizers animate and the lessons measure.

    >>> from edu_parallel import Cluster, run_allreduce
    >>> with Cluster(4) as cluster:
    ...     report = run_allreduce(cluster, "1MiB")
    >>> report.per_rank_sent_bytes  # 2(N-1)/N * D each

Messages, quizzes, figures and tables read in English or 简体中文: ``set_language("zh")``, or
``EDU_PARALLEL_LANG=zh``; else the locale decides (``core/i18n.py``).

The package is layered, one folder per layer and per concept (README, "Where code goes"):
``core`` < ``plans`` < ``engine`` / ``models`` / ``memory`` < ``comm`` < ``task`` < the parallelism
folders (``data_parallel`` < ``zero``, ``compression``, ``async_training``; ``tensor_parallel``,
``expert_parallel``, ``pipeline_parallel``) < ``strategy_map`` < ``parallel_3d``; ``viz`` and
``quiz`` read the pure layers; ``app`` holds the command line.
The names below load on first use, so ``import edu_parallel.viz`` never imports torch.
"""

from __future__ import annotations

from .core.lazy import lazy_exports

__version__ = "0.1.0"

_LAZY = {
    "Cluster": "engine.cluster",
    "RunResult": "engine.executor",
    "RankContext": "engine.context",
    "TorchrunExecutor": "engine.torchrun",
    "run_plan": "engine.execute",
    "Trace": "core.trace",
    "Event": "core.trace",
    "Snapshot": "core.trace",
    "ParallelDims": "core.dims",
    "algbw_gbps": "core.metrics",
    "busbw_gbps": "core.metrics",
    "bus_factor": "core.metrics",
    "parse_size": "core.units",
    "format_bytes": "core.units",
    "set_language": "core.i18n",
    "get_language": "core.i18n",
    "WorkerError": "core.errors",
    "JobTimeoutError": "core.errors",
    "ClusterClosedError": "core.errors",
    "EngineError": "core.errors",
    "MessageSizeError": "engine.matching",
    "Plan": "plans.plan",
    "Step": "plans.plan",
    "Transfer": "plans.plan",
    "PlanError": "plans.plan",
    "validate": "plans.checker",
    "explain": "plans.checker",
    "ring_allreduce_plan": "plans.ring",
    "ring_sent_bytes_formula": "plans.ring",
    "naive_allreduce_plan": "plans.naive",
    "binary_tree_allreduce_plan": "plans.tree",
    "double_binary_tree_allreduce_plan": "plans.tree",
    "parameter_server_plan": "plans.ps",
    "rabenseifner_allreduce_plan": "plans.rabenseifner",
    "hierarchical_allreduce_plan": "plans.hierarchical",
    "channel_ring_allreduce_plan": "plans.hierarchical",
    "COLLECTIVE_PLANS": "plans.collectives",
    "volume_formula": "plans.collectives",
    "PlanArrays": "plans.arrays",
    "simulate": "models.simulation",
    "simulate_fast": "models.fast_simulation",
    "retime": "models.retiming",
    "CostModel": "models.retiming",
    "Link": "models.topology",
    "LINKS": "models.topology",
    "Topology": "models.topology",
    "predict": "models.cost",
    "Prediction": "models.cost",
    "choose_allreduce": "models.choose",
    "crossover_size": "models.choose",
    "NcclSystem": "models.nccl.tuning",
    "nccl_choose": "models.nccl.selection",
    "NCCL_SYSTEMS": "models.nccl.systems",
    "traffic_table": "models.traffic",
    "run_allreduce": "comm.allreduce",
    "AllReduceReport": "comm.allreduce",
    "run_collective": "comm.collective",
    "CollectiveReport": "comm.collective",
    "run_hierarchical": "comm.hierarchical",
    "bench_collectives": "comm.bench",
    "calibrate": "comm.calibration",
    "run_zero": "zero.report",
    "ZeroReport": "zero.report",
    "run_fsdp": "zero.fsdp_report",
    "FsdpReport": "zero.fsdp_report",
    "run_tp": "tensor_parallel.report",
    "TPReport": "tensor_parallel.report",
    "column_parallel_linear": "tensor_parallel.layers",
    "row_parallel_linear": "tensor_parallel.layers",
    "megatron_mlp": "tensor_parallel.layers",
    "shard_linear": "tensor_parallel.layers",
    "tp_attention": "tensor_parallel.attention",
    "run_tp_attention": "tensor_parallel.attention_run",
    "run_moe": "expert_parallel.report",
    "MoEReport": "expert_parallel.report",
    "init_moe": "expert_parallel.experts",
    "moe_layer": "expert_parallel.layer",
    "moe_reference": "expert_parallel.layer",
    "run_pipeline": "pipeline_parallel.report",
    "PipelineReport": "pipeline_parallel.report",
    "build_schedule": "pipeline_parallel.builders",
    "run_strategy_map": "strategy_map.report",
    "StrategyMapReport": "strategy_map.report",
    "run_3d": "parallel_3d.report",
    "Report3D": "parallel_3d.report",
    "plan": "planner.planning",
    "ClusterSpec": "planner.hardware",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
