"""Step time against bucket size (lesson 06): the table of
:func:`~edu_parallel.data_parallel.report.sweep_buckets`, drawn.

:func:`sweep_figure`: measured on the ranks (ms, top panel) and modelled for a GPU (µs, bottom
panel) against the bucket cap, from the smallest (one parameter per bucket) to the largest (one
bucket), in the table's order; each point says how many buckets the cap made, and DDP's default
(a 1 MiB first bucket, then 25 MiB) is a star. Many buckets: every message pays the latency; one
bucket: nothing overlaps with backward.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _
from .fit import fit_layout
from .plotly_figure import Figure
from .style import FONT, RED, WIDTH, legend_below, series_color, title_layout

PER_PARAM_MB = 1e-5  # caps below this hold one parameter per bucket for any model here
PANELS = (
    ("step ms (measured)", "hidden (measured)", N_("step (ms), measured here")),
    ("step us (modelled)", "hidden (modelled)", N_("step (µs), GPU model")),
)


def cap_label(cap: Any) -> str:
    """``"DDP default"``, ``"1 param each"`` or ``"2 MiB"``."""
    if str(cap) == "default":
        return _("DDP default")
    return _("1 param each") if float(cap) < PER_PARAM_MB else f"{float(cap):g} MiB"


def sweep_figure(df: Any, title: str | None = None) -> Any:
    """Step time against the bucket cap from a :func:`sweep_buckets` table (see module doc)."""
    from plotly.subplots import make_subplots

    need = ["bucket_cap_mb", "buckets", *(p[0] for p in PANELS)]
    missing = [c for c in need if c not in df.columns]
    if missing or df.empty:
        raise bad_value(
            "df",
            list(df.columns),
            _("a sweep_buckets table with columns {columns}").format(columns=need),
        )
    labels = [cap_label(c) for c in df["bucket_cap_mb"]]
    is_default = [str(c) == "default" for c in df["bucket_cap_mb"]]
    counts = [int(n) for n in df["buckets"]]
    fig = make_subplots(figure=Figure(), rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12)
    for row, (col, hidden_col, axis_name) in enumerate(PANELS, start=1):
        axis = _(axis_name)
        hidden = list(df[hidden_col]) if hidden_col in df.columns else [None] * len(df)
        hover = [
            f"<b>{label}</b>: "
            + (_("{n} bucket") if n == 1 else _("{n} buckets")).format(n=n)
            + f"<br>{axis}: {v:.4g}"
            + (
                "<br>" + _("all-reduce hidden: {share}").format(share=f"{h:.0%}")
                if h is not None
                else ""
            )
            for label, n, v, h in zip(labels, counts, df[col], hidden, strict=True)
        ]
        fig.add_scatter(
            x=labels,
            y=list(df[col]),
            mode="lines+markers+text",
            text=["" if d else f"{n}" for n, d in zip(counts, is_default, strict=True)],
            textposition="top center",
            textfont=dict(size=11),
            name=axis,
            line=dict(color=series_color(row - 1)),
            hovertext=hover,
            hoverinfo="text",
            row=row,
            col=1,
        )
        fig.add_scatter(
            x=[x for x, d in zip(labels, is_default, strict=True) if d],
            y=[v for v, d in zip(df[col], is_default, strict=True) if d],
            mode="markers+text",  # the star carries its count, above the star (not under it)
            text=[f"{n}" for n, d in zip(counts, is_default, strict=True) if d],
            textposition="top center",
            textfont=dict(size=11),
            name=_("DDP default (1 MiB first bucket, then 25 MiB)"),
            legendgroup="default",
            showlegend=row == 1,
            marker=dict(symbol="star", size=18, color=RED, line=dict(color="black")),
            hoverinfo="skip",
            row=row,
            col=1,
        )
        top = max(df[col]) * 1.25
        fig.update_yaxes(title_text=axis, row=row, col=1, range=[0, top])
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels)
    fig.update_xaxes(
        title_text=_(
            "bucket cap, smallest to largest (the number on each point: buckets per step)"
        ),
        row=2,
        col=1,
    )
    height, margin = 640, dict(l=90, r=30, t=80, b=120)
    fig.update_layout(
        title=title_layout(title or _("Step time against bucket size")),
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        legend=legend_below(height, margin, 70),
    )
    return fit_layout(fig)
