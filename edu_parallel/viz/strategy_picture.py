"""One strategy of the strategy map in one picture: who holds which weights, which data, and what
travels, read from the recorded report (:func:`strategy_figure`).

One row per rank in each of three panels:

* weights: the share of each parameter tensor the rank holds, from its ``holds`` marks (1: a whole
  copy, 0.25: a quarter of it, blank: none of it);
* data: the tokens of the step's batch (sequence x position) the rank computes on, from its
  ``data`` mark, with a white line between microbatches (PP); for EP also the other ranks' tokens
  that the rank's expert computes in the first block (the mark's ``routed_to``: where the router
  sent each token);
* what travels: the bytes the rank sends in the step (ring volume for an all-reduce, as the
  table counts them), stacked by pass, the calls of each pass on hover.

It reads the report's data only
(:meth:`edu_parallel.strategy_map.report.StrategyMapReport.to_json_dict`, or the report itself),
never runs anything and never imports torch; plotly is imported inside.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value
from ..core.i18n import _
from .fit import fit_layout
from .plotly_figure import Figure
from .strategy_map import PASS_COLORS, PASS_NAMES, report_data, split_grid
from .style import DIM_COLORS, EMPTY, FONT_PX, WHITE, WIDTH, tint

OWN, ROUTED = 1, 2  # data codes: the rank's own input; another rank's token for its expert
DIMS = {"dp": "dp", "tp": "tp", "tp-sp": "tp", "pp": "pp", "ep": "ep"}  # -> DIM_COLORS
ROW_PX = 34  # one rank's row in each panel
GRID = {"zmin": 0, "showscale": False, "xgap": 1, "ygap": 1}  # both heatmaps: cells apart, no bar


def op_label(op: str) -> str:
    """A trace op as the learner reads it: ``isend`` is a send, ``_single`` is dropped."""
    return "send" if op == "isend" else op.removesuffix("_single")


def data_grid(run: dict[str, Any], batch: int, seq: int) -> tuple[list[list[int]], list[list[str]]]:
    """``code[rank][token]`` and hover text of one run; token ``b * seq + s`` is position ``s`` of
    sequence ``b``. Codes: 0 none, :data:`OWN` its input, :data:`ROUTED` another rank's token its
    expert computes in the first block."""
    marks = [row["data"] for row in run["per_rank"]]
    owner = {}  # token -> (rank, index among that rank's tokens): EP's routed_to is per own token
    for r, d in enumerate(marks):
        (b0, b1), (s0, s1) = d["rows"], d["seq"]
        own = [b * seq + s for b in range(b0, b1) for s in range(s0, s1)]
        owner.update({t: (r, i) for i, t in enumerate(own)})
    codes, hover = [], []
    for r, d in enumerate(marks):
        (b0, b1), (s0, s1) = d["rows"], d["seq"]
        m = d.get("microbatches", 1)
        row, text = [], []
        for t in range(batch * seq):
            b, s = divmod(t, seq)
            src, i = owner.get(t, (None, 0))
            routed = src is not None and "routed_to" in marks[src]
            if b0 <= b < b1 and s0 <= s < s1:
                row.append(OWN)
                if m > 1:
                    text.append(
                        _(
                            "rank {rank} computes sequence {b}, token {s}: microbatch {m} of"
                            " {count}"
                        ).format(rank=r, b=b, s=s, m=b // (batch // m), count=m)
                    )
                else:
                    text.append(
                        _("rank {rank} computes sequence {b}, token {s}").format(rank=r, b=b, s=s)
                    )
            elif routed and r in marks[src]["routed_to"][i]:
                row.append(ROUTED)
                text.append(
                    _(
                        "rank {rank}'s expert computes sequence {b}, token {s}, sent by rank {src}"
                        " (first block)"
                    ).format(rank=r, b=b, s=s, src=src)
                )
            else:
                row.append(0)
                text.append(
                    _("rank {rank} does not compute sequence {b}, token {s}").format(
                        rank=r, b=b, s=s
                    )
                )
        codes.append(row)
        hover.append(text)
    return codes, hover


def sent_by_pass(run: dict[str, Any]) -> dict[str, tuple[list[float], list[str]]]:
    """Pass -> (bytes each rank sent in it, the calls behind them), for the passes with traffic."""
    out = {}
    for p in PASS_COLORS:
        sent = [float(row["sent_by_pass"].get(p, 0.0)) for row in run["per_rank"]]
        if any(sent):
            calls = [
                ", ".join(
                    f"{op_label(op)} ×{k}" for op, k in row["calls_by_pass"].get(p, {}).items()
                )
                for row in run["per_rank"]
            ]
            out[p] = (sent, calls)
    return out


def strategy_figure(report: Any, strategy: str, title: str | None = None) -> Any:
    """Who holds which weights, which data, and what travels, for ``strategy`` of the report
    ("dp", "tp", "tp-sp", "pp" or "ep"), one row per rank (plotly)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    data = report_data(report)
    if strategy not in data["runs"]:
        valid = _("one of the report's strategies: {names}").format(names=", ".join(data["runs"]))
        raise bad_value("strategy", strategy, valid)
    run, cfg = data["runs"][strategy], data["config"]
    color = DIM_COLORS[DIMS[strategy]]
    ranks = [f"r{r}" for r in range(len(run["per_rank"]))]
    names, frac, held = split_grid(run)
    codes, seen = data_grid(run, cfg["batch"], cfg["seq"])
    microbatches = max(row["data"].get("microbatches", 1) for row in run["per_rank"])
    if any(ROUTED in row for row in codes):
        data_title = _(  # two lines: one is wider than its panel
            "data: the tokens it computes on<br>(light: other ranks' tokens for its expert)"
        )
    elif microbatches > 1:
        data_title = _("data: the tokens it computes on, {m} microbatches one after another")
        data_title = data_title.format(m=microbatches)
    else:
        data_title = _("data: the tokens it computes on (sequence × position)")
    fig = make_subplots(
        figure=Figure(),
        rows=2,
        cols=2,
        specs=[[{"colspan": 2}, None], [{}, {}]],
        column_widths=[0.6, 0.4],
        horizontal_spacing=0.1,
        vertical_spacing=0.36,
        subplot_titles=[
            _("weights: the share of each parameter tensor it holds"),
            data_title,
            _("what travels: bytes it sends in the step"),
        ],
    )
    fig.add_trace(
        go.Heatmap(
            z=frac,
            x=names,
            y=ranks,
            text=[[f"{f:.2g}" if f else "" for f in row] for row in frac],
            texttemplate="%{text}",
            textfont={"size": FONT_PX - 1},
            customdata=held,
            zmax=1,
            colorscale=[[0, WHITE], [1, color]],
            hovertemplate="%{customdata}: %{z:.2f}<extra></extra>",
            **GRID,
        ),
        row=1,
        col=1,
    )
    seq = cfg["seq"]
    fig.add_trace(
        go.Heatmap(
            z=codes,
            y=ranks,
            customdata=seen,
            zmax=ROUTED,
            colorscale=[
                [0, EMPTY],
                [0.25, EMPTY],
                [0.25, color],
                [0.75, color],
                [0.75, tint(color, 0.6)],
                [1, tint(color, 0.6)],
            ],
            hovertemplate="%{customdata}<extra></extra>",
            **GRID,
        ),
        row=2,
        col=1,
    )
    per_mb = cfg["batch"] // microbatches * seq  # tokens of one microbatch
    for k in range(1, microbatches):  # a white line between one microbatch and the next
        fig.add_vline(x=k * per_mb - 0.5, line_color=WHITE, line_width=4, row=2, col=1)
    centres = [b * seq + (seq - 1) / 2 for b in range(cfg["batch"])]
    fig.update_xaxes(
        tickvals=centres,
        ticktext=[str(b) for b in range(cfg["batch"])],
        title_text=_("sequence"),
        row=2,
        col=1,
    )
    for p, (sent, calls) in sent_by_pass(run).items():
        fig.add_trace(
            go.Bar(
                name=_(PASS_NAMES[p]),
                x=sent,
                y=ranks,
                orientation="h",
                marker_color=PASS_COLORS[p],
                showlegend=True,  # also with one pass: the legend names it
                customdata=calls,
                hovertemplate="%{y} · %{fullData.name}: %{x:,.0f} B (%{customdata})<extra></extra>",
            ),
            row=2,
            col=2,
        )
    fig.update_xaxes(title_text=_("bytes"), rangemode="tozero", row=2, col=2)
    fig.update_xaxes(tickangle=45, tickfont={"size": FONT_PX - 1}, row=1, col=1)
    fig.update_yaxes(autorange="reversed")
    height = 150 + 2 * ROW_PX * len(ranks) + 240
    fig.update_layout(
        title=title
        or _("{strategy} on {n} ranks: what each rank holds, computes on and sends").format(
            strategy=run["name"], n=data["world_size"]
        ),
        barmode="stack",
        height=height,
        width=WIDTH,
        legend={
            "orientation": "h",
            "x": 0.62,
            "y": -0.22,
            "yanchor": "top",
            "traceorder": "normal",
        },
        margin={"b": 90},
    )
    return fit_layout(fig)
