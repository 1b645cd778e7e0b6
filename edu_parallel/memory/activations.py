"""Activation memory of transformer layers, after Korthikanti et al. 2022 (arXiv 2205.05198).

Part of the memory calculator (:mod:`edu_parallel.memory`). Pure
arithmetic, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import bad_value, check_choice, check_int
from .model_states import GB, RECOMPUTE


@dataclass(frozen=True)
class ActivationEstimate:
    """Activation bytes of a transformer's layers (Korthikanti et al. 2022)."""

    bytes: float  # all layers, one GPU
    bytes_per_layer: float
    formula: str

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "bytes_per_layer": self.bytes_per_layer,
            "formula": self.formula,
        }


def activation_estimate(
    seq: int,
    batch: int,
    hidden: int,
    heads: int,
    layers: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> ActivationEstimate:
    """Activation bytes stored for the backward pass, per GPU, after Korthikanti et al. 2022.

    16-bit activations and 1-byte dropout masks, per transformer layer (§4.1: attention
    11sbh + 5as²b, MLP 19sbh, two LayerNorms 4sbh; embeddings and the output layer not counted):

    * eq. (1), no parallelism:           sbh·(34 + 5as/h)
    * eq. (2), tensor parallel:          sbh·(10 + 24/t + 5as/(ht))
    * eq. (3), tensor + sequence par.:   sbh·(34/t + 5as/(ht))
    * Table 2, selective recomputation (the attention core, 5as/h, is recomputed):
      sbh·(10 + 24/t) with tensor parallel, sbh·34/t with sequence parallel
    * Table 2, full recomputation (only each layer's 16-bit input is kept): sbh·2

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
    sbh = s * b * h
    attention_core = 5 * a * s / h  # softmax input/output and dropout mask: 5as²b / (sbh)
    if recompute == "full":
        coefficient, text = 2.0, "sbh·2  [Korthikanti et al. 2022, Table 2, full recompute]"
    elif sequence_parallel:
        # eq. (3): every part divided by t (LayerNorm/dropout sharded along the sequence)
        if recompute == "selective":
            coefficient = 34 / t
            text = "sbh·34/t  [Korthikanti et al. 2022, Table 2, sequence parallel + selective]"
        else:
            coefficient = 34 / t + attention_core / t
            text = "sbh·(34/t + 5as/(ht))  [Korthikanti et al. 2022, eq. (3)]"
    elif t > 1:
        # eq. (2): 10sbh (LayerNorm inputs, dropout masks, layer inputs) stays replicated
        if recompute == "selective":
            coefficient = 10 + 24 / t
            text = (
                "sbh·(10 + 24/t)  [Korthikanti et al. 2022, Table 2, tensor parallel + selective]"
            )
        else:
            coefficient = 10 + 24 / t + attention_core / t
            text = "sbh·(10 + 24/t + 5as/(ht))  [Korthikanti et al. 2022, eq. (2)]"
    elif recompute == "selective":
        coefficient, text = 34.0, "sbh·34  [Korthikanti et al. 2022, Table 2, selective]"
    else:
        coefficient, text = (
            34 + attention_core,
            "sbh·(34 + 5as/h)  [Korthikanti et al. 2022, eq. (1)]",
        )
    per_layer = sbh * coefficient
    total = L * per_layer
    formula = (
        f"per layer {text}; s={s}, b={b}, h={h}, a={a}, t={t}: "
        f"{per_layer:.6g} B x L={L} = {total / GB:.4g} GB"
    )
    return ActivationEstimate(bytes=total, bytes_per_layer=per_layer, formula=formula)


def activation_bytes(
    seq: int,
    batch: int,
    hidden: int,
    heads: int,
    layers: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> float:
    """Activation bytes per GPU; the number from :func:`activation_estimate` (see there)."""
    return activation_estimate(
        seq, batch, hidden, heads, layers, tp, sequence_parallel, recompute
    ).bytes
