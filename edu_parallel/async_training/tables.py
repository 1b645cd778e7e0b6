"""Synchronous and asynchronous runs as a table (a pandas DataFrame).

* :func:`straggler_table`: what a straggler costs synchronous regimes, gradients applied beside
  ``S (W - b)`` (backup workers, Chen et al. 2016, arXiv 1604.00981).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..core.i18n import N_
from ..core.shown import shown
from .report import Comparison


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
                f"wall, {calm} (s)": r.wall_s,
                f"wall, {straggler} (s)": slow.wall_s,
                N_("slower by (s)"): slow.wall_s - r.wall_s,
                N_("straggler delays (s)"): sum(
                    e.duration for e in slow.trace.events if e.op == "delay"
                ),
            }
        )
    return shown(pd.DataFrame(rows).set_index("regime"))
