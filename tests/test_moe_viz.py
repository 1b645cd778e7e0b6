"""Expert parallelism's pictures (no browser) and tables, read from the runs and the formulas."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers import fresh_python

from edu_parallel.expert_parallel.experts import init_moe
from edu_parallel.expert_parallel.formulas import balanced_dispatch_bytes, padded_dispatch_bytes
from edu_parallel.expert_parallel.report import run_moe
from edu_parallel.expert_parallel.tables import (
    bytes_into,
    dispatch_table,
    experts_table,
    skew_table,
)


# ----------------------------------------------------------------- pictures (no browser)
def fake_report() -> SimpleNamespace:
    """2 ranks, 4 experts, top-1, 3 tokens per rank, capacity 1; written out by hand."""
    experts = [[[0], [0], [3]], [[2], [0], [1]]]
    kept = [[[True], [False], [True]], [[True], [True], [False]]]
    return SimpleNamespace(
        experts=4,
        capacity=1,
        routing_experts=experts,
        routing_kept=kept,
        routed_matrix=[[2, 0, 0, 1], [1, 1, 1, 0]],
        kept_matrix=[[1, 0, 0, 1], [1, 0, 1, 0]],
        traffic_by_exchange={"dispatch": [[16, 16], [16, 16]], "combine": [[16, 16], [16, 16]]},
    )


def test_heatmap_load_bars_and_animation() -> None:
    from edu_parallel.viz.moe import dispatch_animation, expert_load_bars, traffic_heatmap

    rep = fake_report()
    fig = traffic_heatmap({"a": rep, "b": [[0, 48], [8, 0]]}, title="t")
    assert [list(map(list, d.z)) for d in fig.data] == [[[16, 16], [16, 16]], [[0, 48], [8, 0]]]
    assert all(d.zmax == 48 for d in fig.data) and "(local)" in fig.data[0].text[0][0]
    bars = expert_load_bars(rep)
    assert [list(b.y) for b in bars.data] == [[1, 0, 0, 1], [1, 0, 1, 0], [1, 1, 0, 0]]
    assert bars.layout.meta["capacity_line"] == 2 and bars.layout.barmode == "stack"
    # the lines' names sit right of the plot (not on the last expert's bar), one above its
    # line and one below, so they never meet: N x capacity = 2 over a mean load of 1.5
    names = {a.text: a for a in bars.layout.annotations}
    cap, mean = names["N x capacity = 2 x 1 = 2"], names["mean load 1.5"]
    assert {(a.xref, a.x, a.xanchor) for a in (cap, mean)} == {("paper", 1, "left")}
    assert (cap.y, cap.yanchor, mean.y, mean.yanchor) == (2, "bottom", 1.5, "top")
    assert bars.layout.margin.r > 7 * len(cap.text)
    anim = dispatch_animation(rep)
    assert [f.name for f in anim.frames] == ["routed", "dispatched", "combined"]
    assert anim.layout.meta["slot_width"] == 4  # k + E/N + 1: top-1 column, e0 e1 columns, a gap
    routed, dispatched = anim.frames[0].data[0], anim.frames[1].data[0]
    at = [((routed.x[i], routed.y[i]), (dispatched.x[i], dispatched.y[i])) for i in range(6)]
    assert at[0] == ((0, 0), (1, 0))  # rank 0 token 0 -> e0: rank 0's first expert column
    assert at[1] == ((0, 1), (0, 1))  # rank 0 token 1 dropped: stays home
    assert at[2] == ((0, 2), (6, 0))  # rank 0 token 2 -> e3: rank 1's second expert column
    assert at[3] == ((4, 0), (5, 0))  # rank 1 token 0 -> e2, local on rank 1
    assert at[4] == ((4, 1), (1, 1))  # rank 1 token 1 -> e0: second row of e0
    assert list(anim.frames[2].data[0].x) == list(routed.x)  # combined: back home
    assert list(anim.layout.xaxis.ticktext[:3]) == ["top-1", "e0", "e1"]
    assert anim.layout.updatemenus[0].buttons[0].method == "animate"
    with pytest.raises(ValueError, match="report="):
        expert_load_bars(SimpleNamespace())


def test_renderers_import_without_torch() -> None:
    fresh_python("import edu_parallel.viz.moe, edu_parallel.expert_parallel.formulas")


def test_tables_read_the_runs_and_the_formulas(cluster4) -> None:
    flat, hot = run_moe(cluster4, capacity_factor=8.0), run_moe(cluster4, skew=4.0)
    skews = skew_table([flat, hot])
    assert list(skews.index) == [(0.0, 8.0), (4.0, 1.25)]
    for r in (flat, hot):
        row = skews.loc[(r.skew, r.capacity_factor)]
        columns = [sum(row_[d] for row_ in r.traffic_matrix_bytes) for d in range(4)]
        assert row["bytes into each rank"] == columns == bytes_into(r)
        assert row["bytes into rank 0"] == columns[0]
        assert row["max/mean load"] == r.load_imbalance
        assert row["dropped"] == r.dropped_tokens
    everything = 4 * flat.tokens_per_rank * flat.top_k * flat.hidden * 4  # no drops at C = 8
    assert sum(skews.loc[(0.0, 8.0), "bytes into each rank"]) == everything
    padded = run_moe(cluster4, skew=4.0, dispatch="padded")
    modes = dispatch_table([hot, padded])
    assert list(modes.index) == [(4.0, "variable", 1.25), (4.0, "padded", 1.25)]
    pad = modes.loc[(4.0, "padded", 1.25)]
    formula = padded_dispatch_bytes(padded.experts, padded.capacity, padded.hidden, 4)
    assert pad["padded formula (B)"] == formula == pad["sent per rank per exchange (B)"]
    assert pad["capacity"] == padded.capacity and pad["padding"] == padded.padding_fraction
    assert pad["expert rows computed"] == padded.expert_rows_computed
    assert pad["expert rows with tokens"] == padded.expert_rows_with_tokens
    var = modes.loc[(4.0, "variable", 1.25)]
    assert var["sent per rank per exchange (B)"] == hot.sent_bytes_per_exchange < formula
    assert var["dropped"] == pad["dropped"] == hot.dropped_tokens
    runs = [run_moe(cluster4, experts=e, capacity_factor=float(e)) for e in (4, 8)]
    table = experts_table(runs)
    t, k, h = runs[0].tokens_per_rank, runs[0].top_k, runs[0].hidden
    for r in runs:
        row = table.loc[r.experts]
        assert row["matrix total (B)"] == sum(map(sum, r.traffic_matrix_bytes))
        assert row["N·T·k·h·4 (B)"] == 4 * t * k * h * 4 == row["matrix total (B)"]  # no drops
        assert row["mean sent per rank (B)"] == sum(r.per_rank_sent_bytes) / 4
        assert row["balanced formula (B)"] == balanced_dispatch_bytes(t, k, h, 4)
        shard = init_moe(r.experts, h).experts.shard(0, 4)
        params = sum(p.numel() * p.element_size() for p in shard.parameters())
        assert row["expert bytes per rank"] == params
    assert table.loc[8, "expert bytes per rank"] == 2 * table.loc[4, "expert bytes per rank"]
