"""Tensor parallelism on gloo ranks: layers vs dense nn.Linear, collectives and bytes from the
trace, the syllabus's reversed rule (errata E4), sequence parallelism, pictures, tables (arXiv
1909.08053). The config and the CLI are in ``test_tp_config.py``."""

from __future__ import annotations

import pytest
import torch
from helpers import fresh_python

from edu_parallel.tensor_parallel.config import ITEMSIZE
from edu_parallel.tensor_parallel.formulas import tp_sent_bytes
from edu_parallel.tensor_parallel.layers import (
    column_parallel_linear,
    f_then_linear,
    linear_then_g,
    row_parallel_linear,
    shard_linear,
)
from edu_parallel.tensor_parallel.report import format_tp, run_tp
from edu_parallel.tensor_parallel.tables import message_table, pass_formula, pass_table, rule_table

# (batch, seq, hidden, ffn): ffn=None is 4h
SHAPES = [(2, 4, 8, None), (3, 4, 4, 12)]


# ------------------------------------------------------------------ against a dense nn.Linear
@pytest.mark.parametrize("fixture", ["cluster2", "cluster4"])
@pytest.mark.parametrize("mode", ["column", "row", "mlp", "mlp-sp"])
@pytest.mark.parametrize("shape", SHAPES)
def test_layers_equal_dense_and_trace_the_expected_collectives(
    request, fixture, mode, shape
) -> None:
    cluster = request.getfixturevalue(fixture)
    b, s, h, ffn = shape
    t = cluster.world_size
    r = run_tp(cluster, mode, batch=b, seq=s, hidden=h, ffn=ffn)  # float64
    assert r.matches_dense, r.max_abs_diff
    assert set(r.max_abs_diff) >= {"y", "dx"} and max(r.max_abs_diff.values()) < 1e-12
    fwd, bwd = {
        "column": ([], ["all_reduce"]),
        "row": (["all_reduce"], []),
        "mlp": (["all_reduce"], ["all_reduce"]),
        "mlp-sp": (
            ["all_gather", "reduce_scatter"],
            ["all_gather", "all_gather", "reduce_scatter"],
        ),
    }[mode]
    assert (r.forward_collectives, r.backward_collectives) == (fwd, bwd)
    assert r.same_collectives_on_every_rank
    msg = b * s * h * 8  # the (b, s, h) activation in float64
    for c in r.collectives:
        if c["op"] == "all_reduce":
            assert c["nbytes"] == msg
        elif c["op"] == "all_gather":  # the event records the gathered (full) tensor
            assert c["nbytes"] == msg
        else:  # reduce-scatter: the output block
            assert c["nbytes"] == msg // t
    ar = 2 * (t - 1) / t * msg
    # SP: all-gather + reduce-scatter per pass (= one all-reduce each), plus the backward re-gather
    # of the column layer's input, (t-1)/t of the (b, s, h) tensor
    want = {"column": ar, "row": ar, "mlp": 2 * ar, "mlp-sp": 2 * ar + (t - 1) / t * msg}[mode]
    assert r.per_rank_sent_bytes == [pytest.approx(want)] * t
    assert r.sent_bytes_formula == pytest.approx(want)
    assert r.local_output_kind == ["slice" if mode == "column" else "partial_sum"] * t
    if mode == "mlp-sp":  # forward: the same bytes as the all-reduce; backward: + the X re-gather
        assert r.output_shape == [b, s // t, h]
        assert [p["forward"] for p in r.per_rank_sent_bytes_by_phase] == [pytest.approx(ar)] * t
        assert [p["backward"] for p in r.per_rank_sent_bytes_by_phase] == [
            pytest.approx(1.5 * ar)
        ] * t
    assert "matches a dense nn.Linear on one process: yes" in format_tp(r)


def test_column_gather_output_and_float32(cluster2) -> None:
    r = run_tp(cluster2, "column", gather_output=True, dtype="float32")
    assert r.matches_dense and r.rtol == 1e-4 and max(r.max_abs_diff.values()) < 1e-5
    assert r.forward_collectives == ["all_gather"] and r.backward_collectives == ["all_reduce"]
    assert r.output_shape == [2, 4, 32] and r.local_output_shape == [2, 4, 16]
    gathered = 2 * 4 * 32 * 4  # Y (b, s, ffn) in float32
    assert r.per_rank_sent_bytes[0] == pytest.approx(gathered / 2 + 2 * 4 * 8 * 4)
    assert r.per_rank_sent_bytes[0] == pytest.approx(
        tp_sent_bytes("column", 2, 2, 4, 8, 4, 32, True)
    )


def test_syllabus_rule_is_wrong_and_shows_slices_vs_partial_sums(cluster4) -> None:
    col = run_tp(cluster4, "column", rule="syllabus")
    assert not col.matches_dense and col.max_abs_diff["y"] is None
    assert col.local_output_kind == ["slice"] * 4 and col.forward_collectives == ["all_reduce"]
    assert col.output_shape == [2, 4, 32 // 4] != col.dense_output_shape  # sum of slices
    row = run_tp(cluster4, "row", rule="syllabus")
    assert not row.matches_dense and row.local_output_kind == ["partial_sum"] * 4
    assert row.forward_collectives == ["all_gather"] and row.output_shape == [2, 4, 4 * 8]
    assert "NO" in format_tp(row) and row.sent_bytes_formula is None
    assert not row.matches_builtin  # the CLI exits with status 1


def paper_view_job(ctx, mode: str) -> dict:
    """f then linear (column) and linear then g (row) against the layer Functions, same inputs."""
    g = torch.Generator().manual_seed(3)
    w, bias = (
        torch.randn(8, 8, generator=g, dtype=torch.float64),
        torch.randn(8, generator=g, dtype=torch.float64),
    )
    x, dy = (
        torch.randn(2, 3, 8, generator=g, dtype=torch.float64),
        torch.randn(2, 3, 8, generator=g, dtype=torch.float64),
    )
    ws, bs = shard_linear(w, bias, ctx.rank, ctx.world_size, mode)
    out = []
    for fn in ("layer", "paper", "gathered"):
        xx, ww, bb = x.clone(), ws.clone().requires_grad_(), bs.clone().requires_grad_()
        if mode == "row":
            xx = xx.chunk(ctx.world_size, -1)[ctx.rank].contiguous()
        xx.requires_grad_()
        if mode == "column" and fn == "gathered":
            y = column_parallel_linear(ctx, xx, ww, bb, gather_output=True)
            y.backward(dy)
        elif mode == "column":
            y = (column_parallel_linear if fn == "layer" else f_then_linear)(ctx, xx, ww, bb)
            y.backward(dy.chunk(ctx.world_size, -1)[ctx.rank])
        else:
            y = (row_parallel_linear if fn == "layer" else linear_then_g)(ctx, xx, ww, bb)
            y.backward(dy)
        out.append([y.detach(), xx.grad, ww.grad, bb.grad])
    return {"out": out, "dense_y": torch.nn.functional.linear(x, w, bias)}


@pytest.mark.parametrize("mode", ["column", "row"])
def test_paper_operators_f_and_g_equal_the_layer_functions(cluster2, mode: str) -> None:
    res = cluster2.run(paper_view_job, mode)
    for rank_out in res.results:
        layer, paper, gathered = rank_out["out"]
        for a, b in zip(layer, paper, strict=True):
            assert torch.allclose(a, b, rtol=0, atol=1e-13)
        if mode == "column":  # gather_output: the full Y; same dX, dW, db as with dY sliced
            assert torch.allclose(gathered[0], rank_out["dense_y"], atol=1e-13)
            assert torch.allclose(gathered[1], layer[1], atol=1e-13)
    ops = [(e.op, e.phase) for e in res.trace.events if e.kind == "collective" and e.rank == 0]
    if mode == "column":  # layer, paper: f's backward all-reduce; gathered: + forward all-gather
        assert ops == [("all_reduce", "backward")] * 2 + [
            (ops[2][0], "forward"),
            ("all_reduce", "backward"),
        ]
        assert ops[2][0].startswith("all_gather")
    else:
        assert ops == [("all_reduce", "forward")] * 3


# ------------------------------------------------------------------ pictures, no processes
def report(mode: str, t: int = 2, **kw) -> dict:
    from edu_parallel.tensor_parallel.formulas import expected_collectives

    fwd, bwd = expected_collectives(
        mode, kw.get("gather_output", False), kw.get("rule", "megatron")
    )
    local = "slice" if mode == "column" else "partial_sum"
    return {
        "mode": mode,
        "world_size": t,
        "rule": "megatron",
        "gather_output": False,
        "forward_collectives": fwd,
        "backward_collectives": bwd,
        "local_output_kind": [local] * t,
    } | kw


def test_story_of_the_mlp() -> None:
    from edu_parallel.viz.tp import tp_story

    frames = tp_story(report("mlp", t=2))
    # local matmul; all-reduce Y = reduce-scatter + 1 all-gather step; dX partial; all-reduce dX
    assert [f.op for f in frames] == [
        None,
        "all_reduce",
        "all_reduce",
        None,
        "all_reduce",
        "all_reduce",
    ]
    first, last = frames[0].holds, frames[-1].holds
    assert (
        first["Y"] == [[("partial", "all", 0)]] * 2
        and first["X"] == [[("replicated", "all", 0)]] * 2
    )
    assert first["A"] == [[("shard", "col", 0)], [("shard", "col", 1)]]
    assert first["B"] == [[("shard", "row", 0)], [("shard", "row", 1)]]
    assert first["Z"][1] == [("slice", "col", 1)] and first["dX"] == [[], []]
    assert frames[1].holds["Y"] == [[("slice", "col", 0)], [("slice", "col", 1)]]  # summed blocks
    assert frames[2].holds["Y"] == [[("full", "all", 0)]] * 2
    assert frames[3].holds["dX"] == [[("partial", "all", 0)]] * 2
    assert last["dX"] == [[("full", "all", 0)]] * 2


def test_story_follows_the_run_and_refuses_a_different_one() -> None:
    from edu_parallel.viz.tp import tp_story

    t = 4  # ring all-gather of X: after step k rank r holds blocks r .. r-k
    sp = tp_story(report("mlp-sp", t=t))
    assert sp[0].holds["X"][2] == [("slice", "row", 2)]
    assert sorted(b for _, _, b in sp[1].holds["X"][0]) == [0, 3]
    assert sp[3].holds["X"][0] == [("full", "all", 0)]
    assert sp[-1].holds["dX"][3] == [("slice", "row", 3)]  # reduce-scattered sequence block
    dropped = next(f for f in sp if "dropped" in f.label)  # SP keeps only X's sequence block ...
    assert dropped.phase == "forward" and dropped.holds["X"][1] == [("slice", "row", 1)]
    regather = [f for f in sp if f.phase == "backward" and f.op == "all_gather"]
    assert regather[-1].holds["X"][1] == [("full", "all", 0)]  # ... and gathers it again for dW
    syl = tp_story(report("row", t=t, rule="syllabus"))
    assert len(syl) == 2 and syl[1].holds["Y"][0] == [("wrong", "all", 0)]
    assert tp_story(report("row", local_output_kind=["slice"] * 2))[0].holds["Y"][0] == [
        ("slice", "col", 0)
    ]
    with pytest.raises(ValueError, match="report collectives"):
        tp_story(report("mlp", forward_collectives=[]))
    with pytest.raises(ValueError, match="local_output_kind"):
        tp_story(report("row", local_output_kind=["slice", "partial_sum"]))


def test_animation_draws_every_frame_with_the_blocks() -> None:
    from edu_parallel.viz.tp import KIND_COLORS, KINDS, tp_animation, tp_blocks, tp_story

    rep = report("column", t=2)
    fig = tp_animation(rep, title="column")
    assert len(fig.frames) == len(tp_story(rep)) == 4
    assert (
        len(fig.layout.sliders[0].steps) == 4
        and fig.layout.updatemenus[0].buttons[0].method == "animate"
    )
    slices = fig.frames[0].data[KINDS.index("slice")]
    assert slices.fillcolor == KIND_COLORS["slice"]
    xs = [x for x in slices.x if x is not None]
    assert len(xs) == 2 * 5  # Y on 2 ranks, rank r's half: x from r/2 to (r+1)/2 of the Y box
    last = fig.frames[-1].data[KINDS.index("full")]
    assert len([x for x in last.x if x is not None]) == 2 * 5  # dX full on both ranks
    assert "partial" in fig.frames[1].layout.title.text.lower()
    one = tp_blocks(rep, frame=-1)
    assert one.layout.meta["matrices"] == ["X", "A", "Y", "dY", "dX"]
    with pytest.raises(ValueError, match="frame=9"):
        tp_blocks(rep, frame=9)


def test_tp_renderers_import_no_torch(tmp_path) -> None:
    code = (
        "import edu_parallel.viz.tp as v, edu_parallel.tensor_parallel.formulas as m\n"
        "import edu_parallel.quiz.banks.tensor_parallel\n"
        "f, b = m.expected_collectives('mlp-sp')\n"
        "rep = dict(mode='mlp-sp', world_size=2, rule='megatron', gather_output=False,\n"
        "           forward_collectives=f, backward_collectives=b,\n"
        "           local_output_kind=['partial_sum'] * 2)\n"
        f"v.tp_animation(rep).write_html({str(tmp_path / 'tp.html')!r}, include_plotlyjs='cdn')\n"
    )
    fresh_python(code)
    assert "addFrames" in (tmp_path / "tp.html").read_text()


def test_tables_read_the_runs_and_the_formulas(cluster4) -> None:
    col, wrong = run_tp(cluster4, "column"), run_tp(cluster4, "column", rule="syllabus")
    rules = rule_table([col, wrong])
    assert [tuple(i) for i in rules.index] == [("column", col.rule), ("column", "syllabus")]
    for r, (_, row) in zip((col, wrong), rules.iterrows(), strict=True):
        assert row["each rank held"] == r.local_output_kind[0]
        assert row["forward"] == r.forward_collectives and row["backward"] == r.backward_collectives
        assert row["output"] == r.output_shape and row["dense output"] == r.dense_output_shape
        assert row["equals dense"] == r.matches_dense
    assert rules["equals dense"].tolist() == [True, False]
    mlp, sp = run_tp(cluster4, "mlp"), run_tp(cluster4, "mlp-sp")
    itemsize = ITEMSIZE[mlp.dtype]
    m = 2 * 4 * 8 * itemsize  # b*s*h*itemsize
    messages = message_table(mlp)
    assert messages["op"].tolist() == [c["op"] for c in mlp.collectives]
    assert messages["bytes in the trace"].tolist() == [m] * len(mlp.collectives)
    assert (messages["b*s*h*itemsize"] == m).all()
    passes = pass_table([mlp, sp])
    for r in (mlp, sp):
        row, counted = passes.loc[r.mode], r.per_rank_sent_bytes_by_phase[0]
        assert row["sent forward (B)"] == counted["forward"] == row["formula forward (B)"]
        assert row["sent backward (B)"] == counted["backward"] == row["formula backward (B)"]
        assert row["forward"] == r.forward_collectives and row["matches dense"] == r.matches_dense
    half = 3 / 4 * m
    assert passes.loc["mlp", "formula forward (B)"] == 2 * half
    assert passes.loc["mlp-sp", "formula backward (B)"] == 3 * half  # the second all-gather of X
    total = tp_sent_bytes("mlp", 4, 2, 4, 8, itemsize)
    assert 2 * passes.loc["mlp", "formula forward (B)"] == total
    assert pass_formula(col) is None
