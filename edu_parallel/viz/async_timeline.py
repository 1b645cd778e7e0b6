"""Lesson 14's pictures: idle time at barriers against overlapping pushes, staleness, loss curves.

They read the traces of :mod:`edu_parallel.async_training.sgd` and
:mod:`edu_parallel.async_training.param_server` and the tables of
:mod:`edu_parallel.async_training.report`; they never run anything and never import torch
(plotly is imported inside the functions).

* :func:`regime_timeline`: per rank, a window of the run: gradients, injected straggler delays,
  updates, and the time spent in communication, which includes every wait. In ``sync`` the long
  all-reduce bars are the other ranks idling at the barrier until the straggler sends; in
  ``async-ps`` the workers' pushes overlap and the fast ones never wait for the slow one.
* :func:`staleness_figure`: the histogram of staleness (updates applied between the version a
  gradient was computed from and the one it was applied to), one series per run.
* :func:`loss_curves_figure`: held-out loss against wall-clock time and against steps.
* :func:`time_to_target_figure`: time to the target accuracy, regime by straggler setting.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..core.errors import bad_value
from ..core.i18n import N_, _
from ..core.schema import STEP_START_MARK
from ..core.trace import Event, Trace
from .fit import fit_layout
from .plotly_figure import Figure
from .style import (
    BLUE,
    COMPUTE,
    GREEN,
    IDLE,
    IDLE_FILL,
    ORANGE,
    PHASE_COLORS,
    RED,
    TITLE_PAD_PX,
    WAITING,
    WIDTH,
)

# one colour per regime in every figure of lesson 14, far apart (plotly's defaults drew sync
# and backup in near-identical blue and purple)
REGIME_COLORS = {"sync": BLUE, "async-ps": ORANGE, "local-sgd": GREEN, "backup": RED}

# what a bar of the timeline is, by (kind, op, phase); None: not drawn. Communication that
# includes waiting is grey: most of it is the wait.
CATEGORIES = {
    "gradient": COMPUTE,
    "straggler delay": RED,
    "update": PHASE_COLORS["optimizer"],
    "all-reduce / average (incl. waiting)": WAITING,
    "push": ORANGE,
    "pull (incl. waiting)": IDLE,
    "server waits for a push": IDLE_FILL,
}
CATEGORY_NAMES = {  # what a learner reads; the categories stay in timeline_frame's "what"
    "gradient": N_("gradient"),
    "straggler delay": N_("straggler delay"),
    "update": N_("update"),
    "all-reduce / average (incl. waiting)": N_("all-reduce / average (incl. waiting)"),
    "push": N_("push"),
    "pull (incl. waiting)": N_("pull (incl. waiting)"),
    "server waits for a push": N_("server waits for a push"),
}


def category(e: Event) -> str | None:
    """The timeline's name for an event, or None for events it does not draw (a ring's own
    sends and receives sit inside their all-reduce bar; the server's replies do not block)."""
    if e.kind == "compute":
        return {"gradient": "gradient", "delay": "straggler delay", "apply": "update"}.get(e.op)
    if e.kind == "collective":
        return "all-reduce / average (incl. waiting)"
    if e.phase == "push":
        return "push" if e.kind == "send" else "server waits for a push"
    if e.phase == "pull" and e.kind == "recv":
        return "pull (incl. waiting)"
    return None


def _start(trace: Trace) -> float:
    marks = [e.start for e in trace.events if e.kind == "mark" and e.op == STEP_START_MARK]
    if not marks:
        raise bad_value(
            "trace", trace.meta.get("concept"), _("a trace of run_async (report.trace)")
        )
    return min(marks)


def timeline_frame(trace: Trace, window_s: float = 0.3) -> pd.DataFrame:
    """The drawn events of the first ``window_s`` seconds: rank, category, start and end (ms)."""
    if not isinstance(trace, Trace):
        raise bad_value("trace", trace, _("a Trace of run_async (report.trace)"))
    if not (isinstance(window_s, (int, float)) and window_s > 0):
        raise bad_value("window_s", window_s, _("a number of seconds > 0"))
    t0 = _start(trace)
    rows = []
    for e in trace.events:
        what = category(e)
        if what is None or e.end < t0 or e.start > t0 + window_s:
            continue
        start, end = max(e.start, t0) - t0, min(e.end, t0 + window_s) - t0
        rows.append({"rank": e.rank, "what": what, "start_ms": start * 1e3, "end_ms": end * 1e3})
    return pd.DataFrame(rows, columns=["rank", "what", "start_ms", "end_ms"])


def regime_timeline(trace: Trace, window_s: float = 0.3, title: str | None = None) -> Any:
    """Per rank, the first ``window_s`` seconds of a run (see module doc)."""
    frame = timeline_frame(trace, window_s)
    regime = trace.meta.get("regime", "run")
    server = regime in ("async-ps", "backup")
    ranks = sorted({e.rank for e in trace.events})
    label = {
        r: (
            _("r{rank} server").format(rank=r)
            if server and r == 0
            else _("r{rank} worker").format(rank=r)
        )
        for r in ranks
    }
    fig = Figure()
    for what, color in CATEGORIES.items():
        part = frame[frame["what"] == what]
        if part.empty:
            continue
        fig.add_bar(
            y=[label[r] for r in part["rank"]],
            x=part["end_ms"] - part["start_ms"],
            base=part["start_ms"],
            orientation="h",
            name=_(CATEGORY_NAMES[what]),
            marker=dict(color=color, line=dict(width=0)),
            hovertemplate=f"{_(CATEGORY_NAMES[what])}<br>%{{base:.1f}} ms + %{{x:.2f}} ms"
            "<extra>%{y}</extra>",
        )
    spans = frame.assign(ms=frame["end_ms"] - frame["start_ms"])
    busy = spans[spans["what"].isin(_BUSY)].groupby("rank")["ms"].sum()
    idle = {r: 1 - float(busy.get(r, 0.0)) / (window_s * 1e3) for r in ranks}
    sub = ", ".join(f"{label[r]} {idle[r]:.0%}" for r in ranks)
    head = title or _("{regime}: {straggler} stragglers").format(
        regime=regime, straggler=trace.meta.get("straggler", "")
    )
    waiting = _("share of the window spent waiting: {shares}").format(shares=sub)
    fig.update_layout(
        title=dict(text=f"{head}<br><sup>{waiting}</sup>", x=0, pad=dict(l=TITLE_PAD_PX)),
        barmode="overlay",
        width=WIDTH,
        height=140 + 45 * len(ranks),
        xaxis_title=_("ms since the ranks lined up (measured on this machine)"),
        yaxis=dict(categoryorder="array", categoryarray=[label[r] for r in reversed(ranks)]),
        legend=dict(orientation="h", y=-0.35),
        margin=dict(l=90, r=20, t=70, b=100),
    )
    return fit_layout(fig)


_BUSY = ("gradient", "straggler delay", "update")  # a delay is slow compute, not waiting


def staleness_figure(histograms: dict[str, dict[int, int]], title: str | None = None) -> Any:
    """Share of applied gradients at each staleness, one bar series per run label."""
    import plotly.express as px

    if not isinstance(histograms, dict) or not histograms:
        raise bad_value(
            "histograms", histograms, _("a dict label -> {{staleness: count}}").format()
        )
    rows = []
    for label, hist in histograms.items():
        total = sum(hist.values()) or 1
        rows += [{"run": label, "staleness": int(k), "share": v / total} for k, v in hist.items()]
    fig = px.bar(
        pd.DataFrame(rows), x="staleness", y="share", color="run", barmode="group", width=WIDTH
    )
    fig = Figure(fig)  # displays without plotly's renderer set-up (plotly_figure.py)
    fig.update_layout(
        title=title or _("Staleness of every applied gradient (counted from the trace)"),
        xaxis_title=_("staleness: updates applied since the gradient's parameters were pulled"),
        yaxis_title=_("share of applied gradients"),
        legend_title_text=_("run"),
        yaxis_tickformat=".0%",
    )
    return fit_layout(fig)


def loss_curves_figure(curves: dict[str, pd.DataFrame], title: str | None = None) -> Any:
    """Held-out loss against wall-clock time (left) and against steps (right), per run label;
    each curve a DataFrame with ``time_s``, ``step`` and ``loss`` (``AsyncReport.curve()``)."""
    import plotly.express as px

    if not isinstance(curves, dict) or not curves:
        raise bad_value("curves", curves, _("a dict label -> AsyncReport.curve()"))
    frames = []
    for label, c in curves.items():
        for axis, col in ((_("wall-clock time (s)"), "time_s"), (_("steps"), "step")):
            frames.append(
                pd.DataFrame({"x": c[col], "loss": c["loss"], "run": label, "axis": axis})
            )
    data = pd.concat(frames, ignore_index=True)
    fig = px.line(
        data,
        x="x",
        y="loss",
        color="run",
        color_discrete_map=REGIME_COLORS,
        facet_col="axis",
        width=WIDTH,
        height=420,
    )
    fig = Figure(fig)  # displays without plotly's renderer set-up (plotly_figure.py)
    fig.update_xaxes(matches=None, title="")
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    fig.update_yaxes(title_text=_("loss"), col=1)
    fig.update_layout(
        title=title or _("Held-out loss against wall-clock time and against steps"),
        legend_title_text=_("run"),
    )
    return fit_layout(fig)


def time_to_target_figure(table: pd.DataFrame, title: str | None = None) -> Any:
    """Bars of ``time to target (s)`` (``Comparison.table()``), regime by straggler setting;
    a run that never reached the target is left out and named in the subtitle."""
    import plotly.express as px

    need = {"regime", "straggler", "time to target (s)"}
    if not isinstance(table, pd.DataFrame) or not need <= set(table.columns):
        raise bad_value("table", type(table).__name__, _("Comparison.table()"))
    missed = table[table["time to target (s)"].isna()]
    fig = px.bar(
        table.dropna(subset=["time to target (s)"]),
        x="straggler",
        y="time to target (s)",
        color="regime",
        color_discrete_map=REGIME_COLORS,
        barmode="group",
        width=WIDTH,
    )
    fig = Figure(fig)  # displays without plotly's renderer set-up (plotly_figure.py)
    # "straggler none" is a setting: the note names it as one, and says "every run" for no run
    note = ", ".join(
        _("{regime} with straggler {straggler}").format(regime=r.regime, straggler=r.straggler)
        for r in missed.itertuples()
    )
    head = title or _("Time to the target accuracy, measured")
    never = (
        _("never reached the target: {runs}").format(runs=note)
        if note
        else _("every run reached the target")
    )
    fig.update_layout(
        title=dict(text=f"{head}<br><sup>{never}</sup>", x=0, pad=dict(l=TITLE_PAD_PX)),
        xaxis_title=_("straggler"),
        yaxis_title=_("time to target (s)"),
        legend_title_text=_("regime"),
    )
    # px names the hover's fields by the table's columns, which are code keys
    fig.update_traces(
        hovertemplate=_("straggler {x}: {y} s").format(x="%{x}", y="%{y:.3g}")
        + "<extra>%{fullData.name}</extra>"
    )
    return fit_layout(fig)
