"""Many compression runs at once: the lesson's sweep, bytes against ``N``, a quiz runner.

* :func:`sweep_compress`: every method of :data:`.runs.SWEEP` trained on the same ranks (each
  configuration checked before the first one runs), one job per method under a progress bar;
  ``NO_FEEDBACK``, the lesson's ablation; :func:`summary_table` puts bytes, ratio,
  compute, accuracy and steps to target side by side.
* :func:`bytes_by_world_size`: short runs on clusters of several sizes, the counted bytes beside
  the formula: all-gather methods grow with ``N``.
* :func:`compress_runner`: ``run(world_size=..., **options)`` for predict-then-run quizzes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..comm.bench import ProgressBar
from ..core.errors import check_bool
from ..core.i18n import N_, _
from ..core.shown import shown
from ..engine.executor import Executor
from .config import CompressConfig
from .report import CompressReport, run_compress, run_compress_config
from .runs import NO_FEEDBACK, SWEEP  # noqa: F401 (NO_FEEDBACK: exported from here)

ALL_GATHER = ("topk", "sign")  # the methods whose ranks send different things: all-gather


def sweep_compress(
    cluster: Executor,
    runs: Sequence[dict[str, Any]] = SWEEP,
    compare_torch: bool = False,
    progress: bool = True,
    **common: Any,
) -> tuple[pd.DataFrame, list[CompressReport]]:
    """Run every configuration (each checked before the first runs); a table and the reports.
    ``common``: options of :class:`CompressConfig` every run shares (``steps``, ``lr``...);
    ``progress``: a progress bar over the runs (``tqdm.auto``: a widget in Jupyter).

    One job per run: a job's round trip costs well under a millisecond, so putting every run
    in one job would save nothing, and the bar could not move between runs."""
    options = {"compare_torch": compare_torch, **common}
    configs = [CompressConfig(cluster.world_size, **{**options, **run}) for run in runs]
    bar = ProgressBar(_("training with each method")) if check_bool("progress", progress) else None
    reports = []
    for done, config in enumerate(configs):
        if bar is not None:
            bar(done, len(configs), config.label)
        reports.append(run_compress_config(cluster, config))
    if bar is not None:
        bar(len(configs), len(configs), "")
    return summary_table(reports), reports


def summary_table(reports: Sequence[CompressReport]) -> pd.DataFrame:
    """One row per run: bytes, ratio, compute, accuracy, steps to target."""
    rows = [
        {
            N_("method"): r.config.label,
            N_("sent KB/step"): r.wire_bytes_per_step / 1e3,
            N_("ratio"): r.compression_ratio,
            N_("compress ms/step"): r.compress_s_per_step * 1e3,
            N_("final accuracy"): r.final_accuracy,
            N_("held-out loss"): r.final_loss,
            N_("steps to target"): (  # an int, or the words: never a NaN that reads as a number
                r.steps_to_target
                if r.steps_to_target is not None
                else _("not within {steps} steps").format(steps=r.config.steps)
            ),
            N_("equals torch's hook"): {True: "yes", False: "NO", None: "-"}[r.matches_torch_hook],
        }
        for r in reports
    ]
    return shown(pd.DataFrame(rows).set_index("method"))


def bytes_by_world_size(
    cluster: Executor,
    world_sizes: Sequence[int] = (2, 4, 8),
    methods: Sequence[dict[str, Any]] = (
        {"method": "none"},
        {"method": "randk"},
        {"method": "topk"},
        {"method": "sign"},
    ),
    steps: int = 2,
) -> pd.DataFrame:
    """Wire bytes per rank per step against ``N``: counted on the ranks (short runs on clusters
    of each size) beside the formula. Top-k and sign travel by all-gather, so they grow with
    ``N``; an all-reduce stays below ``2x`` its buffer."""
    configs = [
        (n, [CompressConfig(n, steps=steps, compare_torch=False, **m) for m in methods])
        for n in world_sizes
    ]
    rows = []
    for n, sized in configs:
        with cluster.sized(n) as ranks:
            for config in sized:
                r = run_compress_config(ranks, config)
                rows.append(
                    {
                        "N": n,
                        N_("method"): config.label,
                        N_("collective"): "all-gather"
                        if config.method in ALL_GATHER
                        else "all-reduce",
                        N_("sent B/step"): r.wire_bytes_per_step,
                        N_("formula B/step"): r.formula_wire_bytes,
                    }
                )
    return shown(pd.DataFrame(rows))


def compress_runner(cluster: Executor, **fixed: Any) -> Any:
    """``run(world_size=..., **options) -> CompressReport`` for predict-then-run quizzes."""

    def run(world_size: int | None = None, **options: Any) -> CompressReport | None:
        with cluster.sized(world_size or cluster.world_size) as ranks:
            return run_compress(ranks, **{"compare_torch": False, **fixed, **options})

    return run
