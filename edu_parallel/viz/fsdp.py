"""FSDP2 against ZeRO-3: which collective, for which unit, in which pass, in issue order.

:func:`collective_sequence` draws the ``collectives`` of a
:class:`~edu_parallel.zero.fsdp_report.FsdpReport` (or of its ``to_json_dict()``) as two
panels side by side: x = the position of the collective in the rank's issue order within one step, y
= the unit whose parameters it moves (ZeRO-3: the whole flat model; FSDP2: one ``fully_shard``-ed
module, PyTorch ``fully_shard`` docs), colour = the op, shaded bands = the pass, a thick outline =
issued early as a prefetch (backward prefetch, designed for FSDP1: Zhao et al. 2023,
arXiv 2304.11277, §3.4). :func:`gathered_memory_figure` replays the gathered-parameter memory
events of each run. :func:`comparison_rows` is the table next to it:
collectives per step (the latency term), bytes sent per rank per step, ratio to DP, peak
all-gathered bytes.

Nothing here imports torch; plotly is imported inside :func:`collective_sequence`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import bad_value
from ..core.i18n import _
from .fit import fit_layout
from .plotly_figure import Figure
from .style import MUTED, OP_COLORS, PANEL, PHASE_COLORS, WIDTH, tint

FSDP_OPS = ("all_gather", "reduce_scatter", "all_reduce")  # the colour keys of its collectives
# the passes as pale bands behind the markers (the reduction of gradients: all-reduce's colour)
PASS_COLORS = {
    "forward": tint(PHASE_COLORS["forward"], 0.87),
    "backward": tint(PHASE_COLORS["backward"], 0.87),
    "reduce_grads": tint(OP_COLORS["all_reduce"], 0.87),
    "optimizer": tint(PHASE_COLORS["optimizer"], 0.87),
}
PANELS = (("zero3", "ZeRO-3 (edu_parallel.zero.stages)"), ("fsdp", "FSDP2 (fully_shard)"))


def op_family(op: str) -> str:
    """``"all_gather_single"`` -> ``"all_gather"``: the colour key of an op."""
    return next((k for k in FSDP_OPS if op.startswith(k)), op)


def unit_label(unit: str) -> str:
    """FSDP's module path ``"2"`` -> ``"model[2]"``; ``"root"`` and ``"whole model"`` unchanged."""
    return f"model[{unit}]" if unit.isdigit() else unit


@dataclass
class SequencePoint:
    """One collective as drawn: ``x`` = issue position within the step (0-based)."""

    x: int
    unit: str
    op: str
    phase: str
    prefetch: bool
    nbytes: int
    sent_bytes: float


def _collectives(report: Any) -> Mapping[str, list[dict[str, Any]]]:
    data = (
        report.get("collectives")
        if isinstance(report, Mapping)
        else getattr(report, "collectives", None)
    )
    if not isinstance(data, Mapping) or not all(k in data for k, _name in PANELS):
        raise bad_value(
            "report",
            type(report).__name__,
            _("an FsdpReport or its to_json_dict() with collectives for 'zero3' and 'fsdp'"),
        )
    return data


def sequence_points(report: Any, step: int = 1) -> dict[str, list[SequencePoint]]:
    """``{"zero3": points, "fsdp": points}`` of rank 0's collectives in ``step``, in issue order."""
    data = _collectives(report)
    steps = sorted({row["step"] for rows in data.values() for row in rows})
    if step not in steps:
        raise bad_value("step", step, _("one of the recorded steps {steps}").format(steps=steps))
    out = {}
    for key, _name in PANELS:
        rows = [row for row in data[key] if row["step"] == step]
        out[key] = [
            SequencePoint(
                i,
                unit_label(row["unit"]),
                op_family(row["op"]),
                row["pass"] or "-",
                bool(row["prefetch"]),
                int(row["nbytes"]),
                float(row["sent_bytes"]),
            )
            for i, row in enumerate(rows)
        ]
    return out


def _bands(points: list[SequencePoint]) -> list[tuple[str, int, int]]:
    """Contiguous runs of one pass: (pass, first x, last x)."""
    bands: list[tuple[str, int, int]] = []
    for p in points:
        if bands and bands[-1][0] == p.phase:
            bands[-1] = (p.phase, bands[-1][1], p.x)
        else:
            bands.append((p.phase, p.x, p.x))
    return bands


BAND_LINE_PX = 15  # one line of a pass's name above a panel


def collective_sequence(report: Any, step: int = 1, title: str | None = None) -> Any:
    """Plotly figure: ZeRO-3 and FSDP2 collectives of one step side by side (see module doc)."""
    from plotly.subplots import make_subplots

    points = sequence_points(report, step)
    fig = make_subplots(
        figure=Figure(),
        rows=1,
        cols=2,
        subplot_titles=[name for _key, name in PANELS],
        column_widths=[0.3, 0.7],
        horizontal_spacing=0.12,
    )
    shown: set[str] = set()
    for col, (key, _name) in enumerate(PANELS, start=1):
        pts = points[key]
        for op in dict.fromkeys(p.op for p in pts):
            mine = [p for p in pts if p.op == op]
            fig.add_scatter(
                x=[p.x for p in mine],
                y=[p.unit for p in mine],
                mode="markers+text",
                name=op,
                legendgroup=op,
                showlegend=op not in shown,
                row=1,
                col=col,
                text=[f"{p.sent_bytes:,.0f} B" for p in mine],
                textposition="bottom center",
                marker=dict(
                    symbol="square",
                    size=26,
                    color=OP_COLORS.get(op, MUTED),
                    line=dict(color="black", width=[4 if p.prefetch else 0 for p in mine]),
                ),
                hovertext=[
                    (
                        _(
                            "#{x} {op} of {unit} in {phase}: output {nbytes} B, "
                            "{sent} B sent (prefetch)"
                        )
                        if p.prefetch
                        else _("#{x} {op} of {unit} in {phase}: output {nbytes} B, {sent} B sent")
                    ).format(
                        x=p.x,
                        op=p.op,
                        unit=p.unit,
                        phase=p.phase,
                        nbytes=p.nbytes,
                        sent=f"{p.sent_bytes:,.0f}",
                    )
                    for p in mine
                ],
                hoverinfo="text",
            )
            shown.add(op)
        # after the markers: plotly drops shapes of a subplot that has no trace yet
        for k, (phase, x0, x1) in enumerate(_bands(pts)):
            fig.add_vrect(
                x0=x0 - 0.5,
                x1=x1 + 0.5,
                fillcolor=PASS_COLORS.get(phase, PANEL),
                line_width=0,
                layer="below",
                row=1,
                col=col,
                annotation_text=phase,
                # above the panel, clear of its markers; every other one a line higher, so a
                # narrow pass's name (reduce_grads after backward) does not run into the next
                annotation_position="top left",
                annotation_yanchor="bottom",
                annotation_yshift=BAND_LINE_PX * (k % 2),
            )
        units = list(dict.fromkeys(p.unit for p in pts))
        fig.update_yaxes(categoryorder="array", categoryarray=units[::-1], row=1, col=col)
        fig.update_xaxes(
            title_text=_("issue order (outlined: prefetch)"),
            dtick=1,
            row=1,
            col=col,
            range=[-0.7, max(len(pts), 1) - 0.3],
        )
    for panel_title in fig.layout.annotations[: len(PANELS)]:  # above the passes' two lines
        panel_title.yshift = 2 * BAND_LINE_PX + 4
    fig.update_layout(
        title=title or _("Collectives of step {step} on rank 0: unit, op, pass").format(step=step),
        height=420,
        margin=dict(t=140),
        width=WIDTH,
        legend_title_text=_("op"),
    )
    return fit_layout(fig)


def comparison_rows(reports: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per run: ``{"name": ..., "collectives_per_step", "sent_per_rank", "vs_dp",
    "peak_gathered"}``; the first report also gives the ZeRO-3 row (all ran on one cluster)."""
    if not reports:
        raise bad_value("reports", reports, _("a non-empty mapping name -> FsdpReport"))

    def get(r: Any, k: str) -> Any:
        return r[k] if isinstance(r, Mapping) else getattr(r, k)

    first = next(iter(reports.values()))
    rows = [
        {
            "name": "ZeRO-3",
            "collectives_per_step": get(first, "collectives_per_step")["zero3"],
            "sent_per_rank": max(get(first, "zero3_per_rank_sent_bytes")),
            "vs_dp": get(first, "zero3_comm_ratio_vs_dp"),
            "peak_gathered": max(get(first, "zero3_per_rank_peak_gathered_bytes")),
        }
    ]
    for name, r in reports.items():
        rows.append(
            {
                "name": name,
                "collectives_per_step": get(r, "collectives_per_step")["fsdp"],
                "sent_per_rank": max(get(r, "per_rank_sent_bytes")),
                "vs_dp": get(r, "comm_ratio_vs_dp"),
                "peak_gathered": max(get(r, "per_rank_peak_gathered_bytes")),
            }
        )
    return rows


def gathered_curves(
    traces: Mapping[str, Any], rank: int = 0, step: int = 1
) -> dict[str, list[tuple[str, int]]]:
    """``{name: [(phase, bytes gathered after the event), ...]}``: replay of ``rank``'s
    ``gathered_params`` memory events in ``step`` of each trace, starting from 0."""
    out = {}
    for name, trace in traces.items():
        level, curve = 0, [("start", 0)]
        events = [
            e
            for e in trace.events
            if e.kind == "memory"
            and e.rank == rank
            and e.step == step
            and (e.attrs or {}).get("category") == "gathered_params"
        ]
        for e in sorted(events, key=lambda e: e.start):
            level += e.nbytes
            curve.append((e.phase or "-", level))
        if len(curve) == 1:
            raise bad_value(
                f"traces[{name!r}]",
                _("no gathered_params events of rank {rank} in step {step}").format(
                    rank=rank, step=step
                ),
                _("a ZeRO-3 or FSDP trace (their gathers are recorded as memory events)"),
            )
        out[name] = curve
    return out


def gathered_memory_figure(
    traces: Mapping[str, Any], rank: int = 0, step: int = 1, title: str | None = None
) -> Any:
    """Unsharded parameter bytes alive on ``rank`` over one step, one row per run (shared axes): the
    peak is the largest unit (plus a prefetched one) for FSDP, the whole model for ZeRO-3."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    curves = gathered_curves(traces, rank, step)
    titles = [
        _("{name}: peak {nbytes} B").format(name=name, nbytes=f"{max(b for _p, b in c):,}")
        for name, c in curves.items()
    ]
    fig = make_subplots(
        figure=Figure(),
        rows=len(curves),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=titles,
    )
    for row, (name, curve) in enumerate(curves.items(), start=1):
        fig.add_trace(
            go.Scatter(
                x=list(range(len(curve))),
                y=[b for _p, b in curve],
                mode="lines+markers",
                name=name,
                line_shape="hv",
                customdata=[p for p, _b in curve],
                showlegend=False,
                hovertemplate=_("%{{customdata}}: %{{y:,}} B gathered").format()
                + "<extra>"
                + name
                + "</extra>",
            ),
            row=row,
            col=1,
        )
        fig.update_yaxes(title_text=_("bytes"), matches="y", row=row, col=1)  # one scale for all
    fig.update_xaxes(
        title_text=_("gather / release, in order (forward, then backward)"),
        row=len(curves),
        col=1,
    )
    fig.update_layout(
        title=title
        or _("Gathered (unsharded) parameter bytes on rank {rank}, step {step}").format(
            rank=rank, step=step
        ),
        height=110 + 150 * len(curves),
    )
    return fit_layout(fig)
