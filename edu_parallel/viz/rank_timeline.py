"""A Gantt chart of what each rank did, with an axis that says where the times came from.

One row per rank and kind (``r0 send``, ``r0 recv``, ``r0 compute``, ...), one bar per event,
coloured by phase; hovering a bar shows the event's one-line text (:meth:`Event.line`).
Zero-length events are drawn as diamonds.
"""

from __future__ import annotations

from typing import Any

from ..core.i18n import _
from ..core.phases import phase_label
from ..core.trace import Trace
from .fit import fit_layout
from .plotly_figure import Figure
from .style import series_color

KINDS = ("send", "recv", "compute", "collective")


def time_axis_label(trace: Trace, unit: str | None = None) -> str:
    """Where the times come from: measured, modelled (retimed) or plan steps (simulated).
    ``unit`` (e.g. ``"ms"``) replaces the default, seconds."""
    meta = trace.meta
    if meta.get("time_unit") == "step":
        return _("plan steps (simulated, not measured)")
    unit = _("seconds") if unit is None else unit
    if meta.get("retimed_with"):
        return _("modelled {unit} (retimed: {preset})").format(
            unit=unit, preset=meta["retimed_with"]
        )
    return _("wall-clock {unit} (measured)").format(unit=unit)


def timeline(trace: Trace, title: str | None = None) -> Any:
    """A plotly Gantt of send/recv/compute/collective events per rank, coloured by phase."""
    events = [e for e in trace.events if e.kind in KINDS]
    rows = sorted({(e.rank, KINDS.index(e.kind)) for e in events})
    names = [f"r{r} {KINDS[k]}" for r, k in rows]
    phases = trace.phases()
    phases += ["-"] if "-" not in phases else []  # events without a phase
    fig = Figure()
    for i, phase in enumerate(phases):
        mine = [e for e in events if (e.phase or "-") == phase]
        if not mine:
            continue
        color = series_color(i)
        spans = [e for e in mine if e.end > e.start]
        points = [e for e in mine if e.end <= e.start]
        if spans:
            fig.add_bar(
                y=[f"r{e.rank} {e.kind}" for e in spans],
                x=[e.end - e.start for e in spans],
                base=[e.start for e in spans],
                orientation="h",
                name=phase_label(phase),
                legendgroup=phase,
                marker=dict(color=color, line=dict(color="white", width=1.5)),
                hovertext=[e.line() for e in spans],
                hoverinfo="text",
            )
        if points:
            fig.add_scatter(
                y=[f"r{e.rank} {e.kind}" for e in points],
                x=[e.start for e in points],
                mode="markers",
                marker=dict(symbol="diamond", size=9, color=color),
                name=phase_label(phase),
                legendgroup=phase,
                showlegend=not spans,
                hovertext=[e.line() for e in points],
                hoverinfo="text",
            )
    fig.update_layout(
        title=title
        or _("{concept}: what each rank did").format(concept=trace.meta.get("concept", _("run"))),
        barmode="overlay",
        height=max(320, 150 + 26 * len(names)),
        legend_title_text=_("phase"),
        xaxis_title=time_axis_label(trace),
        yaxis=dict(
            categoryorder="array",
            categoryarray=names,
            autorange="reversed",
            tickmode="array",
            tickvals=names,
            ticktext=names,
        ),  # every row labelled
    )
    return fit_layout(fig)
