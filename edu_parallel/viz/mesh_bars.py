"""A 3D run's numbers per rank as bars: bytes sent by group type against the planner, and memory.

Both read :meth:`edu_parallel.parallel_3d.report.Report3D.to_json_dict` (or the report itself),
run nothing and import plotly inside:

* :func:`group_bytes_figure`: the bytes each rank sent in one step, stacked by the group type they
  travelled in (TP, PP, DP, EP; :mod:`edu_parallel.parallel_3d.measure`), with the planner's
  prediction (:func:`edu_parallel.planner.traffic.group_bytes_per_rank`) as a tick at the top of
  each predicted segment: where a tick sits on its segment's top, measurement and model agree;
* :func:`memory_figure`: each rank's parameter, gradient and optimizer bytes and the peak of its
  saved activations, stacked (the model states of the ZeRO paper, Rajbhandari et al. 2020,
  arXiv 1910.02054 §3).
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _
from ..parallel_3d.measure import GROUP_TYPES
from .fit import fit_layout
from .mesh_data import report_dict
from .plotly_figure import Figure
from .style import DIM_COLORS, INK, MEMORY_COLORS, WIDTH

MEMORY_PARTS = (
    ("param_bytes", N_("parameters"), MEMORY_COLORS["parameters"]),
    ("grad_bytes", N_("gradients"), MEMORY_COLORS["gradients"]),
    ("optimizer_bytes", N_("optimizer (Adam m, v)"), MEMORY_COLORS["optimizer"]),
    ("activation_bytes", N_("activations (peak saved)"), MEMORY_COLORS["activations"]),
)


def _ranks(data: dict[str, Any]) -> list[str]:
    return [f"r{r} ({c['pp']},{c['dp']},{c['tp']})" for r, c in enumerate(data["per_rank_coords"])]


def _size(n: int) -> dict[str, Any]:
    return {"width": min(WIDTH, 360 + 60 * n), "height": 460}


def group_bytes_figure(report: Any, title: str | None = None) -> Any:
    """Bytes each rank sent in one step, stacked by group type; the planner's prediction as ticks
    (none for an MoE run, which the planner does not predict)."""
    import plotly.graph_objects as go

    data = report_dict(report, ("per_rank_coords", "predicted_sent_bytes_by_group"))
    x, sent = _ranks(data), data["per_rank_sent_bytes_by_group"]
    types = [k for k in GROUP_TYPES if any(row.get(k, 0) for row in sent)]
    fig = Figure(
        [
            go.Bar(
                name=k.upper(),
                x=x,
                y=[row.get(k, 0.0) for row in sent],
                marker_color=DIM_COLORS[k],
                hovertemplate=_("%{{x}}: %{{y:,.0f}} B in {dim}").format(dim=k.upper())
                + "<extra></extra>",
            )
            for k in types
        ]
    )
    predicted = data["predicted_sent_bytes_by_group"]
    if predicted is not None:
        below = [0.0] * len(x)
        for k in types:
            values = [p.get(k, 0.0) for p in predicted]
            below = [b + v for b, v in zip(below, values, strict=True)]
            fig.add_trace(
                go.Scatter(
                    name=_("{dim} planned").format(dim=k.upper()),
                    x=x,
                    y=below,
                    customdata=values,
                    mode="markers",
                    marker={"symbol": "line-ew-open", "size": 30, "line": {"width": 3}}
                    | {"color": INK},
                    hovertemplate=_("%{{x}}: planner says %{{customdata:,.0f}} B in {dim}").format(
                        dim=k.upper()
                    )
                    + "<extra></extra>",
                    showlegend=k == types[0],
                    legendgroup="planned",
                )
            )
        fig.data[len(types)].name = _("planner (top of each segment)")
    fig.update_layout(
        barmode="stack",
        title=title
        or _("Bytes each rank sent in one step of {layout}, by group").format(
            layout=data.get("layout", "")
        ),
        yaxis_title=_("bytes sent"),
        xaxis_title=_("rank (pp, dp, tp)"),
        **_size(len(x)),
    )
    return fit_layout(fig)


def memory_figure(report: Any, title: str | None = None) -> Any:
    """Each rank's model-state bytes and peak activation bytes, stacked (plotly)."""
    import plotly.graph_objects as go

    data = report_dict(report, ("per_rank_coords", "per_rank_model_state_bytes"))
    x, states = _ranks(data), data["per_rank_model_state_bytes"]
    acts = data.get("per_rank_activation_bytes")
    if acts is None or len(acts) != len(x):
        raise bad_value("report", "no per_rank_activation_bytes", _("one activation peak per rank"))
    rows = [{**s, "activation_bytes": a} for s, a in zip(states, acts, strict=True)]
    fig = Figure(
        [
            go.Bar(
                name=_(name),
                x=x,
                y=[row[key] for row in rows],
                marker_color=color,
                hovertemplate=_("%{{x}}: %{{y:,.0f}} B of {part}").format(part=_(name))
                + "<extra></extra>",
            )
            for key, name, color in MEMORY_PARTS
        ]
    )
    fig.update_layout(
        barmode="stack",
        title=title
        or _("Memory per rank in one step of {layout}").format(layout=data.get("layout", "")),
        yaxis_title=_("bytes"),
        xaxis_title=_("rank (pp, dp, tp)"),
        **_size(len(x)),
    )
    return fit_layout(fig)
