"""Tensor-parallel pictures: the blocks of X, A (= W^T), Y, dY and dX each rank holds, and the
collectives.

* :func:`tp_story` turns a run's report into frames: what every rank holds before the first
  collective, then after each step of each collective that ran (ring all-gather steps, the
  reduce-scatter half of an all-reduce, then its all-gather steps). The collectives are checked
  against the report's ``forward_collectives`` / ``backward_collectives`` (what the trace recorded),
  and the kind of each rank's local output ("slice" or "partial_sum") is the one the run measured
  (``local_output_kind``). A mismatch raises instead of drawing a story that did not happen.
* :func:`tp_blocks` draws one frame; :func:`tp_animation` all of them (plotly frames with a play
  button and a slider, so it plays in exported HTML).

Colours: a **slice** (blue) is one block of the full tensor; a **partial sum** (orange) has the
full shape but must be summed over the ranks; green is the full tensor. Reads a
:class:`~edu_parallel.tensor_parallel.report.TPReport` or its ``to_json_dict()``; never imports
torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _
from .controls import play_controls
from .fit import MAX_WIDTH_PX, fit_layout

KINDS = ("replicated", "shard", "slice", "partial", "full", "wrong")
KIND_COLORS = {
    "replicated": "#9ecae1",
    "shard": "#9e9ac8",
    "slice": "#3182bd",
    "partial": "#fd8d3c",
    "full": "#31a354",
    "wrong": "#de2d26",
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
PHASE_WORDS = {"forward": N_("forward"), "backward": N_("backward")}
# the forward frame after the local matmul, by what each rank's output is
_LOCAL = {
    "slice": N_("forward, local matmul: each rank's {output} is a slice of Y (measured)"),
    "partial": N_("forward, local matmul: each rank's {output} is a partial sum of Y (measured)"),
    "full": N_("forward, local matmul: each rank's {output} is all of Y (measured)"),
    "wrong": N_("forward, local matmul: each rank's {output} is not Y (measured)"),
}
MEASURED = {"slice": "slice", "partial_sum": "partial", "full": "full", "other": "wrong"}
Region = tuple[str, str, int]  # (kind, "all" | "col" | "row", block)


@dataclass
class TPFrame:
    """One picture: ``label``, the collective drawn (``op``, ``phase``; None for local compute) and
    ``holds[matrix][rank]``: the regions that rank holds."""

    label: str
    phase: str
    op: str | None
    holds: dict[str, list[list[Region]]]


def _get(report: Any, key: str) -> Any:
    return report[key] if isinstance(report, Mapping) else getattr(report, key)


def matrices(report: Any) -> dict[str, str]:
    """The matrices drawn for the report's mode, with their shapes in the paper's notation."""
    if _get(report, "mode") == "column":
        return {"X": "(s, h)", "A": "(h, ffn)", "Y": "(s, ffn)", "dY": "(s, ffn)", "dX": "(s, h)"}
    if _get(report, "mode") == "row":
        return {"X": "(s, ffn)", "A": "(ffn, h)", "Y": "(s, h)", "dY": "(s, h)", "dX": "(s, ffn)"}
    return {
        "X": "(s, h)",
        "A": "(h, ffn)",
        "Z": "(s, ffn)",
        "B": "(ffn, h)",
        "Y": "(s, h)",
        "dY": "(s, h)",
        "dX": "(s, h)",
    }


def tp_story(report: Any) -> list[TPFrame]:
    """The frames of a run (see the module docstring); ValueError if the report disagrees."""
    mode, t, rule = _get(report, "mode"), int(_get(report, "world_size")), _get(report, "rule")
    kinds = set(_get(report, "local_output_kind"))
    if len(kinds) != 1:
        raise bad_value("report.local_output_kind", sorted(kinds), _("the same kind on every rank"))
    local = MEASURED[kinds.pop()]
    names = list(matrices(report))
    state: dict[str, list[list[Region]]] = {m: [[] for _ in range(t)] for m in names}
    frames: list[TPFrame] = []
    ran = [("forward", op) for op in _get(report, "forward_collectives")]
    ran += [("backward", op) for op in _get(report, "backward_collectives")]
    done: list[tuple[str, str]] = []

    def put(m: str, kind: str, axis: str = "all", blocks: Any = None) -> None:
        for r in range(t):
            held = [r] if blocks is None else blocks(r)
            state[m][r] = [(kind, axis, 0)] if axis == "all" else [(kind, axis, b) for b in held]

    def snap(label: str, phase: str, op: str | None = None) -> None:
        frames.append(
            TPFrame(label, phase, op, {m: [list(x) for x in v] for m, v in state.items()})
        )

    def collective(op: str, phase: str, m: str, axis: str, what: str) -> None:
        done.append((phase, op))
        call = f"{op}({m})"
        when = _(PHASE_WORDS[phase])
        if rule == "syllabus":
            put(m, "wrong")
            return snap(
                _("{phase}: {call} as the outline says: {what}").format(
                    phase=when, call=call, what=what
                ),
                phase,
                op,
            )
        # ring reduce-scatter: rank r owns the summed block r
        if op in ("all_reduce", "reduce_scatter"):
            put(m, "slice", axis)
            snap(
                _("{phase}: {call}, reduce-scatter part: rank r holds the SUM of block r").format(
                    phase=when, call=call
                ),
                phase,
                op,
            )
            if op == "reduce_scatter":
                return
        for k in range(1, t):  # ring all-gather: after step k rank r holds blocks r, r-1, .., r-k
            if k == t - 1:
                put(m, "full")
            else:
                put(m, "slice", axis, lambda r, k=k: [(r - j) % t for j in range(k + 1)])
            now = what if k == t - 1 else _("rank r holds blocks r .. r-{k}").format(k=k)
            snap(
                _("{phase}: {call}, all-gather step {k}/{n}: {now}").format(
                    phase=when, call=call, k=k, n=t - 1, now=now
                ),
                phase,
                op,
            )

    # forward, local compute
    sp, mlp = mode == "mlp-sp", mode in ("mlp", "mlp-sp")
    put("A", "shard", "row" if mode == "row" else "col")  # column: A_r = W_r^T; row: rows of A
    if mlp:
        put("B", "shard", "row")
    if sp:
        put("X", "slice", "row")
        snap(_("forward: X split along the sequence (rank r: tokens block r)"), "forward")
        collective("all_gather", "forward", "X", "row", _("every rank gets the whole sequence"))
    elif mode == "row":
        put("X", "slice", "col")
    else:
        put("X", "replicated")
    if mlp:
        put("Z", "slice", "col")  # GeLU(X A_r): whole columns of XA, no communication
    put("Y", local, "col" if local == "slice" else "all")
    snap(_(_LOCAL[local]).format(output="GeLU(X A_r) B_r" if mlp else "Y_r"), "forward")
    if mode == "column" and _get(report, "gather_output"):
        collective("all_gather", "forward", "Y", "col", _("the full Y on every rank"))
    elif mode == "column" and rule == "syllabus":
        collective("all_reduce", "forward", "Y", "col", _("sum of slices, shape (s, ffn/t): not Y"))
    elif mode == "row" and rule == "syllabus":
        collective(
            "all_gather", "forward", "Y", "col", _("partial sums side by side, (s, t*h): not Y")
        )
    elif mode in ("row", "mlp"):
        collective("all_reduce", "forward", "Y", "col", _("g: the full Y on every rank"))
    elif sp:
        collective(
            "reduce_scatter", "forward", "Y", "row", _("rank r keeps the summed sequence block r")
        )
        put("X", "slice", "row")
        snap(
            _("forward done: the gathered X is dropped; each rank saved only its sequence block"),
            "forward",
        )
    if rule == "megatron":  # backward
        if sp:
            put("dY", "slice", "row")
            snap(_("backward: dY arrives split along the sequence"), "backward")
            collective("all_gather", "backward", "dY", "row", _("the whole sequence's dY"))
        elif mode == "column" and not _get(report, "gather_output"):
            put("dY", "slice", "col")
        else:
            put("dY", "replicated")
        if mode == "row":
            put("dX", "slice", "col")
            snap(_("backward: dX_r = dY A_r^T is a slice of dX: no communication"), "backward")
        else:
            if sp:  # dW = dZ^T X needs every token: gather X again instead of having kept it
                collective(
                    "all_gather",
                    "backward",
                    "X",
                    "row",
                    _("X gathered again for dW (SP saved only its block)"),
                )
            put("dX", "partial")
            snap(
                _("backward: dX_r = {grad} A_r^T is a PARTIAL SUM of dX").format(
                    grad="dZ_r" if mlp else "dY_r"
                ),
                "backward",
            )
            if sp:
                collective(
                    "reduce_scatter",
                    "backward",
                    "dX",
                    "row",
                    _("rank r keeps its sequence block of dX"),
                )
            else:
                collective("all_reduce", "backward", "dX", "col", _("f: the full dX on every rank"))
    if done != ran:
        raise bad_value(
            "report collectives",
            ran,
            _("the collectives of mode={mode!r} rule={rule!r}: {done}").format(
                mode=mode, rule=rule, done=done
            ),
        )
    return frames


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
            line=dict(color="#888", width=1),
            layer="below",
        )
        for r in range(t)
        for i in range(len(names))
    ]


def _figure(report: Any, story: list[TPFrame], k: int, title: str | None) -> Any:
    import plotly.graph_objects as go

    shapes, t = matrices(report), int(_get(report, "world_size"))
    names = list(shapes)
    fig = go.Figure(data=_frame_traces(story[k], names, t))
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
    # Equal x and y scales: the width (<= MAX_WIDTH_PX) sets a matrix's size, and so the height.
    width = min(MAX_WIDTH_PX, max(700, 150 * len(names) + 120))
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
    mode, t = _get(report, "mode"), int(_get(report, "world_size"))
    head = f"<b>{title}</b><br>" if title else ""
    if _get(report, "rule") == "megatron":
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
    names, t = list(matrices(report)), int(_get(report, "world_size"))
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
