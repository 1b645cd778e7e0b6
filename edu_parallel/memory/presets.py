"""Transformer shapes for the memory calculator, with their parameter count computed from the shape.

Two families are counted, each from its reference implementation:

* ``"gpt2"`` (GPT-2, Radford et al. 2019; nanoGPT ``model.py``): learned position embeddings,
  LayerNorm with bias, biased Linear layers, a 4h MLP with GELU, the output layer tied to the
  token embedding.
* ``"llama"`` (Llama 3, Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3; Hugging Face
  ``LlamaForCausalLM``): RoPE (no position parameters), RMSNorm (weight only), no biases,
  grouped-query attention with ``kv_heads`` key/value heads, a SwiGLU MLP of width ``ffn``
  (three matrices), an output layer *not* tied to the embedding.

:func:`count_params` is checked in ``tests/test_memory.py`` to be within 2% of each preset's
``nominal_params``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..core.errors import check_choice

ARCHS = ("gpt2", "llama")


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer: the numbers the memory formulas need, and where they come
    from."""

    name: str
    arch: str  # one of ARCHS: decides which weights exist (see count_params)
    layers: int  # L
    hidden: int  # h
    heads: int  # a, attention (query) heads
    vocab: int  # V
    seq: int  # s, the training sequence length
    kv_heads: int | None = None  # grouped-query attention; None means kv_heads == heads
    ffn: int | None = None  # MLP width; None means 4h (GPT-2)
    nominal_params: float = 0.0  # the size the model is known by
    source: str = ""

    @property
    def params(self) -> int:
        return count_params(self)

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["params"] = self.params
        return data


def count_params(shape: ModelShape) -> int:
    """Parameters of ``shape``, counted weight by weight (see the module docstring)."""
    check_choice("arch", shape.arch, ARCHS)
    L, h, a, V, s = shape.layers, shape.hidden, shape.heads, shape.vocab, shape.seq
    kv = shape.kv_heads if shape.kv_heads is not None else a
    head_dim = h // a
    if shape.arch == "gpt2":
        # nanoGPT model.py: c_attn Linear(h, 3h) + c_proj Linear(h, h), both with bias
        attention = (h * 3 * h + 3 * h) + (h * h + h)
        ffn = shape.ffn if shape.ffn is not None else 4 * h
        # c_fc Linear(h, 4h) + c_proj Linear(4h, h), both with bias
        mlp = (h * ffn + ffn) + (ffn * h + h)
        norms = 2 * (2 * h)  # ln_1, ln_2: weight and bias
        per_layer = attention + mlp + norms
        token_embedding = V * h  # wte, tied to lm_head (counted once)
        position_embedding = s * h  # wpe, learned absolute positions
        final_norm = 2 * h  # ln_f
        return L * per_layer + token_embedding + position_embedding + final_norm
    # Llama: q_proj (h, a*d), k_proj and v_proj (h, kv*d), o_proj (a*d, h); no biases
    attention = h * a * head_dim + 2 * h * kv * head_dim + a * head_dim * h
    ffn = shape.ffn if shape.ffn is not None else 4 * h
    mlp = 3 * h * ffn  # SwiGLU: gate_proj, up_proj (h, ffn) and down_proj (ffn, h)
    norms = 2 * h  # input_layernorm, post_attention_layernorm: RMSNorm weight only
    per_layer = attention + mlp + norms
    token_embedding = V * h  # embed_tokens
    output_layer = V * h  # lm_head, untied in Llama 3 8B and 70B
    final_norm = h
    return L * per_layer + token_embedding + output_layer + final_norm


PRESETS: dict[str, ModelShape] = {
    shape.name: shape
    for shape in (
        ModelShape(
            "gpt2-1.5b",
            "gpt2",
            layers=48,
            hidden=1600,
            heads=25,
            vocab=50257,
            seq=1024,
            # OpenAI released it as "1558M"; the paper rounds to 1.5B
            nominal_params=1.558e9,
            source="GPT-2 XL: Radford et al. 2019, Table 2; openai/gpt-2 checkpoint '1558M'",
        ),
        ModelShape(
            "zero-7.5b",
            "gpt2",
            layers=64,
            hidden=3072,
            heads=24,
            vocab=50257,
            seq=1024,
            nominal_params=7.5e9,
            source=(
                "the ZeRO paper's example (Rajbhandari et al. 2019, Fig. 1) gives only Psi = 7.5B, "
                "no shape; we use a GPT-2-style model with Megatron-LM 8.3B's width (h=3072, "
                "24 heads; Shoeybi et al. 2019, Table 1) and 64 instead of 72 layers"
            ),
        ),
        ModelShape(
            "llama3-8b",
            "llama",
            layers=32,
            hidden=4096,
            heads=32,
            vocab=128256,
            seq=8192,
            kv_heads=8,
            ffn=14336,
            nominal_params=8.0e9,
            source="Llama 3 8B: Dubey et al. 2024, Table 3; meta-llama/Meta-Llama-3-8B config.json",
        ),
        ModelShape(
            "llama3-70b",
            "llama",
            layers=80,
            hidden=8192,
            heads=64,
            vocab=128256,
            seq=8192,
            kv_heads=8,
            ffn=28672,
            nominal_params=70.0e9,
            source=(
                "Llama 3 70B: Dubey et al. 2024, Table 3; meta-llama/Meta-Llama-3-70B config.json"
            ),
        ),
    )
}


def get_preset(name: str) -> ModelShape:
    """The preset called ``name``; an unknown name raises a ValueError listing the known ones."""
    return PRESETS[check_choice("model", name, PRESETS)]
