"""Gradient compression (lesson 13), drawn from the tables of runs on the ranks.

* :func:`curves_figure`: held-out accuracy (or a loss) of several compressors against training
  steps and, beside it, against the megabytes each rank sent: the same curve costs another
  amount of wire. The task's target is a dashed line. Input: ``CompressReport.curve()`` tables,
  concatenated.
* :func:`residual_figure`: the norm of the error-feedback residual per step: bounded when the
  feedback works, so the dropped mass is re-sent rather than lost.
* :func:`bytes_by_n_figure`: bytes per rank per step against ``N`` (``bytes_by_world_size``):
  all-gather methods grow with ``N``, all-reduce ones stay below twice their buffer.
* :func:`whatif_figure`: the step time of a large model per link and method (``what_if``),
  compute, compression and exposed communication stacked.
"""

from __future__ import annotations

import math
from typing import Any

from ..compression.config import METHODS
from ..core.errors import bad_value
from ..core.i18n import N_, _
from .fit import fit_layout
from .plotly_figure import Figure
from .style import (
    COMMUNICATION,
    COMPUTE,
    FONT,
    MUTED,
    ORANGE,
    WIDTH,
    legend_below,
    series_color,
    title_layout,
)

# one color per method in every figure of the lesson; a compressor without error feedback dotted
METHOD_COLORS = {m: series_color(i) for i, m in enumerate(METHODS)}
LOSSY = ("topk", "randk", "sign", "powersgd")
CURVE_COLUMNS = ("step", "label", "loss", "heldout_loss", "accuracy", "sent_MB", "residual_norm")
Y_TITLES = {  # translated where shown: _(Y_TITLES[y])
    "accuracy": N_("held-out accuracy"),
    "heldout_loss": N_("held-out loss"),
    "loss": N_("training loss (mean over ranks)"),
}
_CURVES_TITLES = {  # Y_TITLES[y].capitalize() + " against steps and against bytes"
    "accuracy": N_("Held-out accuracy against steps and against bytes"),
    "heldout_loss": N_("Held-out loss against steps and against bytes"),
    "loss": N_("Training loss (mean over ranks) against steps and against bytes"),
}
_WHATIF_PARTS = (
    (N_("compute (forward + backward)"), "compute_s", COMPUTE),
    (N_("compression"), "compress_s", ORANGE),
    (N_("communication not hidden by backward"), "exposed_s", COMMUNICATION),
)


def _need(df: Any, columns: tuple[str, ...], what: str) -> None:
    cols = list(getattr(df, "columns", []))
    if getattr(df, "empty", True) or any(c not in cols for c in columns):
        raise bad_value(
            "df", cols, _("{what} with columns {columns}").format(what=what, columns=list(columns))
        )


def _labels(df: Any) -> list[str]:
    return list(dict.fromkeys(df["label"]))


def line_style(label: str, i: int) -> dict[str, Any]:
    """The method's color (by the label's first word), dotted without error feedback."""
    method = label.split()[0]
    dash = "dot" if method in LOSSY and not label.endswith("+ EF") else "solid"
    return dict(color=METHOD_COLORS.get(method, series_color(i)), width=2, dash=dash)


def log_ticks(values: Any) -> list[float]:
    """Tick values for a log axis over the positive ``values``: 1, 2, 5 per decade over at most
    three decades, else one per decade. Plotly's own log ticks label 2, 3, ... 9 in small type."""
    positive = [float(v) for v in values if v > 0]
    if not positive:
        return []
    first = math.floor(math.log10(min(positive)))
    last = math.ceil(math.log10(max(positive)))
    steps = (1, 2, 5) if last - first <= 3 else (1,)
    return [m * 10.0**e for e in range(first, last + 1) for m in steps]


def curves_figure(
    curves: Any, y: str = "accuracy", target: float | None = None, title: str | None = None
) -> Any:
    """``y`` against steps (left) and against MB sent per rank (right), one line per run."""
    from plotly.subplots import make_subplots

    _need(curves, CURVE_COLUMNS, _("CompressReport.curve() tables, concatenated"))
    if y not in Y_TITLES:
        raise bad_value("y", y, _("one of {options}").format(options=", ".join(Y_TITLES)))
    fig = make_subplots(figure=Figure(), rows=1, cols=2, horizontal_spacing=0.1)
    for i, label in enumerate(_labels(curves)):
        part = curves[curves["label"] == label]
        for col, x in ((1, "step"), (2, "sent_MB")):
            fig.add_scatter(
                x=list(part[x]),
                y=list(part[y]),
                mode="lines",
                name=label,
                legendgroup=label,
                showlegend=col == 1,
                line=line_style(label, i),
                hovertemplate=f"<b>{label}</b><br>"
                + _("step %{{customdata[0]}}<br>MB sent: %{{customdata[1]:.3f}}").format()
                + f"<br>{_(Y_TITLES[y])}: %{{y:.3f}}<extra></extra>",
                customdata=list(zip(part["step"], part["sent_MB"], strict=True)),
                row=1,
                col=col,
            )
    if target is not None:
        for col in (1, 2):
            fig.add_hline(y=target, line=dict(dash="dash", color=MUTED), row=1, col=col)
        fig.add_annotation(
            x=0,
            xref="x domain",
            y=target,
            yref="y",
            text=_("target {value}").format(
                value=f"{target:.0%}" if y == "accuracy" else f"{target:g}"
            ),
            showarrow=False,
            yanchor="bottom",
            xanchor="left",
            font=dict(size=11, color=MUTED),
        )
    fig.update_xaxes(title_text=_("training step"), row=1, col=1)
    fig.update_xaxes(
        title_text=_("MB sent per rank (cumulative, from the trace; log scale)"),
        type="log",
        tickvals=log_ticks(curves["sent_MB"]),
        row=1,
        col=2,
    )
    fig.update_yaxes(title_text=_(Y_TITLES[y]), row=1, col=1)
    height, margin = 460, dict(l=70, r=20, t=80, b=130)
    fig.update_layout(
        title=title_layout(title or _(_CURVES_TITLES[y])),
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        legend=legend_below(height, margin, 60),
    )
    return fit_layout(fig)


def residual_figure(curves: Any, title: str | None = None) -> Any:
    """The residual's norm per step, one line per run (error-feedback runs keep it)."""
    _need(curves, CURVE_COLUMNS, _("CompressReport.curve() tables, concatenated"))
    fig = Figure()
    for i, label in enumerate(_labels(curves)):
        part = curves[curves["label"] == label]
        fig.add_scatter(
            x=list(part["step"]),
            y=list(part["residual_norm"]),
            mode="lines",
            name=label,
            line=line_style(label, i),
            hovertemplate=f"<b>{label}</b><br>"
            + _("step %{{x}}").format()
            + "<br>||e||: %{y:.3f}<extra></extra>",
        )
    height, margin = 400, dict(l=70, r=20, t=80, b=120)
    fig.update_layout(
        title=title_layout(
            title or _("What compression dropped, per step"),
            _("with error feedback: the residual e kept on rank 0; without: what this step lost"),
        ),
        xaxis_title=_("training step"),
        yaxis_title=_("||e|| (rank 0)"),
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        legend=legend_below(height, margin, 60),
    )
    return fit_layout(fig)


def bytes_by_n_figure(df: Any, title: str | None = None) -> Any:
    """Bytes per rank per step against ``N``: counted (markers) and formula (lines)."""
    _need(df, ("N", "method", "collective", "sent B/step", "formula B/step"), _("a table"))
    fig = Figure()
    for i, method in enumerate(dict.fromkeys(df["method"])):
        part = df[df["method"] == method].sort_values("N")
        color = line_style(method, i)["color"]
        kind = part["collective"].iloc[0]
        fig.add_scatter(
            x=list(part["N"]),
            y=list(part["formula B/step"]),
            mode="lines",
            name=_("{method} ({collective}), formula").format(method=method, collective=kind),
            line=dict(color=color, dash="dot"),
            legendgroup=method,
            hoverinfo="skip",
        )
        fig.add_scatter(
            x=list(part["N"]),
            y=list(part["sent B/step"]),
            mode="markers",
            name=_("{method}, counted on the ranks").format(method=method),
            marker=dict(color=color, size=10),
            legendgroup=method,
            hovertemplate=f"<b>{method}</b><br>N=%{{x}}<br>"
            + _("%{{y:,.0f}} B per rank").format()
            + "<extra></extra>",
        )
    height, margin = 460, dict(l=80, r=20, t=80, b=150)
    fig.update_layout(
        title=title_layout(
            title or _("Bytes each rank sends per step, against the number of ranks"),
            _("all-gather (top-k, sign): every rank receives every other rank's piece"),
        ),
        xaxis=dict(title=_("ranks N"), type="log", tickvals=sorted(set(df["N"]))),
        yaxis=dict(
            title=_("bytes per rank per step"),
            type="log",
            tickvals=log_ticks([*df["sent B/step"], *df["formula B/step"]]),
        ),
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        legend=legend_below(height, margin, 60),
    )
    return fit_layout(fig)


def whatif_figure(df: Any, title: str | None = None) -> Any:
    """One panel per link: compute, compression and exposed communication stacked per method
    (ms, each panel its own scale), the speed-up over no compression on top of each bar."""
    from plotly.subplots import make_subplots

    _need(df, ("link", "method", "comm_s", "compute_s", "compress_s", "step_s", "speedup"), _("a"))
    links = list(dict.fromkeys(df["link"]))
    fig = make_subplots(
        figure=Figure(), rows=1, cols=len(links), subplot_titles=links, horizontal_spacing=0.07
    )
    parts = [(_(name), key, color) for name, key, color in _WHATIF_PARTS]
    for col, link in enumerate(links, start=1):
        part = df[df["link"] == link]
        exposed = part["step_s"] - part["compute_s"] - part["compress_s"]
        values = {"compute_s": part["compute_s"], "compress_s": part["compress_s"]}
        values["exposed_s"] = exposed
        for name, key, color in parts:
            fig.add_bar(
                x=list(part["method"]),
                y=[v * 1e3 for v in values[key]],
                name=name,
                legendgroup=name,
                showlegend=col == 1,
                marker_color=color,
                hovertemplate=f"{link}, %{{x}}<br>{name}: %{{y:.1f}} ms<extra></extra>",
                row=1,
                col=col,
            )
        fig.add_scatter(
            x=list(part["method"]),
            y=[v * 1e3 for v in part["step_s"]],
            mode="text",
            text=[f"{v:.2g}x" for v in part["speedup"]],
            textposition="top center",
            textfont=dict(size=11),
            showlegend=False,
            hoverinfo="skip",
            row=1,
            col=col,
        )
        fig.update_yaxes(range=[0, max(part["step_s"]) * 1e3 * 1.2], row=1, col=col)
    fig.update_yaxes(title_text=_("ms per step (model)"), row=1, col=1)
    # the subtitle ends about 75 px down: the panels' titles (annotations just above each
    # panel) start below it
    height, margin = 530, dict(l=70, r=20, t=120, b=170)
    fig.update_layout(
        barmode="stack",
        title=title_layout(
            title or _("When does compression pay? One step of a large model, per link"),
            _("the label on each bar: speed-up over no compression on that link"),
        ),
        width=WIDTH,
        height=height,
        margin=margin,
        font=FONT,
        legend=legend_below(height, margin, 95),
    )
    fig.update_xaxes(tickangle=-40)
    return fit_layout(fig)
