"""ZeRO memory renderers: what each rank holds, by category, event by event.

* :func:`ledger` reads the ``memory`` events of a trace (``nbytes`` = signed change,
  ``attrs["category"]`` = what it is) and keeps the running bytes per rank and category after
  every event (a :class:`Ledger`): peaks, the peak of the model states, one snapshot per event.
* :func:`memory_bars_animation` draws the ledger as stacked bars per rank (plotly frames with a
  play button and a slider, so it plays in exported HTML): gathered parameters appear and are
  released. Several traces (DP, ZeRO-1/2/3) are drawn side by side with a shared y axis.
* :func:`memory_bars` draws calculator estimates (anything with a ``.breakdown`` dict) as static
  stacked bars (matplotlib).
* :class:`ZeroWidget` / :class:`ZeroState`: an ipywidgets explorer of the calculator in
  :mod:`edu_parallel.memory` (bytes per GPU, largest model that fits, communication per step).

Plotting libraries and :mod:`edu_parallel.memory` are imported inside the functions; nothing here
imports torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import bad_value, check_choice, check_int
from ..trace import Event, Trace
from ..units import format_bytes

CATEGORIES = (
    "param16",
    "param32",
    "grad16",
    "grad32",
    "master32",
    "adam_m",
    "adam_v",
    "gathered_params",
    "comm_buffer",
)
MODEL_STATE = ("param16", "grad16", "master32", "adam_m", "adam_v")
CATEGORY_COLORS = {
    "param16": "#3b6ea5",  # blue
    "grad16": "#3f8f3a",  # green
    "master32": "#8c564b",  # brown
    "adam_m": "#e8770e",  # orange
    "adam_v": "#f2b134",  # amber
    "gathered_params": "#c0392b",  # red: appears and is released
    "comm_buffer": "#7f7f7f",  # grey
    "param32": "#1f4e79",  # dark blue (fp32 training: the params are the master copy)
    "grad32": "#25602a",  # dark green
}
CATEGORY_NAMES = {
    "param16": "fp16 parameters",
    "grad16": "fp16 gradients",
    "master32": "fp32 master weights",
    "adam_m": "Adam m (fp32)",
    "adam_v": "Adam v (fp32)",
    "gathered_params": "gathered parameters (temporary)",
    "comm_buffer": "communication buffer",
    "param32": "fp32 parameters",
    "grad32": "fp32 gradients",
}
_EXTRA_COLORS = ("#9467bd", "#17becf", "#bcbd22", "#e377c2", "#2ca02c", "#1f77b4", "#d62728")


def category_color(category: str, index: int = 0) -> str:
    """The fixed colour of ``category``; unknown categories cycle through spare colours."""
    return CATEGORY_COLORS.get(category, _EXTRA_COLORS[index % len(_EXTRA_COLORS)])


def order_categories(names: Any) -> list[str]:
    """Known categories in :data:`CATEGORIES` order, then the others in order of appearance."""
    seen = list(dict.fromkeys(names))
    return [c for c in CATEGORIES if c in seen] + [c for c in seen if c not in CATEGORIES]


# ----------------------------------------------------------------- the ledger
@dataclass(frozen=True)
class LedgerFrame:
    """The bytes every rank holds right after one memory event (``event`` None: before any).

    ``per_rank[rank][category]`` is a byte count (every category of the ledger is present).
    """

    index: int
    time: float
    label: str
    per_rank: dict[int, dict[str, int]]
    event: Event | None = None

    @property
    def step(self) -> int | None:
        return self.event.step if self.event is not None else None

    def total(self, rank: int) -> int:
        """All bytes ``rank`` holds in this snapshot."""
        return sum(self.per_rank[rank].values())


def event_delta(event: Event) -> int:
    """The signed change of a memory event: ``free`` is negative, ``alloc`` positive.

    ``nbytes`` is already signed in traces of :mod:`edu_parallel.zero`; an unsigned ``free`` is
    read as a release too, so either convention gives the same ledger.
    """
    if event.op == "free":
        return -abs(int(event.nbytes))
    if event.op == "alloc":
        return abs(int(event.nbytes))
    return int(event.nbytes)


def event_label(event: Event) -> str:
    """A short text for one memory event, e.g. ``r1 +2 MiB gathered_params (forward, step 0)``."""
    delta = event_delta(event)
    sign = "+" if delta >= 0 else "-"
    where = ", ".join(
        x for x in (event.phase, f"step {event.step}" if event.step is not None else None) if x
    )
    cat = (event.attrs or {}).get("category", "?")
    return f"r{event.rank} {sign}{format_bytes(abs(delta))} {cat}" + (
        f" ({where})" if where else ""
    )


class Ledger:
    """Running bytes per rank and category after every memory event of a trace (time order).

    ``ranks`` and ``categories`` list what appears; :meth:`frames` gives one
    :class:`LedgerFrame` per event plus the initial (all zero) one.
    """

    def __init__(self, trace: Trace) -> None:
        events = [e for e in trace.events if e.kind == "memory"]
        order = sorted(range(len(events)), key=lambda i: (events[i].start, i))
        self.events: list[Event] = [events[i] for i in order]
        self.categories: list[str] = order_categories(
            (e.attrs or {}).get("category", "unknown") for e in self.events
        )
        world = trace.world_size
        ranks = set(range(world)) | {e.rank for e in self.events}
        self.ranks: list[int] = sorted(ranks)
        current = {r: dict.fromkeys(self.categories, 0) for r in self.ranks}
        start = self.events[0].start if self.events else 0.0
        self._frames = [LedgerFrame(0, start, "start", _copy(current))]
        for i, e in enumerate(self.events, start=1):
            cat = (e.attrs or {}).get("category", "unknown")
            current[e.rank][cat] += event_delta(e)
            self._frames.append(LedgerFrame(i, e.start, event_label(e), _copy(current), e))

    def __len__(self) -> int:
        return len(self._frames)

    def frames(self) -> list[LedgerFrame]:
        """Snapshots: the start (all zero), then one after every memory event (time order)."""
        return list(self._frames)

    def bytes(self, rank: int, category: str | None = None, index: int = -1) -> int:
        """Bytes ``rank`` holds of ``category`` (None: all) after frame ``index`` (-1: the end)."""
        held = self._frames[index].per_rank[self._rank(rank)]
        return sum(held.values()) if category is None else held.get(category, 0)

    def peaks_by_category(self, rank: int) -> dict[str, int]:
        """The most bytes ``rank`` held of each category at any moment."""
        r = self._rank(rank)
        return {c: max(f.per_rank[r][c] for f in self._frames) for c in self.categories}

    def peak_model_state(self, rank: int) -> int:
        """The most bytes of model states (fp16 params and grads, fp32 master, Adam m and v)
        ``rank`` held at one moment (the peak of the sum, not the sum of the peaks)."""
        r = self._rank(rank)
        return max(sum(f.per_rank[r].get(c, 0) for c in MODEL_STATE) for f in self._frames)

    def peak_total(self, rank: int) -> int:
        """The most bytes of all categories ``rank`` held at one moment."""
        r = self._rank(rank)
        return max(f.total(r) for f in self._frames)

    def steps(self) -> list[int]:
        """Step numbers of the memory events, in order of appearance."""
        return list(dict.fromkeys(e.step for e in self.events if e.step is not None))

    def step_range(self, step: int | None) -> tuple[int, int]:
        """``(first, last)`` frame indices that animate ``step``: the frame before its first
        event, through its last event (None: the whole run)."""
        if step is None:
            return 0, len(self._frames) - 1
        hits = [i for i, f in enumerate(self._frames) if f.step == step]
        if not hits:
            raise bad_value(
                "step", step, "one of " + (", ".join(map(str, self.steps())) or "no steps")
            )
        return hits[0] - 1, hits[-1]

    def _rank(self, rank: int) -> int:
        if rank not in self.ranks:
            raise bad_value("rank", rank, f"one of {self.ranks}")
        return rank


def _copy(current: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
    return {r: dict(c) for r, c in current.items()}


def ledger(trace: Trace) -> Ledger:
    """The running bytes per rank and category after every ``memory`` event of ``trace``."""
    return Ledger(trace)


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
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    spec = _animation_spec(trace_or_traces, step)
    n = len(spec.names)
    fig = make_subplots(
        rows=1, cols=n, shared_yaxes=True, horizontal_spacing=0.04 if n > 1 else 0.0,
        subplot_titles=[f"<b>{name}</b>" for name in spec.names] if n > 1 else None,
    )  # fmt: skip
    for p in range(n):
        for trace in _panel_traces(spec, p, 0):
            fig.add_trace(trace, row=1, col=p + 1)
    peak = max(
        (spec.frame_of(p, k).total(r) for p in range(n) for k in range(spec.length)
         for r in spec.ledgers[p].ranks),
        default=0,
    )  # fmt: skip
    top = max(peak / spec.scale, 1e-9) * 1.08
    head = f"<b>{title}</b><br>" if title else ""
    which = _steps_text(spec)
    ranks = max(len(lg.ranks) for lg in spec.ledgers)
    width = min(1700, 360 + n * max(340, 40 + 70 * ranks))  # legend ~280 px on the right
    fig.update_layout(
        barmode="stack", bargap=0.25, plot_bgcolor="white", width=width, height=640,
        title=dict(text=f"{head}Memory per rank by category{which}", x=0.5, xanchor="center",
                   y=0.98, yanchor="top", yref="container", font=dict(size=15)),
        legend=dict(orientation="v", x=1.01, xanchor="left", y=1.0, yanchor="top",
                    traceorder="normal", font=dict(size=12)),
        margin=dict(l=80, r=20, t=100 if title else 80, b=190),
        hoverlabel=dict(font=dict(size=12)),
    )  # fmt: skip
    for p in range(n):
        fig.update_xaxes(
            row=1, col=p + 1, type="category", tickfont=dict(size=12), fixedrange=True,
            title=dict(text=_panel_caption(spec, p, 0), font=dict(size=12), standoff=6),
        )  # fmt: skip
    fig.update_yaxes(range=[0, top], gridcolor="#e5e5e5", fixedrange=True)
    fig.update_yaxes(title=dict(text=f"{spec.unit} held per rank", font=dict(size=13)), col=1)
    ntraces = len(fig.data)
    names = [str(k) for k in range(spec.length)]
    fig.frames = [
        go.Frame(
            name=names[k],
            data=[t for p in range(n) for t in _panel_traces(spec, p, k)],
            traces=list(range(ntraces)),
            layout={
                _axis_key(p): dict(title=dict(text=_panel_caption(spec, p, k))) for p in range(n)
            },
        )
        for k in range(spec.length)
    ]
    play = dict(frame=dict(duration=700, redraw=True), transition=dict(duration=0),
                fromcurrent=True, mode="immediate")  # fmt: skip
    pause = dict(frame=dict(duration=0, redraw=False), mode="immediate")
    fig.update_layout(
        updatemenus=[dict(type="buttons", direction="left", x=0.0, y=-0.2, xanchor="left",
                          yanchor="top", showactive=False,
                          buttons=[dict(label="▶ play", method="animate", args=[None, play]),
                                   dict(label="❚❚ pause", method="animate",
                                        args=[[None], pause])])],
        sliders=[dict(active=0, x=0.16, len=0.84, y=-0.18, yanchor="top",
                      currentvalue=dict(prefix="event: ", font=dict(size=12)),
                      steps=[dict(label=name, method="animate",
                                  args=[[name], dict(play, frame=dict(duration=0,
                                                                      redraw=True))])
                             for name in names])],
    )  # fmt: skip
    fig.layout.meta = dict(unit=spec.unit, scale=spec.scale, panels=spec.names)
    return fig


def _animation_spec(
    trace_or_traces: Trace | Mapping[str, Trace], step: int | None
) -> MemoryAnimation:
    if isinstance(trace_or_traces, Trace):
        traces = {"": trace_or_traces}
    elif isinstance(trace_or_traces, Mapping) and trace_or_traces:
        traces = dict(trace_or_traces)
        for name, t in traces.items():
            if not isinstance(t, Trace):
                raise bad_value(f"trace_or_traces[{name!r}]", t, "a Trace")
    else:
        raise bad_value("trace_or_traces", trace_or_traces, "a Trace or a non-empty {name: Trace}")
    ledgers, ranges, steps = [], [], []
    for name, t in traces.items():
        lg = Ledger(t)
        if not lg.events:
            raise bad_value(f"trace {name!r}" if name else "trace", t.meta.get("concept", "run"),
                            "a trace with memory events")  # fmt: skip
        chosen = step
        if step == -1:
            chosen = lg.steps()[-1] if lg.steps() else None
        ledgers.append(lg)
        ranges.append(lg.step_range(chosen))
        steps.append(chosen)
    categories = order_categories(c for lg in ledgers for c in lg.categories)
    length = max(last - first + 1 for first, last in ranges)
    spec = MemoryAnimation(list(traces), ledgers, ranges, categories, length=length, steps=steps)
    peak = max(
        (spec.frame_of(p, k).total(r) for p in range(len(ledgers)) for k in range(length)
         for r in ledgers[p].ranks),
        default=0,
    )  # fmt: skip
    spec.unit, spec.scale = byte_unit(peak)
    return spec


def _steps_text(spec: MemoryAnimation) -> str:
    steps = set(spec.steps)
    if steps == {None}:
        return ", every memory event"
    if len(steps) == 1:
        return f", events of step {spec.steps[0]}"
    return ", events of one step"


def _axis_key(panel: int) -> str:
    return "xaxis" if panel == 0 else f"xaxis{panel + 1}"


def _panel_caption(spec: MemoryAnimation, panel: int, k: int) -> str:
    first, last = spec.ranges[panel]
    frame = spec.frame_of(panel, k)
    count = last - first
    pos = min(k, count)
    if pos == 0:
        what = "before the step" if spec.steps[panel] is not None else "start"
        return f"event 0/{count}: {what}<br> "
    head, _, where = frame.label.partition(" (")
    return f"event {pos}/{count}: <b>{head}</b>" + (f"<br>({where}" if where else "")


def _panel_traces(spec: MemoryAnimation, panel: int, k: int) -> list[Any]:
    """One stacked bar trace per category for panel ``panel`` at animation frame ``k``."""
    import plotly.graph_objects as go

    frame = spec.frame_of(panel, k)
    lg = spec.ledgers[panel]
    changed = frame.event.rank if frame.event is not None and k > 0 else None
    xs = [f"rank {r}" for r in lg.ranks]
    out = []
    for i, cat in enumerate(spec.categories):
        held = [frame.per_rank[r].get(cat, 0) for r in lg.ranks]
        hover = [
            f"<b>rank {r}</b> ({spec.names[panel] or 'run'})<br>{CATEGORY_NAMES.get(cat, cat)}: "
            f"{b:,} B ({format_bytes(b)})<br>total: {frame.total(r):,} B"
            for r, b in zip(lg.ranks, held, strict=True)
        ]
        out.append(
            go.Bar(
                x=xs, y=[b / spec.scale for b in held], name=CATEGORY_NAMES.get(cat, cat),
                legendgroup=cat, showlegend=panel == 0,
                customdata=[[r, cat, b] for r, b in zip(lg.ranks, held, strict=True)],
                hovertext=hover, hoverinfo="text",
                marker=dict(color=category_color(cat, i),
                            line=dict(color=["#111111" if r == changed else "#ffffff"
                                             for r in lg.ranks],
                                      width=[2.5 if r == changed else 0.5 for r in lg.ranks])),
            )
        )  # fmt: skip
    return out


# ----------------------------------------------------------------- static bars
def memory_bars(
    estimates: Mapping[str, Any],
    title: str | None = None,
    gpu_bytes: float | None = None,
    highlight: str | None = None,
) -> Any:
    """Static stacked bars (matplotlib) of ``{name: estimate}``; each estimate has a
    ``.breakdown`` dict ``category -> bytes`` (e.g. :func:`edu_parallel.memory.model_state_bytes`
    for DP and ZeRO-1/2/3) or is such a dict. Bars are labelled with their total; the legend names
    the categories. ``gpu_bytes`` draws the GPU's memory as a dashed line; ``highlight`` names
    the bar to outline.
    """
    from .figure import new_figure

    if not isinstance(estimates, Mapping) or not estimates:
        raise bad_value("estimates", estimates, "a non-empty {name: estimate with .breakdown}")
    breakdowns: dict[str, dict[str, float]] = {}
    for name, est in estimates.items():
        bd = getattr(est, "breakdown", est if isinstance(est, Mapping) else None)
        if not isinstance(bd, Mapping):
            raise bad_value(f"estimates[{name!r}]", est, "an object with a .breakdown dict")
        breakdowns[str(name)] = {str(c): float(b) for c, b in bd.items()}
    categories = order_categories(c for bd in breakdowns.values() for c in bd)
    totals = {n: sum(bd.values()) for n, bd in breakdowns.items()}
    unit, scale = byte_unit(max(totals.values(), default=0))
    names = list(breakdowns)
    fig = new_figure(figsize=(max(5.5, 1.3 * len(names) + 3.2), 4.6), layout="constrained")
    ax = fig.add_subplot()
    bottoms = [0.0] * len(names)
    for i, cat in enumerate(categories):
        heights = [breakdowns[n].get(cat, 0.0) / scale for n in names]
        ax.bar(names, heights, bottom=bottoms, color=category_color(cat, i),
               label=CATEGORY_NAMES.get(cat, cat), edgecolor="white", linewidth=0.6)  # fmt: skip
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    for x, n in enumerate(names):
        ax.annotate(format_bytes(totals[n]), (x, totals[n] / scale), ha="center", va="bottom",
                    xytext=(0, 3), textcoords="offset points", fontsize=9)  # fmt: skip
    top = max(bottoms, default=0)
    if gpu_bytes is not None:
        ax.axhline(gpu_bytes / scale, color="#222222", linestyle="--", linewidth=1.2)
        ax.annotate(f"GPU memory {format_bytes(gpu_bytes)}", (len(names) - 0.5, gpu_bytes / scale),
                    ha="right", va="bottom", fontsize=9, xytext=(0, 2),
                    textcoords="offset points")  # fmt: skip
        top = max(top, gpu_bytes / scale)
    if highlight is not None and highlight in names:
        x = names.index(highlight)
        ax.bar([x], [totals[highlight] / scale], fill=False, edgecolor="#111111", linewidth=2.2,
               label="_highlight")  # fmt: skip
        ax.set_xticks(range(len(names)), labels=names)
        ax.get_xticklabels()[x].set_fontweight("bold")
    ax.set_ylabel(f"{unit} per GPU")
    ax.set_ylim(0, max(top * 1.12, 1e-9))
    ax.set_title(title or "Memory per GPU by category")
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return fig


# ----------------------------------------------------------------- explorer widget
GPUS_RANGE = (1, 65536)
GPU_GIB_RANGE = (1.0, 1024.0)
PARAMS_RANGE = (1.0, 1e15)
STAGE_NAMES = {0: "DP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


def _presets() -> dict[str, Any]:
    from ..memory import PRESETS

    return PRESETS


@dataclass
class ZeroState:
    """Validated explorer state; every assignment is checked.

    ``model`` is a preset name of :data:`edu_parallel.memory.PRESETS` or a parameter count in
    [1, 1e15]; ``gpus`` in [1, 65536]; ``stage`` the ZeRO stage in [0, 3] (0 = plain data
    parallel); ``precision`` one of :data:`edu_parallel.memory.PRECISIONS`; ``offload`` one of
    :data:`edu_parallel.memory.OFFLOADS` that the stage supports; ``gpu_gib`` the memory of one GPU
    in GiB, in [1, 1024]. A bad value raises ValueError naming the field, the value and the valid
    range.
    """

    model: str | float = "zero-7.5b"
    gpus: int = 64
    stage: int = 1
    precision: str = "mixed"
    offload: str = "none"
    gpu_gib: float = 80.0

    def __setattr__(self, name: str, value: Any) -> None:
        from ..memory import OFFLOAD_STAGES, OFFLOADS, PRECISIONS

        if name == "model":
            value = _check_model(value)
        elif name == "gpus":
            value = check_int("gpus", value, *GPUS_RANGE)
        elif name == "stage":
            value = check_int("stage", value, 0, 3)
            offload = self.__dict__.get("offload", "none")
            if value not in OFFLOAD_STAGES[offload]:
                allowed = ", ".join(map(str, OFFLOAD_STAGES[offload]))
                raise bad_value("stage", value, f"one of {allowed} with offload={offload!r}")
        elif name == "precision":
            value = check_choice("precision", value, PRECISIONS)
        elif name == "offload":
            value = check_choice("offload", value, OFFLOADS)
            stage = self.__dict__.get("stage")
            if stage is not None and stage not in OFFLOAD_STAGES[value]:
                allowed = [o for o in OFFLOADS if stage in OFFLOAD_STAGES[o]]
                raise bad_value(
                    "offload", value, f"one of {', '.join(map(repr, allowed))} with stage={stage}"
                )
        elif name == "gpu_gib":
            value = _check_range("gpu_gib", value, *GPU_GIB_RANGE)
        object.__setattr__(self, name, value)

    @property
    def params(self) -> float:
        """The parameter count: the preset's (counted from its shape) or the number given."""
        if isinstance(self.model, str):
            from ..memory import count_params

            return float(count_params(_presets()[self.model]))
        return float(self.model)

    @property
    def gpu_bytes(self) -> float:
        return self.gpu_gib * 1024**3

    def describe(self) -> str:
        model = self.model if isinstance(self.model, str) else f"{self.params:.4g} parameters"
        off = f", offload={self.offload}" if self.offload != "none" else ""
        return (
            f"{model} on {self.gpus} GPUs of {self.gpu_gib:g} GiB, {STAGE_NAMES[self.stage]}, "
            f"{self.precision}{off}"
        )


def _check_range(name: str, value: Any, low: float, high: float) -> float:
    valid = f"a number in [{low:g}, {high:g}]"
    if isinstance(value, bool):
        raise bad_value(name, value, valid)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise bad_value(name, value, valid) from None
    if not low <= x <= high:
        raise bad_value(name, value, valid)
    return x


def _check_model(value: Any) -> str | float:
    presets = _presets()
    if isinstance(value, str):
        if value in presets:
            return value
        try:
            value = float(value)
        except ValueError:
            raise bad_value(
                "model", value,
                f"one of {', '.join(map(repr, presets))} or a parameter count in [1, 1e15]",
            ) from None  # fmt: skip
    return _check_range("model", value, *PARAMS_RANGE)


class ZeroWidget:
    """Controls for a ZeRO configuration, and what the calculator says about it.

    Everything is computed by :mod:`edu_parallel.memory`: ``estimate`` (``model_state_bytes``
    for the chosen stage), ``compare`` (the same for every stage the offload allows),
    ``largest`` (``largest_model_that_fits`` the chosen GPU memory, parameters), ``comm``
    (``comm_estimate``: bytes each GPU sends per step), ``fits`` (model states within the GPU
    memory). ``figure`` is the stacked-bar figure (:func:`memory_bars`), ``summary`` an HTML
    widget with the numbers and formulas. Driven from Python: tests set control values.
    """

    def __init__(
        self,
        model: str | float = "zero-7.5b",
        gpus: int = 64,
        stage: int = 1,
        precision: str = "mixed",
        offload: str = "none",
        gpu_gib: float = 80.0,
    ) -> None:
        import ipywidgets as w

        from ..memory import OFFLOADS, PRECISIONS

        self.state = ZeroState(model, gpus, stage, precision, offload, gpu_gib)
        self.estimate: Any = None
        self.compare: dict[str, Any] = {}
        self.largest: int = 0
        self.comm: Any = None
        self.fits = False
        self.figure: Any = None
        s = self.state
        presets = list(_presets())
        custom = not isinstance(s.model, str)
        self.model_dropdown = w.Dropdown(options=presets + ["custom"],
                                         value="custom" if custom else s.model,
                                         description="model")  # fmt: skip
        self.params_box = w.FloatText(value=s.params / 1e9, description="params (B)", step=0.5,
                                      disabled=not custom)  # fmt: skip
        self.gpus_box = w.IntText(value=s.gpus, description="GPUs")
        self.stage_buttons = w.ToggleButtons(options=[(STAGE_NAMES[k], k) for k in range(4)],
                                             value=s.stage, description="stage")  # fmt: skip
        self.precision_dropdown = w.Dropdown(options=list(PRECISIONS), value=s.precision,
                                             description="precision")  # fmt: skip
        self.offload_dropdown = w.Dropdown(options=list(OFFLOADS), value=s.offload,
                                           description="offload")  # fmt: skip
        self.gpu_box = w.FloatText(value=s.gpu_gib, description="GPU GiB", step=8)
        self.status = w.HTML()
        self.summary = w.HTML()
        self.output = w.Output()
        self.controls = [self.model_dropdown, self.params_box, self.gpus_box, self.stage_buttons,
                         self.precision_dropdown, self.offload_dropdown, self.gpu_box]  # fmt: skip
        for control in self.controls:
            control.observe(lambda _: self.update(), names="value")
        self.widget = w.VBox([
            w.HBox([self.model_dropdown, self.params_box, self.gpus_box]),
            self.stage_buttons,
            w.HBox([self.precision_dropdown, self.offload_dropdown, self.gpu_box]),
            self.status, self.summary, self.output,
        ])  # fmt: skip
        self.update()

    def read_controls(self) -> ZeroState:
        """A validated state from the controls (raises ValueError naming the bad field)."""
        custom = self.model_dropdown.value == "custom"
        self.params_box.disabled = not custom
        model = self.params_box.value * 1e9 if custom else self.model_dropdown.value
        return ZeroState(model, self.gpus_box.value, self.stage_buttons.value,
                         self.precision_dropdown.value, self.offload_dropdown.value,
                         self.gpu_box.value)  # fmt: skip

    def update(self) -> None:
        """Read and validate the controls, ask the calculator, then draw."""
        from ..memory import (
            OFFLOAD_STAGES,
            comm_estimate,
            largest_model_that_fits,
            model_state_bytes,
        )

        try:
            new = self.read_controls()
        except ValueError as err:
            self.status.value = f"<b style='color:#b00'>{err}</b> (showing the last valid setting)"
            return
        params = new.params
        self.estimate = model_state_bytes(params, new.gpus, new.stage, new.precision, new.offload)
        self.compare = {
            STAGE_NAMES[k]: model_state_bytes(params, new.gpus, k, new.precision, new.offload)
            for k in OFFLOAD_STAGES[new.offload]
        }
        self.largest = largest_model_that_fits(
            new.gpu_bytes, new.gpus, new.stage, new.precision, new.offload
        )
        self.comm = comm_estimate(params, new.gpus, new.stage, new.precision)
        self.fits = self.estimate.bytes_per_gpu <= new.gpu_bytes
        self.state, self.status.value = new, ""
        self.summary.value = self.summary_html()
        self.render()

    def summary_html(self) -> str:
        """The numbers shown under the controls."""
        s, est = self.state, self.estimate
        verdict = ("<b style='color:#2a7a2a'>fits</b>" if self.fits
                   else "<b style='color:#b00'>does not fit</b>")  # fmt: skip
        parts = ", ".join(
            f"{CATEGORY_NAMES.get(c, c)} {format_bytes(b)}" for c, b in est.breakdown.items() if b
        )
        cpu = (
            f"<br>CPU memory per GPU (offloaded): <b>{format_bytes(est.cpu_bytes_per_gpu)}</b>"
            if est.cpu_bytes_per_gpu
            else ""
        )
        return (
            f"<b>{s.describe()}</b> ({s.params:,.0f} parameters)<br>"
            f"Model states per GPU: <b>{format_bytes(est.bytes_per_gpu)}</b> "
            f"({est.bytes_per_gpu:,.0f} B) of {format_bytes(s.gpu_bytes)}: {verdict} "
            f"(activations not counted)<br>{parts}{cpu}<br>"
            f"Largest model whose states fit {s.gpu_gib:g} GiB per GPU here: "
            f"<b>{self.largest / 1e9:,.2f} B parameters</b> ({self.largest:,})<br>"
            f"Communication per step, sent by each GPU: <b>{format_bytes(self.comm.bytes_per_gpu)}"
            f"</b><br><small>{est.formula}<br>{self.comm.formula}</small>"
        )

    def render(self) -> None:
        """Draw the stacked bars into ``self.figure`` and, in a kernel, the output area."""
        s = self.state
        self.figure = memory_bars(
            self.compare, title=f"Model states per GPU: {s.describe()}",
            gpu_bytes=s.gpu_bytes, highlight=STAGE_NAMES[s.stage],
        )  # fmt: skip
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:  # pragma: no cover - ipywidgets depends on IPython
            return
        if get_ipython() is not None:
            with self.output:
                self.output.clear_output(wait=True)
                display(self.figure)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)
