"""Bytes become time (lesson 11): the measured crossover beside the formula's, and the GPU model.

* :func:`crossover_time_figure`: a :class:`~edu_parallel.roofline.sweep.SweepReport` on log-log
  axes against the tokens per rank per step: the measured matmul time and all-reduce time (solid,
  with markers), the formula's ``W / F`` and ``2(N-1) α + 2(N-1)/N Ψ e / B`` (dashed, the same
  colours), the rest of the compute (grey), and both crossovers as vertical lines. Left of them the
  step is communication-bound.
* :func:`gpu_share_figure`: modelled on 8 H100s (:mod:`edu_parallel.roofline.gpu`), each
  strategy's communication time over its compute time against the tokens per GPU, in a node and
  across nodes; 1 is the crossover. DP's falls as the batch grows, TP's does not.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.i18n import _
from ..roofline.gpu import GPU_N, PLACE_NAMES, gpu_rows
from .fit import fit_layout
from .plotly_figure import Figure
from .style import COMMUNICATION, COMPUTE, FONT, INK, MUTED, WIDTH, legend_below, title_layout

MS = 1e3
NICE = (1, 2, 5)  # log-axis ticks: 1, 2, 5 times a power of ten


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 ticks from ``low`` to ``high`` (positive), for a log axis without minor digits."""
    e = int(np.floor(np.log10(low)))
    out = []
    while 10.0**e <= high * 10:
        out += [m * 10.0**e for m in NICE if low <= m * 10.0**e <= high]
        e += 1
    return out


def _tick(v: float) -> str:
    return f"{v:g}"


def _finish(fig: Any, title: str, subtitle: str, height: int, bottom: int) -> Any:
    """The lesson column's width, the title and subtitle, the legend under the x axis."""
    margin = dict(l=80, r=30, t=80, b=bottom)
    fig.update_layout(
        title=title_layout(title, subtitle),
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        legend=legend_below(height, margin, 60),
    )
    return fit_layout(fig)


def _line(fig: Any, x: Any, y: Any, name: str, color: str, dash: str = "solid", **kw: Any) -> None:
    mode = "lines+markers" if dash == "solid" else "lines"
    fig.add_scatter(
        x=list(x), y=list(y), name=name, mode=mode, line=dict(color=color, dash=dash), **kw
    )


def crossover_time_figure(report: Any, title: str | None = None) -> Any:
    """The measured sweep and the formula on the same axes (see the module doc)."""
    xs = list(report.tokens)
    fig = Figure()
    _line(fig, xs, [c * MS for c in report.compute_s], _("matmuls, measured"), COMPUTE)
    _line(
        fig,
        xs,
        [c * MS for c in report.formula_compute_s],
        _("W / F, formula (F = {f} GFLOP/s)").format(f=f"{report.flops_per_s / 1e9:.1f}"),
        COMPUTE,
        "dash",
    )
    fig.add_scatter(
        x=xs,
        y=[c * MS for c in report.comm_s],
        mode="markers",
        marker=dict(color=COMMUNICATION),
        name=_("all-reduce, measured at each point"),
    )
    fig.add_scatter(
        x=[xs[0], xs[-1]],
        y=[report.comm_level_s * MS] * 2,
        mode="lines",
        line=dict(color=COMMUNICATION),
        name=_("all-reduce, measured (median of the points: the same bucket at each)"),
    )
    link = report.link
    _line(
        fig,
        xs,
        [report.formula_comm * MS] * len(xs),
        _("2(N-1) α + 2(N-1)/N Ψe/B, formula (α = {a} µs, B = {b} GB/s)").format(
            a=f"{link.alpha_s * 1e6:.0f}", b=f"{link.bandwidth_Bps / 1e9:.2f}"
        ),
        COMMUNICATION,
        "dash",
    )
    _line(fig, xs, [c * MS for c in report.other_s], _("other compute, measured"), MUTED)
    values = [*report.compute_s, *report.other_s, *report.comm_s, *report.formula_compute_s]
    low, top = min(values) * MS / 1.3, max(values) * MS * 1.3
    marks = [
        (report.measured_crossover, _("measured: {t} tokens"), "solid"),
        (report.formula_crossover, _("formula: {t} tokens"), "dash"),
    ]
    for i, (x, text, dash) in enumerate(marks):
        if x is None or not xs[0] <= x <= xs[-1]:
            continue
        fig.add_scatter(
            x=[x, x],
            y=[low, top],
            mode="lines",
            line=dict(color=INK, dash=dash, width=1),
            name=text.format(t=f"{x:.1f}"),
            legendgroup=f"mark{i}",
        )
    fig.update_xaxes(
        type="log",
        title_text=_("tokens per rank per optimizer step (k microbatches)"),
        tickvals=xs,
        ticktext=[str(x) for x in xs],
    )
    yt = log_ticks(low, top)
    fig.update_yaxes(
        type="log",
        title_text=_("time per step (ms)"),
        tickvals=yt,
        ticktext=[_tick(v) for v in yt],
        range=[np.log10(low), np.log10(top)],
    )
    ratio = report.ratio
    sub = _("{n} ranks, {rounds} rounds, fastest kept; formula / measured = {r}").format(
        n=report.world_size,
        rounds=report.config.repeats - 1,
        r="-" if ratio is None else f"{ratio:.2f}",
    )
    return _finish(fig, title or _("When the step stops being communication-bound"), sub, 560, 190)


def gpu_share_figure(hidden: int = 8192, tokens: Any = None, title: str | None = None) -> Any:
    """Modelled communication over compute against tokens per GPU on 8 H100s (module doc)."""
    per_gpu = np.logspace(8, 16, 33, base=2.0) if tokens is None else np.asarray(tokens, float)
    series: dict[tuple[str, str], list[float]] = {}
    for t in per_gpu:
        for r in gpu_rows(hidden, int(t) * GPU_N):
            if r.strategy in ("dp", "tp"):
                series.setdefault((r.strategy, r.place), []).append(
                    r.time.comm_s / r.time.compute_s
                )
    fig = Figure()
    colors = {"dp": COMPUTE, "tp": COMMUNICATION}
    for (strategy, place), ys in series.items():
        dash = "solid" if place == "in a node" else "dash"
        fig.add_scatter(
            x=list(per_gpu),
            y=ys,
            mode="lines",
            line=dict(color=colors[strategy], dash=dash),
            name=f"{strategy.upper()}, {_(PLACE_NAMES[place])}",
        )
    for y, name, color in (
        (1.0, _("communication = compute"), INK),
        (2 / 3, _("= backward: overlap hides DP's all-reduce below"), MUTED),
    ):
        fig.add_scatter(
            x=[per_gpu[0], per_gpu[-1]],
            y=[y, y],
            mode="lines",
            line=dict(color=color, width=1, dash="dot"),
            name=name,
        )
    xt = [4.0**e for e in range(4, 9) if per_gpu[0] <= 4.0**e <= per_gpu[-1]]
    fig.update_xaxes(
        type="log",
        title_text=_("tokens per GPU per step"),
        tickvals=xt,
        ticktext=[f"{int(x):,}" for x in xt],
    )
    ys = [v for ratio in series.values() for v in ratio]
    yt = log_ticks(min(ys), max(ys))
    fig.update_yaxes(
        type="log",
        title_text=_("communication / compute (modelled)"),
        tickvals=yt,
        ticktext=[_tick(v) for v in yt],
    )
    sub = _("8 x H100, 400 TFLOP/s each; NVLink at nccl-tests' 370 GB/s, NDR at 50 GB/s; h = {h}")
    title = title or _("DP gains from a larger batch, TP does not")
    return _finish(fig, title, sub.format(h=hidden), 480, 150)
