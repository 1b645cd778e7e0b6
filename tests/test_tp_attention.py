"""Tensor-parallel attention (Megatron-LM arXiv 1909.08053 §3, Fig. 3b): heads split over gloo
ranks, checked against one process and torch's own multi-head attention, collectives counted."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from helpers import Recorder, count_checks

from edu_parallel.parallel_3d.model import TensorParallel, attention
from edu_parallel.tensor_parallel import (
    attention_heads,
    attention_sent_bytes,
    dense_attention,
    format_attention,
    run_tp_attention,
    shard_attention,
)
from edu_parallel.tensor_parallel.attention_run import (
    attention_job,
    make_attention_problem,
    run_attention_config,
)
from edu_parallel.tensor_parallel.config import AttentionConfig

WEIGHTS = ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo")


@pytest.mark.parametrize("causal", [False, True])
def test_dense_attention_equals_torch_multihead_attention(causal: bool) -> None:
    """The one-process reference is torch's nn.MultiheadAttention with the same weights."""
    b, s, h, a = 2, 5, 16, 4
    p = make_attention_problem(b, s, h, 3, "float64")
    mha = torch.nn.MultiheadAttention(h, a, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([p["wq"], p["wk"], p["wv"]]))
        mha.in_proj_bias.copy_(torch.cat([p["bq"], p["bk"], p["bv"]]))
        mha.out_proj.weight.copy_(p["wo"])
        mha.out_proj.bias.copy_(p["bo"])
    mask = torch.ones(s, s, dtype=torch.bool).triu(1) if causal else None  # True: not allowed
    want, _ = mha(p["x"], p["x"], p["x"], attn_mask=mask, need_weights=False)
    got = dense_attention(p["x"], {k: p[k] for k in WEIGHTS}, a, causal)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_each_ranks_heads_give_a_partial_sum_that_g_adds_up() -> None:
    """Without the forward all-reduce no rank holds Y: each has its heads' share of it."""
    b, s, h, a, t = 2, 4, 16, 4, 4
    p = make_attention_problem(b, s, h, 0, "float64")
    w = {k: p[k] for k in WEIGHTS}
    want = dense_attention(p["x"], w, a, True)
    partials = []
    for r in range(t):
        sh = shard_attention(w, r, t, a)
        y = attention_heads(
            p["x"], sh["wq"], sh["wk"], sh["wv"], a // t, sh["bq"], sh["bk"], sh["bv"], True
        )
        partials.append(F.linear(y, sh["wo"]))  # (b, s, h): this rank's heads through Wo
        assert not torch.allclose(partials[-1] + sh["bo"], want)
    torch.testing.assert_close(torch.stack(partials).sum(0) + w["bo"], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fixture", ["cluster2", "cluster4"])
def test_attention_on_ranks_equals_one_process_and_counts_two_all_reduces(fixture, request) -> None:
    cluster = request.getfixturevalue(fixture)
    t = cluster.world_size
    rep = run_tp_attention(cluster, batch=2, seq=4, hidden=16, heads=4, causal=True)
    assert rep.matches_dense, rep.max_abs_diff
    assert max(rep.max_abs_diff.values()) < 1e-12
    assert set(rep.max_abs_diff) == {"y", "dx", *(f"d{k}" for k in WEIGHTS)}
    assert rep.heads_per_rank == [(r * 4 // t, (r + 1) * 4 // t) for r in range(t)]
    # one all-reduce of (b, s, h) forward (g after Wo), one backward (f before QKV)
    assert rep.forward_collectives == ["all_reduce"] == rep.expected_forward
    assert rep.backward_collectives == ["all_reduce"] == rep.expected_backward
    assert rep.same_collectives_on_every_rank
    assert [c["nbytes"] for c in rep.collectives] == [2 * 4 * 16 * 8] * 2
    want = attention_sent_bytes(t, 2, 4, 16, 8)
    assert rep.per_rank_sent_bytes_by_phase == [want] * t
    assert want["forward"] == 2 * (t - 1) / t * 2 * 4 * 16 * 8
    text = format_attention(rep)
    assert "matches one process: yes" in text and "rank 0 [0," in text


def test_float32_non_causal_more_heads(cluster2) -> None:
    rep = run_tp_attention(
        cluster2, batch=3, seq=5, hidden=24, heads=6, causal=False, dtype="float32"
    )
    assert rep.matches_dense and (rep.rtol, rep.atol) == (1e-4, 1e-5)
    assert rep.heads_per_rank == [(0, 3), (3, 6)]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (
            {"world_size": 4, "heads": 6, "hidden": 24},
            "heads=6 is not valid: expected a multiple of the TP degree",
        ),
        (
            {"world_size": 2, "heads": 5, "hidden": 16},
            "heads=5 is not valid: expected a divisor of hidden=16",
        ),
        ({"world_size": 2, "causal": "yes"}, "causal='yes'"),
        ({"world_size": 2, "dtype": "int8"}, "dtype='int8'"),
        ({"world_size": 0}, "world_size=0"),
        ({"world_size": 2, "seq": 0}, "seq=0"),
        ({"world_size": 2, "seed": 1.5}, "seed=1.5"),
        (
            {"world_size": 2, "batch": 1024, "seq": 64},
            "batch*seq*max(hidden, seq*heads)=16777216 is not valid: expected at most 4194304",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_it(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError) as err:
        AttentionConfig(**kwargs)
    text = str(err.value)
    assert text.startswith(match) and text.count("is not valid") == 1 and "\n" not in text, text


def test_the_keyword_call_builds_the_config_once_for_the_rank_job(monkeypatch) -> None:
    checks = count_checks(monkeypatch, AttentionConfig)
    executor = Recorder(2)
    assert run_tp_attention(executor, 2, 4, 16, heads=4, causal=False) is None
    ((fn, (config,)),) = executor.calls
    assert fn is attention_job and checks == [config] and config.heads_per_rank == 2
    assert config == AttentionConfig(2, 2, 4, 16, heads=4, causal=False)
    with pytest.raises(ValueError, match=re.escape("config.world_size=2 is not valid: expected 4")):
        run_attention_config(Recorder(4), config)


def test_lesson_10_attention_is_the_tensor_parallel_one() -> None:
    """parallel_3d's layer calls the tensor_parallel attention; on one process, no f or g."""
    b, s, h, a = 2, 4, 16, 4
    p = make_attention_problem(b, s, h, 1, "float32")
    w = {k: p[k] for k in ("wq", "wk", "wv", "wo")}
    got = attention(p["x"], w, a, TensorParallel(None, None, 1))
    assert torch.equal(got, dense_attention(p["x"], w, a))  # bitwise: the same operations
