"""3D runs as tables (pandas DataFrames): one row per rank, or one row per layout.

Every number is read off a run (:class:`~edu_parallel.parallel_3d.report.Report3D`: its trace,
measured by :mod:`edu_parallel.parallel_3d.measure`) or is the planner's prediction for the same
layout (:func:`edu_parallel.planner.traffic.group_bytes_per_rank`), shown beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from .measure import GROUP_TYPES


def ranks_table(report: Any) -> pd.DataFrame:
    """Per rank: coordinates, bytes sent per group type beside the planner's prediction, messages
    and idle time (memory per rank: :func:`edu_parallel.viz.memory_figure`)."""
    rows = []
    predicted = report.predicted_bytes_by_group
    for i, r in enumerate(report.rows):
        row = {k: r[k] for k in ("rank", "pp", "dp", "tp")}
        for k in GROUP_TYPES:
            if k == "ep" and not report.config.experts:
                continue
            row[f"{k.upper()} sent"] = round(r["sent_bytes_by_group"][k])
            if predicted is not None and k in predicted[i]:
                row[f"{k.upper()} planner"] = round(predicted[i][k])
        row["messages"] = sum(r["messages_by_group"].values())
        row["idle ms"] = round(r["idle_s"] * 1e3, 1)
        rows.append(row)
    return pd.DataFrame(rows).set_index("rank")


def layouts_table(reports: Sequence[Any]) -> pd.DataFrame:
    """One row per run: the layout, the check against one process and the planner, and the
    largest per-rank numbers."""
    rows = []
    for rep in reports:
        zero = f" ZeRO-{rep.config.zero}" if rep.config.zero else ""
        row: dict[str, Any] = {
            "layout": rep.layout + zero,
            "equals one process": rep.matches_reference,
            "bytes = planner": rep.matches_planner if not rep.config.experts else "-",
            "model state B (max)": max(r["model_state_bytes"] for r in rep.rows),
            "activations B (max)": max(r["activation_bytes"] for r in rep.rows),
        }
        for k in GROUP_TYPES:
            row[f"{k.upper()} sent B (max)"] = max(r["sent_bytes_by_group"][k] for r in rep.rows)
        row["bubble measured"] = round(rep.bubble_fraction_measured, 3)
        row["bubble (p-1)/(M+p-1)"] = round(rep.bubble_fraction_model, 3)
        rows.append(row)
    return pd.DataFrame(rows).set_index("layout")
