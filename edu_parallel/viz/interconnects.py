"""One trace, timed on every interconnect: a bar per link preset and fabric (lesson 15, U19).

:func:`interconnect_figure` draws :func:`edu_parallel.models.interconnects.interconnect_table`:
the same run's time on each interconnect, on a log axis (the presets span three orders of
magnitude), coloured by where the link sits (inside a node, between nodes, a whole rail-optimised
fabric), with the busbw each time implies. Reads the table only; plotly is imported inside.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..core.errors import bad_value
from ..core.i18n import N_, _
from .fit import fit_layout
from .plotly_figure import Figure
from .style import BLUE, GREEN, MUTED, ORANGE, WIDTH

SCOPE_COLORS = {"measured here": MUTED, "intra-node": BLUE, "inter-node": ORANGE, "fabric": GREEN}
COLUMNS = ("scope", "time (µs)", "busbw (GB/s)", "GB/s each way")
SCOPE_NAMES = {
    "measured here": N_("measured here"),
    "intra-node": N_("intra-node"),
    "inter-node": N_("inter-node"),
    "fabric": N_("fabric"),
}


def interconnect_figure(table: pd.DataFrame, title: str | None = None) -> Any:
    """Horizontal bars: the retimed time of each row of ``table`` (fastest on top), log x."""
    import plotly.graph_objects as go

    if not isinstance(table, pd.DataFrame) or any(c not in table.columns for c in COLUMNS):
        raise bad_value("table", type(table).__name__, _("interconnect_table(trace, nbytes)"))
    rows = table.sort_values("time (µs)", ascending=False)
    fig = Figure()
    for scope, color in SCOPE_COLORS.items():
        part = rows[rows["scope"] == scope]
        if part.empty:
            continue
        bw = [
            "" if math.isnan(b) else ", " + _("{bw} GB/s each way").format(bw=f"{b:g}")
            for b in part["GB/s each way"]
        ]
        fig.add_trace(
            go.Bar(
                name=_(SCOPE_NAMES[scope]),
                orientation="h",
                x=part["time (µs)"],
                y=list(part.index),
                marker_color=color,
                text=[f"{t:,.0f} µs" for t in part["time (µs)"]],
                textposition="outside",
                customdata=[[b, w] for b, w in zip(part["busbw (GB/s)"], bw, strict=True)],
                hovertemplate="%{y}: %{x:,.1f} µs, busbw %{customdata[0]:.1f} GB/s"
                "%{customdata[1]}<extra></extra>",
            )
        )
    top = rows["time (µs)"].max()
    fig.update_layout(
        title=title or _("The same trace, timed on each interconnect"),
        xaxis={
            "type": "log",
            "title": _("time (µs, log scale)"),
            "range": [math.log10(max(rows["time (µs)"].min(), 1e-3)) - 0.3, math.log10(top) + 0.6],
        },
        yaxis={"categoryorder": "array", "categoryarray": list(rows.index)},
        barmode="overlay",
        width=WIDTH,
        height=140 + 26 * len(rows),
        margin={"l": 190, "r": 30},
        legend={"orientation": "h", "y": -0.12 - 2.0 / len(rows)},
    )
    return fit_layout(fig)
