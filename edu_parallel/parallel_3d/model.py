"""The lesson 12 model in torch: seeded weights, one layer under TP, and the one-process reference.

A layer (:func:`layer`) is ``x + Attn(x)`` then ``x + MLP(x)`` (or ``x + MoE(x)``), no biases or
norms (see :mod:`edu_parallel.parallel_3d.config`). Under tensor parallelism (Megatron-LM, Shoeybi
et al. 2019, arXiv 1909.08053 §3, Fig. 3) with ``t`` ranks:

* attention: ``Wq``, ``Wk``, ``Wv`` column-parallel by heads (rank r holds heads
  ``[r a/t, (r+1) a/t)``), ``Wo`` row-parallel; ``f`` before the projections (identity forward,
  all-reduce backward), ``g`` after ``Wo`` (all-reduce forward, identity backward): the rank-side
  layer is :func:`edu_parallel.tensor_parallel.attention.tp_attention`;
* MLP: ``W1`` column-parallel, ``W2`` row-parallel, ``f`` before, ``g`` after.

So a layer pays four all-reduces of a (b, s, h) tensor per microbatch: two forward (``g``), two
backward (``f``), what :func:`edu_parallel.planner.traffic.group_bytes_per_rank` counts. With
``t = 1`` there is no collective at all.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..engine.context import RankContext
from ..expert_parallel.experts import MoEParams, init_moe
from ..expert_parallel.layer import moe_layer, moe_reference
from ..task.mlp import adam_update
from ..task.threads import one_thread
from ..tensor_parallel.attention import attention_heads, tp_attention
from ..tensor_parallel.layers import CopyToTensorParallel, ReduceFromTensorParallel
from .config import DTYPE, STEP, Config3D

ATTENTION = ("wq", "wk", "wv", "wo")
MLP = ("w1", "w2")
# parameter -> (dimension split by TP: 0 rows = output features, 1 columns = input features)
TP_SPLIT = {"wq": 0, "wk": 0, "wv": 0, "wo": 1, "w1": 0, "w2": 1}


def dtype() -> torch.dtype:
    return getattr(torch, DTYPE)


def layer_weights(cfg: Config3D) -> list[dict[str, torch.Tensor]]:
    """Seeded ``nn.Linear``-layout weights of every layer, U(-1/sqrt(fan_in), +): the same bits on
    every process. The MoE variant has no ``w1``/``w2`` (see :func:`moe_weights`)."""
    g = torch.Generator().manual_seed(cfg.seed)
    h, f = cfg.hidden, cfg.ffn

    def u(rows: int, cols: int) -> torch.Tensor:
        return ((torch.rand(rows, cols, generator=g) * 2 - 1) / cols**0.5).to(dtype())

    out = []
    for _ in range(cfg.layers):
        w = {k: u(h, h) for k in ATTENTION}
        if not cfg.experts:
            w["w1"], w["w2"] = u(f, h), u(h, f)
        out.append(w)
    return out


def moe_weights(cfg: Config3D) -> list[MoEParams]:
    """Per layer a router and E experts of width 4h/E (same FFN parameters as the dense MLP)."""
    return [
        init_moe(cfg.experts, cfg.hidden, cfg.ffn // cfg.experts, seed=cfg.seed + 101 + i)
        for i in range(cfg.layers)
    ]


def make_data(cfg: Config3D) -> tuple[torch.Tensor, torch.Tensor]:
    """Input activations and target, both (b, s, h), seeded apart from the weights."""
    g = torch.Generator().manual_seed(cfg.seed + 1_000_003)
    shape = (cfg.batch, cfg.seq, cfg.hidden)
    return torch.randn(shape, generator=g).to(dtype()), torch.randn(shape, generator=g).to(dtype())


def shard(name: str, w: torch.Tensor, rank: int, t: int) -> torch.Tensor:
    """Rank ``rank``'s block of ``w`` along :data:`TP_SPLIT`'s dimension (heads stay whole: the
    rows of ``Wq``/``Wk``/``Wv`` are grouped by head, so a block of h/t rows is a/t heads)."""
    return w.chunk(t, TP_SPLIT[name])[rank].contiguous()


def sq_error(out: torch.Tensor, target: torch.Tensor, total: int) -> torch.Tensor:
    """This microbatch's share of the global MSE (sum of squares / all target elements)."""
    return ((out - target) ** 2).sum() / total


class TensorParallel:
    """``f`` and ``g`` on one TP group (``group`` None and ``t = 1``: both are the identity)."""

    def __init__(self, ctx: RankContext | None, group: Any, t: int):
        self.ctx, self.group, self.t = ctx, group, t

    def f(self, x: torch.Tensor) -> torch.Tensor:
        if self.t == 1:
            return x
        return CopyToTensorParallel.apply(x, self.ctx, STEP, self.group)

    def g(self, x: torch.Tensor) -> torch.Tensor:
        if self.t == 1:
            return x
        return ReduceFromTensorParallel.apply(x, self.ctx, STEP, self.group)


def attention(x: torch.Tensor, w: dict[str, torch.Tensor], heads: int, tp: TensorParallel):
    """(b, s, h) -> (b, s, h): softmax attention over this rank's ``heads`` heads, then ``g``:
    :func:`edu_parallel.tensor_parallel.attention.tp_attention` (one process: the same heads
    without ``f`` and ``g``)."""
    wq, wk, wv, wo = (w[n] for n in ATTENTION)  # (h/t, h) x 3 and (h, h/t)
    if tp.t == 1:
        return F.linear(attention_heads(x, wq, wk, wv, heads), wo)  # (b, s, h)
    return tp_attention(tp.ctx, x, wq, wk, wv, wo, heads=heads, step=STEP, group=tp.group)


def mlp(x: torch.Tensor, w: dict[str, torch.Tensor], tp: TensorParallel) -> torch.Tensor:
    """(b, s, h) @ (h, 4h/t) -> GeLU -> @ (4h/t, h), then ``g``."""
    return tp.g(F.linear(F.gelu(F.linear(tp.f(x), w["w1"])), w["w2"]))


def layer(
    x: torch.Tensor,
    w: dict[str, torch.Tensor],
    heads: int,
    tp: TensorParallel,
    moe: Any = None,
) -> torch.Tensor:
    """One layer; ``moe(tokens (T, h)) -> (T, h)`` replaces the MLP in the MoE variant."""
    x = x + attention(x, w, heads, tp)
    if moe is None:
        return x + mlp(x, w, tp)
    b, s, h = x.shape
    return x + moe(x.reshape(b * s, h)).view(b, s, h)


def adam_step(params: list[torch.Tensor], lr: float) -> None:
    """The first step of ``torch.optim.Adam(params, lr=lr)`` (fresh m and v, default betas and
    eps), in place, with its update written out (:func:`edu_parallel.task.mlp.adam_update`): a
    ``torch.optim`` optimizer imports ``torch._dynamo`` when it is built, about 1.5 s per
    process, which eight ranks on two cores paid on the first step of every cluster."""
    with torch.no_grad():
        for t in params:
            if t.grad is not None:  # as torch.optim skips a parameter without a gradient
                adam_update(t, t.grad, torch.zeros_like(t), torch.zeros_like(t), 1 + STEP, lr)


def moe_on_ranks(
    ctx: RankContext, router: Any, experts: Any, cfg: Config3D, group: Any, routings: list
) -> Any:
    """The expert-parallel MoE of one layer: tokens travel to their experts' ranks by
    all-to-all in ``group`` (:func:`edu_parallel.expert_parallel.layer.moe_layer`)."""

    def run(tok: torch.Tensor) -> torch.Tensor:
        y, routing = moe_layer(
            ctx,
            tok,
            router,
            experts,
            top_k=cfg.top_k,
            capacity_factor=cfg.capacity_factor,
            step=STEP,
            group=group,
        )
        routings.append(routing)
        return y

    return run


def reference_step(cfg: Config3D) -> dict[str, Any]:
    """The same step on one process: ``{"loss", "grads" {name: full gradient}, "updated"
    {name: parameter after Adam}}`` (names ``layer{i}.{param}``; MoE: ``layer{i}.router.*`` and
    ``layer{i}.experts.*``).

    Runs with one intra-op thread, as every rank does
    (:func:`edu_parallel.task.threads.one_thread`: on two shared cores a second thread
    only waited for a busy core, and this 10 ms step took 0.3 to 2 s)."""
    with one_thread():
        return _reference_step(cfg)


def _reference_step(cfg: Config3D) -> dict[str, Any]:
    x, y = make_data(cfg)
    named: dict[str, torch.Tensor] = {}
    weights = layer_weights(cfg)
    moes = moe_weights(cfg) if cfg.experts else [None] * cfg.layers
    one = TensorParallel(None, None, 1)
    for i, w in enumerate(weights):
        for k, v in w.items():
            named[f"layer{i}.{k}"] = v.requires_grad_(True)
        if moes[i] is not None:
            named.update({f"layer{i}.router.{k}": p for k, p in moes[i].router.named_parameters()})
            named.update(
                {f"layer{i}.experts.{k}": p for k, p in moes[i].experts.named_parameters()}
            )
    out = x
    for w, p in zip(weights, moes, strict=True):
        moe = None
        if p is not None:

            def moe(tok: torch.Tensor, p: MoEParams = p) -> torch.Tensor:
                kw = {"top_k": cfg.top_k, "capacity_factor": cfg.capacity_factor}
                return moe_reference(tok, p.router, p.experts, **kw)[0]

        out = layer(out, w, cfg.heads, one, moe)  # (b, s, h)
    loss = sq_error(out, y, y.numel())
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in named.items()}
    adam_step(list(named.values()), cfg.lr)
    updated = {k: v.detach().clone() for k, v in named.items()}
    return {"loss": float(loss.detach()), "grads": grads, "updated": updated}
