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
* Capacity (:func:`~edu_parallel.expert_parallel.router.capacity_positions`): each source rank is
  one GShard "group": expert e accepts at most ``capacity = ceil(C * T * k / E)`` of that rank's T
  tokens' k assignments (:func:`~edu_parallel.expert_parallel.formulas.expert_capacity`). Queue
  order as in GShard Algorithm 1: all first choices in token order, then all second choices, and so
  on; an assignment past the capacity is dropped before it travels, and contributes 0 (the token
  keeps its other assignments; weights are not renormalised after a drop).
* :func:`moe_layer`, ``dispatch="variable"`` (default): exchange the per-expert counts (an
  ``all_to_all_single`` of E integers), then dispatch the kept token rows with ``all_to_all_single``
  and variable splits, run the local experts, and combine back with the reverse
  ``all_to_all_single``. ``dispatch="padded"``: GShard/Switch's fixed (E, C, h) buffer with equal
  splits, empty slots zero, no counts. Both in :mod:`edu_parallel.expert_parallel.dispatch`, whose
  :class:`~edu_parallel.expert_parallel.dispatch.AllToAll` is the autograd function: its backward is
  the reverse all-to-all (phase ``"backward"``). Each exchange also writes a ``mark`` with the bytes
  sent to and received from every peer, which is where the traffic matrix comes from
  (:func:`~edu_parallel.expert_parallel.report.traffic_matrix`).
* :func:`moe_reference`: the same layer on one process, the naive dense way (every expert on every
  token, combined with a (T, E) weight matrix that is 0 where not routed or dropped).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..core.schema import STEP_END_MARK
from ..engine.autograd import backward_from
from ..engine.context import RankContext
from .config import MoEConfig
from .dispatch import DISPATCH
from .experts import ExpertBank, init_moe, make_tokens
from .router import Routing, route


# ----------------------------------------------------------------- the layer
def moe_layer(
    ctx: RankContext,
    x: torch.Tensor,
    router: nn.Module,
    experts: ExpertBank,
    *,
    top_k: int,
    capacity_factor: float,
    step: int | None = None,
    group: Any = None,
    dispatch: str = "variable",
) -> tuple[torch.Tensor, Routing]:
    """The expert-parallel MoE layer on this rank: (T, h) tokens -> (T, h) output and the routing.

    ``experts`` are this rank's E/N experts (``experts.first`` = rank * E/N); E = N * experts.num.
    ``dispatch="variable"``: counts, then the kept rows
    (:func:`~edu_parallel.expert_parallel.dispatch.dispatch_variable`); ``"padded"``: GShard's fixed
    (E, C, h) buffer (:func:`~edu_parallel.expert_parallel.dispatch.dispatch_padded`). The routing
    returned carries the measured :class:`~edu_parallel.expert_parallel.dispatch.DispatchStats`.
    """
    run = DISPATCH[dispatch]  # a choice of MoEConfig.dispatch (config.DISPATCHES)
    n = ctx.world_size if group is None else dist.get_world_size(group)
    t = x.shape[0]
    e = n * experts.num
    with ctx.compute("router", t * e * x.element_size(), step=step, phase="router"):
        routing = route(x, router, top_k, capacity_factor)
    y, routing.stats = run(ctx, x, routing, experts, n, step=step, group=group)
    return y, routing


def moe_reference(
    x: torch.Tensor,
    router: nn.Module,
    experts: ExpertBank,
    *,
    top_k: int,
    capacity_factor: float,
    groups: int = 1,
) -> tuple[torch.Tensor, list[Routing]]:
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
def moe_job(ctx: RankContext, config: MoEConfig) -> dict[str, Any]:
    """On every rank: one MoE layer forward (and backward with a seeded dy), traced as step 0."""
    n, r, c = ctx.world_size, ctx.rank, config
    params = init_moe(c.experts, c.hidden, seed=c.seed, skew=c.skew)
    router = params.router.to(ctx.device)
    local = params.experts.shard(r, n).to(ctx.device)
    x_all, dy_all = make_tokens(n, c.tokens, c.hidden, c.seed)
    rows = slice(r * c.tokens, (r + 1) * c.tokens)
    x = x_all[rows].to(ctx.device).requires_grad_(c.backward)  # (T, h) this rank's tokens
    y, routing = moe_layer(
        ctx,
        x,
        router,
        local,
        top_k=c.top_k,
        capacity_factor=c.capacity_factor,
        step=0,
        dispatch=c.dispatch,
    )
    out = {
        "y": y.detach(),
        "experts": routing.experts,
        "kept": routing.kept,
        "gates": routing.gates.detach(),
        "capacity": routing.capacity,
        "stats": asdict(routing.stats),
    }
    if c.backward:
        backward_from(y, dy_all[rows].to(ctx.device))
        out["dx"] = x.grad
        out["router_grads"] = [p.grad for p in router.parameters()]
        out["expert_grads"] = [p.grad for p in local.parameters()]
    ctx.mark(STEP_END_MARK, step=0)
    return out
