"""Llama's activation terms (RMSNorm, grouped-query attention, SwiGLU, no dropout) against a hand
count per tensor; GPT presets keep Korthikanti et al.'s formula (issue 15)."""

from __future__ import annotations

import pytest

from edu_parallel.memory.activations import (
    activation_bytes,
    activation_estimate,
    mlp_activation_sbh,
    shape_activation_estimate,
)
from edu_parallel.memory.presets import PRESETS, get_preset

# s=4 tokens, b=2 sequences, h=8, a=4 query heads (d=2), k=2 KV heads, f=12: sbh = 64
SMALL = dict(seq=4, batch=2, hidden=8, heads=4, layers=1, arch="llama", kv_heads=2, ffn=12)


def test_llama_terms_by_hand_no_parallelism():
    est = activation_estimate(**SMALL)
    assert est.terms == {
        "RMSNorm inputs": 2 * (2 * 64),  # two norms, 2 bytes x sbh each
        "q/k/v input": 2 * 64,
        "Q": 2 * 64,  # a·d = h columns
        "K and V": 2 * (2 * 4 * 2 * 2 * 2),  # two tensors of s·b·k·d 16-bit values
        "o_proj input": 2 * 64,
        "gate/up input": 2 * 64,
        "gate and up outputs": 2 * (2 * 4 * 2 * 12),  # two s·b·f tensors
        "SwiGLU output": 2 * 4 * 2 * 12,
        "softmax output": 2 * 4 * 4 * 4 * 2,  # a·s·s·b values
    }
    assert est.bytes_per_layer == 1728 == sum(est.terms.values())
    # the closed form sbh·(12 + 4k/a + 6f/h) + 2as²b
    assert est.bytes_per_layer == 64 * (12 + 4 * 2 / 4 + 6 * 12 / 8) + 2 * 4 * 16 * 2
    assert est.arch == "llama" and "12 + 4k/a + 6f/h" in est.formula


def test_llama_terms_with_tensor_and_sequence_parallelism():
    tp = activation_estimate(**SMALL, tp=2)
    # 8sbh whole (norm inputs 256, q/k/v input 128, gate/up input 128); the rest halved; one
    # KV head per rank: K and V 2·(2·4·2·2·1)
    assert tp.terms["RMSNorm inputs"] == 256 and tp.terms["gate/up input"] == 128
    assert tp.terms["K and V"] == 64 and tp.terms["softmax output"] == 128
    assert tp.bytes_per_layer == 512 + 64 + 64 + 128 + 64 + 192 + 96 == 1120
    sp = activation_estimate(**SMALL, tp=2, sequence_parallel=True)
    assert sp.bytes_per_layer == 256 + 64 + 64 + 128 + 64 + 192 + 96 == 864
    # tp = 4 > k = 2: each rank keeps one (replicated) KV head
    assert activation_estimate(**SMALL, tp=4).terms["K and V"] == 2 * (2 * 4 * 2 * 2)
    selective = activation_estimate(**SMALL, tp=2, recompute="selective")
    assert "softmax output" not in selective.terms
    assert selective.bytes_per_layer == 1120 - 128
    full = activation_estimate(**SMALL, recompute="full")
    assert full.terms == {"layer input": 128} and full.bytes_per_layer == 128


def test_gpt_presets_keep_korthikanti():
    for shape in PRESETS.values():
        if shape.arch == "llama":
            continue
        for tp, sp, rc in [(1, False, "none"), (8, True, "none"), (8, False, "selective")]:
            if shape.heads % tp:
                continue
            est = shape_activation_estimate(
                shape, batch=2, tp=tp, sequence_parallel=sp, recompute=rc
            )
            args = (shape.seq, 2, shape.hidden, shape.heads, shape.layers, tp, sp, rc)
            assert est.bytes == activation_bytes(*args)  # the same call as before issue 15
            assert est.arch == "gpt" and "Korthikanti" in est.formula
            # the per-tensor split adds up to Korthikanti's per-layer coefficient
            assert sum(est.terms.values()) == pytest.approx(est.bytes_per_layer)
    assert mlp_activation_sbh(get_preset("gpt3-175b")) == 19


def test_llama3_8b_differs_from_the_gpt_formula():
    shape = get_preset("llama3-8b")
    llama = shape_activation_estimate(shape)
    gpt = activation_estimate(shape.seq, 1, shape.hidden, shape.heads, shape.layers)
    s, h, a, k, f = 8192, 4096, 32, 8, 14336
    assert llama.bytes_per_layer == pytest.approx(
        s * h * (12 + 4 * k / a + 6 * f / h) + 2 * a * s * s
    )
    assert gpt.bytes_per_layer == pytest.approx(s * h * (34 + 5 * a * s / h))
    assert llama.bytes < gpt.bytes  # no dropout: the attention core is 2as²b, not 5as²b
    # with the attention core recomputed, 8B's terms add up to GPT's 34 by coincidence:
    # 12 + 4·8/32 + 6·3.5 = 34 (no masks, a quarter of K/V, wider SwiGLU tensors)
    sel = shape_activation_estimate(shape, recompute="selective")
    assert sel.bytes_per_layer == s * h * (12 + 1 + 6 * 3.5) == s * h * 34
    assert sel.bytes == activation_bytes(s, 1, h, a, 32, recompute="selective")
    # 70B's SwiGLU is wider relative to h (28672 / 8192 = 3.5, k/a = 8/64): 12 + 0.5 + 21 < 34
    big = get_preset("llama3-70b")
    sel70 = shape_activation_estimate(big, recompute="selective")
    assert sel70.bytes_per_layer == 8192 * 8192 * (12 + 0.5 + 21)
    assert mlp_activation_sbh(shape) == 2 + 6 * f / h


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(arch="bert"), "arch='bert'"),
        (dict(kv_heads=3), "kv_heads=3"),
        (dict(kv_heads=8), "kv_heads=8"),
        (dict(ffn=0), "ffn=0"),
    ],
)
def test_llama_bad_inputs(kwargs, word):
    with pytest.raises(ValueError, match=word.replace("(", r"\(")):
        activation_estimate(**(SMALL | kwargs))
