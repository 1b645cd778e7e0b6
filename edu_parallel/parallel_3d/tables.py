"""3D runs as tables (pandas DataFrames): one row per rank, or one row per layout.

Every number is read off a run (:class:`~edu_parallel.parallel_3d.report.Report3D`: its trace,
measured by :mod:`edu_parallel.parallel_3d.measure`) or is the planner's prediction for the same
layout (:func:`edu_parallel.planner.traffic.group_bytes_per_rank`), shown beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..core.i18n import N_
from ..core.shown import shown
from .measure import GROUP_TYPES

# the headers built per group type ("DP sent", "TP planner", ...), each a message of its own
GROUP_HEADERS = {
    "DP sent": N_("DP sent"),
    "TP sent": N_("TP sent"),
    "PP sent": N_("PP sent"),
    "EP sent": N_("EP sent"),
    "DP planner": N_("DP planner"),
    "TP planner": N_("TP planner"),
    "PP planner": N_("PP planner"),
    "EP planner": N_("EP planner"),
    "DP sent B (max)": N_("DP sent B (max)"),
    "TP sent B (max)": N_("TP sent B (max)"),
    "PP sent B (max)": N_("PP sent B (max)"),
    "EP sent B (max)": N_("EP sent B (max)"),
}


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
        row[N_("messages")] = sum(r["messages_by_group"].values())
        row[N_("idle ms")] = round(r["idle_s"] * 1e3, 1)
        rows.append(row)
    return shown(pd.DataFrame(rows).set_index("rank"), messages=GROUP_HEADERS)


def layouts_table(reports: Sequence[Any]) -> pd.DataFrame:
    """One row per run: the layout, the check against one process and the planner, and the
    largest per-rank numbers."""
    rows = []
    for rep in reports:
        zero = f" ZeRO-{rep.config.zero}" if rep.config.zero else ""
        row: dict[str, Any] = {
            N_("layout"): rep.layout + zero,
            N_("equals one process"): rep.matches_reference,
            N_("bytes = planner"): rep.matches_planner if not rep.config.experts else "-",
            N_("model state B (max)"): max(r["model_state_bytes"] for r in rep.rows),
            N_("activations B (max)"): max(r["activation_bytes"] for r in rep.rows),
        }
        for k in GROUP_TYPES:
            row[f"{k.upper()} sent B (max)"] = max(r["sent_bytes_by_group"][k] for r in rep.rows)
        row[N_("bubble measured")] = round(rep.bubble_fraction_measured, 3)
        row[N_("bubble (p-1)/(M+p-1)")] = round(rep.bubble_fraction_model, 3)
        rows.append(row)
    return shown(pd.DataFrame(rows).set_index("layout"), messages=GROUP_HEADERS)
