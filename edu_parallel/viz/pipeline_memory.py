"""Pipeline renderer: live stashed activations per stage over time, peaks marked.

Reads a :class:`~edu_parallel.pipeline_parallel.timing.Timeline` (microbatches) or a measured
:class:`~edu_parallel.core.trace.Trace` (bytes from its ``activation`` memory events). Plotly is
imported inside the functions; nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

from ..core.i18n import N_, _
from ..core.schema import ACTIVATION
from ..core.trace import Trace
from ..pipeline_parallel.schedule import KINDS
from ..pipeline_parallel.timing import Timeline
from .fit import fit_layout
from .pipeline import pipeline_view
from .plotly_figure import Figure
from .style import ALERT, GRID, SERIES, series_color, tint

UNIT_NAMES = {"microbatches": N_("microbatches"), "bytes": N_("bytes")}


def _unit_label(unit: str) -> str:
    return _(UNIT_NAMES[unit]) if unit in UNIT_NAMES else unit


def live_activation_steps(
    timeline_or_trace: Timeline | Trace,
) -> tuple[list[list[tuple[float, float]]], str]:
    """Per stage, the step function ``[(time, live), ...]`` of stashed activations, and its unit.

    A Timeline gives microbatches (:meth:`Timeline.live_activations`). A Trace gives the running
    sum of its ``memory`` events of category ``"activation"`` per stage (``attrs["stage"]``, else
    ``chunk``), frees before allocations at equal times, in bytes (``"microbatches"`` when every
    change is +-1), with times shifted like :func:`pipeline_view`.
    """
    if isinstance(timeline_or_trace, Timeline):
        steps = timeline_or_trace.live_activations()
        return [[(t, float(c)) for t, c in row] for row in steps], "microbatches"
    view = pipeline_view(timeline_or_trace)
    trace = timeline_or_trace
    origin = min(e.start for e in trace.events if e.kind == "compute" and e.op in KINDS)
    mem = [
        e
        for e in trace.events
        if e.kind == "memory" and (e.attrs or {}).get("category") == ACTIVATION
    ]
    unit = "microbatches" if all(abs(e.nbytes) == 1 for e in mem) else "bytes"
    per_stage: list[list[tuple[float, int]]] = [[] for _ in range(view.num_stages)]
    for e in mem:
        stage = int((e.attrs or {}).get("stage", e.chunk if e.chunk is not None else e.rank))
        while stage >= len(per_stage):
            per_stage.append([])
        per_stage[stage].append((e.start - origin, e.nbytes))
    out = []
    for changes in per_stage:
        row, live = [(0.0, 0.0)], 0.0
        for t, delta in sorted(changes):
            live += delta
            row[-1:] = [(t, live)] if row[-1][0] == t else [row[-1], (t, live)]
        out.append(row)
    return out, unit


def activation_memory_figure(
    timeline_or_trace: Timeline | Trace, title: str | None = None, *, time_label: str | None = None
) -> Any:
    """Plotly: stashed activations per stage over time, the peak of each stage marked.

    Up to 8 stages: one panel each (a step line; shared axes, so heights compare). More stages: a
    heatmap (stage rows, stage 0 on top; each cell the most held during its time bin). Peak
    markers (``meta`` ``{"role": "peak"}``, ``customdata`` ``[stage, peak]`` per point) sit at
    the first time a stage reaches its peak; panel lines have ``meta`` ``{"role": "live",
    "stage"}``. ``time_label`` overrides the x-axis label (see :func:`pipeline_view`).
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    view = pipeline_view(timeline_or_trace, time_label)
    steps, unit = live_activation_steps(timeline_or_trace)
    end, n = view.makespan, len(steps)
    peaks = [max(c for _, c in row) for row in steps]
    first = [next(t for t, c in row if c == pk) for row, pk in zip(steps, peaks, strict=True)]
    how = _("measured") if view.measured else _("simulated")
    if unit == "microbatches":
        heading = _("{name}: stashed activations per stage (microbatches, {how})")
    else:
        heading = _("{name}: stashed activations per stage (bytes, {how})")
    title = title or heading.format(name=view.name, how=how)
    shown = _unit_label(unit)
    if n > 8:
        fig = _memory_heatmap(steps, peaks, first, end, shown, view.num_ranks)
        fig.update_layout(
            title=dict(text=title, x=0.01, xanchor="left"),
            plot_bgcolor="white",
            height=min(900, 200 + 14 * n),
            margin=dict(l=80, r=20, t=60, b=60),
        )
        fig.update_xaxes(title_text=view.time_label)
        return fit_layout(fig)
    fig = make_subplots(
        figure=Figure(), rows=n, cols=1, shared_xaxes=True, vertical_spacing=0.05 if n > 1 else 0
    )
    top = max(peaks, default=0.0)
    for s, row in enumerate(steps):
        color = _stage_color(s, n)
        fig.add_trace(
            go.Scatter(
                x=[t for t, _ in row] + [end],
                y=[c for _, c in row] + [row[-1][1]],
                mode="lines",
                line=dict(shape="hv", color=color, width=2),
                fill="tozeroy",
                name=_("stage {stage} (rank {rank})").format(stage=s, rank=s % view.num_ranks),
                meta={"role": "live", "stage": s},
                showlegend=False,
                hovertemplate=_("stage {stage}: %{{y}} {unit} stashed from t=%{{x}}").format(
                    stage=s, unit=shown
                )
                + "<extra></extra>",
            ),
            row=s + 1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=[first[s]],
                y=[peaks[s]],
                mode="markers+text",
                text=[_("peak {value}").format(value=f"{peaks[s]:g}")],
                textposition="top right",
                cliponaxis=False,
                textfont=dict(size=12),
                marker=dict(
                    symbol="triangle-down", size=11, color=color, line=dict(color="black", width=1)
                ),
                name=f"peak stage {s}",
                meta={"role": "peak", "stage": s},
                showlegend=False,
                customdata=[[s, peaks[s]]],
                hovertemplate=_("stage {stage} peak: {value} {unit}").format(
                    stage=s, value=f"{peaks[s]:g}", unit=shown
                )
                + "<extra></extra>",
            ),
            row=s + 1,
            col=1,
        )
        fig.update_yaxes(
            title_text=_("stage {stage}").format(stage=s),
            row=s + 1,
            col=1,
            title_font=dict(size=11),
            range=[0, top * 1.5 + 1e-9],
            nticks=3,
            gridcolor=GRID,
        )
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left"),
        height=max(320, 130 + 80 * n),
        plot_bgcolor="white",
        margin=dict(l=80, r=20, t=60, b=60),
    )
    fig.update_xaxes(range=[0, end * 1.01 or 1.0], gridcolor=GRID)
    fig.update_xaxes(title_text=view.time_label, row=n, col=1)
    return fit_layout(fig)


def _memory_heatmap(
    steps: list[list[tuple[float, float]]],
    peaks: list[float],
    first: list[float],
    end: float,
    unit: str,
    num_ranks: int,
    bins: int = 400,
) -> Any:
    """Stage x time heatmap: each cell the most activations held during its time bin."""
    import plotly.graph_objects as go

    end = end or 1.0
    edges = [end * i / bins for i in range(bins + 1)]
    z = []
    for row in steps:
        cells = [0.0] * bins
        for i, (t, c) in enumerate(row):
            t_next = row[i + 1][0] if i + 1 < len(row) else end
            lo = min(int(t / end * bins), bins - 1)
            hi = min(max(lo, int(t_next / end * bins - 1e-9)), bins - 1)
            for k in range(lo, hi + 1):
                cells[k] = max(cells[k], c)
        z.append(cells)
    n = len(steps)
    fig = Figure(
        go.Heatmap(
            x=edges,
            y=list(range(n)),
            z=z,
            colorscale="Blues",
            zmin=0,
            colorbar=dict(title=dict(text=unit, side="right")),
            meta={"role": "live"},
            hovertemplate=_("stage %{{y}}, t=%{{x}}: up to %{{z}} {unit}").format(unit=unit)
            + "<extra></extra>",
        )
    )
    fig.add_scatter(
        x=first,
        y=list(range(n)),
        mode="markers+text" if n <= 32 else "markers",
        text=[_("peak {value}").format(value=f"{pk:g}") for pk in peaks],
        textposition="middle right",
        textfont=dict(size=10, color=ALERT),
        cliponaxis=False,
        marker=dict(symbol="triangle-right", size=8, color=ALERT),
        showlegend=False,
        meta={"role": "peak"},
        customdata=[[s, pk] for s, pk in enumerate(peaks)],
        name="peaks",
        hovertemplate=_("stage %{{customdata[0]}}: %{{text}}").format() + "<extra></extra>",
    )
    fig.update_yaxes(
        title_text=_("stage (on rank stage % {n})").format(n=num_ranks), autorange="reversed"
    )
    return fig


def _stage_color(stage: int, num_stages: int) -> str:
    """A series colour per stage; with more stages than colours, paler blues down the pipe."""
    if num_stages <= len(SERIES):
        return series_color(stage)
    return tint(SERIES[0], 0.7 * stage / max(num_stages - 1, 1))


# ----------------------------------------------------------------- bubble against microbatches
