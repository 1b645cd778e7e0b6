"""Data parallelism as DDP runs it: gradient buckets, overlap with backward, accumulation.

* ``buckets.py``: DDP's gradient buckets as pure data (reverse registration order, 25 MiB cap,
  1 MiB first bucket, one dtype and device each), with a text form and a validator;
* ``config.py``: the validated :class:`DdpConfig` of a run and its formulas;
* ``model.py``: its model family, data and one-process references;
* ``ddp.py``: the rank's trainer (per-parameter, bucketed, or overlapped with backward through
  post-accumulate-grad hooks and a communication stream; gradient accumulation; a comm-hook seam
  that compression plugs into); ``torch_ddp.py``: torch's own DDP on the same ranks;
* ``overlap.py``: overlap measured from the trace and retimed for a GPU;
* ``report.py``: run, check, sweep (:func:`run_ddp`, :func:`sweep_buckets`); ``tables.py``: the
  runs as a DataFrame (:func:`ddp_sync_table`).

ZeRO and FSDP are in ``zero/``, compression in ``compression/``, asynchronous training in
``async_training/``, the shared models and tasks in ``task/``. Imports the layers below ``task/``.
Names load on first use.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "ddp_sync_table": "tables",
    "ParamSpec": "buckets",
    "Bucket": "buckets",
    "BucketPlan": "buckets",
    "assign_buckets": "buckets",
    "bucket_limits": "buckets",
    "validate_buckets": "buckets",
    "DdpConfig": "config",
    "DDP_MODELS": "config",
    "SYNCS": "config",
    "allreduce_mean_hook": "ddp",
    "train_ddp": "ddp",
    "ddp_job": "ddp",
    "torch_ddp_run": "torch_ddp",
    "measure": "overlap",
    "gpu_retime": "overlap",
    "DdpReport": "report",
    "check_ddp_args": "config",
    "run_ddp": "report",
    "format_ddp": "report",
    "sweep_buckets": "report",
    "ddp_runner": "report",
    "GradBucket": "ddp",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
