"""One training step of DP x TP x PP (x EP) on the ranks of a mesh: the job every rank runs.

Each rank (coordinates ``(pp, dp, tp)`` from :class:`~edu_parallel.core.dims.ParallelDims`):

1. holds the layers of its pipeline stage, ``[stage L/p, (stage+1) L/p)``, each weight cut for its
   TP rank (:mod:`edu_parallel.parallel_3d.model`);
2. takes its replica's rows of the global batch, ``[d b/dp, (d+1) b/dp)``, in ``M`` microbatches,
   and runs them in the 1F1B order of :func:`edu_parallel.pipeline_parallel.builders.make_schedule`
   (Narayanan et al. 2021, arXiv 2104.04473, §2.1): activations go to the next stage and gradients
   back with ``isend``/``recv`` to the rank with the same ``(dp, tp)`` one stage over;
3. synchronises gradients across its DP group: one flat all-reduce (``zero=0``), or ZeRO-1
   (Rajbhandari et al. 2019, §5.1): reduce-scatter of the flat gradient, Adam on this rank's 1/dp
   shard only, all-gather of the updated parameters;
4. steps Adam.

Into the trace, per rank: memory events "params", "grads", "optimizer" and "activations" (bytes
autograd saved for backward, per microbatch, freed by its backward), a "holds" mark per tensor, and
every send and collective (collectives carry their group's ranks). The result: the loss share, the
local gradients before the DP sync and the parameters after the step, each with its slice.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..core.dims import ParallelDims
from ..core.schema import ACTIVATIONS, GRAD_SYNC, GRADS, OPTIMIZER, STEP_END_MARK
from ..engine.autograd import backward_from
from ..engine.context import ALL_GATHER, REDUCE_SCATTER, RankContext
from ..pipeline_parallel.builders import make_schedule
from ..strategy_map.model import Holdings, SavedBytes
from .config import STEP, Config3D, Run3D
from .mesh import mesh_groups
from .model import (
    TP_SPLIT,
    TensorParallel,
    adam_step,
    layer,
    layer_weights,
    make_data,
    moe_on_ranks,
    moe_weights,
    shard,
    sq_error,
)


def _hold_layers(
    dims: ParallelDims, c: dict[str, int], cfg: Config3D, held: Holdings, device: Any
) -> tuple[list[Any], list[Any]]:
    """This rank's weights (and MoE layers) on ``device``, held in ``held``."""
    per = cfg.layers // dims.pp
    lo = c["pp"] * per
    blocks, moes = [], []
    all_moe = moe_weights(cfg) if cfg.experts else None
    for i, w in enumerate(layer_weights(cfg)):
        if not lo <= i < lo + per:
            continue
        t, r = dims.tp, c["tp"]
        blocks.append(
            {
                k: held.add(f"layer{i}.{k}", shard(k, v, r, t).to(device), v, TP_SPLIT[k], r, t)
                for k, v in w.items()
            }
        )
        if all_moe is not None:
            p = all_moe[i]
            p.router.to(device)
            for k, t in p.router.named_parameters():  # replicated on every rank
                held.hold(f"layer{i}.router.{k}", t)
            e = c["dp"] % dims.ep  # place in the EP block: which E/ep experts this rank holds
            local = p.experts.shard(e, dims.ep).to(device)
            for k in ("w1", "b1", "w2", "b2"):
                full = tuple(getattr(p.experts, k).shape)
                per_e = full[0] // dims.ep
                index = [(e * per_e, (e + 1) * per_e)] + [(0, d) for d in full[1:]]
                held.hold(f"layer{i}.experts.{k}", getattr(local, k), index, full)
            moes.append((p.router, local))
    return blocks, moes


def _pipeline(
    ctx: RankContext,
    dims: ParallelDims,
    c: dict[str, int],
    cfg: Config3D,
    held: Holdings,
    forward: Any,
) -> float:
    """Every microbatch of this replica through this stage in 1F1B order; the loss share."""
    p, stage, m_count = dims.pp, c["pp"], cfg.num_microbatches(dims.pp)
    x, y = (t.to(ctx.device) for t in make_data(cfg))
    mb = cfg.micro_batch(dims)
    first_row = c["dp"] * (cfg.batch // dims.dp)
    shape = (mb, cfg.seq, cfg.hidden)  # one microbatch's activation (and its gradient)
    prev = dims.rank_of(stage - 1, c["dp"], c["tp"]) if stage > 0 else None
    nxt = dims.rank_of(stage + 1, c["dp"], c["tp"]) if stage < p - 1 else None
    stash: dict[int, tuple[torch.Tensor, torch.Tensor, int]] = {}
    sends, loss = [], 0.0
    order = make_schedule("1f1b", p, m_count).orders()[stage]
    for done, action in enumerate(order, 1):
        m = action.microbatch
        rows = slice(first_row + m * mb, first_row + (m + 1) * mb)
        if action.kind == "F":
            if prev is None:
                inp = x[rows]
            else:
                inp = torch.empty(shape, dtype=x.dtype, device=x.device)
                ctx.recv(inp, prev, tag=1 + m, step=STEP, phase="forward")
                inp.requires_grad_(True)
            saved = SavedBytes(held.params)
            with ctx.compute("F", step=STEP, phase="forward", chunk=m), saved.counting():
                out = forward(inp)  # (mb, s, h)
                if nxt is None:
                    out = sq_error(out, y[rows], y.numel())
                    loss += float(out.detach())
            stash[m] = (inp, out, saved.bytes)
            ctx.memory(ACTIVATIONS, saved.bytes, step=STEP, phase="forward")
            if nxt is not None:
                sends.append(ctx.isend(out.detach(), nxt, tag=1 + m, step=STEP, phase="forward"))
        else:
            inp, out, nbytes = stash.pop(m)
            grad = None
            if nxt is not None:
                grad = torch.empty(shape, dtype=x.dtype, device=x.device)
                ctx.recv(grad, nxt, tag=1 + m_count + m, step=STEP, phase="backward")
            with ctx.compute("B", step=STEP, phase="backward", chunk=m):
                backward_from(out, grad)
            ctx.memory(ACTIVATIONS, -nbytes, step=STEP, phase="backward")
            if prev is not None:
                tag = 1 + m_count + m
                sends.append(ctx.isend(inp.grad, prev, tag=tag, step=STEP, phase="backward"))
        ctx.progress(done, len(order))
    ctx.wait_all(sends)
    return loss


def _sync_and_step(
    ctx: RankContext, dims: ParallelDims, cfg: Config3D, held: Holdings, groups: dict[str, Any]
) -> None:
    """DP gradient sync (all-reduce, or ZeRO-1's reduce-scatter + all-gather) and Adam."""
    params = [t for name, t, _, _ in held.items if ".experts." not in name]  # experts: EP-owned
    experts = [t for name, t, _, _ in held.items if ".experts." in name]
    if experts and groups["edp"] is not None:  # each expert's replicas: one all-reduce
        flat_e = torch.cat([t.grad.flatten() for t in experts])
        ctx.collective("all_reduce", flat_e, group=groups["edp"], step=STEP, phase=GRAD_SYNC)
        at = 0
        for t in experts:
            t.grad.copy_(flat_e[at : at + t.numel()].view_as(t))
            at += t.numel()
    d, dp_group = dims.dp, groups["dp"]
    flat = torch.cat([t.grad.flatten() for t in params])  # (P_rank,)
    item = flat.element_size()
    if cfg.zero == 0 or d == 1:
        if d > 1:
            ctx.collective("all_reduce", flat, group=dp_group, step=STEP, phase=GRAD_SYNC)
        at = 0
        for t in params:
            t.grad.copy_(flat[at : at + t.numel()].view_as(t))
            at += t.numel()
        adam_step(held.params, cfg.lr)
        state = sum(2 * t.numel() for t in held.params)  # Adam's m and v, fp32 like the params
        ctx.memory(OPTIMIZER, state * item, step=STEP, phase=GRAD_SYNC)
        return
    pad = (-flat.numel()) % d  # equal shards: the flat buffer padded to a multiple of dp
    flat = F.pad(flat, (0, pad))
    shard_n = flat.numel() // d
    grad_shard = flat.new_empty(shard_n)
    ctx.collective(REDUCE_SCATTER, grad_shard, flat, group=dp_group, step=STEP, phase=GRAD_SYNC)
    rank_in_dp = ctx.rank // dims.tp % dims.dp
    with torch.no_grad():
        values = F.pad(torch.cat([t.detach().flatten() for t in params]), (0, pad))
    master = values[rank_in_dp * shard_n : (rank_in_dp + 1) * shard_n].clone().requires_grad_(True)
    master.grad = grad_shard
    adam_step([master, *experts], cfg.lr)
    state = 2 * (shard_n + sum(t.numel() for t in experts))
    ctx.memory(OPTIMIZER, state * item, step=STEP, phase=GRAD_SYNC)
    gathered = flat.new_empty(flat.numel())
    ctx.collective(
        ALL_GATHER, gathered, master.detach(), group=dp_group, step=STEP, phase=GRAD_SYNC
    )
    at = 0
    with torch.no_grad():
        for t in params:
            t.copy_(gathered[at : at + t.numel()].view_as(t))
            at += t.numel()


def step_job(ctx: RankContext, run: Run3D) -> dict[str, Any]:
    """On every rank: one training step of ``run.config`` on the mesh ``run.dims``, both checked
    in the parent before any rank started (trusted here)."""
    dims, cfg = run.dims, run.config
    c = dims.coords(ctx.rank)
    ctx.tracer.where(f"3d step: rank {ctx.rank} at {c}")
    groups = mesh_groups(dims, ctx.rank)
    held = Holdings()
    blocks, moes = _hold_layers(dims, c, cfg, held, ctx.device)
    held.record(ctx)
    tp_ops = TensorParallel(ctx, groups["tp"], dims.tp)
    routings: list[Any] = []
    heads = cfg.heads // dims.tp

    def forward(t: torch.Tensor) -> torch.Tensor:
        for i, w in enumerate(blocks):
            moe = None
            if moes:
                moe = moe_on_ranks(ctx, *moes[i], cfg, groups["ep"], routings)
            t = layer(t, w, heads, tp_ops, moe)  # (mb, s, h)
        return t

    loss = _pipeline(ctx, dims, c, cfg, held, forward)
    grad_bytes = sum(t.grad.numel() * t.grad.element_size() for t in held.params)
    ctx.memory(GRADS, grad_bytes, step=STEP, phase="backward")
    local = held.grads()  # before the DP sync: the parent sums them over the DP group
    _sync_and_step(ctx, dims, cfg, held, groups)
    ctx.mark(STEP_END_MARK, step=STEP, strategy="3d")
    return {
        "coords": c,
        "loss": loss,
        "grads": local,
        "updated": {n: (i, t.detach().clone()) for n, t, i, _ in held.items},
    }
