"""The strategy map, executed: one tiny model trained one step under DP, TP, TP+SP, PP and EP.

Syllabus units U1 and U7 compare the four strategies in words ("TP communicates most, PP least, DP
saves no memory, EP uses all-to-all"). This module runs them, so the comparison can be measured.

The model: activations ``x`` (b, s, h) through ``L`` residual MLP blocks
``x + W2 GeLU(W1 x + b1) + b2`` (h -> 4h -> h, ``nn.Linear`` layout), loss = summed squared error to
a seeded target divided by the number of target elements (the global MSE, so per-rank losses add
up and gradients are SUMMED across ranks). EP needs experts, so its run trains the MoE variant of
the same model: each block's FFN becomes E experts of width 4h/E behind a top-k router
(:func:`edu_parallel.expert_parallel.layer.init_moe`; fine-grained experts, so both variants have
the same FFN parameter count; DeepSeekMoE, Dai et al. 2024, arXiv 2401.06066).

One training step per strategy on N ranks (forward, backward, gradient sync, plain SGD):

* ``dp`` (data parallel): full replica; rank r takes batch rows ``[r b/N, (r+1) b/N)``; one flat
  ``all_reduce`` of all gradients (one bucket: the model is far below DDP's 1 MiB first bucket).
* ``tp`` (Megatron tensor parallel, Shoeybi et al. 2019, arXiv 1909.08053): every block is
  :func:`edu_parallel.tensor_parallel.layers.megatron_mlp` (W1 column-parallel, W2 row-parallel);
  the whole batch on every rank; no gradient sync (every gradient is either a shard or identical on
  all ranks).
* ``tp-sp`` (TP + sequence parallelism, Korthikanti et al. 2022, arXiv 2205.05198, §4.2.2): as
  ``tp``, but the residual stream between blocks is split along the sequence: rank r holds
  ``x[:, r s/N : (r+1) s/N]`` (b, s/N, h), each block all-gathers it before W1 and reduce-scatters
  W2's partial sums back into sequence blocks (``megatron_mlp(..., sequence_parallel=True)``).
  The replicated b2 is then added on s/N tokens only, so each rank's b2 gradient is a partial
  sum: the L b2 gradients are all-reduced in one bucket across the TP group, as Megatron-LM does
  for every parameter marked ``sequence_parallel`` (``RowParallelLinear`` marks its bias;
  ``megatron/core/distributed/finalize_model_grads.py``, ``_allreduce_layernorm_grads``).
* ``pp`` (pipeline): rank r holds the blocks ``stage_bounds(L, N)[r]``; M microbatches follow a
  :func:`edu_parallel.pipeline_parallel.builders.make_schedule` order (1F1B by default) executed
  here with ``ctx.isend``/``ctx.irecv`` (:mod:`edu_parallel.pipeline_parallel.execute` is tied to
  its own model).
* ``ep`` (expert parallel): rank r's batch rows as in DP; every block is
  :func:`edu_parallel.expert_parallel.layer.moe_layer` with rank r's E/N experts (tokens travel by
  all-to-all); the replicated routers' gradients are all-reduced.

Measured on each rank, into the trace: ``memory`` events "params" (every tensor the rank holds)
and "activations" (bytes saved for backward, through ``torch.autograd.graph.saved_tensors_hooks``,
parameters excluded, each tensor once), a ``mark`` "holds" per parameter tensor naming the slice
held, a ``mark`` "data" naming the batch rows and positions the rank computes on (EP: and the
ranks each of its tokens visits in the first block), and every send and collective.
:mod:`edu_parallel.strategy_map.report` reads them back.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.schema import ACTIVATIONS, DATA_MARK, STEP_END_MARK
from ..engine.autograd import backward_from
from ..engine.context import RankContext
from ..expert_parallel.layer import moe_layer
from ..pipeline_parallel.builders import make_schedule
from ..pipeline_parallel.config import stage_bounds
from ..tensor_parallel.layers import megatron_mlp, shard_linear
from .formulas import (
    DTYPE,
    STEP,
    SYNC,
    MapConfig,
    slice_index,
)
from .model import (
    Holdings,
    SavedBytes,
    dense_block,
    dense_weights,
    make_data,
    moe_weights,
    sq_error,
)


def _result(
    held: Holdings, out: torch.Tensor | None, rows: tuple[int, int], **extra: Any
) -> dict[str, Any]:
    """``out`` covers batch ``rows`` (and, with ``seq=(lo, hi)`` in ``extra``, those positions)."""
    return {
        "out": None if out is None else out.detach().clone(),
        "rows": rows,
        "grads": held.grads(),
        **extra,
    }


def _rows(cfg: MapConfig, ctx: RankContext) -> tuple[int, int]:
    per = cfg.batch // ctx.world_size
    return ctx.rank * per, (ctx.rank + 1) * per


def _mark_data(
    ctx: RankContext,
    rows: tuple[int, int],
    seq: tuple[int, int],
    microbatches: int = 1,
    **extra: Any,
) -> None:
    """Record the input this rank computes on: batch ``rows`` and sequence positions ``seq``."""
    ctx.mark(DATA_MARK, rows=list(rows), seq=list(seq), microbatches=microbatches, **extra)


def _sync_grads(ctx: RankContext, params: list[torch.Tensor]) -> None:
    """One flat bucket: all-reduce (sum) of every gradient in ``params``."""
    flat = torch.cat([p.grad.flatten() for p in params])  # (sum of numel,)
    ctx.collective("all_reduce", flat, step=STEP, phase=SYNC)
    at = 0
    for p in params:
        p.grad.copy_(flat[at : at + p.numel()].view_as(p))
        at += p.numel()


def _forward_backward(
    ctx: RankContext, held: Holdings, x: torch.Tensor, y: torch.Tensor, forward: Any, total: int
) -> torch.Tensor:
    """Forward with saved-tensor accounting, loss, backward; memory events around both."""
    saved = SavedBytes(held.params)
    with ctx.compute("forward", step=STEP, phase="forward"), saved.counting():
        out = forward(x)
        loss = sq_error(out, y, total)
    ctx.memory(ACTIVATIONS, saved.bytes, step=STEP, phase="forward")
    with ctx.compute("backward", step=STEP, phase="backward"):
        loss.backward()
    ctx.memory(ACTIVATIONS, -saved.bytes, step=STEP, phase="backward")
    return out


# ---------------------------------------------------------------- the strategies
def _dp(ctx: RankContext, cfg: MapConfig) -> dict[str, Any]:
    held = Holdings()
    blocks = [
        {k: held.add(f"block{i}.{k}", v) for k, v in w.items()}
        for i, w in enumerate(dense_weights(cfg))
    ]
    held.record(ctx)
    x, y = make_data(cfg)
    lo, hi = _rows(cfg, ctx)
    _mark_data(ctx, (lo, hi), (0, cfg.seq))

    def forward(t: torch.Tensor) -> torch.Tensor:
        for w in blocks:
            t = dense_block(t, w)  # (b/N, s, h)
        return t

    out = _forward_backward(ctx, held, x[lo:hi], y[lo:hi], forward, y.numel())
    _sync_grads(ctx, held.params)
    result = _result(held, out, (lo, hi))
    held.sgd(cfg.lr)
    return result


def _tp(ctx: RankContext, cfg: MapConfig, sequence_parallel: bool = False) -> dict[str, Any]:
    n, r = ctx.world_size, ctx.rank
    held = Holdings()
    blocks = []
    for i, w in enumerate(dense_weights(cfg)):
        w1, b1 = shard_linear(w["w1"], w["b1"], r, n, "column")  # (4h/t, h), (4h/t,)
        w2, b2 = shard_linear(w["w2"], w["b2"], r, n, "row")  # (h, 4h/t), (h,) full
        blocks.append(
            {
                "w1": held.add(f"block{i}.w1", w1, w["w1"], 0, r, n),
                "b1": held.add(f"block{i}.b1", b1, w["b1"], 0, r, n),
                "w2": held.add(f"block{i}.w2", w2, w["w2"], 1, r, n),
                "b2": held.add(f"block{i}.b2", b2),
            }
        )
    held.record(ctx)
    x, y = make_data(cfg)  # the whole batch on every rank: (b, s, h)
    seq = slice_index(x.shape, r, n, 1)[1] if sequence_parallel else (0, cfg.seq)
    x, y = x[:, seq[0] : seq[1]], y[:, seq[0] : seq[1]]  # SP: the rank's sequence block (b, s/t, h)
    _mark_data(ctx, (0, cfg.batch), seq)

    def forward(t: torch.Tensor) -> torch.Tensor:
        # TP: (b, s, h) -> (b, s, 4h/t) -> all-reduced (b, s, h); SP: (b, s/t, h) -> all-gathered
        # (b, s, h) -> (b, s, 4h/t) -> reduce-scattered (b, s/t, h), the residual added on the block
        for w in blocks:
            t = t + megatron_mlp(
                ctx,
                t,
                w["w1"],
                w["b1"],
                w["w2"],
                w["b2"],
                sequence_parallel=sequence_parallel,
                step=STEP,
            )
        return t

    out = _forward_backward(ctx, held, x, y, forward, cfg.batch * cfg.seq * cfg.hidden)
    if sequence_parallel:  # b2 (replicated) saw only this rank's tokens: sum over the TP group
        _sync_grads(ctx, [w["b2"] for w in blocks])
    result = _result(held, out, (0, cfg.batch), seq=seq)
    held.sgd(cfg.lr)
    return result


def _tp_sp(ctx: RankContext, cfg: MapConfig) -> dict[str, Any]:
    return _tp(ctx, cfg, sequence_parallel=True)


def _pp(ctx: RankContext, cfg: MapConfig) -> dict[str, Any]:
    n, r = ctx.world_size, ctx.rank
    m_count = cfg.num_microbatches(n)
    lo_b, hi_b = stage_bounds(cfg.layers, n)[r]
    held = Holdings()
    blocks = [
        {k: held.add(f"block{i}.{k}", v) for k, v in w.items()}
        for i, w in enumerate(dense_weights(cfg))
        if lo_b <= i < hi_b
    ]
    held.record(ctx)
    x, y = make_data(cfg)
    mb = cfg.batch // m_count
    _mark_data(ctx, (0, cfg.batch), (0, cfg.seq), m_count)  # every microbatch, one at a time
    shape = (mb, cfg.seq, cfg.hidden)  # one microbatch's activation (and its gradient)
    stash: dict[int, tuple[torch.Tensor, torch.Tensor, int]] = {}
    outs: dict[int, torch.Tensor] = {}
    sends = []
    for action in make_schedule(cfg.schedule, n, m_count).orders()[r]:
        m, rows = action.microbatch, slice(action.microbatch * mb, (action.microbatch + 1) * mb)
        if action.kind == "F":
            if r == 0:
                inp = x[rows]
            else:
                inp = torch.empty(shape, dtype=getattr(torch, DTYPE))
                ctx.recv(inp, r - 1, tag=1 + m, step=STEP, phase="forward")
                inp.requires_grad_(True)
            saved = SavedBytes(held.params)
            with ctx.compute("F", step=STEP, phase="forward", chunk=m), saved.counting():
                out = inp
                for w in blocks:
                    out = dense_block(out, w)  # (mb, s, h)
                if r == n - 1:
                    outs[m] = out.detach()
                    out = sq_error(out, y[rows], y.numel())
            stash[m] = (inp, out, saved.bytes)
            ctx.memory(ACTIVATIONS, saved.bytes, step=STEP, phase="forward")
            if r < n - 1:
                sends.append(ctx.isend(out.detach(), r + 1, tag=1 + m, step=STEP, phase="forward"))
        else:
            inp, out, nbytes = stash.pop(m)
            grad = None
            if r < n - 1:
                grad = torch.empty(shape, dtype=getattr(torch, DTYPE))
                ctx.recv(grad, r + 1, tag=1 + m_count + m, step=STEP, phase="backward")
            with ctx.compute("B", step=STEP, phase="backward", chunk=m):
                backward_from(out, grad)
            ctx.memory(ACTIVATIONS, -nbytes, step=STEP, phase="backward")
            if r > 0:
                sends.append(
                    ctx.isend(inp.grad, r - 1, tag=1 + m_count + m, step=STEP, phase="backward")
                )
    ctx.wait_all(sends)
    out_all = torch.cat([outs[m] for m in range(m_count)]) if outs else None
    result = _result(held, out_all, (0, cfg.batch), blocks=(lo_b, hi_b))
    held.sgd(cfg.lr)
    return result


def _ep(ctx: RankContext, cfg: MapConfig) -> dict[str, Any]:
    n, r = ctx.world_size, ctx.rank
    held = Holdings()
    layers = []
    for i, p in enumerate(moe_weights(cfg)):
        router = p.router  # nn.Linear(h, E), replicated: its parameters are held as they are
        held.hold(f"block{i}.router.weight", router.weight)
        held.hold(f"block{i}.router.bias", router.bias)
        local = p.experts.shard(r, n)  # E/N experts: w1 (E/N, h, f), b1, w2 (E/N, f, h), b2
        for k in ("w1", "b1", "w2", "b2"):
            full = tuple(getattr(p.experts, k).shape)
            held.hold(f"block{i}.experts.{k}", getattr(local, k), slice_index(full, r, n), full)
        layers.append((router, local))
    held.record(ctx)
    x, y = make_data(cfg)
    lo, hi = _rows(cfg, ctx)
    routings: list[dict[str, torch.Tensor]] = []

    def forward(t: torch.Tensor) -> torch.Tensor:
        b, s, h = t.shape
        for router, local in layers:  # tokens (b/N * s, h) -> routed -> (b/N * s, h)
            tok = t.reshape(b * s, h)
            moe, routing = moe_layer(
                ctx,
                tok,
                router,
                local,
                top_k=cfg.top_k,
                capacity_factor=cfg.capacity_factor,
                step=STEP,
            )
            routings.append({"experts": routing.experts.clone(), "kept": routing.kept.clone()})
            t = (tok + moe).view(b, s, h)
        return t

    out = _forward_backward(ctx, held, x[lo:hi], y[lo:hi], forward, y.numel())
    per = cfg.experts // n  # expert e lives on rank e // (E/N)
    first = routings[0]
    routed_to = [
        sorted({int(e) // per for e, kept in zip(es, ks, strict=True) if kept})
        for es, ks in zip(first["experts"].tolist(), first["kept"].tolist(), strict=True)
    ]  # per token of this rank (b/N * s, row-major): the ranks its kept experts live on
    _mark_data(ctx, (lo, hi), (0, cfg.seq), routed_to=routed_to)
    routers = [p for router, _ in layers for p in router.parameters()]
    _sync_grads(ctx, routers)  # replicated routers; each expert lives on one rank only
    result = _result(held, out, (lo, hi), routings=routings)
    held.sgd(cfg.lr)
    return result


JOBS = {"dp": _dp, "tp": _tp, "tp-sp": _tp_sp, "pp": _pp, "ep": _ep}


def strategy_job(ctx: RankContext, strategy: str, cfg: MapConfig) -> dict[str, Any]:
    """On every rank: one training step of ``strategy``; returns outputs, gradients, routing."""
    ctx.tracer.where(f"strategy map: {strategy}")
    out = JOBS[strategy](ctx, cfg)
    ctx.mark(STEP_END_MARK, step=STEP, strategy=strategy)
    return out
