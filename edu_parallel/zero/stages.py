"""Sharded data-parallel training, executed: plain DP and ZeRO stages 1, 2, 3 on real ranks.

Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models"
(arXiv 1910.02054). :func:`zero_job` trains the tiny MLP of
:mod:`edu_parallel.task.mlp` with mixed-precision Adam (bf16 params and grads, fp32
master, fp32 Adam m and v: §3.1) on every rank:

* stage 0, plain DP: full copies of everything; ``all_reduce`` of the bf16 grads (through a
  padded bucket, as DDP's gradient buckets);
* stage 1 (P_os, §5.1): each rank keeps fp32 master, m and v for its 1/N flat shard only;
  ``reduce_scatter`` of the full bf16 grads, update of the own shard, ``all_gather`` of the bf16
  params;
* stage 2 (P_os+g, §5.2): also the reduced gradients are sharded: backward writes the full bf16
  grads into a communication bucket that is reduce-scattered into the rank's grad shard and freed;
* stage 3 (P_os+g+p, §5.3): also the bf16 params are sharded; the full params are all-gathered
  before forward, released, all-gathered AGAIN before backward, released (the PyTorch FSDP2
  ``fully_shard`` docs call this unshard / reshard; ``reshard_after_forward=True``).

Every rank receives the run's :class:`~edu_parallel.zero.config.ZeroConfig`, checked once where
the run started. Flat buffers are padded to a multiple of N
(:func:`~edu_parallel.task.mlp.padded_numel`). Every allocation and release of a
tracked buffer is written to the trace with ``ctx.memory(category, +-bytes)``, categories
:data:`edu_parallel.core.schema.ZERO_CATEGORIES`; the parent replays these into running sums per
rank (:mod:`edu_parallel.zero.report`).

The collectives are the engine's own ring plans (:mod:`edu_parallel.plans.collectives`, run by
:func:`~edu_parallel.engine.execute.run_plan`): each one is a ``collective`` event spanning the
ring's ``send``/``recv`` events, so bytes sent are counted, not inferred. A ring sums chunk k in a
fixed rank order, which :func:`~edu_parallel.task.mlp.reference_training` replays with
:func:`~edu_parallel.engine.execute.replay_plan`: every stage equals DP and the single-process
reference bit for bit, on any N and after any number of steps (bf16 sums rounded in gloo's internal
order would not).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ..core.schema import (
    ADAM_M,
    ADAM_V,
    COMM_BUFFER,
    GATHERED_PARAMS,
    GRAD16,
    MASTER32,
    PARAM16,
    STEP_END_MARK,
)
from ..engine.context import ALL_GATHER, RankContext, nbytes_of
from ..engine.execute import run_plan
from ..plans.collectives import ring_all_gather_plan, ring_reduce_scatter_plan
from ..task.mlp import (
    MASTER_DTYPE,
    PARAM_DTYPE,
    adam_update,
    init_master,
    microbatch_of,
    mlp_backward,
    mlp_forward,
    mse_grad,
    num_params,
    padded_numel,
)
from .config import ZeroConfig


class _Ledger:
    """Allocate / free tracked buffers and record each change with ``ctx.memory``."""

    def __init__(self, ctx: RankContext):
        self.ctx = ctx

    def alloc(self, category: str, t: torch.Tensor, step: int | None, phase: str) -> torch.Tensor:
        self.ctx.memory(category, nbytes_of(t), step=step, phase=phase)
        return t

    def free(self, category: str, t: torch.Tensor, step: int | None, phase: str) -> None:
        self.ctx.memory(category, -nbytes_of(t), step=step, phase=phase)


def train_stage(ctx: RankContext, config: ZeroConfig, stage: int | None = None) -> dict[str, Any]:
    """Run ``config.steps`` steps of ZeRO ``stage`` (default ``config.stage``) on this rank;
    returns the full fp32 master and the losses.

    Shapes: Psi params, flat length P (Psi rounded up to a multiple of N), shard S = P / N.
    Rank r owns the flat slice [r*S, (r+1)*S). DP keeps its model states at Psi and pads only
    its gradient bucket to P, so every stage reduces the same chunks in the same ring order.
    """
    stage = config.stage if stage is None else stage
    steps, lr, seed, dims = config.steps, config.lr, config.seed, config.dims
    n, r = ctx.world_size, ctx.rank
    psi = num_params(dims)
    p = padded_numel(psi, n)
    s = p // n
    flat = psi if stage == 0 else p  # length of the full (unsharded) model-state buffers
    own = slice(r * s, (r + 1) * s) if stage >= 1 else slice(0, psi)
    led = _Ledger(ctx)
    ctx.tracer.where(f"zero stage {stage}: init")
    full32 = torch.zeros(p, dtype=MASTER_DTYPE)  # (P,) scratch for the initial values, untracked
    full32[:psi] = init_master(dims, seed)
    # Model states (ZeRO §3.1): sizes per stage, in elements.
    master = led.alloc(MASTER32, full32[own].clone(), None, "init")  # (S,) or (Psi,) fp32
    m = led.alloc(ADAM_M, torch.zeros_like(master), None, "init")  # same as master
    v = led.alloc(ADAM_V, torch.zeros_like(master), None, "init")
    param16 = led.alloc(
        PARAM16, (master if stage == 3 else full32[:flat]).to(PARAM_DTYPE), None, "init"
    )  # (S,) st.3 else (flat,)
    grad16 = led.alloc(
        GRAD16, torch.zeros(s if stage >= 2 else flat, dtype=PARAM_DTYPE), None, "init"
    )  # (S,) st.2-3 else (flat,)
    del full32
    x, y = microbatch_of(r, dims, n, config.microbatch, seed)  # (B, d_in), (B, d_out)
    losses = []

    rs_plan, ag_plan = ring_reduce_scatter_plan(n), ring_all_gather_plan(n)

    def ring(name: str, buf: torch.Tensor, step: int, phase: str) -> None:
        """``name`` on ``buf`` (P,) in place with the engine's ring plans (lesson 02): rank r's
        chunk r is the shard. One ``collective`` event spans it; its sends carry the bytes."""
        plans = {
            "reduce_scatter": [rs_plan],
            "all_gather": [ag_plan],
            "all_reduce": [rs_plan, ag_plan],
        }[name]
        start = ctx.tracer.now()
        for plan in plans:
            run_plan(ctx, plan, buf, step=step, phase=phase, snapshots=False)
        ctx.record(
            "collective",
            name,
            start,
            step=step,
            phase=phase,
            nbytes=nbytes_of(buf),
            attrs={"plan": "+".join(x.name for x in plans)},
        )

    def gather_params(step: int, phase: str) -> torch.Tensor:
        full = led.alloc(GATHERED_PARAMS, torch.empty(p, dtype=PARAM_DTYPE), step, phase)  # (P,)
        full[own].copy_(param16)  # own shard in place; the ring copies the other N-1 around
        ring("all_gather", full, step, phase)
        return full

    for step in range(1, steps + 1):
        ctx.tracer.where(f"zero stage {stage} step {step}: forward")
        weights = gather_params(step, "forward") if stage == 3 else param16  # (P,) bf16
        out, saved = mlp_forward(weights, x, dims)  # (B, d_out); saved inputs only
        loss, dout = mse_grad(out, y)
        losses.append(loss)
        if stage == 3:
            led.free(GATHERED_PARAMS, weights, step, "forward")  # reshard after forward
            del weights
            weights = gather_params(step, "backward")  # and gather AGAIN for backward (§5.3)
        ctx.tracer.where(f"zero stage {stage} step {step}: backward")
        if stage != 1:  # full grads land in a bucket that is reduced, then freed (DDP does too)
            bucket = led.alloc(COMM_BUFFER, torch.zeros(p, dtype=PARAM_DTYPE), step, "backward")
        else:
            bucket = grad16  # (P,) the full gradient buffer of ZeRO-1
        mlp_backward(weights, saved, dout, dims, bucket[:psi])
        if stage == 3:
            led.free(GATHERED_PARAMS, weights, step, "backward")
        del weights
        # The ring sums chunk k in a fixed rank order; reference_training replays that order.
        if stage == 0:  # all-reduce = reduce-scatter + all-gather: every rank gets the full sum
            ring("all_reduce", bucket, step, "reduce_grads")
            grad16.copy_(bucket[:psi])
        else:  # reduce-scatter: rank r keeps only chunk r of the sum
            ring("reduce_scatter", bucket, step, "reduce_grads")
            if stage >= 2:
                grad16.copy_(bucket[own])  # (S,)
        if stage != 1:
            led.free(COMM_BUFFER, bucket, step, "reduce_grads")
        del bucket
        shard16 = (grad16[own] if stage == 1 else grad16).div_(n)  # mean over ranks
        ctx.tracer.where(f"zero stage {stage} step {step}: optimizer")
        adam_update(master, shard16.to(MASTER_DTYPE), m, v, step, lr)  # on own shard only
        if stage in (1, 2):  # updated bf16 shard -> every rank's full bf16 params, in place
            param16[own].copy_(master)
            ring("all_gather", param16, step, "gather_params")
        else:
            param16.copy_(master)  # stage 0: (Psi,); stage 3: own (S,) shard only
        ctx.mark(STEP_END_MARK, step=step)
        ctx.progress(step, steps)
    with ctx.tracer.paused():  # untraced: collect the result for checking
        full_master = torch.empty(p, dtype=MASTER_DTYPE)
        if stage >= 1:
            getattr(dist, ALL_GATHER)(full_master, master)
        else:
            full_master[:psi].copy_(master)
    return {"master": full_master[:psi].clone(), "losses": losses, "padded_numel": p}


def zero_job(ctx: RankContext, config: ZeroConfig, compare_dp: bool = True) -> dict[str, Any]:
    """On every rank: ZeRO ``config.stage``, traced; then (untraced) plain DP for comparison."""
    out = train_stage(ctx, config)
    if compare_dp:
        with ctx.tracer.paused():
            dp = out if config.stage == 0 else train_stage(ctx, config, stage=0)
            out["dp_master"] = dp["master"]
    return out
