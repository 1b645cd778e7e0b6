"""The planner's results drawn (lesson 12): which configurations fit, which are fast, and why.

They read a :class:`~edu_parallel.planner.plan.PlannerResult` only (never run anything, never
import torch; plotly is imported inside):

* :func:`pareto_figure`: every feasible configuration at (memory per GPU, step time) on log axes,
  coloured by activation recomputation; the Pareto front (no other configuration is both smaller
  and faster, :meth:`PlannerResult.pareto`) as a line; the best starred; out-of-memory ones as
  faint grey crosses right of the GPU memory line; a ``highlight`` (e.g. a published layout) as a
  diamond. Hover shows the configuration. The memory axis spans the configurations that fit and
  the budget line (not the out-of-memory ones, up to 100x further); its title counts the crosses
  left off it.
* :func:`time_terms_figure`: the step time of the top configurations split into the planner's
  exposed terms (compute, TP, EP for a mixture of experts, PP, DP, bubble;
  :mod:`edu_parallel.planner.estimate`), stacked, so the learner sees why one wins.

The trade-off drawn is the Ultra-Scale Playbook's (Tazi et al. 2025, "finding the best
configuration"): memory bought with recomputation, sharding and pipeline stages costs time.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.errors import bad_value, check_int
from ..core.i18n import N_, _
from ..planner import TERMS, ConfigEstimate, PlannerResult
from .fit import fit_layout
from .plotly_figure import Figure
from .style import (
    ALERT,
    BLUE,
    COMPUTE,
    DIM_COLORS,
    FONT,
    GREEN,
    IDLE,
    MUTED,
    ORANGE,
    STAR,
    WIDTH,
    legend_below,
    title_layout,
)

# the fields that name a configuration (a ConfigEstimate's, before its estimate)
CONFIG_KEYS = ("dp", "tp", "pp", "ep", "chunks", "zero", "micro_batch", "microbatches", "recompute")
RECOMPUTE_COLORS = {"none": BLUE, "selective": GREEN, "full": ORANGE}
# a term's colour: compute's, the communication of each dimension, the bubble's idle grey
TERM_COLORS = {
    "compute": COMPUTE,
    "tp": DIM_COLORS["tp"],
    "ep": DIM_COLORS["ep"],
    "pp": DIM_COLORS["pp"],
    "dp": DIM_COLORS["dp"],
    "bubble": IDLE,
}
TERM_NAMES = {  # translated where shown: _(TERM_NAMES[term])
    "compute": N_("compute"),
    "tp": N_("TP all-reduces"),
    "ep": N_("EP all-to-alls"),
    "pp": N_("PP sends"),
    "dp": N_("DP sync (exposed)"),
    "bubble": N_("pipeline bubble"),
}
RECOMPUTE_SHORT = {"none": "no-rc", "selective": "sel-rc", "full": "full-rc"}


def layout_label(c: ConfigEstimate) -> str:
    """A configuration in one short line: ``"8×2×4 v4 Z3 mb1 M64 sel-rc"`` (dp×tp×pp, interleaved
    chunks when more than one, the EP degree when more than one (``ep8``), ZeRO stage, micro-batch
    size, microbatches, recomputation)."""
    chunks = f" v{c.chunks}" if c.chunks > 1 else ""
    chunks += f" ep{c.ep}" if c.ep > 1 else ""
    return (
        f"{c.dp}×{c.tp}×{c.pp}{chunks} Z{c.zero} mb{c.micro_batch} M{c.microbatches}"
        f" {RECOMPUTE_SHORT.get(c.recompute, c.recompute)}"
    )


def config_hover(c: ConfigEstimate) -> str:
    """The hover text of one configuration: its degrees and its estimate."""
    head = (
        f"<b>dp={c.dp}, tp={c.tp}, pp={c.pp}</b>, chunks={c.chunks}, ZeRO-{c.zero}<br>"
        f"micro_batch={c.micro_batch}, microbatches M={c.microbatches}, recompute={c.recompute}"
    )
    if c.memory_bytes_per_gpu is None:
        return f"{head}<br>{c.reason}"
    tail = "<br>" + _("memory {memory} GB per GPU, step {step} s, MFU {mfu}").format(
        memory=f"{c.memory_bytes_per_gpu / 1e9:.1f}",
        step=f"{c.step_time_s:.3g}",
        mfu=f"{c.mfu:.1%}",
    )
    return head + tail + ("" if c.feasible else f"<br>{c.reason}")


def _check_result(result: Any) -> PlannerResult:
    if not isinstance(result, PlannerResult) or not result.feasible:
        raise bad_value(
            "result",
            type(result).__name__,
            _("a PlannerResult of plan() with a feasible config"),
        )
    return result


def find_config(result: PlannerResult, highlight: Any) -> ConfigEstimate:
    """The best-ranked configuration of ``result`` (with an estimate) whose fields equal
    ``highlight``'s (a dict of :data:`CONFIG_KEYS`, plus an optional ``"name"``)."""
    valid = _("a dict of configuration fields ({fields}) and an optional 'name'").format(
        fields=", ".join(CONFIG_KEYS)
    )
    if not isinstance(highlight, dict) or not set(highlight) - {"name"}:
        raise bad_value("highlight", highlight, valid)
    unknown = set(highlight) - {*CONFIG_KEYS, "name"}
    if unknown:
        raise bad_value(
            "highlight",
            highlight,
            _("{valid}; unknown: {unknown}").format(
                valid=valid, unknown=", ".join(sorted(unknown))
            ),
        )
    fields = {k: v for k, v in highlight.items() if k != "name"}
    for c in result.configs:
        if c.memory_bytes_per_gpu is not None and all(
            getattr(c, k) == v for k, v in fields.items()
        ):
            return c
    raise bad_value(
        "highlight", highlight, _("fields matching a configuration this plan estimated")
    )


def log_ticks(values: list[float]) -> list[float]:
    """1-2-3-5 tick values over the decades ``values`` span (plotly's own log ticks label 2, 3, ...
    in small type; ticks outside the axis range are not drawn)."""
    first = math.floor(math.log10(min(values)))
    last = math.ceil(math.log10(max(values)))
    return [m * 10.0**e for e in range(first, last + 1) for m in (1, 2, 3, 5)]


def _point_trace(configs: list[tuple[int, ConfigEstimate]], name: str, **style: Any) -> Any:
    import plotly.graph_objects as go

    return go.Scatter(
        x=[c.memory_bytes_per_gpu / 1e9 for _i, c in configs],
        y=[c.step_time_s for _i, c in configs],
        customdata=[i for i, _c in configs],  # index into result.configs
        hovertext=[config_hover(c) for _i, c in configs],
        hoverinfo="text",
        name=name,
        **style,
    )


OFF_AXIS_PAD = 1.3  # the memory axis runs from the smallest fit / 1.3 to the budget x 1.3²


def pareto_figure(
    result: Any,
    *,
    highlight: dict[str, Any] | None = None,
    infeasible: bool = True,
    title: str | None = None,
) -> Any:
    """Step time against memory per GPU for every configuration of ``result`` (see the module
    docstring). Each feasible configuration is one point, in exactly one trace (``"feasible,
    recompute=..."`` or ``"Pareto front"``); ``customdata`` holds its index in
    ``result.configs``. ``infeasible=False`` leaves out the out-of-memory crosses."""
    import plotly.graph_objects as go

    result = _check_result(result)
    marked = None if highlight is None else find_config(result, highlight)
    indexed = list(enumerate(result.configs))
    front_ids = {id(c) for c in result.pareto()}
    fig = Figure()
    oom = [(i, c) for i, c in indexed if not c.feasible and c.memory_bytes_per_gpu is not None]
    if infeasible and oom:
        fig.add_trace(
            _point_trace(
                oom,
                _("out of memory"),
                mode="markers",
                marker=dict(symbol="x-thin", size=6, color=MUTED, line=dict(width=1)),
                opacity=0.45,
            )
        )
    for rc, color in RECOMPUTE_COLORS.items():
        points = [(i, c) for i, c in indexed if c.feasible and id(c) not in front_ids]
        points = [(i, c) for i, c in points if c.recompute == rc]
        if points:
            fig.add_trace(
                _point_trace(
                    points,
                    _("feasible, recompute={rc}").format(rc=rc),
                    mode="markers",
                    marker=dict(size=6, color=color, opacity=0.6),
                )
            )
    front = [(i, c) for i, c in indexed if id(c) in front_ids]
    fig.add_trace(
        _point_trace(
            front,
            _("Pareto front ({n})").format(n=len(front)),
            mode="lines+markers",
            line=dict(color="black", width=2),
            marker=dict(size=8, color="black"),
        )
    )
    best = result.best
    fig.add_trace(
        _point_trace(
            [(0, best)],
            _("best: {config}").format(config=layout_label(best)),
            mode="markers",
            marker=dict(symbol="star", size=20, color=STAR, line=dict(color="black", width=1)),
        )
    )
    if marked is not None:
        name = highlight.get("name") or ", ".join(f"{k}={v}" for k, v in highlight.items())
        rank = result.rank_of(**{k: getattr(marked, k) for k in CONFIG_KEYS})
        where = f"rank {rank}" if rank else _("does not fit")
        fig.add_trace(
            _point_trace(
                [(result.configs.index(marked), marked)],
                f"{name} ({where})",
                mode="markers",
                marker=dict(symbol="diamond-open", size=18, color=ALERT, line=dict(width=3)),
            )
        )
    budget = result.memory_budget / 1e9
    # the axis spans the configurations that fit (and the budget line, a little past it): the
    # out-of-memory ones reach 100x the budget and would squeeze every fitting one into a corner
    fit_mems = [c.memory_bytes_per_gpu / 1e9 for c in result.feasible] or [budget]
    if marked is not None and marked.memory_bytes_per_gpu is not None:  # a highlight stays in view
        fit_mems.append(marked.memory_bytes_per_gpu / 1e9)
    x_lo, x_hi = min(fit_mems) / OFF_AXIS_PAD, max(*fit_mems, budget) * OFF_AXIS_PAD**2
    shown = [c for _i, c in (oom if infeasible else [])] + result.feasible
    shown = [c for c in shown if c.memory_bytes_per_gpu / 1e9 <= x_hi] or shown
    off = [c for _i, c in (oom if infeasible else []) if c.memory_bytes_per_gpu / 1e9 > x_hi]
    times = [c.step_time_s for c in shown]
    mems = [c.memory_bytes_per_gpu / 1e9 for c in shown]
    is_gpu = result.memory_budget == result.cluster.gpu.memory_bytes
    fig.add_trace(
        go.Scatter(
            x=[budget, budget],
            y=[min(times) / 1.15, max(times) * 1.15],
            mode="lines",
            line=dict(color=ALERT, dash="dash", width=2),
            name=(
                _("GPU memory: {budget} GB") if is_gpu else _("memory budget: {budget} GB")
            ).format(budget=f"{budget:.4g}"),
            hoverinfo="name",
        )
    )
    cluster = result.cluster
    n, ok = len(result.configs), len(result.feasible)
    head = title or _("{model} on {n} {gpu}: {ok} of {total} configurations fit").format(
        model=result.model.name, n=cluster.world_size, gpu=cluster.gpu.name.upper(), ok=ok, total=n
    )
    sub = _(
        "batch {batch} × {seq} tokens, efficiency {efficiency}; best {config}: {step} s, MFU {mfu}"
    ).format(
        batch=result.global_batch,
        seq=result.seq,
        efficiency=f"{result.efficiency:g}",
        config=layout_label(best),
        step=f"{best.step_time_s:.3g}",
        mfu=f"{best.mfu:.1%}",
    )
    height, margin = 600, dict(l=80, r=30, t=90, b=150)
    fig.update_layout(
        title=title_layout(head, sub),
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        legend=legend_below(height, margin, 60),
        xaxis=dict(
            type="log",
            title_text=_x_title(off),
            tickvals=log_ticks([*mems, budget]),
            range=[math.log10(x_lo), math.log10(x_hi)],
        ),
        yaxis=dict(
            type="log",
            title_text=_("step time (s, log scale)"),
            tickvals=log_ticks(times),
            range=[math.log10(min(times) / 1.3), math.log10(max(times) * 1.3)],
        ),
        hovermode="closest",
    )
    return fit_layout(fig)


def _x_title(off: list[Any]) -> str:
    """The memory axis' title, and how many out-of-memory configurations lie right of it."""
    title = _("memory per GPU (GB, log scale)")
    if not off:
        return title
    most = max(c.memory_bytes_per_gpu for c in off) / 1e9
    return (
        title
        + "; "
        + _(
            "{n} out-of-memory configurations (up to {most} GB) are off the axis, to the right"
        ).format(n=f"{len(off):,}", most=f"{most:,.0f}")
    )


def time_terms_figure(
    result: Any, top: int = 10, *, overhead_only: bool = False, title: str | None = None
) -> Any:
    """The ``top`` fastest feasible configurations, one horizontal bar each (best at the top),
    split into the step time's exposed terms; the bar's end is the step time, written with the
    MFU beside it. ``overhead_only=True`` leaves compute out: the bars are what each
    configuration pays on top of it (where the top configurations differ)."""
    result = _check_result(result)
    top = check_int("top", top, 1, 100)
    configs = result.feasible[:top]
    labels = [f"{r}. {layout_label(c)}" for r, c in enumerate(configs, 1)]
    fig = Figure()
    # EP only for a mixture-of-experts model (a dense model's EP term is always 0)
    skip = {"compute"} if overhead_only else set()
    if not result.model.experts:
        skip.add("ep")
    terms = [t for t in TERMS if t not in skip]
    for term in terms:
        xs = [c.time_terms[term] for c in configs]
        fig.add_bar(
            y=labels,
            x=xs,
            orientation="h",
            name=_(TERM_NAMES[term]),
            marker_color=TERM_COLORS[term],
            hovertext=[
                f"{lab}<br>"
                + _("{term}: {seconds} s ({share} of the step)").format(
                    term=_(TERM_NAMES[term]), seconds=f"{x:.4g}", share=f"{x / c.step_time_s:.1%}"
                )
                for lab, x, c in zip(labels, xs, configs, strict=True)
            ],
            hoverinfo="text",
        )
    ends = [sum(c.time_terms[t] for t in terms) for c in configs]
    fig.add_scatter(
        y=labels,
        x=ends,
        mode="text",
        text=[
            f"  {'+' * overhead_only}{e:.3g} s"
            + (
                " " + _("(step {step} s)").format(step=f"{c.step_time_s:.3g}")
                if overhead_only
                else f", MFU {c.mfu:.0%}"
            )
            for c, e in zip(configs, ends, strict=True)
        ],
        textposition="middle right",
        textfont=dict(size=12),
        showlegend=False,
        hoverinfo="skip",
    )
    head = title or _("Why the fastest win: {model}, the top {n} step times").format(
        model=result.model.name, n=len(configs)
    )
    sub = (
        _("each bar: one configuration's time beyond compute, split into exposed terms (s)")
        if overhead_only
        else _("each bar: one configuration's step time, split into exposed terms (s)")
    )
    height = max(320, 150 + 30 * len(configs)) + 110
    margin = dict(l=230, r=30, t=90, b=110)
    fig.update_layout(
        title=title_layout(head, sub),
        barmode="stack",
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        legend=legend_below(height, margin, 55) | dict(traceorder="normal"),
        xaxis=dict(
            title_text=_("time beyond compute (s)") if overhead_only else _("step time (s)"),
            range=[0, max(ends) * 1.28 or 1.0],
        ),
        yaxis=dict(autorange="reversed", categoryorder="array", categoryarray=labels),
    )
    return fit_layout(fig)
