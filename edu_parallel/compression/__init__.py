"""Gradient compression as DDP communication hooks, with error feedback (lesson 13).

* ``config.py``: the validated :class:`CompressConfig` and the wire-bytes formula (torch-free);
* ``compressors.py``: fp16/bf16 casts, top-k, random-k and sign compression with error feedback;
  ``powersgd.py``: PowerSGD as torch's ``powerSGD_hook`` does it (Vogels et al. 2019);
* ``torch_hooks.py``: torch's own hooks on the same ranks, the reference;
* ``report.py``: run and check one method (:func:`run_compress`, or :func:`run_compress_config`
  for a config built already); ``sweep.py``: every method, bytes against the world size;
  ``whatif.py``: when compression pays on a link.

Plugs into the DDP trainer's comm-hook seam (``data_parallel/``) and trains the classifier of
``task/``. Names load on first use.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "CompressConfig": "config",
    "METHODS": "config",
    "wire_bytes_per_step": "config",
    "dense_bytes_per_step": "config",
    "LESSON_LR": "config",
    "LESSON_STEPS": "config",
    "Cast": "compressors",
    "TopK": "compressors",
    "RandK": "compressors",
    "Sign": "compressors",
    "PowerSGD": "powersgd",
    "make_hook": "report",
    "CompressReport": "report",
    "run_compress": "report",
    "run_compress_config": "report",
    "format_compress": "report",
    "sweep_compress": "sweep",
    "NO_FEEDBACK": "sweep",
    "summary_table": "sweep",
    "bytes_by_world_size": "sweep",
    "compress_runner": "sweep",
    "Measured": "whatif",
    "what_if": "whatif",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
