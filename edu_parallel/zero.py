"""Sharded data-parallel training, executed: plain DP and ZeRO stages 1, 2, 3 on real ranks.

Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models"
(arXiv 1910.02054). :func:`zero_job` trains the tiny MLP of :mod:`edu_parallel.zero_model` with
mixed-precision Adam (bf16 params and grads, fp32 master, fp32 Adam m and v: §3.1) on every rank:

* stage 0, plain DP: full copies of everything; ``all_reduce`` of the bf16 grads;
* stage 1 (P_os, §5.1): each rank keeps fp32 master, m and v for its 1/N flat shard only;
  ``reduce_scatter`` of the full bf16 grads, update of the own shard, ``all_gather`` of the bf16
  params;
* stage 2 (P_os+g, §5.2): also the reduced gradients are sharded: backward writes the full bf16
  grads into a communication bucket that is reduce-scattered into the rank's grad shard and freed;
* stage 3 (P_os+g+p, §5.3): also the bf16 params are sharded; the full params are all-gathered
  before forward, released, all-gathered AGAIN before backward, released (the PyTorch FSDP2
  ``fully_shard`` docs call this unshard / reshard; ``reshard_after_forward=True``).

Flat buffers are padded to a multiple of N (:func:`~edu_parallel.zero_model.padded_numel`).
Every allocation and release of a tracked buffer is written to the trace with
``ctx.memory(category, +-bytes)``, categories :data:`CATEGORIES`; the parent replays these into
running sums per rank (:mod:`edu_parallel.zero_report`). Collectives go through
``ctx.collective`` so the bytes come from the trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from .zero_model import (
    CATEGORIES,
    DEFAULT_DIMS,
    DEFAULT_MICROBATCH,
    MASTER_DTYPE,
    MODEL_STATE,
    PARAM_DTYPE,
    STAGES,
    adam_update,
    init_master,
    microbatch_of,
    mlp_backward,
    mlp_forward,
    mse_grad,
    num_params,
    padded_numel,
)

__all__ = ["CATEGORIES", "MODEL_STATE", "STAGES", "ZeroReport", "format_zero", "run_zero",
           "train_stage", "zero_job"]  # fmt: skip

REDUCE_SCATTER = "reduce_scatter_single" if hasattr(dist, "reduce_scatter_single") else "reduce_scatter_tensor"  # fmt: skip
ALL_GATHER = "all_gather_single" if hasattr(dist, "all_gather_single") else "all_gather_into_tensor"  # fmt: skip


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class _Ledger:
    """Allocate / free tracked buffers and record each change with ``ctx.memory``."""

    def __init__(self, ctx: Any):
        self.ctx = ctx

    def alloc(self, category: str, t: torch.Tensor, step: int | None, phase: str) -> torch.Tensor:
        self.ctx.memory(category, _nbytes(t), step=step, phase=phase)
        return t

    def free(self, category: str, t: torch.Tensor, step: int | None, phase: str) -> None:
        self.ctx.memory(category, -_nbytes(t), step=step, phase=phase)


def train_stage(
    ctx: Any, stage: int, steps: int, lr: float, seed: int,
    dims: Sequence[int] = DEFAULT_DIMS, microbatch: int = DEFAULT_MICROBATCH,
) -> dict[str, Any]:  # fmt: skip
    """Run ``steps`` steps of ZeRO ``stage`` on this rank; returns full fp32 master and losses.

    Shapes: Psi params, flat length P (Psi for DP, else Psi rounded up to a multiple of N),
    shard S = P / N. Rank r owns the flat slice [r*S, (r+1)*S).
    """
    n, r = ctx.world_size, ctx.rank
    psi = num_params(dims)
    p = psi if stage == 0 else padded_numel(psi, n)
    s = p // n
    own = slice(r * s, (r + 1) * s) if stage >= 1 else slice(0, p)
    led = _Ledger(ctx)
    ctx.tracer.where(f"zero stage {stage}: init")
    full32 = torch.zeros(p, dtype=MASTER_DTYPE)  # (P,) scratch for the initial values, untracked
    full32[:psi] = init_master(dims, seed)
    # Model states (ZeRO §3.1): sizes per stage, in elements.
    master = led.alloc("master32", full32[own].clone(), None, "init")  # (S,) or (P,) fp32
    m = led.alloc("adam_m", torch.zeros_like(master), None, "init")  # same as master
    v = led.alloc("adam_v", torch.zeros_like(master), None, "init")
    param16 = led.alloc("param16", (master if stage == 3 else full32).to(PARAM_DTYPE), None, "init")  # (S,) st.3 else (P,)  # fmt: skip
    grad16 = led.alloc("grad16", torch.zeros(s if stage >= 2 else p, dtype=PARAM_DTYPE), None, "init")  # (S,) st.2-3 else (P,)  # fmt: skip
    del full32
    x, y = microbatch_of(r, dims, n, microbatch, seed)  # (B, d_in), (B, d_out)
    losses = []

    def gather_params(step: int, phase: str) -> torch.Tensor:
        full = led.alloc("gathered_params", torch.empty(p, dtype=PARAM_DTYPE), step, phase)  # (P,)
        ctx.collective(ALL_GATHER, full, param16, step=step, phase=phase)
        return full

    for step in range(1, steps + 1):
        ctx.tracer.where(f"zero stage {stage} step {step}: forward")
        weights = gather_params(step, "forward") if stage == 3 else param16  # (P,) bf16
        out, saved = mlp_forward(weights, x, dims)  # (B, d_out); saved inputs only
        loss, dout = mse_grad(out, y)
        losses.append(loss)
        if stage == 3:
            led.free("gathered_params", weights, step, "forward")  # reshard after forward
            del weights
            weights = gather_params(step, "backward")  # and gather AGAIN for backward (§5.3)
        ctx.tracer.where(f"zero stage {stage} step {step}: backward")
        if stage >= 2:  # full grads land in a bucket that is reduce-scattered, then freed
            bucket = led.alloc("comm_buffer", torch.empty(p, dtype=PARAM_DTYPE), step, "backward")
        else:
            bucket = grad16  # (P,) the full gradient buffer of DP / ZeRO-1
        mlp_backward(weights, saved, dout, dims, bucket)
        if stage == 3:
            led.free("gathered_params", weights, step, "backward")
        del weights
        if stage == 0:
            ctx.collective("all_reduce", grad16, step=step, phase="reduce_grads")
            shard16 = grad16.div_(n)  # (P,) mean over ranks
        elif stage == 1:  # the reduced shard goes to a (S,) buffer; grad16 stays full (2 Psi)
            shard16 = led.alloc(
                "comm_buffer", torch.empty(s, dtype=PARAM_DTYPE), step, "reduce_grads"
            )
            ctx.collective(REDUCE_SCATTER, shard16, grad16, step=step, phase="reduce_grads")
            shard16.div_(n)
        else:
            ctx.collective(REDUCE_SCATTER, grad16, bucket, step=step, phase="reduce_grads")
            led.free("comm_buffer", bucket, step, "reduce_grads")
            shard16 = grad16.div_(n)  # (S,)
        del bucket
        ctx.tracer.where(f"zero stage {stage} step {step}: optimizer")
        adam_update(master, shard16.to(MASTER_DTYPE), m, v, step, lr)  # on own shard only
        if stage == 1:
            led.free("comm_buffer", shard16, step, "optimizer")
        if stage in (1, 2):  # updated bf16 shard -> every rank's full bf16 params
            send = led.alloc("comm_buffer", master.to(PARAM_DTYPE), step, "gather_params")  # (S,)
            ctx.collective(ALL_GATHER, param16, send, step=step, phase="gather_params")
            led.free("comm_buffer", send, step, "gather_params")
        else:
            param16.copy_(master)  # stage 0: (P,); stage 3: own (S,) shard only
        ctx.mark("step_end", step=step)
    with ctx.tracer.paused():  # untraced: collect the result for checking
        full_master = torch.empty(p, dtype=MASTER_DTYPE)
        if stage >= 1:
            getattr(dist, ALL_GATHER)(full_master, master)
        else:
            full_master.copy_(master)
    return {"master": full_master[:psi].clone(), "losses": losses, "padded_numel": p}


def zero_job(
    ctx: Any, stage: int, steps: int, lr: float, seed: int,
    dims: Sequence[int] = DEFAULT_DIMS, microbatch: int = DEFAULT_MICROBATCH,
    compare_dp: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """On every rank: ZeRO ``stage``, traced; then (untraced) plain DP for comparison."""
    out = train_stage(ctx, stage, steps, lr, seed, dims, microbatch)
    if compare_dp:
        with ctx.tracer.paused():
            out["dp_master"] = (
                out["master"] if stage == 0 else train_stage(ctx, 0, steps, lr, seed, dims, microbatch)["master"]
            )  # fmt: skip
    return out


from .zero_report import ZeroReport, format_zero, run_zero  # noqa: E402
