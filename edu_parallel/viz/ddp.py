"""Data-parallel renderers (lesson 06): the two streams of a rank, and the bucket-size sweep.

They read the trace of :func:`~edu_parallel.data_parallel.ddp.train_ddp` (or the retimed trace of
:func:`~edu_parallel.data_parallel.overlap.gpu_retime`) and the table of
:func:`~edu_parallel.data_parallel.report.sweep_buckets`; they never run anything and never
import torch (plotly is imported inside the functions).

* :func:`streams_figure`: per rank a ``compute`` row (forward, backward per layer, optimizer) and a
  ``comm`` row (one all-reduce bar per bucket, coloured by bucket), a triangle where each bucket was
  issued, a dotted line while the compute thread waited on a bucket (measured traces only), the
  synchronising micro-batch's backward shaded: the part of a comm bar inside the shade is hidden
  communication; the subtitle gives the hidden share of all-reduce time.

:func:`~edu_parallel.viz.ddp_buckets.bucket_fill_animation` animates the buckets filling up;
:func:`~edu_parallel.viz.ddp_sweep.sweep_figure` draws step time against bucket size.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _
from ..core.schema import GRAD_SYNC, STEP_END_MARK, STEP_START_MARK
from ..core.trace import Event, Trace
from ..core.units import format_bytes
from ..data_parallel.overlap import measure, training_steps
from .fit import fit_layout
from .plotly_figure import Figure
from .rank_timeline import time_axis_label
from .style import (
    BROWN,
    FONT,
    GREY,
    PHASE_COLORS,
    PINK,
    PURPLE,
    RED,
    SOFT_INK,
    TEAL,
    WIDTH,
    YELLOW,
    legend_below,
    tint,
    title_layout,
)

COMPUTE_NAMES = {"forward": N_("forward"), "backward": N_("backward"), "optimizer": N_("optimizer")}
COMPUTE_COLORS = {op: PHASE_COLORS[op] for op in COMPUTE_NAMES}
# communication, one colour per bucket: red first, none of the compute row's colours
BUCKET_COLORS = (RED, TEAL, PURPLE, BROWN, YELLOW, PINK, GREY)
SYNC_SHADE = tint(YELLOW, 0.55)  # behind the synchronising micro-batch's backward
PLOT_PX = WIDTH - 110  # the plot area's width: the figure less its left and right margins
LABEL_PX_PER_CHAR, LABEL_GAP_PX = 8, 4  # a bar label "b3" at 12 px, and the room between two
ISSUED_ABOVE = 0.45  # the issued triangle sits this many rows above its comm bar's centre


def bucket_color(bucket: int) -> str:
    return BUCKET_COLORS[bucket % len(BUCKET_COLORS)]


def pick_step(trace: Trace, step: int | None) -> int:
    """``step`` if the trace ran it; None: the last step."""
    if not isinstance(trace, Trace):
        raise bad_value("trace", trace, _("a Trace of a data-parallel run (report.trace)"))
    steps = training_steps(trace)
    if not steps:
        raise bad_value("trace", trace.meta.get("concept", "run"), _("a train_ddp trace"))
    if step is None:
        return steps[-1]
    if step not in steps:
        raise bad_value("step", step, _("one of the trace's steps {steps}").format(steps=steps))
    return step


def step_events(trace: Trace, step: int, rank: int) -> list[Event]:
    """``rank``'s events of ``step``: compute and collectives, and marks (``attrs["step"]``)."""
    return [
        e
        for e in trace.events
        if e.rank == rank
        and (e.step == step if e.kind != "mark" else (e.attrs or {}).get("step") == step)
    ]


def sync_backward(events: list[Event]) -> list[Event]:
    """The backward events of the synchronising (last) micro-batch, in time order."""
    back = [e for e in events if e.kind == "compute" and e.op == "backward"]
    last = max(((e.attrs or {}).get("microbatch", 0) for e in back), default=0)
    return sorted(
        (e for e in back if (e.attrs or {}).get("microbatch", 0) == last), key=lambda e: e.start
    )


def grad_syncs(events: list[Event]) -> list[Event]:
    """The gradient all-reduces (phase ``grad_sync``) in bucket order."""
    comm = [e for e in events if e.kind == "collective" and e.phase == GRAD_SYNC]
    return sorted(comm, key=lambda e: (e.attrs or {}).get("bucket", 0))


def step_origin(events: list[Event]) -> float:
    """The step's time zero: its ``step_start`` mark, else its first event."""
    marks = [e.start for e in events if e.kind == "mark" and e.op == STEP_START_MARK]
    return min(marks) if marks else min((e.start for e in events), default=0.0)


def time_unit(span_s: float) -> tuple[float, str]:
    """``(factor, unit)`` that keeps ``span_s`` seconds readable: ms, else us."""
    return (1e3, "ms") if span_s >= 1e-3 else (1e6, "\u00b5s")


def axis_title(trace: Trace, unit: str) -> str:
    """:func:`time_axis_label` in ``unit`` since the step began."""
    return _("{label}, since the step began").format(label=time_axis_label(trace, unit))


def hidden_fraction(trace: Trace, step: int) -> tuple[float, str]:
    """Share of the all-reduce time that ran during backward, and where it comes from:
    :func:`~edu_parallel.data_parallel.overlap.measure` when the trace has step marks, else
    computed from the (retimed) events of ``step``."""
    if any(e.kind == "mark" and e.op == STEP_END_MARK for e in trace.events):
        m = measure(trace)
        return m.overlap_fraction, _("measured, median over steps, mean over ranks")
    rank = min((e.rank for e in trace.events), default=0)
    events = step_events(trace, step, rank)
    back = sync_backward(events)
    lo, hi = (back[0].start, max(e.end for e in back)) if back else (0.0, 0.0)
    comm = grad_syncs(events)
    total = sum(e.duration for e in comm)
    hidden = sum(max(0.0, min(e.end, hi) - max(e.start, lo)) for e in comm)
    return (hidden / total if total > 0 else 0.0), _("modelled, step {step} of r{rank}").format(
        step=step, rank=rank
    )


def _compute_hover(e: Event) -> str:
    a = e.attrs or {}
    op = _(COMPUTE_NAMES[e.op]) if e.op in COMPUTE_NAMES else e.op
    head = f"<b>r{e.rank} {op}</b>"
    if e.op == "backward":
        head += " " + _("layer {layer}").format(layer=a.get("layer"))
    if "microbatch" in a:
        head += ", " + _("micro-batch {microbatch}").format(microbatch=a["microbatch"])
    flops = (
        "<br>"
        + _("{mflop} MFLOP, {rows} rows").format(
            mflop=f"{a['flops'] / 1e6:,.2f}", rows=a.get("rows")
        )
        if "flops" in a
        else ""
    )
    return head + flops


def _crowded_labels(comm: list[Event], x: Any, span: float) -> set[int]:
    """The all-reduces (by ``id``) whose bar label would be drawn on an earlier one's: measured
    all-reduces of one rank can run at once, and their bars overlap; hover still names them."""
    px = PLOT_PX / max(span, 1e-12)  # pixels per axis unit, about
    hidden: set[int] = set()
    for rank in {e.rank for e in comm}:
        last = None  # the centre and half width (px) of the last label drawn on this row
        for e in sorted((e for e in comm if e.rank == rank), key=lambda e: e.start):
            centre = (x(e.start) + x(e.end)) / 2 * px
            half = LABEL_PX_PER_CHAR * len(f"b{e.attrs['bucket']}") / 2
            if last is not None and centre - last[0] < last[1] + half + LABEL_GAP_PX:
                hidden.add(id(e))
            else:
                last = (centre, half)
    return hidden


def streams_figure(
    trace: Trace, ranks: list[int] | None = None, step: int | None = None, title: str | None = None
) -> Any:
    """Compute and communication stream of each rank in one step (see the module doc).

    ``ranks`` default: rank 0 and the last rank (all ranks when there are at most two); ``step``
    default: the last. Times are relative to the step's start; ``layout.meta`` holds ``origin_s``,
    ``factor`` (seconds -> axis unit), ``unit``, ``step``, ``hidden``.
    """
    step = pick_step(trace, step)
    present = sorted({e.rank for e in trace.events if e.kind in ("compute", "collective")})
    if ranks is None:
        ranks = present if len(present) <= 2 else [present[0], present[-1]]
    bad = [r for r in ranks if r not in present]
    if bad or not ranks:
        raise bad_value(
            "ranks", ranks, _("a non-empty list of the trace's ranks {ranks}").format(ranks=present)
        )
    per_rank = {r: step_events(trace, step, r) for r in ranks}
    origin = min(step_origin(evs) for evs in per_rank.values())
    end = max(e.end for evs in per_rank.values() for e in evs)
    factor, unit = time_unit(end - origin)

    def x(t: float) -> float:
        return (t - origin) * factor

    rows = [f"r{r} {k}" for r in ranks for k in ("compute", "comm")]
    fig = Figure()
    for op, color in COMPUTE_COLORS.items():
        evs = [e for r in ranks for e in per_rank[r] if e.kind == "compute" and e.op == op]
        if evs:
            fig.add_bar(
                y=[f"r{e.rank} compute" for e in evs],
                x=[e.duration * factor for e in evs],
                base=[x(e.start) for e in evs],
                orientation="h",
                name=_(COMPUTE_NAMES[op]),
                marker=dict(color=color, line=dict(color="white", width=1)),
                text=[f"L{e.attrs['layer']}" if op == "backward" else "" for e in evs],
                textposition="inside",
                insidetextanchor="middle",
                hovertext=[_compute_hover(e) for e in evs],
                hoverinfo="text",
            )
    comm = [e for r in ranks for e in grad_syncs(per_rank[r])]
    unlabelled = _crowded_labels(comm, x, (end - origin) * factor)
    for b in sorted({e.attrs["bucket"] for e in comm}):
        evs = [e for e in comm if e.attrs["bucket"] == b]
        fig.add_bar(
            y=[f"r{e.rank} comm" for e in evs],
            x=[e.duration * factor for e in evs],
            base=[x(e.start) for e in evs],
            orientation="h",
            name=_("b{bucket} all-reduce").format(bucket=b),
            marker=dict(color=bucket_color(b), line=dict(color="white", width=1)),
            text=["" if id(e) in unlabelled else f"b{b}" for e in evs],
            textposition="inside",
            insidetextanchor="middle",
            hovertext=[
                f"<b>r{e.rank} "
                + _("b{bucket} all-reduce").format(bucket=b)
                + f"</b>, {format_bytes(e.nbytes)}<br>"
                + _(
                    "issued {issued} {unit}, after layer {layer} (None: after backward)<br>"
                    "ran {start} - {end} {unit}"
                ).format(
                    issued=f"{x(e.attrs.get('issued', e.start)):.3g}",
                    unit=unit,
                    layer=e.attrs.get("after_layer"),
                    start=f"{x(e.start):.3g}",
                    end=f"{x(e.end):.3g}",
                )
                for e in evs
            ],
            hoverinfo="text",
        )
    issued = [e for e in comm if e.attrs.get("issued") is not None]
    fig.add_scatter(  # on the comm bar's top edge, clear of its label (an axis of row numbers)
        x=[x(e.attrs["issued"]) for e in issued],
        y=[rows.index(f"r{e.rank} comm") - ISSUED_ABOVE for e in issued],
        yaxis="y2",
        mode="markers",
        name=_("bucket issued"),
        marker=dict(symbol="triangle-down", size=12, color="black", line=dict(color="white")),
        hovertext=[
            _("r{rank} b{bucket} issued").format(rank=e.rank, bucket=e.attrs["bucket"])
            for e in issued
        ],
        hoverinfo="text+x",
    )
    retimed = bool(trace.meta.get("retimed_with"))  # its waited/released are still measured
    waits = [
        e
        for e in comm
        if not retimed and e.attrs.get("waited") is not None and e.attrs.get("released") is not None
    ]
    if waits:
        xs: list[float | None] = []
        ys: list[str | None] = []
        for e in waits:
            xs += [x(e.attrs["waited"]), x(e.attrs["released"]), None]
            ys += [f"r{e.rank} compute"] * 2 + [None]
        fig.add_scatter(
            x=xs,
            y=ys,
            mode="lines",
            name=_("compute waits on a bucket"),
            line=dict(color=SOFT_INK, width=3, dash="dot"),
            hoverinfo="x",
        )
    for i, r in enumerate(ranks):
        back = sync_backward(per_rank[r])
        if back:
            fig.add_shape(
                type="rect",
                x0=x(back[0].start),
                x1=x(max(e.end for e in back)),
                y0=2 * i - 0.5,
                y1=2 * i + 1.5,
                fillcolor=SYNC_SHADE,
                opacity=0.55,
                line_width=0,
                layer="below",
                name=_("backward of the synchronising micro-batch"),
                showlegend=i == 0,
            )
    frac, where = hidden_fraction(trace, step)
    head = title or _("{sync} data parallel: compute and comm streams").format(
        sync=trace.meta.get("sync", "ddp")
    )
    buckets = len({e.attrs["bucket"] for e in comm})
    legend_rows = -(-(700 + 125 * buckets) // 850)  # a horizontal legend wraps at the width
    margin = dict(l=90, r=WIDTH - PLOT_PX - 90, t=90, b=95 + 24 * legend_rows)
    height = max(160, 46 * len(rows)) + margin["t"] + margin["b"]
    fig.update_layout(
        title=title_layout(
            _("{head}, step {step}").format(head=head, step=step),
            _("all-reduce hidden under backward: {share} ({where})").format(
                share=f"<b>{frac:.0%}</b>", where=where
            ),
        ),
        barmode="overlay",
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        uniformtext=dict(minsize=11, mode="hide"),
        legend=legend_below(height, margin, 70),
        xaxis=dict(title=axis_title(trace, unit), rangemode="tozero"),
        yaxis=dict(categoryorder="array", categoryarray=rows, range=[len(rows) - 0.5, -0.5]),
        yaxis2=dict(overlaying="y", range=[len(rows) - 0.5, -0.5], visible=False),
        meta=dict(origin_s=origin, factor=factor, unit=unit, step=step, hidden=frac),
    )
    return fit_layout(fig)
