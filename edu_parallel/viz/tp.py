"""Tensor-parallel pictures: the blocks of X, A (= W^T), Y, dY and dX each rank holds, and the
collectives.

* :func:`~edu_parallel.viz.tp_frames.tp_story` (``tp_frames.py``) turns a run's report into
  frames, checked against what the run recorded.
* :func:`tp_blocks` draws one frame; :func:`tp_animation` all of them (plotly frames with a play
  button and a slider, so it plays in exported HTML).

Colours (``style.py``): a **slice** (blue) is one block of the full tensor; a **partial sum**
(orange) has the full shape but must be summed over the ranks; green is the full tensor; red is
not the dense result. Reads a :class:`~edu_parallel.tensor_parallel.report.TPReport` or its
``to_json_dict()``; never imports torch.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _
from .controls import play_controls
from .fit import fit_layout
from .plotly_figure import Figure
from .style import BLUE, GREEN, MUTED, ORANGE, PURPLE, RED, WIDTH, tint
from .tp_frames import KINDS, Region, TPFrame, matrices, report_field, tp_story

KIND_COLORS = {
    "replicated": tint(BLUE),
    "shard": tint(PURPLE),
    "slice": BLUE,
    "partial": ORANGE,
    "full": GREEN,
    "wrong": RED,
}
KIND_NAMES = {  # legend entries, translated where shown
    "replicated": N_("replicated input (same on every rank)"),
    "shard": N_("weight shard"),
    "slice": N_("slice: one block of the full tensor"),
    "partial": N_("partial sum: full shape, must be summed over ranks"),
    "full": N_("the full tensor"),
    "wrong": N_("not the dense result (the syllabus rule)"),
}
KIND_WORDS = {  # the short labels under each block
    "replicated": N_("replicated"),
    "shard": N_("shard"),
    "slice": N_("slice"),
    "partial": N_("partial"),
    "full": N_("full"),
    "wrong": N_("wrong"),
}


# ----------------------------------------------------------------- drawing
GAP_X, GAP_Y = 0.45, 0.75


def _rect(x0: float, y0: float, kind_region: Region, t: int) -> tuple[list[float], list[float]]:
    _kind, axis, b = kind_region
    if axis == "col":
        x0, x1, y1 = x0 + b / t, x0 + (b + 1) / t, y0 + 1
    elif axis == "row":
        x1, y1, y0 = x0 + 1, y0 + 1 - b / t, y0 + 1 - (b + 1) / t
    else:
        x1, y1 = x0 + 1, y0 + 1
    return [x0, x1, x1, x0, x0, None], [y0, y0, y1, y1, y0, None]  # type: ignore[list-item]


def _frame_traces(frame: TPFrame, names: list[str], t: int) -> list[Any]:
    import plotly.graph_objects as go

    xs: dict[str, list[Any]] = {k: [] for k in KINDS}
    ys: dict[str, list[Any]] = {k: [] for k in KINDS}
    tx, ty, tt = [], [], []
    for r in range(t):
        y0 = -r * (1 + GAP_Y)
        for i, m in enumerate(names):
            x0 = i * (1 + GAP_X)
            regions = frame.holds[m][r]
            for reg in regions:
                px, py = _rect(x0, y0, reg, t)
                xs[reg[0]] += px
                ys[reg[0]] += py
            kinds = sorted({k for k, _a, _b in regions})
            blocks = sorted({b for _k, a, b in regions if a != "all"})
            tx.append(x0 + 0.5)
            ty.append(y0 - 0.13)
            words = [_(KIND_WORDS[k]) if k in KIND_WORDS else k for k in kinds]
            tt.append(", ".join(words) + (f" {blocks}" if blocks and len(blocks) < t else ""))
    traces = [
        go.Scatter(
            x=xs[k],
            y=ys[k],
            fill="toself",
            mode="lines",
            fillcolor=KIND_COLORS[k],
            line=dict(color="white", width=1),
            name=_(KIND_NAMES[k]),
            hoverinfo="name",
            legendgroup=k,
        )
        for k in KINDS
    ]
    traces.append(
        go.Scatter(
            x=tx,
            y=ty,
            mode="text",
            text=tt,
            textfont=dict(size=11),
            showlegend=False,
            hoverinfo="skip",
        )
    )
    return traces


def _outlines(names: list[str], t: int) -> list[dict[str, Any]]:
    return [
        dict(
            type="rect",
            x0=i * (1 + GAP_X),
            x1=i * (1 + GAP_X) + 1,
            y0=-r * (1 + GAP_Y),
            y1=-r * (1 + GAP_Y) + 1,
            line=dict(color=MUTED, width=1),
            layer="below",
        )
        for r in range(t)
        for i in range(len(names))
    ]


def _figure(report: Any, story: list[TPFrame], k: int, title: str | None) -> Any:
    shapes, t = matrices(report), int(report_field(report, "world_size"))
    names = list(shapes)
    fig = Figure(data=_frame_traces(story[k], names, t))
    notes = [
        dict(
            x=i * (1 + GAP_X) + 0.5,
            y=1.12,
            text=f"<b>{m}</b> {shapes[m]}",
            showarrow=False,
            font=dict(size=13),
        )
        for i, m in enumerate(names)
    ]
    notes += [
        dict(
            x=-0.15,
            y=-r * (1 + GAP_Y) + 0.5,
            text=f"rank {r}",
            showarrow=False,
            xanchor="right",
            font=dict(size=12),
        )
        for r in range(t)
    ]
    prefix = _title_prefix(report, title)
    # Equal x and y scales: the width (<= WIDTH) sets a matrix's size, and so the height.
    width = min(WIDTH, max(700, 150 * len(names) + 120))
    x_span, y_span = len(names) * (1 + GAP_X) + 0.9, (t - 1) * (1 + GAP_Y) + 1.7
    height = round((width - 90) * y_span / x_span) + 110 + 150
    fig.update_layout(
        title=dict(text=_frame_title(prefix, story[k].label), x=0.5, font=dict(size=14)),
        shapes=_outlines(names, t),
        annotations=notes,
        plot_bgcolor="white",
        width=width,
        height=height,
        margin=dict(l=70, r=20, t=110, b=150),
        legend=dict(orientation="h", x=0, y=-0.02, yanchor="top", font=dict(size=11)),
        xaxis=dict(visible=False, range=[-0.9, len(names) * (1 + GAP_X)], fixedrange=True),
        yaxis=dict(
            visible=False,
            range=[-(t - 1) * (1 + GAP_Y) - 0.4, 1.3],
            fixedrange=True,
            scaleanchor="x",
        ),
    )
    fig.layout.meta = dict(frame_labels=[f.label for f in story], matrices=names)
    return fig


def _title_prefix(report: Any, title: str | None) -> str:
    """``<b>title</b><br>TP column on 4 ranks`` (the part every frame's title shares)."""
    mode, t = report_field(report, "mode"), int(report_field(report, "world_size"))
    head = f"<b>{title}</b><br>" if title else ""
    if report_field(report, "rule") == "megatron":
        return head + _("TP {mode} on {n} ranks").format(mode=mode, n=t)
    return head + _("TP {mode}, syllabus rule on {n} ranks").format(mode=mode, n=t)


def _frame_title(prefix: str, label: str) -> str:
    return _("{head}: {description}").format(head=prefix, description=label)


def tp_blocks(report: Any, frame: int = 0, title: str | None = None) -> Any:
    """One frame of :func:`tp_story` (default: the first, after the local matmul)."""
    story = tp_story(report)
    if (
        isinstance(frame, bool)
        or not isinstance(frame, int)
        or not -len(story) <= frame < len(story)
    ):
        raise bad_value(
            "frame",
            frame,
            _("an integer in [{low}, {high}]").format(low=-len(story), high=len(story) - 1),
        )
    return fit_layout(_figure(report, story, frame % len(story), title))


def tp_animation(report: Any, title: str | None = None) -> Any:
    """Every frame of :func:`tp_story`, with play / pause and a slider (plays in exported HTML)."""
    import plotly.graph_objects as go

    story = tp_story(report)
    fig = _figure(report, story, 0, title)
    names, t = list(matrices(report)), int(report_field(report, "world_size"))
    prefix = _title_prefix(report, title)
    fig.frames = [
        go.Frame(
            name=str(k),
            data=_frame_traces(f, names, t),
            layout=dict(title=dict(text=_frame_title(prefix, f.label))),
        )
        for k, f in enumerate(story)
    ]
    frames = [str(k) for k in range(len(story))]
    plot_px = fig.layout.width - fig.layout.margin.l - fig.layout.margin.r
    fig.update_layout(
        **play_controls(
            frames, duration_ms=1100, prefix=_("frame: "), y=-0.25, font_size=12, plot_px=plot_px
        )
    )
    return fit_layout(fig)
