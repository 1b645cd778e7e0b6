"""Expert parallelism, executed: a top-k mixture-of-experts layer whose tokens travel by all-to-all.

Shazeer et al. 2017, "Outrageously Large Neural Networks: the Sparsely-Gated Mixture-of-Experts
Layer" (arXiv 1701.06538); GShard, Lepikhin et al. 2020 (arXiv 2006.16668); Switch Transformer,
Fedus et al. 2021 (arXiv 2101.03961); Mixtral, Jiang et al. 2024 (arXiv 2401.04088).

* Experts: E small MLPs ``h -> f -> h`` with GeLU; rank r of N owns experts
  ``[r E/N, (r+1) E/N)`` (:meth:`ExpertBank.shard`). The router is replicated on every rank.
* Router (:func:`route`): ``logits = x W_r + b_r``, ``p = softmax(logits)``, the k experts with the
  largest logits. Combine weights: for k > 1 the k probabilities renormalised to sum to 1 (GShard
  top-2, Mixtral's softmax over the top-k logits: the same numbers); for k = 1 the raw probability
  (Switch: renormalising one weight gives 1 and the router would get no gradient).
* Capacity (:func:`capacity_positions`): each source rank is one GShard "group": expert e accepts
  at most ``capacity = ceil(C * T * k / E)`` of that rank's T tokens' k assignments
  (:func:`~edu_parallel.moe_run.expert_capacity`). Queue order as in GShard Algorithm 1: all
  first choices in token order, then all second choices, and so on; an assignment past the
  capacity is dropped before it travels, and contributes 0 (the token keeps its other
  assignments; weights are not renormalised after a drop).
* :func:`moe_layer`, ``dispatch="variable"`` (default): exchange the per-expert counts (an
  ``all_to_all_single`` of E integers), then dispatch the kept token rows with ``all_to_all_single``
  and variable splits, run the local experts, and combine back with the reverse
  ``all_to_all_single``. ``dispatch="padded"``: GShard/Switch's fixed (E, C, h) buffer with equal
  splits, empty slots zero, no counts. Both in :mod:`edu_parallel.moe_dispatch`, whose
  :class:`AllToAll` is the autograd function: its backward is the reverse all-to-all (phase
  ``"backward"``). Each exchange also writes a ``mark`` with the bytes sent to and received from
  every peer, which is where the traffic matrix comes from
  (:func:`~edu_parallel.moe_run.traffic_matrix`).
* :func:`moe_reference`: the same layer on one process, the naive dense way (every expert on every
  token, combined with a (T, E) weight matrix that is 0 where not routed or dropped).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .moe_dispatch import (  # noqa: F401  (A2A, SPLITS_MARK, AllToAll, exchange: re-exported)
    A2A,
    DISPATCH,
    SPLITS_MARK,
    AllToAll,
    DispatchStats,
    exchange,
)
from .moe_formulas import check_dispatch, expert_capacity


class ExpertBank(nn.Module):
    """``num`` experts ``y = GeLU(x W1 + b1) W2 + b2``, global indices ``first .. first+num-1``.

    Shapes: w1 (e, h, f), b1 (e, f), w2 (e, f, h), b2 (e, h).
    """

    def __init__(self, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor,
                 first: int = 0):  # fmt: skip
        super().__init__()
        self.w1, self.b1 = nn.Parameter(w1), nn.Parameter(b1)
        self.w2, self.b2 = nn.Parameter(w2), nn.Parameter(b2)
        self.first = first

    @property
    def num(self) -> int:
        return self.w1.shape[0]

    def expert(self, j: int, x: torch.Tensor) -> torch.Tensor:
        """Local expert ``j`` on rows ``x``: (m, h) -> (m, h)."""
        return F.gelu(x @ self.w1[j] + self.b1[j]) @ self.w2[j] + self.b2[j]

    def shard(self, rank: int, world_size: int) -> ExpertBank:
        """A copy of the E/N experts rank ``rank`` owns (E divisible by N)."""
        per = self.num // world_size
        s = slice(rank * per, (rank + 1) * per)
        return ExpertBank(*(p.detach()[s].clone() for p in (self.w1, self.b1, self.w2, self.b2)),
                          first=self.first + rank * per)  # fmt: skip


@dataclass
class MoEParams:
    """A whole MoE layer: the router (``nn.Linear(h, E)``) and all E experts."""

    router: nn.Linear
    experts: ExpertBank


def init_moe(experts: int, hidden: int, ffn: int | None = None, *, seed: int = 0,
             skew: float = 0.0, dtype: torch.dtype = torch.float32) -> MoEParams:  # fmt: skip
    """Seeded weights, identical on every rank. ``ffn`` defaults to ``2 * hidden``.

    ``skew`` is added to the router bias of expert 0: its logit grows by ``skew`` for every token,
    so it becomes the hot expert.
    """
    f = 2 * hidden if ffn is None else ffn
    g = torch.Generator().manual_seed(seed)
    router = nn.Linear(hidden, experts, dtype=dtype)
    with torch.no_grad():
        router.weight.copy_(torch.randn(experts, hidden, generator=g) / math.sqrt(hidden))
        router.bias.zero_()
        router.bias[0] = skew
    w1 = torch.randn(experts, hidden, f, generator=g, dtype=dtype) / math.sqrt(hidden)
    b1 = 0.1 * torch.randn(experts, f, generator=g, dtype=dtype)
    w2 = torch.randn(experts, f, hidden, generator=g, dtype=dtype) / math.sqrt(f)
    b2 = 0.1 * torch.randn(experts, hidden, generator=g, dtype=dtype)
    return MoEParams(router, ExpertBank(w1, b1, w2, b2))


def make_tokens(world_size: int, tokens: int, hidden: int, seed: int = 0,
                dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The global batch ``x`` (N T, h) (rank r holds rows [r T, (r+1) T)) and a seeded output
    gradient ``dy`` of the same shape for the backward check."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(world_size * tokens, hidden, generator=g, dtype=dtype)
    return x, torch.randn(world_size * tokens, hidden, generator=g, dtype=dtype)


# ----------------------------------------------------------------- router and capacity
@dataclass
class Routing:
    """One group's routing decisions. Shapes: T tokens, k choices, E experts."""

    probs: torch.Tensor  # (T, E) softmax of the router logits
    experts: torch.Tensor  # (T, k) int64, best first
    gates: torch.Tensor  # (T, k) combine weights (differentiable)
    positions: torch.Tensor  # (T, k) place in the expert's queue
    kept: torch.Tensor  # (T, k) bool: positions < capacity
    capacity: int
    stats: DispatchStats | None = None  # set by moe_layer: slots sent and filled, rows computed


def capacity_positions(choices: torch.Tensor, experts: int) -> torch.Tensor:
    """Each assignment's place in its expert's queue: all first choices in token order, then all
    second choices, ... (GShard Algorithm 1). (T, k) expert ids -> (T, k) positions."""
    t, k = choices.shape
    flat = choices.t().reshape(-1)  # (k T,) choice-major: first choices of every token come first
    onehot = F.one_hot(flat, experts)  # (k T, E)
    pos = ((onehot.cumsum(0) - 1) * onehot).sum(1)  # (k T,) assignments ahead in the same expert
    return pos.view(k, t).t()


def route(x: torch.Tensor, router: nn.Module, top_k: int, capacity_factor: float) -> Routing:
    """Softmax gate, top-k, renormalised weights (k > 1), capacity. (T, h) -> :class:`Routing`."""
    logits = router(x)  # (T, h) -> (T, E)
    t, e = logits.shape
    probs = logits.softmax(-1)  # (T, E)
    choices = logits.detach().topk(top_k, dim=-1).indices  # (T, k); on logits: no 0-prob ties
    gates = probs.gather(1, choices)  # (T, k)
    if top_k > 1:
        gates = gates / gates.sum(-1, keepdim=True)
    cap = expert_capacity(t, e, top_k, capacity_factor)
    pos = capacity_positions(choices, e)
    return Routing(probs, choices, gates, pos, pos < cap, cap)


# ----------------------------------------------------------------- the layer
def moe_layer(ctx: Any, x: torch.Tensor, router: nn.Module, experts: ExpertBank, *, top_k: int,
              capacity_factor: float, step: int | None = None, group: Any = None,
              dispatch: str = "variable") -> tuple[torch.Tensor, Routing]:  # fmt: skip
    """The expert-parallel MoE layer on this rank: (T, h) tokens -> (T, h) output and the routing.

    ``experts`` are this rank's E/N experts (``experts.first`` = rank * E/N); E = N * experts.num.
    ``dispatch="variable"``: counts, then the kept rows (:func:`~edu_parallel.moe_dispatch.dispatch_variable`);
    ``"padded"``: GShard's fixed (E, C, h) buffer (:func:`~edu_parallel.moe_dispatch.dispatch_padded`).
    The routing returned carries the measured :class:`~edu_parallel.moe_dispatch.DispatchStats`.
    """
    import torch.distributed as dist

    run = DISPATCH[check_dispatch(dispatch)]
    n = ctx.world_size if group is None else dist.get_world_size(group)
    t = x.shape[0]
    e = n * experts.num
    with ctx.compute("router", t * e * x.element_size(), step=step, phase="router"):
        routing = route(x, router, top_k, capacity_factor)
    y, routing.stats = run(ctx, x, routing, experts, n, step=step, group=group)
    return y, routing


def moe_reference(x: torch.Tensor, router: nn.Module, experts: ExpertBank, *, top_k: int,
                  capacity_factor: float, groups: int = 1) -> tuple[torch.Tensor, list[Routing]]:  # fmt: skip
    """The same layer on one process, the naive dense way: every expert computes every token.

    ``x`` (G T, h) is cut into ``groups`` equal groups (one per source rank), routed and capped per
    group like :func:`moe_layer`. Per group: combine (T, E) = gate where routed and kept, else 0;
    ``y = sum_e combine[:, e] * expert_e(x)``: E/k times the expert work of the sparse layer.
    """
    ys, routings = [], []
    for xg in x.chunk(groups):  # (T, h)
        r = route(xg, router, top_k, capacity_factor)
        combine = torch.zeros_like(r.probs).scatter_add(1, r.experts, r.gates * r.kept)  # (T, E)
        dense = torch.stack([experts.expert(j, xg) for j in range(experts.num)], 1)  # (T, E, h)
        ys.append((combine.unsqueeze(2) * dense).sum(1))  # (T, h)
        routings.append(r)
    return torch.cat(ys), routings


# ----------------------------------------------------------------- the job
def moe_job(ctx: Any, experts: int, top_k: int, capacity_factor: float, skew: float, tokens: int,
            hidden: int, seed: int, backward: bool = True,
            dispatch: str = "variable") -> dict[str, Any]:  # fmt: skip
    """On every rank: one MoE layer forward (and backward with a seeded dy), traced as step 0."""
    n, r = ctx.world_size, ctx.rank
    params = init_moe(experts, hidden, seed=seed, skew=skew)
    router = params.router.to(ctx.device)
    local = params.experts.shard(r, n).to(ctx.device)
    x_all, dy_all = make_tokens(n, tokens, hidden, seed)
    rows = slice(r * tokens, (r + 1) * tokens)
    x = x_all[rows].to(ctx.device).requires_grad_(backward)  # (T, h) this rank's tokens
    y, routing = moe_layer(ctx, x, router, local, top_k=top_k, capacity_factor=capacity_factor,
                           step=0, dispatch=dispatch)  # fmt: skip
    out = {"y": y.detach(), "experts": routing.experts, "kept": routing.kept,
           "gates": routing.gates.detach(), "capacity": routing.capacity, "stats": asdict(routing.stats)}  # fmt: skip
    if backward:
        # loss = sum(y * dy), so dL/dy = dy (y.backward(dy) would import sympy on first use: ~2 s)
        (y * dy_all[rows].to(ctx.device)).sum().backward()
        out["dx"] = x.grad
        out["router_grads"] = [p.grad for p in router.parameters()]
        out["expert_grads"] = [p.grad for p in local.parameters()]
    ctx.mark("step_end", step=0)
    return out
