"""Pipeline-parallel renderers: a Gantt of F/B/I/W per rank, live activations, bubble against M.

They read a :class:`~edu_parallel.pipeline_parallel.timing.Timeline` (the modelled run of a
schedule) or a :class:`~edu_parallel.core.trace.Trace` whose ``compute`` events have op
``F``/``B``/``I``/``W`` and ``attrs`` ``microbatch`` and ``stage`` (a measured run, or
``Timeline.to_trace``), and draw it. :func:`pipeline_view` turns either into a :class:`PipelineView`
(the boxes, the idle gaps, an honest time-axis label); the figure functions only draw that. Only
:func:`~edu_parallel.viz.pipeline_bubble.bubble_vs_microbatches_figure` computes anything: it times
pure-Python plans with ``time_schedule`` (no torch).

Plotly is imported inside the functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import check_int
from ..core.i18n import N_, _
from ..core.trace import Trace
from ..pipeline_parallel.schedule import KINDS
from ..pipeline_parallel.timing import Timeline
from .controls import play_controls
from .fit import MIN_FONT_PX, fit_layout
from .plotly_figure import Figure
from .rank_timeline import time_axis_label
from .style import ALERT, GRID, IDLE, IDLE_FILL, PHASE_COLORS, WIDTH, text_color, tint

# the kinds are torch.distributed.pipelining's (I: input gradient, W: weight gradient)
KIND_COLORS = {
    "F": PHASE_COLORS["forward"],
    "B": PHASE_COLORS["backward"],
    "I": PHASE_COLORS["input_grad"],
    "W": PHASE_COLORS["weight_grad"],
}
KIND_NAMES = {
    "F": N_("F forward"),
    "B": N_("B backward"),
    "I": N_("I input grad"),
    "W": N_("W weight grad"),
}
# Keys Timeline.to_trace writes when given no meta: such a trace holds modelled times.
_TO_TRACE_KEYS = {"concept", "schedule", "world_size", "num_stages", "makespan"}


@dataclass(frozen=True, slots=True)
class Box:
    """``rank`` ran ``kind`` (F/B/I/W) of ``stage`` on ``microbatch`` from ``start`` to ``end``."""

    rank: int
    kind: str
    stage: int
    microbatch: int
    start: float
    end: float


@dataclass(frozen=True)
class PipelineView:
    """What the pipeline renderers draw; times start at 0 (the first compute)."""

    boxes: list[Box]
    num_ranks: int
    num_stages: int
    name: str
    time_label: str
    measured: bool

    @property
    def makespan(self) -> float:
        return max((b.end for b in self.boxes), default=0.0)

    @property
    def chunks(self) -> int:
        """Model chunks per rank ``v`` (virtual stages / ranks)."""
        return max(1, self.num_stages // self.num_ranks)

    @property
    def num_microbatches(self) -> int:
        return 1 + max((b.microbatch for b in self.boxes), default=-1)

    def idle(self) -> list[list[tuple[float, float]]]:
        """Per rank, the ``(start, end)`` gaps in ``[0, makespan]`` where it computes nothing."""
        end_all, eps = self.makespan, 1e-9 * max(self.makespan, 1.0)
        out: list[list[tuple[float, float]]] = []
        for r in range(self.num_ranks):
            gaps, t = [], 0.0
            for b in sorted((b for b in self.boxes if b.rank == r), key=lambda b: b.start):
                if b.start > t + eps:
                    gaps.append((t, b.start))
                t = max(t, b.end)
            if end_all > t + eps:
                gaps.append((t, end_all))
            out.append(gaps)
        return out

    def bubble_fraction(self) -> float:
        """Idle rank-time / (ranks * makespan): the bubble as a share of total time."""
        total = self.num_ranks * self.makespan
        return sum(b - a for gaps in self.idle() for a, b in gaps) / total if total else 0.0

    def busy_at(self, t: float) -> int:
        """How many ranks are computing at time ``t``."""
        return len({b.rank for b in self.boxes if b.start <= t < b.end})


def _trace_is_modelled(meta: dict[str, Any]) -> bool:
    """True for a trace of modelled times: ``meta`` ``clock``/``time_unit``/``source`` say so,
    or it holds only what ``Timeline.to_trace`` writes when given no meta."""
    clock, unit = str(meta.get("clock", "")), str(meta.get("time_unit", ""))
    source = str(meta.get("source", ""))
    if clock or unit or source:
        return (
            clock in ("model", "modelled", "simulated")
            or unit in ("t_f", "model", "modelled")
            or source in ("simulated", "time_schedule")
        )
    return meta.get("concept") == "pipeline" and set(meta) <= _TO_TRACE_KEYS


def _modelled_label(t_f: float) -> str:
    if abs(t_f - 1.0) < 1e-12:
        return _("time (t_f = 1)")
    return _("modelled time (t_f = {t_f})").format(t_f=f"{t_f:g}")


def pipeline_view(
    timeline_or_trace: Timeline | Trace, time_label: str | None = None
) -> PipelineView:
    """Read a Timeline or a Trace of F/B/I/W compute events (``time_label`` overrides the axis)."""
    if isinstance(timeline_or_trace, Timeline):
        tl = timeline_or_trace
        boxes = [
            Box(s.rank, s.action.kind, s.action.stage, s.action.microbatch, s.start, s.end)
            for s in tl.spans
        ]
        t_f = next((b.end - b.start for b in boxes if b.kind == "F"), 1.0)
        label = time_label or _modelled_label(t_f)
        return PipelineView(boxes, tl.num_ranks, tl.num_stages, tl.name, label, False)
    if not isinstance(timeline_or_trace, Trace):
        raise TypeError(
            _(
                "timeline_or_trace={value} is not valid: expected a "
                "Timeline (edu_parallel.pipeline_parallel.timing) or a Trace with F/B/I/W compute "
                "events"
            ).format(value=type(timeline_or_trace).__name__)
        )
    trace = timeline_or_trace
    events = [e for e in trace.events if e.kind == "compute" and e.op in KINDS]
    if not events:
        raise ValueError(_("trace has no compute events with op F, B, I or W: nothing to draw"))
    origin = min(e.start for e in events)
    boxes = []
    for e in events:
        attrs = e.attrs or {}
        stage = attrs.get("stage", e.chunk if e.chunk is not None else e.rank)
        boxes.append(
            Box(
                e.rank,
                e.op,
                int(stage),
                int(attrs.get("microbatch", 0)),
                e.start - origin,
                e.end - origin,
            )
        )
    ranks = max(trace.world_size, 1 + max(b.rank for b in boxes))
    stages = max(int(trace.meta.get("num_stages", 0)), 1 + max(b.stage for b in boxes))
    modelled = _trace_is_modelled(trace.meta)
    if time_label:
        label = time_label
    elif modelled:
        label = _modelled_label(next((b.end - b.start for b in boxes if b.kind == "F"), 1.0))
    else:
        label = time_axis_label(trace)
        if origin:
            label = _("{label}, 0 = first compute").format(label=label)
    measured = not modelled and time_axis_label(trace).endswith("(measured)")
    name = str(trace.meta.get("schedule", trace.meta.get("concept", "run")))
    return PipelineView(boxes, ranks, stages, name, label, measured)


def _fmt(t: float) -> str:
    return f"{t:.3g}" if abs(t) < 1000 else f"{t:.4g}"


def _default_title(view: PipelineView) -> str:
    how = _("measured") if view.measured else _("simulated")
    values = dict(
        name=view.name,
        p=view.num_ranks,
        m=view.num_microbatches,
        v=view.chunks,
        bubble=f"{view.bubble_fraction():.1%}",
        how=how,
    )
    if view.chunks > 1:
        return _(
            "{name}: P={p} ranks, M={m} microbatches, v={v}: bubble {bubble} of rank-time ({how})"
        ).format(**values)
    return _(
        "{name}: P={p} ranks, M={m} microbatches: bubble {bubble} of rank-time ({how})"
    ).format(**values)


def pipeline_gantt(
    timeline_or_trace: Timeline | Trace,
    title: str | None = None,
    *,
    time_label: str | None = None,
    cursor_frames: int = 61,
) -> Any:
    """A plotly Gantt of a pipeline run with an animated time cursor.

    One row per rank (rank 0 on top); F/B/I/W boxes (blue/orange/orange/yellow, the phase colours
    of ``style.py``; paler for later model chunks when interleaved) labelled with their
    microbatch (and ``s`` + stage when interleaved); idle time hatched grey as the bubble; the x
    axis says whether times are modelled or measured.
    A red cursor moves across time in ``cursor_frames`` plotly frames (play button and slider),
    so it plays in an exported HTML file. Box traces carry ``customdata`` ``[rank, stage,
    microbatch]`` and ``meta`` ``{"role": "box", "kind", "chunk"}``; the bubble trace has
    ``meta`` ``{"role": "bubble"}``; the cursor is the last trace.
    """
    import plotly.graph_objects as go

    cursor_frames = check_int("cursor_frames", cursor_frames, 2, 1000)
    view = pipeline_view(timeline_or_trace, time_label)
    p, v, span = view.num_ranks, view.chunks, view.makespan or 1.0
    fig = Figure()
    gaps = [(r, a, b) for r, row in enumerate(view.idle()) for a, b in row]
    fig.add_bar(
        y=[g[0] for g in gaps],
        base=[g[1] for g in gaps],
        x=[g[2] - g[1] for g in gaps],
        orientation="h",
        width=0.78,
        name=_("bubble (idle)"),
        meta={"role": "bubble"},
        marker=dict(
            color=IDLE_FILL,
            line=dict(color=IDLE, width=0.5),
            pattern=dict(shape="/", fgcolor=IDLE, size=7, solidity=0.15),
        ),
        hovertext=[
            _("rank {rank} idle {start} to {end} ({length}): bubble").format(
                rank=r, start=_fmt(a), end=_fmt(b), length=_fmt(b - a)
            )
            for r, a, b in gaps
        ],
        hoverinfo="text",
    )
    for kind in KINDS:
        for chunk in range(v):
            mine = [b for b in view.boxes if b.kind == kind and b.stage // p == chunk]
            if not mine:
                continue
            color = tint(KIND_COLORS[kind], 0.5 * chunk / max(v - 1, 1))
            kind_name = _(KIND_NAMES[kind])
            name = kind_name
            if v > 1:
                name = _("{kind}, chunk {chunk} (stages {first}-{last})").format(
                    kind=kind_name, chunk=chunk, first=chunk * p, last=chunk * p + p - 1
                )
            labels = [f"{b.microbatch}" + (f"<br>s{b.stage}" if v > 1 else "") for b in mine]
            fig.add_bar(
                y=[b.rank for b in mine],
                base=[b.start for b in mine],
                x=[b.end - b.start for b in mine],
                orientation="h",
                width=0.78,
                name=name,
                meta={"role": "box", "kind": kind, "chunk": chunk},
                customdata=[[b.rank, b.stage, b.microbatch] for b in mine],
                text=labels,
                textposition="inside",
                insidetextanchor="middle",
                textangle=0,
                textfont=dict(color=text_color(color), size=13),
                marker=dict(color=color, line=dict(color="white", width=1)),
                hovertext=[
                    _(
                        "rank {rank}: {action} ({kind}, stage {stage}, microbatch {microbatch}) "
                        "{start} to {end}"
                    ).format(
                        rank=b.rank,
                        action=f"{b.stage}{b.kind}{b.microbatch}",
                        kind=kind_name,
                        stage=b.stage,
                        microbatch=b.microbatch,
                        start=_fmt(b.start),
                        end=_fmt(b.end),
                    )
                    for b in mine
                ],
                hoverinfo="text",
            )
    times = [span * i / (cursor_frames - 1) for i in range(cursor_frames)]
    fig.add_trace(_cursor(view, times[0], span))
    cursor_index = len(fig.data) - 1
    names = [f"{i}" for i in range(len(times))]
    fig.frames = [
        go.Frame(name=n, data=[_cursor(view, t, span)], traces=[cursor_index])
        for n, t in zip(names, times, strict=True)
    ]
    key = _("box label: microbatch over s + stage") if v > 1 else _("box label: microbatch")
    row_px = 44 if p <= 8 else max(12, 480 // p)
    _layout_gantt(fig, title or _default_title(view), key, view, row_px, names, times, span)
    return fit_layout(fig)


def _cursor(view: PipelineView, t: float, span: float) -> Any:
    import plotly.graph_objects as go

    busy = view.busy_at(t)
    text = (
        "  "
        + _("t = {t}: {busy} of {n} ranks busy").format(t=_fmt(t), busy=busy, n=view.num_ranks)
        + "  "
    )
    side = "middle right" if t < 0.6 * span else "middle left"
    return go.Scatter(
        x=[t, t],
        y=[-0.72, view.num_ranks - 0.5],
        mode="lines+text",
        text=[text, ""],
        textposition=side,
        textfont=dict(color=ALERT, size=13),
        line=dict(color=ALERT, width=2.5),
        name="time cursor",
        hoverinfo="skip",
        showlegend=False,
        meta={"role": "cursor", "time": t},
    )


def _layout_gantt(
    fig: Any,
    title: str,
    key: str,
    view: PipelineView,
    row_px: int,
    names: list[str],
    times: list[float],
    span: float,
) -> None:
    p = view.num_ranks
    every = max(1, len(times) // 6)
    labels = [_fmt(t) if i % every == 0 or i == len(times) - 1 else "" for i, t in enumerate(times)]
    height = 230 + row_px * p
    plot_h = height - 80 - 150  # minus the top and bottom margins
    below = lambda px: -px / plot_h  # noqa: E731 - paper y of ``px`` pixels under the plot
    fig.update_layout(
        title=dict(
            text=f"{title}<br><sup>"
            + _("{key}; hatched grey = bubble (idle)").format(key=key)
            + "</sup>",
            x=0.01,
            xanchor="left",
            font=dict(size=15),
        ),
        barmode="overlay",
        height=height,
        width=WIDTH,
        plot_bgcolor="white",
        margin=dict(l=70, r=20, t=80, b=150),
        uniformtext=dict(minsize=MIN_FONT_PX, mode="hide"),  # smaller labels: hidden
        xaxis=dict(
            title=view.time_label,
            range=[-0.005 * span, 1.005 * span],
            showgrid=True,
            gridcolor=GRID,
            zeroline=False,
        ),
        yaxis=dict(
            tickmode="array",
            tickvals=list(range(p)),
            ticktext=[f"rank {r}" for r in range(p)],
            range=[p - 0.5, -1.0],
            showgrid=False,
            zeroline=False,
        ),
        legend=dict(orientation="h", x=0.0, y=below(58), yanchor="top", xanchor="left"),
    )
    fig.update_layout(
        **play_controls(
            names,
            duration_ms=120,
            labels=labels,
            prefix=None,
            y=below(100),
            slider_y=below(92),
            plot_px=WIDTH - 70 - 20,
            font_size=11,
        )
    )
