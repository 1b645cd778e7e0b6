"""Strategy-map renderers: the measured DP / TP / TP+SP / PP / EP table, and what each strategy
splits.

They read the report's data only
(:meth:`edu_parallel.strategy_map.report.StrategyMapReport.to_json_dict`, or the report itself),
never run anything and never import torch; plotly is imported inside.

* :func:`map_table_figure`: a heatmap, one row per (strategy, rank), one column per measured
  quantity (parameter bytes, activation bytes, bytes sent per step, messages); each column is
  coloured relative to its own largest value and every cell shows its number.
* :func:`sent_bars_figure`: bytes each rank sent in one step, stacked by pass (forward, backward,
  gradient sync), grouped by strategy: which pass each strategy's traffic belongs to.
* :func:`split_figure`: for each strategy a rank x parameter-tensor grid coloured by the fraction
  of the tensor the rank holds (1 = a full copy), with the held slice on hover.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _
from .fit import fit_layout
from .plotly_figure import Figure
from .style import DIM_COLORS, PHASE_COLORS, WIDTH

METRICS = (
    ("param_bytes", N_("parameter bytes")),
    ("activation_bytes", N_("activation bytes")),
    ("sent_bytes", N_("bytes sent / step")),
    ("messages", N_("messages / step")),
)
PASS_COLORS = {  # the gradient sync is the data-parallel group's traffic
    "forward": PHASE_COLORS["forward"],
    "backward": PHASE_COLORS["backward"],
    "grad_sync": DIM_COLORS["dp"],
}
PASS_NAMES = {"forward": N_("forward"), "backward": N_("backward"), "grad_sync": N_("grad sync")}


def report_data(report: Any) -> dict[str, Any]:
    """The report as plain data: a ``to_json_dict()`` result, or anything that has the method."""
    data = report.to_json_dict() if hasattr(report, "to_json_dict") else report
    if not isinstance(data, dict) or data.get("concept") != "map" or "runs" not in data:
        raise bad_value(
            "report",
            type(report).__name__,
            _("a StrategyMapReport or its to_json_dict() (concept 'map')"),
        )
    return data


def table_cells(report: Any) -> tuple[list[str], list[str], list[list[float]]]:
    """Row labels ("DP r0"), column labels (English; :func:`map_table_figure` shows them in the
    learner's language) and values of :func:`map_table_figure`."""
    data = report_data(report)
    labels, values = [], []
    for run in data["runs"].values():
        for r, row in enumerate(run["per_rank"]):
            labels.append(f"{run['name']} r{r}")
            values.append([float(row[key]) for key, _ in METRICS])
    return labels, [name for _, name in METRICS], values


def map_table_figure(report: Any, title: str | None = None) -> Any:
    """The measured table as a heatmap coloured per column (plotly)."""
    import plotly.graph_objects as go

    data = report_data(report)
    rows, cols, values = table_cells(data)
    cols = [_(label) for _key, label in METRICS]
    tops = [max((v[j] for v in values), default=0.0) or 1.0 for j in range(len(cols))]
    z = [[v[j] / tops[j] for j in range(len(cols))] for v in values]
    text = [[f"{x:,.0f}" for x in v] for v in values]
    fig = Figure(
        go.Heatmap(
            z=z,
            x=cols,
            y=rows,
            text=text,
            texttemplate="%{text}",
            colorscale="Blues",
            zmin=0,
            zmax=1,
            showscale=False,
            hovertemplate="%{y} · %{x}: %{text}<extra></extra>",
        )
    )
    n = data["world_size"]
    fig.update_layout(
        title=title
        or _(
            "Measured per rank, one training step, N = {n} "
            "(each column coloured relative to its largest value)"
        ).format(n=n),
        yaxis={"autorange": "reversed"},
        height=120 + 26 * len(rows),
    )
    return fit_layout(fig)


def sent_bars_figure(report: Any, title: str | None = None) -> Any:
    """Bytes sent per rank per step, stacked by pass, grouped by strategy (plotly)."""
    import plotly.graph_objects as go

    data = report_data(report)
    x = [[], []]  # multi-category axis: strategy, rank
    by_pass: dict[str, list[float]] = {p: [] for p in PASS_COLORS}
    for run in data["runs"].values():
        for r, row in enumerate(run["per_rank"]):
            x[0].append(run["name"])
            x[1].append(f"r{r}")
            for p in PASS_COLORS:
                by_pass[p].append(float(row["sent_by_pass"].get(p, 0.0)))
    fig = Figure(
        [
            go.Bar(name=_(PASS_NAMES[p]), x=x, y=ys, marker_color=PASS_COLORS[p])
            for p, ys in by_pass.items()
        ]
    )
    fig.update_layout(
        barmode="stack",
        yaxis_title=_("bytes sent by the rank"),
        title=title or _("Bytes sent per step, by pass (from the traces)"),
    )
    return fit_layout(fig)


def split_grid(run: dict[str, Any]) -> tuple[list[str], list[list[float]], list[list[str]]]:
    """Tensor names (model order), ``fraction[rank][tensor]`` held and hover text of one run."""
    names: list[str] = []
    for row in run["per_rank"]:
        names += [t for t in row["holds"] if t not in names]
    frac, hover = [], []
    for r, row in enumerate(run["per_rank"]):
        h = row["holds"]
        frac.append([h[t]["fraction"] if t in h else 0.0 for t in names])
        hover.append(
            [
                (
                    _("rank {rank} holds {tensor} of shape {shape}").format(
                        rank=r,
                        tensor=t + "".join(f"[{lo}:{hi}]" for lo, hi in h[t]["index"]),
                        shape=tuple(h[t]["shape"]),
                    )
                    if t in h
                    else _("rank {rank}: no {tensor}").format(rank=r, tensor=t)
                )
                for t in names
            ]
        )
    return names, frac, hover


def split_figure(report: Any, title: str | None = None) -> Any:
    """What each strategy splits: per strategy, the fraction of every parameter tensor each rank
    holds."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    data = report_data(report)
    runs = list(data["runs"].values())
    subtitles = [
        _("{strategy} ({model} model)").format(strategy=run["name"], model=run["model"])
        for run in runs
    ]
    fig = make_subplots(
        figure=Figure(), rows=len(runs), cols=1, subplot_titles=subtitles, vertical_spacing=0.12
    )
    for i, run in enumerate(runs, start=1):
        names, frac, hover = split_grid(run)
        fig.add_trace(
            go.Heatmap(
                z=frac,
                x=names,
                y=[f"r{r}" for r in range(len(frac))],
                customdata=hover,
                zmin=0,
                zmax=1,
                colorscale="Greens",
                showscale=i == 1,
                colorbar={"title": _("fraction held")},
                hovertemplate="%{customdata}: %{z:.2f}<extra></extra>",
            ),
            row=i,
            col=1,
        )
        fig.update_yaxes(autorange="reversed", row=i, col=1)
        fig.update_xaxes(tickangle=45, tickfont={"size": 11}, row=i, col=1)
    fig.update_layout(
        title=title or _("What each strategy splits: fraction of each parameter tensor per rank"),
        height=280 * len(runs),
        width=WIDTH,
    )
    return fit_layout(fig)
