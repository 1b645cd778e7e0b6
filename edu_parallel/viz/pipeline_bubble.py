"""Pipeline renderer: the bubble fraction against the number of microbatches, per schedule.

Times pure-Python plans with :func:`~edu_parallel.pipeline_parallel.timing.time_schedule` (no torch)
and draws the GPipe formula ``(P-1)/(M+P-1)`` beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import check_int
from ..core.i18n import _
from ..pipeline_parallel.builders import SCHEDULES, build_schedule
from ..pipeline_parallel.timing import gpipe_bubble, time_schedule
from .fit import fit_layout
from .plotly_figure import Figure
from .style import GRID, series_color

# where a one-line ValueError (core/errors.py) says what it expected, in English and in Chinese
_EXPECTED = (": expected ", "：应为")


def _needs(err: ValueError) -> str:
    """``"needs M >= 4"`` from ``"num_microbatches=2 is not valid: expected M >= 4"``."""
    text = str(err)
    for marker in _EXPECTED:
        if marker in text:
            text = text.split(marker, 1)[-1]
            break
    return _("needs {what}").format(what=text)


@dataclass(frozen=True)
class BubbleCurve:
    """Simulated bubble fractions of one schedule at the supported ``Ms``; ``skipped`` says why
    the others are missing (``{M: reason}``)."""

    schedule: str
    chunks: int
    ms: list[int]
    fractions: list[float]
    skipped: dict[int, str]


def bubble_curves(
    num_ranks: int,
    ms: Iterable[int],
    schedules: Sequence[str] = ("gpipe", "1f1b", "interleaved", "zb-h1"),
    v: int = 2,
    t_f: float = 1.0,
    t_b: float = 2.0,
    t_w: float = 1.0,
) -> list[BubbleCurve]:
    """Time every ``schedule`` at every M with ``time_schedule`` (``v`` chunks for interleaved);
    a combination ``build_schedule`` rejects is skipped with its reason."""
    ms = sorted(set(ms))
    out = []
    for name in schedules:
        if name not in SCHEDULES:
            raise ValueError(
                _("schedules={value!r} is not valid: expected names from {names}").format(
                    value=name, names=", ".join(SCHEDULES)
                )
            )
        chunks = v if name == "interleaved" else 1
        good, fractions, skipped = [], [], {}
        for m in ms:
            try:
                plan = build_schedule(name, num_ranks, m, chunks)
            except ValueError as err:
                skipped[m] = _needs(err)
                continue
            good.append(m)
            fractions.append(time_schedule(plan, t_f, t_b, t_w).bubble_fraction())
        out.append(BubbleCurve(name, chunks, good, fractions, skipped))
    return out


def bubble_vs_microbatches_figure(
    P: int,  # noqa: N803 - the literature's name
    Ms: Iterable[int],  # noqa: N803
    schedules: Sequence[str] = ("gpipe", "1f1b", "interleaved", "zb-h1"),
    v: int = 2,
    t_f: float = 1.0,
    t_b: float = 2.0,
    t_w: float = 1.0,
) -> Any:
    """Plotly: bubble share of rank-time against M for each schedule (simulated with
    ``time_schedule``), with the GPipe formula ``(P-1)/(M+P-1)`` dashed for reference.

    Unsupported (schedule, M) pairs are left out and the legend says which and why. Curve traces
    have ``meta`` ``{"role": "simulated", "schedule", "chunks", "skipped"}``; the formula trace
    ``{"role": "formula"}``.
    """
    ms = sorted({check_int("Ms", m, 1) for m in Ms})
    curves = bubble_curves(P, ms, schedules, v, t_f, t_b, t_w)
    fig = Figure()
    colors = {name: series_color(i) for i, name in enumerate(SCHEDULES)}
    symbols = {"gpipe": "circle", "1f1b": "x", "interleaved": "square", "zb-h1": "diamond"}
    for c in curves:
        name = c.schedule + (f" (v={c.chunks})" if c.schedule == "interleaved" else "")
        if c.skipped:
            reasons = "; ".join(sorted(set(c.skipped.values())))
            which = ", ".join(str(m) for m in c.skipped) if c.ms else _("every M")
            name = _("{name}: skipped M={which} ({reasons})").format(
                name=name, which=which, reasons=reasons
            )
        fig.add_scatter(
            x=c.ms,
            y=c.fractions,
            mode="lines+markers",
            name=name,
            line=dict(color=colors.get(c.schedule), width=2),
            marker=dict(symbol=symbols.get(c.schedule, "circle"), size=8),
            meta={
                "role": "simulated",
                "schedule": c.schedule,
                "chunks": c.chunks,
                "skipped": {str(k): r for k, r in c.skipped.items()},
            },
        )
    fig.add_scatter(  # last: drawn on top of the simulated curves it may coincide with
        x=ms,
        y=[gpipe_bubble(P, m) for m in ms],
        mode="lines",
        name=_("GPipe formula (P-1)/(M+P-1), for reference"),
        line=dict(color="black", dash="dash", width=1.5),
        meta={"role": "formula"},
    )
    log = bool(ms) and ms[-1] / ms[0] >= 16
    fig.update_layout(
        title=dict(
            text=_(
                "Bubble against microbatches, P={p} ranks (simulated with "
                "time_schedule: t_f={t_f}, t_b={t_b}, t_w={t_w})"
            ).format(p=P, t_f=f"{t_f:g}", t_b=f"{t_b:g}", t_w=f"{t_w:g}"),
            x=0.01,
            xanchor="left",
        ),
        xaxis=dict(
            title=_("microbatches M (log scale)") if log else _("microbatches M"),
            type="log" if log else "linear",
            tickvals=ms,
            gridcolor=GRID,
        ),
        yaxis=dict(
            title=_("bubble (idle share of rank-time)"),
            tickformat=".0%",
            rangemode="tozero",
            gridcolor=GRID,
        ),
        plot_bgcolor="white",
        height=560,
        margin=dict(t=60, b=190),
        legend=dict(orientation="v", x=0.0, xanchor="left", y=-0.2, yanchor="top"),
    )
    return fit_layout(fig)
