"""Transformer shapes for the memory calculator, with their parameter count computed from the shape.

Three families are counted, the first two from their reference implementations:

* ``"gpt2"`` (GPT-2, Radford et al. 2019; nanoGPT ``model.py``): learned position embeddings,
  LayerNorm with bias, biased Linear layers, a 4h MLP with GELU, the output layer tied to the
  token embedding.
* ``"llama"`` (Llama 3, Dubey et al. 2024, "The Llama 3 Herd of Models", Table 3; Hugging Face
  ``LlamaForCausalLM``): RoPE (no position parameters), RMSNorm (weight only), no biases,
  grouped-query attention with ``kv_heads`` key/value heads, a SwiGLU MLP of width ``ffn``
  (three matrices), an output layer *not* tied to the embedding.
* ``"bare"`` (the lesson 12 model, :mod:`edu_parallel.parallel_3d`): ``L`` layers of attention
  (``Wq``, ``Wo`` (h, h); ``Wk``, ``Wv`` (h, kv_heads * h/heads)) and a two-matrix MLP h -> ffn
  -> h (ffn default 4h); no biases, norms or embeddings (``vocab`` may be 0). With the defaults a
  layer has exactly ``12 h^2`` parameters.

A **mixture of experts** (``experts = E > 0``, ``top_k = k``; Shazeer et al. 2017, Fedus et al.
2022; Mixtral, Jiang et al. 2024, arXiv 2401.04088 §2.1) replaces each layer's MLP by ``E``
experts, each an MLP of the family's kind of width ``expert_ffn`` (default ``ffn``), and a router
``Linear(h, E)`` without bias; every token runs through ``k`` experts. :func:`count_params`
counts all ``E`` experts; :func:`active_params` counts the parameters one token uses (``k``
experts; the ``6·N·T`` compute of the planner); :func:`expert_params` is the experts' share.

:func:`layer_params` and :func:`edge_params` split the count the way pipeline stages hold it (the
planner's traffic and memory per stage); ``count_params = L * layer_params + sum(edge_params)``.

:func:`count_params` is checked in ``tests/test_memory.py`` to be within 2% of each preset's
``nominal_params``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..core.errors import check_choice, check_int

ARCHS = ("gpt2", "llama", "bare")


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
    experts: int = 0  # E experts per layer replace the MLP; 0: a dense model
    top_k: int = 0  # experts each token runs through (1 <= top_k <= experts when experts > 0)
    expert_ffn: int | None = None  # width of one expert's MLP; None means ffn

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def params(self) -> int:
        return count_params(self)

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["params"] = self.params
        if self.is_moe:
            data["active_params"] = active_params(self)
        return data


def check_experts(shape: ModelShape) -> tuple[int, int]:
    """``(experts, top_k)`` of ``shape``, checked: ``experts`` >= 0 (0: dense), and with experts
    ``1 <= top_k <= experts``."""
    E = check_int("experts", shape.experts, 0)
    if E == 0:
        return 0, 0
    return E, check_int("top_k", shape.top_k, 1, E)


def mlp_params(shape: ModelShape, width: int) -> int:
    """One MLP of the family's kind, h -> ``width`` -> h (see the module docstring)."""
    h = shape.hidden
    if shape.arch == "gpt2":
        return (h * width + width) + (width * h + h)  # nanoGPT c_fc, c_proj, both with bias
    if shape.arch == "bare":
        return 2 * h * width  # W1 (h -> width), W2 (width -> h)
    return 3 * h * width  # SwiGLU: gate_proj, up_proj (h, width) and down_proj (width, h)


def expert_params(shape: ModelShape) -> int:
    """Parameters of one layer's ``E`` experts (0 for a dense model; the router not counted)."""
    E, _ = check_experts(shape)
    width = shape.expert_ffn if shape.expert_ffn is not None else _ffn(shape)
    return E * mlp_params(shape, width) if E else 0


def layer_params(shape: ModelShape) -> int:
    """Parameters of one transformer layer of ``shape`` (see the module docstring)."""
    check_choice("arch", shape.arch, ARCHS)
    h, a = shape.hidden, shape.heads
    kv = shape.kv_heads if shape.kv_heads is not None else a
    head_dim = h // a
    E, _ = check_experts(shape)
    # the MLP, or E experts (each an MLP of the same kind) and a router Linear(h, E) without bias
    mlp = expert_params(shape) + h * E if E else mlp_params(shape, _ffn(shape))
    if shape.arch == "gpt2":
        # nanoGPT model.py: c_attn Linear(h, 3h) + c_proj Linear(h, h), both with bias
        attention = (h * 3 * h + 3 * h) + (h * h + h)
        norms = 2 * (2 * h)  # ln_1, ln_2: weight and bias
        return attention + mlp + norms
    # Llama and bare: q_proj (h, a*d), k_proj and v_proj (h, kv*d), o_proj (a*d, h); no biases
    attention = h * a * head_dim + 2 * h * kv * head_dim + a * head_dim * h
    if shape.arch == "bare":
        return attention + mlp  # no norms
    norms = 2 * h  # input_layernorm, post_attention_layernorm: RMSNorm weight only
    return attention + mlp + norms


def _ffn(shape: ModelShape) -> int:
    return shape.ffn if shape.ffn is not None else 4 * shape.hidden


def edge_params(shape: ModelShape) -> tuple[int, int]:
    """Parameters outside the layers: (held by the first pipeline stage, by the last).

    GPT-2: token and position embeddings on the first stage (the output layer is tied to the
    token embedding and counted there once), the final LayerNorm on the last. Llama: the token
    embedding on the first, the final RMSNorm and the untied output layer on the last. Bare:
    none."""
    check_choice("arch", shape.arch, ARCHS)
    h, V, s = shape.hidden, shape.vocab, shape.seq
    if shape.arch == "gpt2":
        return V * h + s * h, 2 * h  # wte (tied to lm_head) + wpe; ln_f
    if shape.arch == "llama":
        return V * h, V * h + h  # embed_tokens; lm_head (untied in Llama 3) + final norm
    return 0, 0


def count_params(shape: ModelShape) -> int:
    """Parameters of ``shape``, counted weight by weight (see the module docstring)."""
    first, last = edge_params(shape)
    return shape.layers * layer_params(shape) + first + last


def active_params(shape: ModelShape) -> int:
    """Parameters one token uses: :func:`count_params` less the ``E - k`` experts it skips in
    every layer (equal to ``count_params`` for a dense model)."""
    E, k = check_experts(shape)
    unused = expert_params(shape) * (E - k) // E if E else 0
    return count_params(shape) - shape.layers * unused


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
        ModelShape(
            "llama3-405b",
            "llama",
            layers=126,
            hidden=16384,
            heads=128,
            vocab=128256,
            seq=8192,
            kv_heads=8,
            ffn=53248,
            nominal_params=405e9,
            source=(
                "Llama 3 405B: Dubey et al. 2024, 'The Llama 3 Herd of Models', arXiv 2407.21783,"
                " Table 3 (126 layers, model dimension 16,384, FFN 53,248, 128 heads, 8 KV heads,"
                " vocabulary 128K = 128,256 in meta-llama/Llama-3.1-405B config.json)"
            ),
        ),
        ModelShape(
            "gpt3-175b",
            "gpt2",
            layers=96,
            hidden=12288,
            heads=96,
            vocab=50257,
            seq=2048,
            nominal_params=175e9,
            source=(
                "GPT-3 175B: Brown et al. 2020, 'Language Models are Few-Shot Learners',"
                " arXiv 2005.14165, Table 2.1 (96 layers, d_model 12288, 96 heads, context 2048);"
                " GPT-2's vocabulary of 50257 BPE tokens and layer structure"
            ),
        ),
        ModelShape(
            "gpt-7b",
            "gpt2",
            layers=32,
            hidden=4096,
            heads=32,
            vocab=50257,
            seq=2048,
            nominal_params=6.7e9,
            source=(
                "a GPT-2-style 7B: the shape of GPT-3 6.7B (Brown et al. 2020, Table 2.1: 32"
                " layers, d_model 4096, 32 heads, context 2048), GPT-2's vocabulary"
            ),
        ),
        ModelShape(
            "mixtral-8x7b",
            "llama",
            layers=32,
            hidden=4096,
            heads=32,
            vocab=32000,
            seq=32768,
            kv_heads=8,
            ffn=14336,
            nominal_params=46.7e9,
            source=(
                "Mixtral 8x7B: Jiang et al. 2024, 'Mixtral of Experts', arXiv 2401.04088, Table 1"
                " (dim 4096, 32 layers, 32 heads, 8 KV heads, hidden_dim 14336, vocab 32000,"
                " 8 experts, top-2) and §2 (pretrained with a 32k-token context); 46.7B total and"
                " 12.9B active parameters in Mistral AI's announcement 'Mixtral of experts'"
                " (Dec. 2023); mistralai/Mixtral-8x7B-v0.1 config.json"
            ),
            experts=8,
            top_k=2,
        ),
    )
}


def get_preset(name: str) -> ModelShape:
    """The preset called ``name``; an unknown name raises a ValueError listing the known ones."""
    return PRESETS[check_choice("model", name, PRESETS)]
