"""Activation memory of transformer layers: Korthikanti et al. 2022 (GPT) and Llama's own terms.

Part of the memory calculator (:mod:`edu_parallel.memory`). Pure arithmetic, no torch. Bytes per
layer for ``s`` tokens of ``b`` sequences, hidden size ``h``, ``a`` query heads, 16-bit
activations, tensor parallel degree ``t``:

**arch="gpt"** (Korthikanti et al. 2022, arXiv 2205.05198, §4.1): GPT's layer (two LayerNorms,
full multi-head attention, a 4h GeLU MLP, dropout with 1-byte masks) stores ``sbh·34 + 5as²b``.

**arch="llama"** (Llama 3, Dubey et al. 2024, arXiv 2407.21783, Table 3; the layer of Hugging Face
``LlamaDecoderLayer``): RMSNorm, grouped-query attention with ``k`` key/value heads of size
``d = h/a``, a SwiGLU MLP of width ``f`` (``down(silu(gate(x)) * up(x))``) and no dropout
(``attention_dropout = 0``). Counted tensor by tensor, as Korthikanti counts GPT's (what autograd
keeps for the backward pass), in bytes per layer:

=================================  ===========  ===================================================
tensor                             bytes        why it is kept
=================================  ===========  ===================================================
RMSNorm inputs (2 norms)           4sbh         each norm's backward needs its input
q/k/v projection input             2sbh         the three projections' weight gradients
Q                                  2sbh         QKᵀ's backward (after RoPE, which keeps nothing)
K and V                            4sbh·k/a     QKᵀ and attention-over-V at their ``k`` heads
softmax output                     2as²b        softmax's and attention-over-V's backward
o_proj input                       2sbh         o_proj's weight gradient
gate/up input                      2sbh         gate_proj's and up_proj's weight gradients
gate output, up output             4sbf         the fused SwiGLU's input: its backward
                                                recomputes ``silu(gate)`` from them
SwiGLU output                      2sbf         down_proj's weight gradient
=================================  ===========  ===================================================

Total ``sbh·(12 + 4k/a + 6f/h) + 2as²b``: against GPT no dropout masks or dropout output
(``5as²b`` becomes ``2as²b``; ``2sbh`` of masks go), K and V at ``k`` of ``a`` heads, and three
``f``-wide tensors for SwiGLU where GeLU keeps two ``4h``-wide ones. The SwiGLU count is Megatron-
Core's fused kernel (``SwiGLUFunction`` in ``megatron/core/fusions/fused_bias_swiglu.py`` saves
only its input), as Korthikanti's GeLU count is Megatron's; eager PyTorch (``act_fn(gate) * up``)
also keeps ``silu(gate)``, another ``2sbf``. We count K and V at ``k`` heads
as a GQA-aware attention kernel stores them (torch SDPA ``enable_gqa``, FlashAttention-2); the
eager ``repeat_kv`` path stores them ``a/k`` times larger. RMSNorm's input is counted at 2 bytes
like Korthikanti's LayerNorm (fused kernels keep a per-token ``1/rms`` besides, which we ignore).

Tensor parallelism (Megatron's split, Korthikanti eq. (2)) keeps the norm inputs and the two
projection inputs whole (``8sbh``) and divides the rest by ``t``; K and V split ``k`` heads over
``t`` ranks (one head per rank, replicated, when ``t > k``). Sequence parallelism (eq. (3)) divides
the whole-kept ``8sbh`` by ``t`` too. Selective recomputation drops the attention core (the
softmax output), full recomputation keeps only the layer's 16-bit input, ``2sbh``, for both
architectures (Korthikanti Table 2).

:func:`shape_activation_estimate` picks the architecture of a
:class:`~edu_parallel.memory.presets.ModelShape`: ``"llama"`` shapes get Llama's terms, ``"gpt2"``
and ``"bare"`` shapes Korthikanti's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import bad_value, check_choice, check_int
from ..core.i18n import N_, _
from .model_states import GB, RECOMPUTE
from .presets import ModelShape

ACTIVATION_ARCHS = ("gpt", "llama")


@dataclass(frozen=True)
class ActivationEstimate:
    """Activation bytes of a transformer's layers (see the module docstring)."""

    bytes: float  # all layers, one GPU
    bytes_per_layer: float
    formula: str
    arch: str = "gpt"
    terms: dict[str, float] = field(default_factory=dict)  # bytes per layer, by tensor

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "bytes_per_layer": self.bytes_per_layer,
            "formula": self.formula,
            "arch": self.arch,
            "terms": dict(self.terms),
        }


def _layer_terms(
    arch: str, s: int, b: int, h: int, a: int, t: int, sp: bool, rc: str, kv: int, f: int
) -> dict[str, float]:
    """Bytes per layer per GPU of each stored tensor (the module docstring's tables)."""
    sbh, core = s * b * h, a * s * s * b
    if rc == "full":
        return {N_("layer input"): 2.0 * sbh}
    whole = 1 / t if sp else 1.0  # kept whole under TP, split along the sequence under SP
    split = 1 / t
    if arch == "gpt":  # Korthikanti et al. 2022, §4.1
        terms = {
            N_("LayerNorm inputs"): 4 * sbh * whole,
            N_("QKV input"): 2 * sbh * whole,
            N_("Q and K"): 4 * sbh * split,
            "V": 2 * sbh * split,
            N_("out-proj input"): 2 * sbh * split,
            N_("attention dropout mask"): sbh * whole,
            N_("MLP input"): 2 * sbh * whole,
            N_("GeLU input"): 8 * sbh * split,
            N_("GeLU output"): 8 * sbh * split,
            N_("MLP dropout mask"): sbh * whole,
        }
        attention_core = {
            N_("softmax output"): 2 * core * split,
            N_("softmax dropout mask"): core * split,
            N_("dropout output"): 2 * core * split,
        }
    else:  # Llama: RMSNorm, grouped-query attention, SwiGLU, no dropout
        kv_local = kv / t if t <= kv else 1  # K/V heads per rank (replicated when t > kv)
        terms = {
            N_("RMSNorm inputs"): 4 * sbh * whole,
            N_("q/k/v input"): 2 * sbh * whole,
            "Q": 2 * sbh * split,
            N_("K and V"): 4 * sbh * kv_local / a,
            N_("o_proj input"): 2 * sbh * split,
            N_("gate/up input"): 2 * sbh * whole,
            N_("gate and up outputs"): 4 * s * b * f * split,
            N_("SwiGLU output"): 2 * s * b * f * split,
        }
        attention_core = {N_("softmax output"): 2 * core * split}
    if rc != "selective":
        terms.update(attention_core)
    return terms


def _gpt_coefficient(a: int, s: int, h: int, t: int, sp: bool, rc: str) -> tuple[float, str]:
    """Korthikanti's per-layer coefficient of sbh and its source (eqs. (1)-(3), Table 2)."""
    attention_core = 5 * a * s / h  # softmax input/output and dropout mask: 5as²b / (sbh)
    if rc == "full":
        return 2.0, _("sbh·2  [Korthikanti et al. 2022, Table 2, full recompute]")
    if sp:  # eq. (3): every part divided by t (LayerNorm/dropout sharded along the sequence)
        if rc == "selective":
            return (
                34 / t,
                _("sbh·34/t  [Korthikanti et al. 2022, Table 2, sequence parallel + selective]"),
            )
        return (
            34 / t + attention_core / t,
            "sbh·(34/t + 5as/(ht))  [Korthikanti et al. 2022, eq. (3)]",
        )
    if t > 1:  # eq. (2): 10sbh (LayerNorm inputs, dropout masks, layer inputs) stays replicated
        if rc == "selective":
            return 10 + 24 / t, (
                _(
                    "sbh·(10 + 24/t)  [Korthikanti et al. 2022, Table 2, tensor parallel +"
                    " selective]"
                )
            )
        return 10 + 24 / t + attention_core / t, (
            "sbh·(10 + 24/t + 5as/(ht))  [Korthikanti et al. 2022, eq. (2)]"
        )
    if rc == "selective":
        return 34.0, _("sbh·34  [Korthikanti et al. 2022, Table 2, selective]")
    return 34 + attention_core, "sbh·(34 + 5as/h)  [Korthikanti et al. 2022, eq. (1)]"


def _llama_text(t: int, sp: bool, rc: str) -> str:
    if rc == "full":
        return _("sbh·2  [full recompute: the layer input, Korthikanti et al. 2022, Table 2]")
    core = "" if rc == "selective" else (" + 2as/h" if t == 1 else " + 2as/(ht)")
    if t == 1:
        body = f"12 + 4k/a + 6f/h{core}"
    elif sp:
        body = f"(12 + 6f/h)/t + 4k'/a{core}"
    else:
        body = f"8 + (4 + 6f/h)/t + 4k'/a{core}"
    return _(
        "sbh·({body})  [Llama layer: RMSNorm, GQA, SwiGLU, no dropout; module docstring]"
    ).format(body=body)


def activation_estimate(
    seq: int,
    batch: int,
    hidden: int,
    heads: int,
    layers: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    arch: str = "gpt",
    kv_heads: int | None = None,
    ffn: int | None = None,
) -> ActivationEstimate:
    """Activation bytes stored for the backward pass, per GPU (see the module docstring).

    ``arch="gpt"``, after Korthikanti et al. 2022: 16-bit activations and 1-byte dropout masks,
    per transformer layer (§4.1: attention 11sbh + 5as²b, MLP 19sbh, two LayerNorms 4sbh;
    embeddings and the output layer not counted):

    * eq. (1), no parallelism:           sbh·(34 + 5as/h)
    * eq. (2), tensor parallel:          sbh·(10 + 24/t + 5as/(ht))
    * eq. (3), tensor + sequence par.:   sbh·(34/t + 5as/(ht))
    * Table 2, selective recomputation (the attention core, 5as/h, is recomputed):
      sbh·(10 + 24/t) with tensor parallel, sbh·34/t with sequence parallel
    * Table 2, full recomputation (only each layer's 16-bit input is kept): sbh·2

    ``arch="llama"``: ``sbh·(12 + 4k/a + 6f/h) + 2as²b`` with ``k = kv_heads`` (default
    ``heads``) and ``f = ffn`` (default 4h), split by TP/SP as the module docstring says.

    With 1F1B pipeline parallelism the first stage holds p micro-batches of L/p layers each, i.e.
    ``layers`` layers' worth whatever p is (§4.2.3), so pass the full layer count.
    """
    s = check_int("seq", seq, 1)
    b = check_int("batch", batch, 1)
    h = check_int("hidden", hidden, 1)
    a = check_int("heads", heads, 1)
    L = check_int("layers", layers, 1)
    t = check_int("tp", tp, 1)
    if a % t:
        raise bad_value("tp", tp, f"a divisor of heads={a} (each rank holds whole heads)")
    if not isinstance(sequence_parallel, bool):
        raise bad_value("sequence_parallel", sequence_parallel, "True or False")
    recompute = check_choice("recompute", recompute, RECOMPUTE)
    arch = check_choice("arch", arch, ACTIVATION_ARCHS)
    k = a if kv_heads is None else check_int("kv_heads", kv_heads, 1, a)
    if a % k:
        raise bad_value("kv_heads", kv_heads, f"a divisor of heads={a}")
    f = 4 * h if ffn is None else check_int("ffn", ffn, 1)
    sp = sequence_parallel and t > 1
    terms = _layer_terms(arch, s, b, h, a, t, sp, recompute, k, f)
    if arch == "gpt":
        coefficient, text = _gpt_coefficient(a, s, h, t, sequence_parallel, recompute)
        per_layer = s * b * h * coefficient
        shape = f"s={s}, b={b}, h={h}, a={a}, t={t}"
    else:
        per_layer, text = sum(terms.values()), _llama_text(t, sp, recompute)
        shape = f"s={s}, b={b}, h={h}, a={a}, k={k}, f={f}, t={t}"
    total = L * per_layer
    formula = _("per layer {text}; {shape}: {per_layer} B x L={layers} = {gb} GB").format(
        text=text, shape=shape, per_layer=f"{per_layer:.6g}", layers=L, gb=f"{total / GB:.4g}"
    )
    return ActivationEstimate(total, per_layer, formula, arch, terms)


def activation_bytes(
    seq: int,
    batch: int,
    hidden: int,
    heads: int,
    layers: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    arch: str = "gpt",
    kv_heads: int | None = None,
    ffn: int | None = None,
) -> float:
    """Activation bytes per GPU; the number from :func:`activation_estimate` (see there)."""
    return activation_estimate(
        seq, batch, hidden, heads, layers, tp, sequence_parallel, recompute, arch, kv_heads, ffn
    ).bytes


def shape_activation_estimate(
    shape: ModelShape,
    seq: int | None = None,
    batch: int = 1,
    layers: int | None = None,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> ActivationEstimate:
    """:func:`activation_estimate` for a preset's shape: Llama's terms for ``arch="llama"``
    (with its ``kv_heads`` and ``ffn``; a mixture of experts counts one expert's width, the
    extra experts of ``top_k`` are the planner's), Korthikanti's for GPT-2 and bare shapes.
    ``seq`` and ``layers`` default to the shape's."""
    llama = shape.arch == "llama"
    width = shape.expert_ffn if shape.experts and shape.expert_ffn is not None else shape.ffn
    return activation_estimate(
        shape.seq if seq is None else seq,
        batch,
        shape.hidden,
        shape.heads,
        shape.layers if layers is None else layers,
        tp,
        sequence_parallel,
        recompute,
        "llama" if llama else "gpt",
        shape.kv_heads if llama else None,
        width if llama else None,
    )


def mlp_activation_sbh(shape: ModelShape) -> float:
    """Bytes one MLP block (one expert) of ``shape`` stores, per unit of ``s·b·h``: GPT's input,
    GeLU input and output and dropout mask, ``2 + 8 + 8 + 1`` = Korthikanti's 19 (§4.1); Llama's
    input and three ``f``-wide SwiGLU tensors, ``2 + 6f/h`` (the module docstring). The planner
    adds it once per extra expert a token visits."""
    if shape.arch != "llama":
        return 19.0
    width = shape.expert_ffn if shape.experts and shape.expert_ffn is not None else shape.ffn
    f = 4 * shape.hidden if width is None else width
    return 2 + 6 * f / shape.hidden
