"""Lesson 13's figures: built from real runs and the formulas, checked without a browser."""

from __future__ import annotations

import pandas as pd
import pytest

from edu_parallel.compression import CompressConfig, Measured, run_compress, what_if
from edu_parallel.compression.config import messages_per_step, wire_bytes_per_step
from edu_parallel.viz import bytes_by_n_figure, curves_figure, residual_figure, whatif_figure
from edu_parallel.viz.compress import log_ticks

pytestmark = pytest.mark.multiprocess


@pytest.fixture(scope="module")
def curves(cluster2):
    runs = [
        run_compress(cluster2, "none", steps=6, compare_torch=False),
        run_compress(cluster2, "topk", steps=6, error_feedback=True, compare_torch=False),
    ]
    return pd.concat([r.curve() for r in runs]), runs


def test_curves_against_steps_and_bytes(curves):
    df, runs = curves
    fig = curves_figure(df, target=0.8)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == 4  # two runs, two panels
    by_name = {(t.name, t.xaxis): t for t in lines}
    topk = by_name[("topk 1% + EF", "x2")]
    assert list(topk.y) == runs[1].accuracies  # the run's numbers, not typed ones
    sent = [sum(runs[1]._sent_per_step()[:s]) / 1e6 for s in range(1, 7)]
    assert list(topk.x) == pytest.approx(sent)
    assert sent[-1] * 1e6 == pytest.approx(6 * runs[1].wire_bytes_per_step)
    assert fig.layout.xaxis2.type == "log" and "trace" in fig.layout.xaxis2.title.text
    # the log axis is labelled 1, 2, 5 per decade in the figure's type (plotly's own minor
    # labels 2, 3, ... 9 are tiny), over the decades the runs span
    ticks = list(fig.layout.xaxis2.tickvals)
    assert ticks[0] <= min(df["sent_MB"]) and max(df["sent_MB"]) <= ticks[-1]
    assert ticks == log_ticks(df["sent_MB"]) and 0.2 in log_ticks([0.1, 9])
    assert log_ticks([1, 1e6]) == [10.0**e for e in range(7)]  # one per decade over many
    assert any(s.y0 == 0.8 for s in fig.layout.shapes)  # the target line
    assert [t.showlegend for t in lines].count(True) == 2  # one legend entry per run
    assert fig.layout.width <= 968  # fits JupyterLab's output area


def test_curves_name_bad_input(curves):
    with pytest.raises(ValueError, match="y='acc' is not valid"):
        curves_figure(curves[0], y="acc")
    with pytest.raises(ValueError, match="df="):
        curves_figure(pd.DataFrame({"step": [1]}))


def test_residual_figure_plots_the_marks(curves):
    df, runs = curves
    fig = residual_figure(df)
    assert [t.name for t in fig.data] == ["none", "topk 1% + EF"]
    assert list(fig.data[1].y) == runs[1].residual_norms and max(runs[1].residual_norms) > 0
    assert set(fig.data[0].y) == {0.0}  # nothing is dropped without compression


def bytes_by_n_table() -> pd.DataFrame:
    """Counted and formula bytes per step for N in 2, 4, 8, fp32 and top-k."""
    rows = []
    for n in (2, 4, 8):
        for m in ("none", "topk"):
            c = CompressConfig(n, m)
            w = wire_bytes_per_step(c)
            kind = "all-gather" if m == "topk" else "all-reduce"
            rows.append(
                {
                    "N": n,
                    "method": c.label,
                    "collective": kind,
                    "sent B/step": w,
                    "formula B/step": w,
                }
            )
    return pd.DataFrame(rows)


def test_bytes_by_n_figure_draws_formula_and_counts():
    fig = bytes_by_n_figure(bytes_by_n_table())
    assert len(fig.data) == 4 and fig.layout.yaxis.type == "log"
    assert "all-gather" in fig.data[2].name and list(fig.data[2].x) == [2, 4, 8]


def test_whatif_figure_stacks_the_model():
    runs = []
    for m in ("none", "topk"):
        c = CompressConfig(4, m)
        runs.append(
            Measured(c.label, m, 4, c.ddp().psi, wire_bytes_per_step(c), messages_per_step(c))
        )
    df = what_if(runs, links=("nvlink4-h100", "eth-25g"))
    fig = whatif_figure(df)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 3 * 2  # compute, compression, exposed comm per link panel
    eth = df[df.link == "eth-25g"]
    totals = [sum(b.y[i] for b in bars if b.xaxis == "x2") for i in range(2)]
    assert totals == pytest.approx(list(eth.step_s * 1e3))
    labels = [t for t in fig.data if t.type == "scatter"]
    assert [float(x[:-1]) for x in labels[1].text] == pytest.approx(list(eth.speedup), rel=0.05)
    # the panels' titles sit just above the plot; the title and subtitle above them (lesson 13
    # had the subtitle on the first panel's title): 120 px of top margin
    assert [a.text for a in fig.layout.annotations[:2]] == ["nvlink4-h100", "eth-25g"]
    assert fig.layout.margin.t >= 120
    with pytest.raises(ValueError, match="df="):
        whatif_figure(df.drop(columns="speedup"))
