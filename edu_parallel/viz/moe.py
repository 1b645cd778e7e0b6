"""Expert-parallel (MoE) renderers: who sends tokens to whom, how loaded each expert is.

They read a :class:`~edu_parallel.expert_parallel.report.MoEReport` (or its ``to_json_dict()``) or a
trace, never run anything, and never import torch (plotly is imported inside the functions).

* :func:`traffic_heatmap`: the rank x rank matrix of bytes one exchange moved (row = from, column =
  to; the diagonal is a local copy). Several runs side by side share one colour scale.
* :func:`expert_load_bars`: assignments per expert, stacked by source rank, dropped ones on top in
  red, with the capacity line (N x capacity: the most an expert can receive) and the mean load.
* :func:`dispatch_animation`: every token-expert assignment as a marker, plotly frames
  routed -> dispatched (at the expert's rank, one column per local expert) -> combined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _
from ..core.marks import traffic_matrix
from ..core.trace import Trace
from ..core.width import width as text_width
from .controls import play_controls
from .fit import fit_layout
from .plotly_figure import Figure
from .style import ALERT, EMPTY, WIDTH, legend_below, series_color

LINE_NAME_GAP_PX, PX_PER_COLUMN = 6, 7  # a line's name right of the plot; 12 px text, per column

DROPPED = ALERT  # an assignment over capacity
STAGE_CAPTIONS = {
    "routed": N_("routed: each token's k choices at its own rank (x = over capacity)"),
    "dispatched": N_("after dispatch: rows at their expert's rank, one column per local expert"),
    "combined": N_("after combine: expert outputs back home, weighted and summed; dropped = 0"),
}
STAGE_WORDS = {"routed": N_("routed"), "dispatched": N_("dispatched"), "combined": N_("combined")}


def _get(report: Any, name: str) -> Any:
    value = report.get(name) if isinstance(report, Mapping) else getattr(report, name, None)
    if value is None:
        raise bad_value(
            "report",
            type(report).__name__,
            _("an MoEReport (or its JSON) with {name!r}").format(name=name),
        )
    return value


def matrix_of(data: Any, exchange: str = "dispatch") -> list[list[int]]:
    """The ``exchange`` matrix of a report, a report's JSON, a trace, or a matrix itself."""
    if isinstance(data, Trace):
        return traffic_matrix(data, exchange)
    if isinstance(data, list | tuple):
        if not data or any(len(row) != len(data) for row in data):
            raise bad_value("matrix", data, _("a square list of lists of bytes"))
        return [list(row) for row in data]
    return [list(row) for row in _get(data, "traffic_by_exchange")[exchange]]


def traffic_heatmap(data: Any, title: str | None = None, exchange: str = "dispatch") -> Any:
    """Heatmap of bytes rank s sent to rank d in ``exchange``; ``data`` one run or ``{name: run}``.

    Each cell shows its bytes; ``layout.meta["matrices"]`` holds the matrices drawn."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    runs = (
        dict(data)
        if isinstance(data, Mapping) and "traffic_by_exchange" not in data
        else {"": data}
    )
    if not runs:
        raise bad_value("data", data, _("a run or a non-empty {{name: run}}").format())
    mats = {name: matrix_of(run, exchange) for name, run in runs.items()}
    top = max((b for m in mats.values() for row in m for b in row), default=0) or 1
    cols = min(len(mats), 2)  # two heatmaps a row fit the notebook's width with the colour bar
    rows = -(-len(mats) // cols)
    fig = make_subplots(
        figure=Figure(),
        rows=rows,
        cols=cols,
        horizontal_spacing=0.12,
        vertical_spacing=0.3 / rows if rows > 1 else 0.0,
        subplot_titles=[f"<b>{k}</b>" for k in mats] if len(mats) > 1 else None,
    )
    for i, m in enumerate(mats.values()):
        row, col = i // cols + 1, i % cols + 1
        n = len(m)
        labels = [f"r{k}" for k in range(n)]
        text = [
            [
                _("{nbytes} (local)").format(nbytes=f"{m[s][d]:,}") if s == d else f"{m[s][d]:,}"
                for d in range(n)
            ]
            for s in range(n)
        ]
        fig.add_trace(
            go.Heatmap(
                z=m,
                x=labels,
                y=labels,
                zmin=0,
                zmax=top,
                colorscale="Blues",
                text=text,
                texttemplate="%{text}",
                showscale=i == 0,
                textfont=dict(size=12),
                colorbar=dict(title=_("bytes"), len=min(1.0, 1.2 / rows), y=1.0, yanchor="top"),
                hovertemplate=_("from %{{y}} to %{{x}}: %{{z:,}} B").format() + "<extra></extra>",
            ),
            row=row,
            col=col,
        )
        fig.update_xaxes(title_text=_("to rank"), side="bottom", row=row, col=col)
        fig.update_yaxes(
            title_text=_("from rank") if col == 1 else None, autorange="reversed", row=row, col=col
        )
    head = f"<b>{title}</b><br>" if title else ""
    fig.update_layout(
        title=dict(
            text=head
            + _("{exchange} all-to-all: bytes sent, rank x rank").format(exchange=exchange),
            x=0.5,
        ),
        width=min(WIDTH, 160 + 380 * cols),
        height=130 + 320 * rows + 60 * (rows - 1),
        plot_bgcolor="white",
    )
    fig.layout.meta = dict(matrices=list(mats.values()), names=list(mats), exchange=exchange)
    return fit_layout(fig)


def expert_load_bars(report: Any, title: str | None = None) -> Any:
    """Assignments per expert stacked by source rank (kept), dropped in red on top; lines at
    N x capacity and at the mean load. ``layout.meta``: ``kept``, ``dropped``, ``capacity_line``."""
    import plotly.graph_objects as go

    routed, kept = _get(report, "routed_matrix"), _get(report, "kept_matrix")
    n, e = len(routed), len(routed[0])
    cap = _get(report, "capacity")
    xs = [f"e{j}" for j in range(e)]
    fig = Figure()
    for s in range(n):
        fig.add_trace(
            go.Bar(
                x=xs,
                y=kept[s],
                name=_("kept, from rank {rank}").format(rank=s),
                marker_color=series_color(s, wide=True),
                hovertemplate=_("from rank {rank}: %{{y}} kept").format(rank=s)
                + "<extra>%{x}</extra>",
            )
        )
    dropped = [sum(routed[s][j] - kept[s][j] for s in range(n)) for j in range(e)]
    fig.add_trace(
        go.Bar(
            x=xs,
            y=dropped,
            name=_("dropped"),
            marker_color=DROPPED,
            marker_pattern_shape="/",
            hovertemplate=_("%{{y}} dropped").format() + "<extra>%{x}</extra>",
        )
    )
    mean = sum(map(sum, routed)) / e
    line = n * cap
    up, down = ("bottom", "top") if line >= mean else ("top", "bottom")
    lines = (
        (
            line,
            _("N x capacity = {n} x {cap} = {line}").format(n=n, cap=cap, line=line),
            "dash",
            up,
        ),
        (mean, _("mean load {mean}").format(mean=f"{mean:g}"), "dot", down),
    )
    for y, text, dash, anchor in lines:
        fig.add_hline(y=y, line_dash=dash, line_color="black")
        # named right of the plot, clear of the bars: the higher line's name above its line,
        # the lower's below, so the two never meet however close the lines are
        fig.add_annotation(
            x=1,
            xref="paper",
            xanchor="left",
            xshift=LINE_NAME_GAP_PX,
            y=y,
            yanchor=anchor,
            text=text,
            showarrow=False,
        )
    load = [sum(routed[s][j] for s in range(n)) for j in range(e)]
    head = f"<b>{title}</b><br>" if title else ""
    names_px = LINE_NAME_GAP_PX + PX_PER_COLUMN * max(text_width(t) for _y, t, _d, _a in lines)
    height, margin = 480, dict(l=70, r=names_px + 10, t=90, b=130)
    fig.update_layout(
        barmode="stack",
        plot_bgcolor="white",
        width=min(WIDTH, 560 + margin["r"]),
        height=height,
        margin=margin,
        legend=legend_below(height, margin, 50),
        title=dict(
            text=head
            + _("expert load: max/mean = {ratio}, {dropped} of {total} assignments dropped").format(
                ratio=f"{max(load) / mean:.2f}", dropped=sum(dropped), total=sum(load)
            ),
            x=0.5,
        ),
        xaxis_title=_("expert (e0.. on rank 0, then rank 1, ...)"),
        yaxis_title=_("token-expert assignments"),
    )
    fig.layout.meta = dict(kept=[list(r) for r in kept], dropped=dropped, capacity_line=line)
    return fit_layout(fig)


def _positions(report: Any) -> tuple[list[dict[str, Any]], int, int]:
    """Every assignment with its place in each frame; returns (points, slot width, height).

    Rank r owns columns ``r W .. r W + W - 2`` (W = k + E/N + 1): first its k choice columns (the
    tokens at home, one row per token), then one column per local expert (the rows it received)."""
    exps, kept = _get(report, "routing_experts"), _get(report, "routing_kept")
    n, e = len(exps), _get(report, "experts")
    per, k = e // n, len(exps[0][0]) if exps[0] else 1
    width = k + per + 1
    fill: dict[int, int] = {}  # next free slot of each expert at its rank
    points = []
    for s in range(n):
        for t, (row, krow) in enumerate(zip(exps[s], kept[s], strict=True)):
            for j, (ex, ok) in enumerate(zip(row, krow, strict=True)):
                home = (s * width + j, t)
                there = home
                if ok:
                    there = ((ex // per) * width + k + ex % per, fill.get(ex, 0))
                    fill[ex] = fill.get(ex, 0) + 1
                points.append(
                    dict(src=s, token=t, choice=j, expert=ex, kept=bool(ok), home=home, there=there)
                )
    height = max([p["there"][1] for p in points] + [p["home"][1] for p in points], default=0) + 1
    return points, width, height


def dispatch_animation(report: Any, title: str | None = None) -> Any:
    """Frames ``routed``, ``dispatched``, ``combined``: each marker one token-expert assignment
    (colour = expert, x = dropped). Dispatched markers sit at their expert's rank, one column per
    local expert; dropped ones stay home. ``layout.meta["points"]`` lists them."""
    import plotly.graph_objects as go

    points, width, height = _positions(report)
    n = len(_get(report, "routing_experts"))
    per = _get(report, "experts") // n
    k = width - per - 1
    ids = [f"r{p['src']}t{p['token']}c{p['choice']}" for p in points]
    hover = [
        (
            _("rank {src} token {token} choice {choice} -> expert {expert}")
            if p["kept"]
            else _(
                "rank {src} token {token} choice {choice} -> expert {expert} "
                "(dropped: over capacity)"
            )
        ).format(src=p["src"], token=p["token"], choice=p["choice"], expert=p["expert"])
        for p in points
    ]

    def scatter(stage: str) -> Any:
        at = [p["there"] if stage == "dispatched" else p["home"] for p in points]
        faded = stage == "combined"
        return go.Scatter(
            x=[a[0] for a in at],
            y=[a[1] for a in at],
            ids=ids,
            mode="markers",
            text=hover,
            hovertemplate="%{text}<extra></extra>",
            showlegend=False,
            marker=dict(
                size=11,
                color=[
                    series_color(p["expert"], wide=True) if p["kept"] or not faded else EMPTY
                    for p in points
                ],
                symbol=["square" if p["kept"] else "x" for p in points],
                line=dict(width=[0 if p["kept"] else 2 for p in points], color=DROPPED),
            ),
        )

    stages = ("routed", "dispatched", "combined")
    captions = {s: _(STAGE_CAPTIONS[s]) for s in stages}
    head = f"<b>{title}</b> · " if title else ""
    fig = Figure(data=[scatter("routed")])
    e = _get(report, "experts")
    for ex in range(e):  # legend only: one entry per expert colour
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=_("e{expert} on r{rank}").format(expert=ex, rank=ex // per),
                marker=dict(size=11, symbol="square", color=series_color(ex, wide=True)),
            )
        )
    fig.frames = [
        go.Frame(name=s, data=[scatter(s)], traces=[0], layout=dict(title_text=head + captions[s]))
        for s in stages
    ]
    for r in range(n):
        fig.add_vrect(
            x0=r * width - 0.6,
            x1=(r + 1) * width - 1.4,
            fillcolor=series_color(r, wide=True),
            opacity=0.07,
            line_width=0,
            annotation_text=_("rank {rank}").format(rank=r),
            annotation_position="outside top left",  # above the panel, clear of its first row
        )
    fig.update_layout(
        title=dict(text=head + captions["routed"], x=0.5),
        plot_bgcolor="white",
        width=min(WIDTH, 200 + 40 * n * width),
        height=min(900, 220 + 14 * height),
        legend=dict(title=dict(text=_("expert")), font=dict(size=12)),
        xaxis=dict(
            range=[-1, n * width - 1],
            fixedrange=True,
            tickfont=dict(size=11),
            tickvals=[r * width + c for r in range(n) for c in range(width - 1)],
            ticktext=[
                f"top-{c + 1}" if c < k else f"e{r * per + c - k}"
                for r in range(n)
                for c in range(width - 1)
            ],
        ),
        yaxis=dict(
            range=[height, -1],
            title=_("token (home) / slot (at the expert)"),
            fixedrange=True,
        ),
    )
    controls = play_controls(
        list(stages),
        duration_ms=1200,
        labels=[_(STAGE_WORDS[s]) for s in stages],
        transition_ms=800,
        redraw=False,
        prefix=_("frame: "),
        y=-0.09,
        plot_px=fig.layout.width - 80 - 160,  # default left margin, the legend on the right
    )
    fig.update_layout(**controls)
    fig.layout.meta = dict(points=points, slot_width=width, stages=list(stages))
    return fit_layout(fig)
