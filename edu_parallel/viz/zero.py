"""ZeRO memory renderers: what each rank holds, by category, event by event.

* :func:`~edu_parallel.viz.memory_ledger.ledger` reads the ``memory`` events of a trace (``nbytes``
  = signed change, ``attrs["category"]`` = what it is) and keeps the running bytes per rank and
  category after every event (a :class:`Ledger`): peaks, the peak of the model states, one snapshot
  per event.
* :func:`memory_bars_animation` draws the ledger as stacked bars per rank (plotly frames with a
  play button and a slider, so it plays in exported HTML): gathered parameters appear and are
  released. Several traces (DP, ZeRO-1/2/3) are drawn side by side with a shared y axis.
* :func:`memory_bars` draws calculator estimates (anything with a ``.breakdown`` dict) as static
  stacked bars (matplotlib).
* :class:`~edu_parallel.viz.zero_widget.ZeroWidget`: an ipywidgets explorer of the calculator in
  :mod:`edu_parallel.memory` (bytes per GPU, largest model that fits, communication per
  step).

Plotting libraries and :mod:`edu_parallel.memory.model_states` are imported inside the functions;
nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import bad_value
from ..core.i18n import _
from ..core.trace import Trace
from ..core.units import format_bytes
from .controls import play_controls
from .figure import new_figure
from .fit import fit_layout
from .memory_ledger import (
    Ledger,
    LedgerFrame,
    category_color,
    category_name,
    order_categories,
)
from .plotly_figure import Figure
from .style import GRID, INK, WHITE, WIDTH

# ----------------------------------------------------------------- animation
_UNITS = (("B", 1), ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3))


def byte_unit(largest: float) -> tuple[str, int]:
    """The binary unit that keeps ``largest`` readable: ``("MiB", 1048576)`` and so on."""
    name, scale = _UNITS[0]
    for n, s in _UNITS:
        if largest >= s:
            name, scale = n, s
    return name, scale


@dataclass
class MemoryAnimation:
    """What :func:`memory_bars_animation` draws (kept for tests and reuse).

    ``names`` of the panels, ``ledgers``, ``ranges`` (first, last frame index of each ledger),
    ``categories`` (shared), ``unit``/``scale`` of the y axis, ``length`` (frames drawn).
    """

    names: list[str]
    ledgers: list[Ledger]
    ranges: list[tuple[int, int]]
    categories: list[str]
    unit: str = "B"
    scale: int = 1
    length: int = 0
    steps: list[int | None] = field(default_factory=list)
    held: set[int] = field(default_factory=set)
    """Panels whose run has no memory event inside a step (ZeRO-1: nothing is gathered or
    buffered), drawn as what setup allocated, held through the step."""

    def frame_of(self, panel: int, k: int) -> LedgerFrame:
        """The ledger frame panel ``panel`` shows at animation frame ``k`` (held at its end)."""
        first, last = self.ranges[panel]
        return self.ledgers[panel].frames()[min(first + k, last)]


def memory_bars_animation(
    trace_or_traces: Trace | Mapping[str, Trace],
    title: str | None = None,
    step: int | None = -1,
) -> Any:
    """Stacked bars of bytes per rank by category, animated over the memory events of one step.

    ``trace_or_traces`` is one trace, or ``{"DP": t0, "ZeRO-1": t1, ...}`` drawn side by side with
    a shared y axis (panels with fewer events hold their last state). ``step=-1`` (default)
    animates the last step of each trace (frame 0 is what the ranks hold when it begins), a step
    number that step, None every memory event. Hover shows exact bytes; bar ``customdata`` is
    ``[rank, category, bytes]``. Plays in an exported HTML file (``fig.write_html``).
    """
    from plotly.subplots import make_subplots

    spec = _animation_spec(trace_or_traces, step)
    n = len(spec.names)
    cols = min(n, 2)  # two panels a row: four of them fit the notebook's width
    rows = -(-n // cols)
    fig = make_subplots(
        figure=Figure(),
        rows=rows,
        cols=cols,
        shared_yaxes=True,
        horizontal_spacing=0.06 if n > 1 else 0.0,
        vertical_spacing=0.22 / rows if rows > 1 else 0.0,
        subplot_titles=[f"<b>{name}</b>" for name in spec.names] if n > 1 else None,
    )
    for p in range(n):
        for trace in _panel_traces(spec, p, 0):
            fig.add_trace(trace, row=p // cols + 1, col=p % cols + 1)
    peak = max(
        (
            spec.frame_of(p, k).total(r)
            for p in range(n)
            for k in range(spec.length)
            for r in spec.ledgers[p].ranks
        ),
        default=0,
    )
    top = max(peak / spec.scale, 1e-9) * 1.08
    head = f"<b>{title}</b><br>" if title else ""
    which = _steps_text(spec)
    ranks = max(len(lg.ranks) for lg in spec.ledgers)
    width = min(WIDTH, 330 + cols * max(300, 40 + 70 * ranks))  # legend ~230 px, right
    fig.update_layout(
        barmode="stack",
        bargap=0.25,
        plot_bgcolor="white",
        width=width,
        height=450 + 330 * rows,
        title=dict(
            text=head + which,
            x=0.5,
            xanchor="center",
            y=0.98,
            yanchor="top",
            yref="container",
            font=dict(size=15),
        ),
        legend=dict(
            orientation="v",
            x=1.01,
            xanchor="left",
            y=1.0,
            yanchor="top",
            traceorder="normal",
            font=dict(size=12),
        ),
        margin=dict(l=80, r=20, t=100 if title else 80, b=190),
        hoverlabel=dict(font=dict(size=12)),
    )
    for p in range(n):
        fig.update_xaxes(
            row=p // cols + 1,
            col=p % cols + 1,
            type="category",
            tickfont=dict(size=12),
            fixedrange=True,
            title=dict(text=_panel_caption(spec, p, 0), font=dict(size=12), standoff=6),
        )
    fig.update_yaxes(range=[0, top], gridcolor=GRID, fixedrange=True)
    fig.update_yaxes(
        title=dict(text=_("{unit} held per rank").format(unit=spec.unit), font=dict(size=13)),
        col=1,
    )
    ntraces = len(fig.data)
    names = [str(k) for k in range(spec.length)]
    # Frames as plain dicts: plotly checks each property once, when they are assigned (go.Frame
    # objects of go.Bar are checked when built and again, deep-copied, on assignment)
    fig.frames = [
        dict(
            name=names[k],
            data=[t for p in range(n) for t in _panel_traces(spec, p, k)],
            traces=list(range(ntraces)),
            layout={
                _axis_key(p): dict(title=dict(text=_panel_caption(spec, p, k))) for p in range(n)
            },
        )
        for k in range(spec.length)
    ]
    fig.update_layout(
        **play_controls(names, duration_ms=700, prefix=_("event: "), y=-0.2 / rows, font_size=12)
    )
    fig.layout.meta = dict(unit=spec.unit, scale=spec.scale, panels=spec.names)
    return fit_layout(fig)


def _animation_spec(
    trace_or_traces: Trace | Mapping[str, Trace], step: int | None
) -> MemoryAnimation:
    if isinstance(trace_or_traces, Trace):
        traces = {"": trace_or_traces}
    elif isinstance(trace_or_traces, Mapping) and trace_or_traces:
        traces = dict(trace_or_traces)
        for name, t in traces.items():
            if not isinstance(t, Trace):
                raise bad_value(f"trace_or_traces[{name!r}]", t, _("a Trace"))
    else:
        raise bad_value(
            "trace_or_traces", trace_or_traces, _("a Trace or a non-empty {{name: Trace}}").format()
        )
    ledgers, ranges, steps, held = [], [], [], set()
    for name, t in traces.items():
        lg = Ledger(t)
        if not lg.events:
            raise bad_value(
                f"trace {name!r}" if name else "trace",
                t.meta.get("concept", "run"),
                _("a trace with memory events"),
            )
        chosen = step
        if step == -1:
            chosen = lg.steps()[-1] if lg.steps() else None
        if step == -1 and chosen is None:  # every event is setup: its last state, all step long
            held.add(len(ledgers))
            last = len(lg.frames()) - 1
            ranges.append((last, last))
        else:
            ranges.append(lg.step_range(chosen))
        ledgers.append(lg)
        steps.append(chosen)
    categories = order_categories(c for lg in ledgers for c in lg.categories)
    length = max(last - first + 1 for first, last in ranges)
    spec = MemoryAnimation(
        list(traces), ledgers, ranges, categories, length=length, steps=steps, held=held
    )
    peak = max(
        (
            spec.frame_of(p, k).total(r)
            for p in range(len(ledgers))
            for k in range(length)
            for r in ledgers[p].ranks
        ),
        default=0,
    )
    spec.unit, spec.scale = byte_unit(peak)
    return spec


def _steps_text(spec: MemoryAnimation) -> str:
    """The title: "Memory per rank by category" and which events it animates."""
    steps = {s for p, s in enumerate(spec.steps) if p not in spec.held} or set(spec.steps)
    if steps == {None}:
        return _("Memory per rank by category, every memory event")
    if len(steps) == 1:
        return _("Memory per rank by category, events of step {step}").format(step=spec.steps[0])
    return _("Memory per rank by category, events of one step")


def _axis_key(panel: int) -> str:
    return "xaxis" if panel == 0 else f"xaxis{panel + 1}"


def _panel_caption(spec: MemoryAnimation, panel: int, k: int) -> str:
    first, last = spec.ranges[panel]
    frame = spec.frame_of(panel, k)
    if panel in spec.held:
        return _("no memory event in the step:") + "<br>" + _("what setup allocated, held")
    count = last - first
    pos = min(k, count)
    if pos == 0:
        what = _("before the step") if spec.steps[panel] is not None else _("start")
        return _("event {pos}/{count}: {what}").format(pos=0, count=count, what=what) + "<br> "
    head, _sep, where = frame.label.partition(" (")
    text = _("event {pos}/{count}: {what}").format(pos=pos, count=count, what=f"<b>{head}</b>")
    return text + (f"<br>({where}" if where else "")


def _panel_traces(spec: MemoryAnimation, panel: int, k: int) -> list[dict[str, Any]]:
    """One stacked bar trace (a plotly ``bar``, as a dict) per category for panel ``panel`` at
    animation frame ``k``."""
    frame = spec.frame_of(panel, k)
    lg = spec.ledgers[panel]
    changed = frame.event.rank if frame.event is not None and k > 0 else None
    xs = [f"rank {r}" for r in lg.ranks]
    out = []
    for i, cat in enumerate(spec.categories):
        held = [frame.per_rank[r].get(cat, 0) for r in lg.ranks]
        hover = [
            f"<b>rank {r}</b> ({spec.names[panel] or _('run')})<br>{category_name(cat)}: "
            f"{b:,} B ({format_bytes(b)})<br>"
            + _("total: {nbytes} B").format(nbytes=f"{frame.total(r):,}")
            for r, b in zip(lg.ranks, held, strict=True)
        ]
        out.append(
            dict(
                type="bar",
                x=xs,
                y=[b / spec.scale for b in held],
                name=category_name(cat),
                legendgroup=cat,
                showlegend=panel == 0,
                customdata=[[r, cat, b] for r, b in zip(lg.ranks, held, strict=True)],
                hovertext=hover,
                hoverinfo="text",
                marker=dict(
                    color=category_color(cat, i),
                    line=dict(
                        color=[INK if r == changed else WHITE for r in lg.ranks],
                        width=[2.5 if r == changed else 0.5 for r in lg.ranks],
                    ),
                ),
            )
        )
    return out


# ----------------------------------------------------------------- static bars
def memory_bars(
    estimates: Mapping[str, Any],
    title: str | None = None,
    gpu_bytes: float | None = None,
    highlight: str | None = None,
) -> Any:
    """Static stacked bars (matplotlib) of ``{name: estimate}``; each estimate has a
    ``.breakdown`` dict ``category -> bytes`` (e.g.
    :func:`edu_parallel.memory.model_states.model_state_bytes` for DP and ZeRO-1/2/3) or is such a
    dict. Bars are labelled with their total; the legend names the categories. ``gpu_bytes`` draws
    the GPU's memory as a dashed line; ``highlight`` names the bar to outline.
    """
    if not isinstance(estimates, Mapping) or not estimates:
        raise bad_value(
            "estimates", estimates, _("a non-empty {{name: estimate with .breakdown}}").format()
        )
    breakdowns: dict[str, dict[str, float]] = {}
    for name, est in estimates.items():
        bd = getattr(est, "breakdown", est if isinstance(est, Mapping) else None)
        if not isinstance(bd, Mapping):
            raise bad_value(f"estimates[{name!r}]", est, _("an object with a .breakdown dict"))
        breakdowns[str(name)] = {str(c): float(b) for c, b in bd.items()}
    categories = order_categories(c for bd in breakdowns.values() for c in bd)
    totals = {n: sum(bd.values()) for n, bd in breakdowns.items()}
    unit, scale = byte_unit(max(totals.values(), default=0))
    names = list(breakdowns)
    fig = new_figure(
        figsize=(min(7.6, max(5.5, 1.3 * len(names) + 3.2)), 4.6), layout="constrained"
    )
    ax = fig.add_subplot()
    bottoms = [0.0] * len(names)
    for i, cat in enumerate(categories):
        heights = [breakdowns[n].get(cat, 0.0) / scale for n in names]
        ax.bar(
            names,
            heights,
            bottom=bottoms,
            color=category_color(cat, i),
            label=category_name(cat),
            edgecolor="white",
            linewidth=0.6,
        )
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    for x, n in enumerate(names):
        ax.annotate(
            format_bytes(totals[n]),
            (x, totals[n] / scale),
            ha="center",
            va="bottom",
            xytext=(0, 3),
            textcoords="offset points",
            fontsize=9,
        )
    top = max(bottoms, default=0)
    if gpu_bytes is not None:
        ax.axhline(gpu_bytes / scale, color=INK, linestyle="--", linewidth=1.2)
        ax.annotate(
            _("GPU memory {size}").format(size=format_bytes(gpu_bytes)),
            (len(names) - 0.5, gpu_bytes / scale),
            ha="right",
            va="bottom",
            fontsize=9,
            xytext=(0, 2),
            textcoords="offset points",
        )
        top = max(top, gpu_bytes / scale)
    if highlight is not None and highlight in names:
        x = names.index(highlight)
        ax.bar(
            [x],
            [totals[highlight] / scale],
            fill=False,
            edgecolor=INK,
            linewidth=2.2,
            label="_highlight",
        )
        ax.set_xticks(range(len(names)), labels=names)
        ax.get_xticklabels()[x].set_fontweight("bold")
    ax.set_ylabel(_("{unit} per GPU").format(unit=unit))
    ax.set_ylim(0, max(top * 1.12, 1e-9))
    ax.set_title(title or _("Memory per GPU by category"))
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return fig
