"""The 3D-parallelism planner: every DP x TP x PP configuration of a model on a cluster, ranked.

Pure arithmetic over the package's models (no torch, no processes):

* ``hardware.py``: GPU presets (memory, peak bf16 FLOP/s) and a validated :class:`ClusterSpec`.
* ``inputs.py``: :class:`PlannerInputs`, the model, cluster, batch, sequence, efficiency and
  memory budget checked once; everything below trusts it.
* ``traffic.py``: exact bytes each rank sends per group type in one step
  (:func:`group_bytes_per_rank`), what ``parallel_3d`` counts from its traces.
* ``estimate.py``: one configuration's memory per GPU, time terms, tokens/s and MFU (the
  formulas); ``evaluate.py``: :func:`estimate_config`, one configuration given by its
  degrees, checked.
* ``experts.py``: what a mixture-of-experts model adds (EP carved out of DP: expert memory,
  all-to-all time, expert-DP gradient sync).
* ``planning.py``: :func:`plan` enumerates and ranks every configuration (:class:`PlannerResult`).
* ``published.py``: Megatron-LM's and Llama 3's published layouts against the planner.
* ``tables.py``: the results as DataFrames.

Imports only ``core/``, ``models/`` and ``memory/``.
"""

from __future__ import annotations

from .estimate import ITEMSIZE, JSON_KEYS, TERMS, ConfigEstimate, Estimator
from .evaluate import estimate_config
from .hardware import GPU, GPUS, ClusterSpec, gpu_preset
from .inputs import PlannerInputs
from .planning import PlannerResult, plan
from .published import PUBLISHED, PublishedRun, compare_all, compare_published
from .tables import configs_table, published_table
from .traffic import GROUPS, dp_volume_factor, group_bytes_per_rank, stage_params

__all__ = [
    "GPU",
    "GPUS",
    "GROUPS",
    "ITEMSIZE",
    "JSON_KEYS",
    "PUBLISHED",
    "TERMS",
    "ClusterSpec",
    "ConfigEstimate",
    "Estimator",
    "PlannerInputs",
    "PlannerResult",
    "PublishedRun",
    "compare_all",
    "compare_published",
    "configs_table",
    "dp_volume_factor",
    "estimate_config",
    "gpu_preset",
    "group_bytes_per_rank",
    "plan",
    "published_table",
    "stage_params",
]
