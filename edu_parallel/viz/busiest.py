"""The busiest rank's load against N, one line per all-reduce algorithm (lesson 04).

:func:`busiest_rank_figure` reads the rows of :func:`~edu_parallel.models.traffic_table` (never
runs anything). Two algorithms can load their busiest rank exactly alike (naive and the parameter
server: the root takes every piece; Rabenseifner and the ring: 2(N-1)/N D): the second one drawn
on the same points is dashed, with open markers, a few pixels to the right, and its legend entry
says which line it shares, so neither hides the other.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value
from ..core.i18n import _
from .fit import fit_layout
from .plotly_figure import Figure
from .style import ALGORITHM_COLORS, FONT, WIDTH, legend_below, series_color, title_layout

SHARED_SHIFT = 1.04  # a line on another's points is drawn this factor right (log axis: a few px)


def busiest_rank_figure(rows: list[dict[str, Any]], title: str | None = None) -> Any:
    """Busiest rank's bytes over D against N, per algorithm, from ``traffic_table`` rows."""
    rows = [r for r in rows if isinstance(r, dict) and r.get("supported")]
    if not rows or any("busiest_over_d" not in r for r in rows):
        raise bad_value("rows", len(rows), _("the rows of traffic_table()"))
    fig = Figure()
    drawn: dict[tuple, str] = {}  # the points of each line drawn, and its algorithm
    algos = list(dict.fromkeys(r["algo"] for r in rows))
    for i, algo in enumerate(algos):
        mine = sorted((r["world_size"], r["busiest_over_d"]) for r in rows if r["algo"] == algo)
        xs, ys = [n for n, _y in mine], [y for _n, y in mine]
        key = tuple((n, round(y, 9)) for n, y in mine)
        same = drawn.get(key)
        color = ALGORITHM_COLORS.get(algo, series_color(i))
        fig.add_scatter(
            x=[n * SHARED_SHIFT for n in xs] if same else xs,
            y=ys,
            customdata=xs,
            mode="lines+markers",
            name=_("{algo} (same as {other})").format(algo=algo, other=same) if same else algo,
            line=dict(color=color, width=2, dash="dash" if same else "solid"),
            marker=dict(
                color=color,
                size=11 if same else 8,
                symbol="square-open" if same else "circle",
                line=dict(width=2),
            ),
            hovertemplate=f"<b>{algo}</b><br>N=%{{customdata}}<br>"
            + _("busiest rank: %{{y:.3f}} x D").format()
            + "<extra></extra>",
        )
        drawn.setdefault(key, algo)
    sizes = sorted({r["world_size"] for r in rows})
    height, margin = 440, dict(l=80, r=20, t=70, b=130)
    fig.update_layout(
        title=title_layout(title or _("Load of the busiest rank, counted")),
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        legend=legend_below(height, margin, 60),
        xaxis=dict(title=_("ranks N (log scale)"), type="log", tickvals=sizes),
        yaxis=dict(title=_("busiest rank moves (x D)"), rangemode="tozero"),
    )
    return fit_layout(fig)
