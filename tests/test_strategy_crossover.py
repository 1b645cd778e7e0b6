"""Lesson 01's corrections as numbers: messages per rank (PP against TP), and when TP sends more
bytes than DP for an MLP block and for a full transformer layer, with gradient accumulation.

The formulas (:mod:`edu_parallel.strategy_map.crossover`, ``formula_messages``) against real
runs: the strategy map (MLP blocks) and lesson 12's 3D step (attention + MLP layers)."""

from __future__ import annotations

import pytest
import torch

from edu_parallel.parallel_3d import run_3d
from edu_parallel.parallel_3d.config import Config3D
from edu_parallel.parallel_3d.model import layer_weights
from edu_parallel.strategy_map import (
    crossover_tokens,
    formula_messages,
    layer_crossover_table,
    layer_param_count,
    message_table,
    run_strategy_map,
    step_sent_bytes,
    tp_allreduces,
)
from edu_parallel.strategy_map.formulas import MapConfig
from edu_parallel.strategy_map.model import dense_weights


@pytest.mark.parametrize("h", [16, 64, 4096, 8192])
def test_crossover_is_4h_plus_2_5_for_mlp_and_3h_for_a_full_layer(h: int) -> None:
    assert crossover_tokens(h, "mlp") == pytest.approx(4 * h + 2.5)
    assert crossover_tokens(h, "bare") == pytest.approx(3 * h)
    assert crossover_tokens(h, "gpt2") == pytest.approx(3 * h + 3.25)
    for k in (2, 8):  # DP pays once per step, TP every microbatch: T* per microbatch / k
        assert crossover_tokens(h, "bare", k) == pytest.approx(3 * h / k)
    # at T* both send the same bytes per step
    for kind in ("mlp", "bare", "gpt2"):
        t = crossover_tokens(h, kind)
        sizes = {"kind": kind, "layers": 3, "hidden": h, "itemsize": 2}
        dp = step_sent_bytes("dp", 8, tokens=1, **sizes)
        tp_at = step_sent_bytes("tp", 8, tokens=1, **sizes) * t  # linear in the tokens
        assert tp_at == pytest.approx(dp)


def test_layer_parameters_are_the_models_own() -> None:
    """mlp: the strategy map's block; bare: lesson 12's layer; gpt2: torch modules of a GPT-2
    layer (QKV and output projections with bias, MLP with bias, two LayerNorms)."""
    h = 16
    block = dense_weights(MapConfig(layers=1, hidden=h))[0]
    assert layer_param_count("mlp", h) == sum(t.numel() for t in block.values())
    layer = layer_weights(Config3D(layers=1, hidden=h, heads=4))[0]
    assert layer_param_count("bare", h) == sum(t.numel() for t in layer.values()) == 12 * h * h
    nn = torch.nn
    gpt2 = nn.ModuleList(
        [nn.Linear(h, 3 * h), nn.Linear(h, h), nn.Linear(h, 4 * h), nn.Linear(4 * h, h)]
        + [nn.LayerNorm(h), nn.LayerNorm(h)]
    )
    assert layer_param_count("gpt2", h) == sum(p.numel() for p in gpt2.parameters())


def test_bad_kind_and_missing_layers_are_named() -> None:
    with pytest.raises(ValueError, match="kind='attention'"):
        crossover_tokens(16, "attention")
    with pytest.raises(ValueError, match="layers=None"):
        crossover_tokens(16, "bare", input_grad=False)
    with pytest.raises(ValueError, match="accumulation=0"):
        tp_allreduces("bare", 2, 0)


def test_mlp_bytes_equal_the_strategy_map_run(cluster2) -> None:
    rep = run_strategy_map(cluster2, ["dp", "tp"], batch=8)
    c = rep.config
    sizes = {"kind": "mlp", "layers": c["layers"], "hidden": c["hidden"]}
    tokens = c["batch"] * c["seq"]
    for s in ("dp", "tp"):
        want = step_sent_bytes(s, 2, tokens=tokens, **sizes)
        assert rep.runs[s].column("sent_bytes") == [pytest.approx(want)] * 2


def test_full_layer_bytes_and_accumulation_equal_lesson_10_runs(cluster2) -> None:
    """DP's bytes stay put as k grows; TP's all-reduces and bytes grow k-fold; T* moves by 1/k."""
    runs = []
    for k in (1, 2, 4):
        for layout in ({"dp": 2}, {"dp": 1, "tp": 2}):
            sizes = {"layers": 2, "hidden": 16, "heads": 4, "seq": 4, "batch": 4 * k}
            rep = run_3d(cluster2, **layout, pp=1, microbatches=k, **sizes)
            assert rep.matches_reference
            runs.append(rep)
    table = layer_crossover_table(runs)
    assert list(table.index) == [1, 2, 4]
    assert (table["DP sent (B)"] == table["DP formula (B)"]).all()
    assert (table["TP sent (B)"] == table["TP formula (B)"]).all()
    assert (table["TP all-reduces"] == table["formula"]).all()
    assert list(table["TP all-reduces"]) == [7, 14, 28]  # (4L - 1) k with L = 2
    assert table["DP sent (B)"].nunique() == 1
    assert list(table["TP sent (B)"] / table["TP sent (B)"].iloc[0]) == [1, 2, 4]
    star = table["T* (crossover)"]
    assert list(star * table.index) == pytest.approx([star.iloc[0]] * 3)
    # which side of T* the microbatch is on says which sends more; k moves it across
    above = table["tokens per microbatch T"] > star
    assert list(above) == list(table["TP/DP"] > 1) == [False, False, True]


def test_messages_pp_scales_with_microbatches_tp_with_layers(cluster4) -> None:
    reports = [
        run_strategy_map(cluster4, ["dp", "tp", "tp-sp", "pp"], layers=layers, microbatches=m)
        for layers, m in ((4, 4), (4, 8), (8, 4))
    ]
    table = message_table(reports)
    for _, row in table.iterrows():
        assert row["messages per rank (trace)"] == row["formula"]
    pp = {idx[:2]: row["formula"] for idx, row in table.iterrows() if idx[2] == "PP"}
    tp = {idx[:2]: row["formula"] for idx, row in table.iterrows() if idx[2] == "TP"}
    assert pp[(4, 8)] == [2 * x for x in pp[(4, 4)]] and pp[(8, 4)] == pp[(4, 4)]
    assert tp[(8, 4)] == [2 * x for x in tp[(4, 4)]] and tp[(4, 8)] == tp[(4, 4)]
    assert formula_messages("pp", 4, 1, layers=4, microbatches=8) == 16
    assert formula_messages("tp-sp", 4, 0, layers=4, microbatches=8) == 21
