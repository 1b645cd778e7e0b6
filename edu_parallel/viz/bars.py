"""Bytes each rank sent, measured from the trace, against what the formula says.

:func:`bytes_bars` (matplotlib) and :func:`bytes_bars_plotly` draw one bar per rank, stacked by
phase, from ``trace.sent_bytes(per_phase=True)``, and the formula as horizontal line(s). Bar
heights are bytes; the axis ticks read in B, KiB or MiB. Matplotlib artists carry ``gid``
"bar" and "formula".
"""

from __future__ import annotations

import math
from typing import Any

from ..core.i18n import _
from ..core.phases import phase_label
from ..core.trace import Trace
from ..core.units import format_bytes
from ..plans.naive import naive_sent_bytes_formula
from ..plans.plan import Plan
from ..plans.ring import ring_sent_bytes_formula
from .figure import new_figure
from .fit import fit_layout
from .plotly_figure import Figure
from .style import ALERT, series_color

Formula = float | list[float] | None
ALL_PHASES = "all phases"  # the one series when bytes are not split by phase


def default_formula(trace: Trace) -> tuple[list[float] | None, str]:
    """Per-rank bytes the formula predicts for this trace's concept, and its name."""
    concept, n = trace.meta.get("concept"), trace.world_size
    nbytes = trace.meta.get("nbytes")
    if nbytes is None:
        return None, ""
    if concept == "ring_allreduce":
        return [ring_sent_bytes_formula(n, nbytes)["total"]] * n, "2(N-1)/N \u00b7 D"
    if concept == "naive_allreduce":
        root = Plan.from_text(trace.meta["plan"]).root if trace.meta.get("plan") else 0
        return naive_sent_bytes_formula(n, nbytes, root), _("(N-1)\u00b7D at the root, D elsewhere")
    return None, ""


def _formula(
    trace: Trace, formula: Formula, name: str = "formula"
) -> tuple[list[float] | None, str]:
    n = trace.world_size
    if formula is None:
        return default_formula(trace)
    if isinstance(formula, (int, float)):
        return [float(formula)] * n, name
    values = [float(v) for v in formula]
    if len(values) != n:
        raise ValueError(
            _(
                "formula={formula!r} is not valid: expected a number or a list of {n} numbers"
            ).format(formula=formula, n=n)
        )
    return values, name


def _unit(top: float) -> tuple[float, str]:
    for size, name in ((1024**2, "MiB"), (1024, "KiB")):
        if top >= size:
            return size, name
    return 1, "B"


def _nice_step(top: float, unit: float) -> float:
    raw = max(top / unit / 5, 1e-9)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return step * unit


def _series(trace: Trace, per_phase: bool) -> dict[str, list[int]]:
    if per_phase:
        return dict(trace.sent_bytes(per_phase=True))  # type: ignore[arg-type]
    return {ALL_PHASES: list(trace.sent_bytes())}  # type: ignore[arg-type]


def _series_label(phase: str) -> str:
    return _("all phases") if phase == ALL_PHASES else phase_label(phase)


def bytes_bars(
    trace: Trace,
    formula: Formula = None,
    per_phase: bool = True,
    ax: Any = None,
    *,
    formula_name: str = "formula",
    mark: int | None = None,
) -> Any:
    """Matplotlib Figure: bytes each rank sent (stacked by phase) with the formula line(s);
    ``formula_name`` labels a given formula, and ``mark`` outlines one rank's bar in red (gid
    "mark": the first rank that sent more than its share)."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    n = trace.world_size
    series = _series(trace, per_phase)
    predicted, name = _formula(trace, formula, formula_name)
    if ax is None:
        fig = new_figure(figsize=(max(5.0, 0.55 * n + 3.0), 4.0), layout="constrained")
        ax = fig.add_subplot()
    fig = ax.figure
    bottom = [0] * n
    for i, (phase, values) in enumerate(series.items()):
        ax.bar(
            range(n),
            values,
            bottom=bottom,
            color=series_color(i),
            label=_series_label(phase),
            gid="bar",
            width=0.7,
        )
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    if predicted is not None:
        uniform = len(set(predicted)) == 1
        value = format_bytes(predicted[0])
        if formula_name == "formula":  # a named line says what it is
            shown = _("formula") if name == "formula" else name
            label = (
                _("formula {name} = {value}").format(name=shown, value=value)
                if uniform
                else _("formula {name}").format(name=shown)
            )
        else:
            label = f"{name} = {value}" if uniform else name
        if uniform:
            ax.axhline(predicted[0], color="black", ls="--", lw=1.4, label=label, gid="formula")
        else:
            for r, v in enumerate(predicted):
                ax.hlines(
                    v,
                    r - 0.45,
                    r + 0.45,
                    colors="black",
                    linestyles="--",
                    lw=1.4,
                    label=label if r == 0 else None,
                    gid="formula",
                )
    if mark is not None and 0 <= mark < n:
        ax.bar([mark], [bottom[mark]], width=0.82, fill=False, edgecolor=ALERT, lw=2.5, gid="mark")
    top = max(bottom + (predicted or []) + [1])
    unit, unit_name = _unit(top)
    ax.yaxis.set_major_locator(MultipleLocator(_nice_step(top, unit)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / unit:g} {unit_name}"))
    ax.set_ylim(0, top * 1.4)  # room for the legend above the bars
    ax.set_xticks(range(n), [f"r{r}" for r in range(n)])
    ax.set_xlabel("rank")
    ax.set_ylabel(_("bytes sent ({unit})").format(unit=unit_name))
    size = format_bytes(trace.meta["nbytes"]) if "nbytes" in trace.meta else "?"
    ax.set_title(
        _("{concept}: bytes sent per rank, D = {size}").format(
            concept=trace.meta.get("concept", _("run")), size=size
        ),
        fontsize=11,
    )
    ax.legend(fontsize=8, loc="upper right")
    return fig


def bytes_bars_plotly(trace: Trace, formula: Formula = None, per_phase: bool = True) -> Any:
    """The same chart as a plotly figure (hover shows exact bytes)."""
    n = trace.world_size
    series = _series(trace, per_phase)
    predicted, name = _formula(trace, formula)
    fig = Figure()
    ranks = [f"r{r}" for r in range(n)]
    for i, (phase, values) in enumerate(series.items()):
        fig.add_bar(
            x=ranks,
            y=values,
            name=_series_label(phase),
            marker_color=series_color(i),
            hovertext=[f"{_series_label(phase)}: {v} B ({format_bytes(v)})" for v in values],
            hoverinfo="text",
        )
    if predicted is not None:
        fig.add_scatter(
            x=ranks,
            y=predicted,
            mode="markers",
            name=_("formula {name}").format(name=name),
            marker=dict(symbol="line-ew-open", size=40, color="black", line=dict(width=2)),
            hovertext=[_("formula: {value}").format(value=format_bytes(v)) for v in predicted],
            hoverinfo="text",
        )
    top = max([sum(v) for v in zip(*series.values(), strict=True)] + (predicted or []) + [1])
    unit, unit_name = _unit(top)
    step = _nice_step(top, unit)
    ticks = [i * step for i in range(int(top * 1.15 / step) + 1)]
    fig.update_layout(
        barmode="stack",
        title=_("{concept}: bytes sent per rank").format(
            concept=trace.meta.get("concept", _("run"))
        ),
        xaxis_title="rank",
        yaxis=dict(
            title=_("bytes sent ({unit})").format(unit=unit_name),
            tickvals=ticks,
            ticktext=[f"{t / unit:g} {unit_name}" for t in ticks],
        ),
    )
    return fit_layout(fig)
