"""Synchronous and asynchronous runs side by side, as tables (pandas DataFrames).

* :func:`compare_regimes`: every regime under every straggler setting with the same number of
  workers (each configuration checked before the first run starts; a progress bar over the
  runs), a :class:`Comparison`
  whose :meth:`~Comparison.time_to_target` is the lesson's table: measured, never assumed;
* :func:`straggler_table`: what a straggler costs synchronous regimes, gradients applied beside
  ``S (W - b)`` (backup workers, Chen et al. 2016, arXiv 1604.00981).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..comm.bench import ProgressBar
from ..core.errors import check_bool
from ..core.i18n import N_, _
from ..core.shown import shown
from ..engine.executor import Executor
from .config import MODES, AsyncConfig, Mode, world_size_for
from .report import AsyncReport, run_async_config

# the straggler settings of the lesson's table: none, one slow rank (heavy-tailed), a random one
SETTINGS: tuple[dict[str, Any], ...] = (
    {"straggler": "none"},
    {"straggler": "rank", "distribution": "pareto"},
    {"straggler": "random", "distribution": "exponential"},
)
MODES_ORDER = MODES  # the tables' order of regimes


@dataclass
class Comparison:
    """Every regime under every straggler setting, with the same number of workers."""

    workers: int
    reports: dict[tuple[str, str], AsyncReport]  # (mode, straggler label) -> its run

    def table(self) -> pd.DataFrame:
        """One row per run: throughput, staleness, time and steps to target, final loss."""
        rows = []
        for (mode, label), r in self.reports.items():
            hist = r.staleness_histogram
            applied = sum(hist.values())
            rows.append(
                {
                    N_("regime"): mode,
                    N_("straggler"): label,
                    N_("samples/s"): r.samples_per_s,
                    N_("time to target (s)"): r.time_to_target_s,
                    N_("steps to target"): r.steps_to_target,
                    N_("final loss"): r.final_loss,
                    N_("mean staleness"): sum(k * v for k, v in hist.items()) / max(applied, 1),
                    N_("max staleness"): max(hist, default=0),
                    N_("dropped"): r.dropped,
                    N_("workers waiting"): r.wait_fraction,
                    N_("replay matches"): r.replay_matches,
                }
            )
        return shown(pd.DataFrame(rows))

    def time_to_target(self) -> pd.DataFrame:
        """Time to the target accuracy (s): regimes down, straggler settings across."""
        t = self.table()
        return t.pivot(index="regime", columns="straggler", values="time to target (s)").loc[
            [m for m in MODES_ORDER if m in set(t["regime"])], list(dict.fromkeys(t["straggler"]))
        ]


def compare_regimes(
    cluster: Executor,
    workers: int = 3,
    modes: Sequence[Mode] = MODES_ORDER,
    settings: Sequence[dict[str, Any]] = SETTINGS,
    progress: bool = True,
    **options: Any,
) -> Comparison:
    """Run each of ``modes`` under each of ``settings`` (AsyncConfig fields) with ``workers``
    workers: the server regimes on ``workers + 1`` ranks (``cluster.sized``), the others on
    ``workers``. ``backup`` (in ``options`` or a setting) is given to mode ``backup`` only, the
    one whose backup workers it counts, ``local_steps`` to ``local-sgd`` only, and
    ``distribution`` and ``delay_ms`` to the settings with a straggler only. Every
    configuration is checked before the first run starts. ``progress``: a progress bar over
    the runs (``tqdm.auto``: a widget in Jupyter)."""
    configs = {}
    for mode in modes:
        for s in settings:
            given = {**options, **s}
            if mode != "backup":
                given.pop("backup", None)
            if mode != "local-sgd":
                given.pop("local_steps", None)
            if given.get("straggler", "none") == "none":  # nobody is slow: no delay to draw
                given.pop("distribution", None)
                given.pop("delay_ms", None)
            c = AsyncConfig(world_size_for(mode, workers), mode, **given)
            configs[(mode, c.straggler_label())] = c
    bar = ProgressBar(_("training each regime")) if check_bool("progress", progress) else None
    reports: dict[tuple[str, str], AsyncReport] = {}
    for size in sorted({c.world_size for c in configs.values()}, reverse=True):
        with cluster.sized(size) as ranks:
            for key, c in configs.items():
                if c.world_size == size:
                    if bar is not None:
                        bar(len(reports), len(configs), f"{key[0]}, {key[1]}")
                    reports[key] = run_async_config(ranks, c)
    if bar is not None:
        bar(len(reports), len(configs), "")
    return Comparison(workers, {k: reports[k] for k in configs})


def straggler_table(
    comparison: Comparison, calm: str, straggler: str, modes: Sequence[str] = ("sync", "backup")
) -> pd.DataFrame:
    """One row per regime of ``modes``: gradients applied without a straggler beside
    ``S x kept per step`` (``W``, or ``W - b`` with backup workers), dropped ones, staleness, and
    the wall time it loses with ``straggler`` beside the delays that straggler slept."""
    rows = []
    for mode in modes:
        r, slow = comparison.reports[(mode, calm)], comparison.reports[(mode, straggler)]
        rows.append(
            {
                N_("regime"): mode,
                N_("applied"): r.applied,
                N_("S x kept per step"): r.config.steps * r.config.kept_per_step,
                N_("dropped"): r.dropped,
                N_("staleness"): r.staleness_histogram,
                _("wall, {setting} (s)").format(setting=calm): r.wall_s,
                _("wall, {setting} (s)").format(setting=straggler): slow.wall_s,
                N_("slower by (s)"): slow.wall_s - r.wall_s,
                N_("straggler delays (s)"): sum(
                    e.duration for e in slow.trace.events if e.op == "delay"
                ),
            }
        )
    return shown(pd.DataFrame(rows).set_index("regime"))
