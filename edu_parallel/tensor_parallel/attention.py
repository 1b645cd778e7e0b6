"""Tensor-parallel self-attention: the heads split across ranks (Megatron-LM §3, Fig. 3b).

Shoeybi et al. 2019, "Megatron-LM" (arXiv 1909.08053) §3: multi-head attention is parallel by
construction, every head is computed on its own. With ``a`` heads of size ``d = h/a`` on ``t``
ranks, rank r keeps heads ``[r a/t, (r+1) a/t)``:

* ``Wq``, ``Wk``, ``Wv`` (each ``nn.Linear(h, h)``, weight (h, h)) are **column-parallel**: the
  rows of the weight are grouped by head, so rank r holds rows ``[r h/t, (r+1) h/t)`` and the
  matching bias slices. The input X (b, s, h) is replicated; Q, K, V come out as the rank's
  (b, s, h/t) slices, its a/t heads;
* softmax attention runs per local head, with no communication (heads never mix);
* ``Wo`` (``nn.Linear(h, h)``) is **row-parallel**: rank r holds its columns ``[r h/t, (r+1) h/t)``,
  the heads it computed; ``Y_r Wo_r^T`` is a PARTIAL SUM of the output, all-reduced forward
  (``g``), and the bias ``bo`` is added once, after it;
* ``f`` before the projections: identity forward, all-reduce of dX backward (each rank's dX is
  the part that flowed through its heads).

So one attention block costs one all-reduce of (b, s, h) forward and one backward, like the MLP:
Megatron's layer pays four per microbatch. Written as :func:`tp_attention` with the operators of
:mod:`edu_parallel.tensor_parallel.layers` (``CopyToTensorParallel`` = ``f``,
``ReduceFromTensorParallel`` = ``g``), the structure of Megatron-LM's ``SelfAttention``
(``megatron/core/transformer/attention.py``: ``num_attention_heads_per_partition`` = heads / t,
``linear_qkv`` column-parallel, ``linear_proj`` row-parallel with ``input_is_parallel=True``).
Attention itself is
``torch.nn.functional.scaled_dot_product_attention``; :func:`dense_attention` is the layer on one
process. ``edu_parallel.parallel_3d`` builds its transformer layer from :func:`attention_heads` and
:func:`tp_attention`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..core.errors import bad_value
from ..engine.context import RankContext
from .layers import CopyToTensorParallel, linear_then_g, own_block

PROJECTIONS = ("wq", "wk", "wv", "wo")
BIASES = ("bq", "bk", "bv", "bo")


def attention_heads(
    x: torch.Tensor,
    wq: torch.Tensor,
    wk: torch.Tensor,
    wv: torch.Tensor,
    heads: int,
    bq: torch.Tensor | None = None,
    bk: torch.Tensor | None = None,
    bv: torch.Tensor | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """Softmax attention of the ``heads`` heads whose rows ``wq``/``wk``/``wv`` hold.

    ``x`` (b, s, h); ``wq`` etc. (heads*d, h). Returns (b, s, heads*d), the heads side by side.
    """
    b, s, _ = x.shape

    def split(t: torch.Tensor) -> torch.Tensor:  # (b, s, heads*d) -> (b, heads, s, d)
        return t.view(b, s, heads, -1).transpose(1, 2)

    q, k, v = (split(F.linear(x, w, bias)) for w, bias in ((wq, bq), (wk, bk), (wv, bv)))
    att = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # (b, heads, s, d)
    return att.transpose(1, 2).reshape(b, s, -1)  # (b, s, heads*d)


def tp_attention(
    ctx: RankContext,
    x: torch.Tensor,
    wq: torch.Tensor,
    wk: torch.Tensor,
    wv: torch.Tensor,
    wo: torch.Tensor,
    bo: torch.Tensor | None = None,
    *,
    heads: int,
    bq: torch.Tensor | None = None,
    bk: torch.Tensor | None = None,
    bv: torch.Tensor | None = None,
    causal: bool = False,
    step: int | None = None,
    group: Any = None,
) -> torch.Tensor:
    """This rank's heads of self-attention, summed over the group: (b, s, h) -> (b, s, h).

    ``x`` replicated; ``wq``/``wk``/``wv`` (h/t, h) and ``bq``/``bk``/``bv`` (h/t,) the rank's
    rows; ``wo`` (h, h/t) its columns; ``bo`` (h,) the full bias; ``heads`` = a/t, the rank's
    heads. ``f`` (all-reduce backward) before the projections, ``g`` (all-reduce forward) after
    ``Wo``.
    """
    x = CopyToTensorParallel.apply(x, ctx, step, group)  # f: (b, s, h), identity forward
    y = attention_heads(x, wq, wk, wv, heads, bq, bk, bv, causal)  # (b, s, h/t): local heads
    return linear_then_g(ctx, y, wo, bo, step, group)  # (b, s, h/t) @ (h/t, h), g, + bo


def shard_attention(
    weights: dict[str, torch.Tensor], rank: int, t: int, heads: int
) -> dict[str, torch.Tensor]:
    """Rank ``rank``'s part of the attention ``weights`` (``wq``... (h, h), ``bq``... (h,)): rows
    (heads) of Q, K, V and their biases, columns of ``Wo``, the full ``bo``."""
    if heads % t:
        raise bad_value("heads", heads, f"a multiple of the TP degree t={t} (whole heads per rank)")
    out = {}
    for name, w in weights.items():
        if name in ("wq", "wk", "wv", "bq", "bk", "bv"):
            out[name] = own_block(w.detach(), rank, t, 0)  # a/t heads: (h/t, h) or (h/t,)
        elif name == "wo":
            out[name] = own_block(w.detach(), rank, t, 1)  # (h, h/t)
        elif name == "bo":
            out[name] = w.detach().clone()  # added once, after g
        else:
            raise bad_value("weights", name, f"keys among {PROJECTIONS + BIASES}")
    return out


def dense_attention(
    x: torch.Tensor, weights: dict[str, torch.Tensor], heads: int, causal: bool = False
) -> torch.Tensor:
    """The same layer on one process: all ``heads`` heads, then ``Wo`` and ``bo``."""
    w = weights
    biases = (w.get("bq"), w.get("bk"), w.get("bv"))
    y = attention_heads(x, w["wq"], w["wk"], w["wv"], heads, *biases, causal=causal)  # (b, s, h)
    return F.linear(y, w["wo"], w.get("bo"))
