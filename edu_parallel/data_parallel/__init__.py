"""Data parallelism, executed: plain DP and ZeRO stages 1-3 on real ranks, and PyTorch's FSDP2.

* ``training.py``: the tiny MLP, its data, Adam and the single-process reference every stage is
  checked against (bit for bit: the reference replays the ring's summation order).
* ``zero.py``: one rank's training step under DP or ZeRO-1/2/3, with a memory ledger in the trace;
  ``zero_report.py``: run a stage, check it, read memory and bytes off the trace (:func:`run_zero`).
* ``buckets.py``: DDP's gradient buckets as pure data (reverse registration order, 25 MiB cap,
  1 MiB first bucket, one dtype and device each), with a text form and a validator;
  ``ddp_config.py``: the validated :class:`DdpConfig` of a run and its formulas;
  ``ddp_model.py``: its model, data and one-process references; ``ddp.py``: the rank's trainer
  (per-parameter, bucketed, or overlapped with backward through post-accumulate-grad hooks and a
  communication stream; gradient accumulation; a comm-hook seam); ``ddp_torch.py``: torch's own
  DDP on the same ranks; ``overlap.py``: overlap measured from the trace and retimed for a GPU;
  ``ddp_report.py``: run, check, sweep (:func:`run_ddp`, :func:`sweep_buckets`).
* lesson 12, synchronous against asynchronous training with stragglers: ``async_config.py`` (the
  validated :class:`AsyncConfig`, torch-free: regimes, worker convention, straggler delays);
  ``async_sgd.py`` (sync and local SGD on the ranks); ``param_server.py`` (asynchronous and
  backup-worker parameter servers); ``async_replay.py`` (the one-process replay of a run's
  recorded order); ``async_report.py`` (:func:`run_async`, :func:`compare_regimes`).
* ``task.py``: the learning task of lessons 11 and 12 (a classifier a linear teacher labels);
  ``compress_config.py``: the validated :class:`CompressConfig` and the wire-bytes formula;
  ``compress.py``: fp16/bf16 casts, top-k, random-k and sign compression with error feedback as
  communication hooks; ``powersgd.py``: PowerSGD as torch's ``powerSGD_hook`` does it;
  ``compress_torch.py``: torch's own hooks on the same ranks; ``compress_report.py``: run and
  check one (:func:`run_compress`); ``compress_sweep.py``: the sweep, bytes against ``N``;
  ``compress_whatif.py``: when compression pays on a link.
* ``fsdp.py``: ``fully_shard`` on the ranks, its collectives recorded by the profiler;
  ``fsdp_report.py``: FSDP2 beside ZeRO-3 on the same cluster (:func:`run_fsdp`).
* ``tables.py``: DDP, ZeRO and FSDP runs as DataFrames, counts beside formulas
  (:func:`ddp_sync_table`, :func:`zero_table`, :func:`fsdp_table`, :func:`straggler_table`).

Imports ``core/``, ``plans/``, ``engine/``, ``models/``, ``memory/`` and ``comm/``. Names load on
first use.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "DEFAULT_DIMS": "training",
    "DEFAULT_MICROBATCH": "training",
    "check_dims": "training",
    "num_params": "training",
    "padded_numel": "training",
    "adam_update": "training",
    "reference_training": "training",
    "formula_model_state_bytes": "training",
    "train_stage": "zero",
    "zero_job": "zero",
    "ZeroReport": "zero_report",
    "check_zero_args": "zero_report",
    "memory_curves": "zero_report",
    "run_zero": "zero_report",
    "zero_table": "tables",
    "fsdp_table": "tables",
    "ddp_sync_table": "tables",
    "straggler_table": "tables",
    "format_zero": "zero_report",
    "zero_runner": "zero_report",
    "ParamSpec": "buckets",
    "Bucket": "buckets",
    "BucketPlan": "buckets",
    "assign_buckets": "buckets",
    "bucket_limits": "buckets",
    "validate_buckets": "buckets",
    "DdpConfig": "ddp_config",
    "DDP_MODELS": "ddp_config",
    "SYNCS": "ddp_config",
    "allreduce_mean_hook": "ddp",
    "train_ddp": "ddp",
    "ddp_job": "ddp",
    "torch_ddp_run": "ddp_torch",
    "measure": "overlap",
    "gpu_retime": "overlap",
    "DdpReport": "ddp_report",
    "check_ddp_args": "ddp_config",
    "run_ddp": "ddp_report",
    "format_ddp": "ddp_report",
    "sweep_buckets": "ddp_report",
    "ddp_runner": "ddp_report",
    "CompressConfig": "compress_config",
    "METHODS": "compress_config",
    "wire_bytes_per_step": "compress_config",
    "dense_bytes_per_step": "compress_config",
    "evaluate": "task",
    "steps_to_target": "task",
    "TARGET_ACCURACY": "ddp_config",
    "TARGET_STEPS": "ddp_config",
    "TASK_LR": "ddp_config",
    "GradBucket": "ddp",
    "Cast": "compress",
    "TopK": "compress",
    "RandK": "compress",
    "Sign": "compress",
    "PowerSGD": "powersgd",
    "make_hook": "compress_report",
    "CompressReport": "compress_report",
    "run_compress": "compress_report",
    "format_compress": "compress_report",
    "sweep_compress": "compress_sweep",
    "summary_table": "compress_sweep",
    "bytes_by_world_size": "compress_sweep",
    "compress_runner": "compress_sweep",
    "Measured": "compress_whatif",
    "what_if": "compress_whatif",
    "FsdpUnavailableError": "fsdp",
    "GRANULARITIES": "fsdp",
    "require_fsdp2": "fsdp",
    "preload": "fsdp",
    "fsdp_job": "fsdp",
    "FsdpReport": "fsdp_report",
    "check_fsdp_args": "fsdp_report",
    "fsdp_padded_numel": "fsdp_report",
    "formula_sent_bytes": "fsdp_report",
    "run_fsdp": "fsdp_report",
    "format_fsdp": "fsdp_report",
    "AsyncConfig": "async_config",
    "delay_s": "async_config",
    "sync_sgd": "async_sgd",
    "local_sgd": "async_sgd",
    "server_job": "param_server",
    "replay": "async_replay",
    "AsyncReport": "async_report",
    "Comparison": "async_report",
    "run_async": "async_report",
    "compare_regimes": "async_report",
    "format_async": "async_report",
    "async_runner": "async_report",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
