"""Gradient buckets filling up during backward (lesson 06), animated with plotly frames.

:func:`bucket_fill_animation` reads one rank's step of a
:func:`~edu_parallel.data_parallel.ddp.train_ddp` trace: one cell per parameter, in reduction
order (reverse registration order, bucket after bucket, as in the run's
:class:`~edu_parallel.data_parallel.buckets.BucketPlan` in ``meta["buckets"]``), on the shaded
background of its bucket. A cell turns *grad ready* at its ``grad_ready`` mark; every cell of a
bucket turns *issued* at the bucket's ``bucket_ready`` mark and *reduced* when its all-reduce
ends. With ``sync="overlap"`` the first bucket is issued while backward still fills the others;
with ``sync="bucketed"`` every cell fills before any bucket is issued.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _
from ..core.schema import BUCKET_READY_MARK, GRAD_READY_MARK
from ..core.trace import Trace
from ..data_parallel.buckets import BucketPlan
from .controls import play_controls
from .ddp import (
    bucket_color,
    grad_syncs,
    pick_step,
    step_events,
    step_origin,
    sync_backward,
    time_unit,
)
from .fit import fit_layout
from .plotly_figure import Figure
from .style import (
    DIM_COLORS,
    FONT,
    GRADIENTS,
    SOFT_INK,
    WHITE,
    WIDTH,
    YELLOW,
    below,
    title_layout,
)

STATES = ("empty", "grad ready", "issued", "reduced")
# a gradient (orange, as in memory), issued, then reduced by the data-parallel group (DP green)
STATE_COLORS = (WHITE, GRADIENTS, YELLOW, DIM_COLORS["dp"])
STATE_NAMES = {  # what a learner reads; the states themselves stay in customdata
    "empty": N_("empty"),
    "grad ready": N_("grad ready"),
    "issued": N_("issued"),
    "reduced": N_("reduced"),
}
_EVENT_TEXT = {"issued": N_("b{bucket} issued"), "reduced": N_("b{bucket} reduced")}


def state_name(state: str) -> str:
    return _(STATE_NAMES[state]) if state in STATE_NAMES else state


@dataclass(frozen=True)
class FillEvent:
    """Something that changes a cell: ``what`` is ``ready`` (one ``param``), ``issued`` or
    ``reduced`` (a whole ``bucket``), at ``t`` seconds of the trace's clock."""

    t: float
    what: str
    bucket: int
    param: str | None = None

    def text(self) -> str:
        if self.what == "ready":
            return _("{param} grad ready").format(param=self.param)
        if self.what in _EVENT_TEXT:
            return _(_EVENT_TEXT[self.what]).format(bucket=self.bucket)
        return f"b{self.bucket} {self.what}"


def fill_events(trace: Trace, rank: int, step: int) -> list[FillEvent]:
    """Grad-ready, bucket-issued and all-reduce-ended moments of ``rank`` in ``step``, in order."""
    events = step_events(trace, step, rank)
    out = []
    for e in events:
        a = e.attrs or {}
        if e.kind == "mark" and e.op == GRAD_READY_MARK:
            out.append(FillEvent(e.start, "ready", a["bucket"], a["param"]))
        elif e.kind == "mark" and e.op == BUCKET_READY_MARK:
            out.append(FillEvent(e.start, "issued", a["bucket"]))
    out += [FillEvent(e.end, "reduced", e.attrs["bucket"]) for e in grad_syncs(events)]
    order = {"ready": 0, "issued": 1, "reduced": 2}
    return sorted(out, key=lambda f: (f.t, order[f.what]))


def _plan(trace: Trace, fills: list[FillEvent]) -> list[tuple[int, list[str], int]]:
    """``(bucket, params, bytes)`` in reduction order: the run's plan, else the marks' order."""
    if trace.meta.get("buckets"):
        return [
            (b.index, list(b.params), b.nbytes) for b in BucketPlan.from_text(trace.meta["buckets"])
        ]
    found: dict[int, list[str]] = {}
    for f in fills:
        if f.what == "ready":
            found.setdefault(f.bucket, []).append(f.param)
    return [(b, found[b], 0) for b in sorted(found)]


def bucket_fill_animation(
    trace: Trace, rank: int = 0, step: int | None = None, title: str | None = None
) -> Any:
    """Cells of parameters filling bucket by bucket during ``rank``'s backward in ``step``
    (default: the last); see the module doc. Frame ``k`` shows the state after the ``k``-th
    moment (frame 0: the synchronising backward starts); frames are named by their label
    (``"t=12.3 ms: b0 issued"``). Cell ``customdata`` is ``[param, bucket, state]``;
    ``layout.meta`` holds ``times`` (axis unit, since the step began), ``unit`` and ``params``."""
    import plotly.graph_objects as go

    step = pick_step(trace, step)
    ranks = sorted({e.rank for e in trace.events if e.kind == "compute"})
    if rank not in ranks:
        raise bad_value("rank", rank, _("one of the trace's ranks {ranks}").format(ranks=ranks))
    fills = fill_events(trace, rank, step)
    if not any(f.what == "ready" for f in fills):
        raise bad_value(
            "trace",
            trace.meta.get("source", "run"),
            _("a measured train_ddp trace with grad_ready marks"),
        )
    plan = _plan(trace, fills)
    cells = [(p, b) for b, params, _nbytes in plan for p in params]
    events = step_events(trace, step, rank)
    origin = step_origin(events)
    back = sync_backward(events)
    start = back[0].start if back else fills[0].t
    factor, unit = time_unit(max(f.t for f in fills) - origin)
    moments = [FillEvent(start, "start", -1), *fills]

    def states(k: int) -> list[str]:
        state = {p: 0 for p, _b in cells}
        bucket_state: dict[int, int] = {}
        for f in moments[1 : k + 1]:
            if f.what == "ready":
                state[f.param] = max(state.get(f.param, 0), 1)
            else:
                bucket_state[f.bucket] = 2 if f.what == "issued" else 3
        return [STATES[max(state[p], bucket_state.get(b, 0))] for p, b in cells]

    def doing(t: float) -> str:
        running = [e for e in back if e.start <= t < e.end]
        if running:
            return _("backward running (layer {layer})").format(layer=running[0].attrs.get("layer"))
        return _("backward done") if back and t >= back[-1].end else _("before backward")

    labels, cell_states = [], []
    for k, f in enumerate(moments):
        what = _("backward starts") if k == 0 else f.text()
        labels.append(f"t={(f.t - origin) * factor:.1f} {unit}: {what}")
        cell_states.append(states(k))
    names = [lab if lab not in labels[:k] else f"{lab} ({k})" for k, lab in enumerate(labels)]

    def cell_trace(k: int) -> Any:
        st = cell_states[k]
        return go.Bar(
            x=[p for p, _b in cells],
            y=[1] * len(cells),
            marker=dict(
                color=[STATE_COLORS[STATES.index(s)] for s in st],
                line=dict(color=SOFT_INK, width=1.5),
            ),
            customdata=[[p, b, s] for (p, b), s in zip(cells, st, strict=True)],
            hovertext=[
                f"<b>{p}</b> (b{b})<br>{state_name(s)}" for (p, b), s in zip(cells, st, strict=True)
            ],
            hoverinfo="text",
            showlegend=False,
            name="parameters",
        )

    def annotations(k: int) -> list[dict[str, Any]]:
        out = [
            dict(
                text=f"<b>{labels[k]}</b> \u00b7 {doing(moments[k].t)}",
                x=0.0,
                y=1.2,
                xref="paper",
                yref="paper",
                xanchor="left",
                showarrow=False,
                font=dict(size=14),
            )
        ]
        pos = 0
        for b, params, nbytes in plan:
            st = [s for (_p, cb), s in zip(cells, cell_states[k], strict=True) if cb == b]
            ready = sum(s != "empty" for s in st)
            now = (
                state_name(st[0])
                if st and st[0] in ("issued", "reduced")
                else _("{ready}/{total} ready").format(ready=ready, total=len(st))
            )
            size = f" {nbytes / 2**20:.2f} MiB" if nbytes and len(params) > 2 else ""
            out.append(
                dict(
                    text=f"<b>b{b}</b>{size}<br>{now}",
                    x=pos + (len(params) - 1) / 2,
                    y=1.08,
                    xref="x",
                    yref="y",
                    showarrow=False,
                    font=dict(size=12, color=bucket_color(b)),
                    yanchor="bottom",
                    hovertext=_("b{bucket}: {n} parameters, {nbytes} B").format(
                        bucket=b, n=len(params), nbytes=f"{nbytes:,}"
                    ),
                )
            )
            pos += len(params)
        return out

    fig = Figure([cell_trace(0)])
    for state, color in zip(STATES, STATE_COLORS, strict=True):
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=state_name(state),
            marker=dict(symbol="square", size=14, color=color, line=dict(color=SOFT_INK, width=1)),
        )
    pos = 0
    for b, params, _nbytes in plan:
        fig.add_shape(
            type="rect",
            x0=pos - 0.5,
            x1=pos + len(params) - 0.5,
            y0=-0.08,
            y1=1.35,
            fillcolor=bucket_color(b),
            opacity=0.25,
            line_width=0,
            layer="below",
        )
        pos += len(params)
    fig.frames = [
        go.Frame(
            name=names[k], data=[cell_trace(k)], traces=[0], layout=dict(annotations=annotations(k))
        )
        for k in range(len(moments))
    ]
    head = title or _("{sync} data parallel: buckets filling up").format(
        sync=trace.meta.get("sync", "ddp")
    )
    height, margin = 540, dict(l=40, r=20, t=150, b=220)
    fig.update_layout(
        title=title_layout(
            head,
            _("rank {rank}, step {step}: one cell per parameter, in reduction order").format(
                rank=rank, step=step
            ),
        ),
        annotations=annotations(0),
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        bargap=0.15,
        plot_bgcolor="white",
        legend=dict(orientation="h", x=1.0, xanchor="right", y=1.3, yanchor="bottom", font=FONT),
        xaxis=dict(tickangle=-45, tickfont=dict(size=11), fixedrange=True),
        yaxis=dict(visible=False, range=[-0.1, 1.4], fixedrange=True),
        meta=dict(
            times=[(f.t - origin) * factor for f in moments],
            unit=unit,
            params=[p for p, _b in cells],
        ),
        **play_controls(
            names,
            duration_ms=600,
            labels=[f"{(f.t - origin) * factor:.1f}" for f in moments],
            prefix=f"t ({unit}): ",
            y=below(height, margin, 85),
            font_size=11,
        ),
    )
    return fit_layout(fig)
