"""Data parallelism as DDP runs it: gradient buckets, overlap with backward, accumulation.

* ``buckets.py``: DDP's gradient buckets as pure data (reverse registration order, 25 MiB cap,
  1 MiB first bucket, one dtype and device each), with a text form and a validator;
* ``config.py``: the validated :class:`DdpConfig` of a run (its bucket plan made once, by the
  check) and its formulas, and :class:`DdpRun`, the config with what the parent does beside;
* ``model.py``: its model family, data and one-process references;
* ``reducer.py``: DDP's reducer on a rank (:class:`BucketReducer`: flat buckets filled by
  post-accumulate-grad hooks, issued in order on a communication stream; a comm-hook seam that
  compression plugs into), and the per-layer backward timing;
* ``ddp.py``: the rank's trainer (per-parameter, bucketed, or overlapped with backward; gradient
  accumulation); ``torch_ddp.py``: torch's own DDP on the same ranks;
* ``overlap.py``: overlap measured from the trace and retimed for a GPU;
* ``report.py``: run and check (:func:`run_ddp`, :func:`run_ddp_config`), sweep
  (:func:`sweep_buckets`); ``tables.py``: a run as text (:func:`format_ddp`), runs as a
  DataFrame (:func:`ddp_sync_table`).

The options are checked once, where a run starts (:func:`run_ddp`, the command line), into a
:class:`DdpRun`; everything below trusts it. ZeRO and FSDP are in ``zero/``, compression in
``compression/``, asynchronous training in ``async_training/``, the shared models and tasks in
``task/``. Imports the layers below ``task/``. Names load on first use.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "ddp_sync_table": "tables",
    "format_ddp": "tables",
    "ParamSpec": "buckets",
    "Bucket": "buckets",
    "BucketPlan": "buckets",
    "assign_buckets": "buckets",
    "bucket_limits": "buckets",
    "validate_buckets": "buckets",
    "DdpConfig": "config",
    "DdpRun": "config",
    "DDP_MODELS": "config",
    "MODELS": "config",
    "SYNCS": "config",
    "BucketReducer": "reducer",
    "GradBucket": "reducer",
    "LayerTimer": "reducer",
    "allreduce_mean_hook": "ddp",
    "train_ddp": "ddp",
    "ddp_job": "ddp",
    "torch_ddp_run": "torch_ddp",
    "measure": "overlap",
    "gpu_retime": "overlap",
    "DdpReport": "report",
    "run_ddp": "report",
    "run_ddp_config": "report",
    "sweep_buckets": "report",
    "ddp_runner": "report",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
