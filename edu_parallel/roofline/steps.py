"""The rank side of the measured roofline: data-parallel steps swept over their tokens, timed.

:func:`sweep_job` trains the strategy map's residual MLP (``x + W2 GeLU(W1 x + b1) + b2``, the
weights and data of :mod:`edu_parallel.strategy_map.model`, lesson 01's DP run) on every rank with
``k`` microbatches of ``T`` tokens per rank per step, one step per ``k`` in each round (one job
per round, so the parent can show the rounds go by). A step is the forward and backward of each
microbatch (``compute`` events ``forward``, ``backward``), the gradients adding up, then one
``all_reduce`` of the flat gradient bucket (phase ``grad_sync``) into which every gradient is a
view, as DDP's buckets are (Li et al. 2020, arXiv 2006.15704 §3.2.3); the optimizer is left out.
Accumulating microbatches of one size keeps each one's compute the same, so the step's compute
grows in proportion to ``k`` while its all-reduce stays: the crossover is well defined even where
a single small matmul is bound by memory, not FLOPs. Inside, every matmul is its own ``compute``
event of phase ``matmul``: the forward ``addmm`` timed around the call, the backward
``AddmmBackward0`` node (dX and dW) between the hooks autograd calls before and after it
(``Node.register_prehook`` / ``register_hook``). The rest of the compute (GeLU, the residual,
gradient accumulation, autograd and Python) is what the roofline leaves out.

In the same round, on the same ranks, it times the two constants the formula needs:

* ``F``, this machine's matmul FLOP/s at the step's shapes: the model's forward and backward
  alone on two microbatches (the first finds the weights cold, the second warm, as in the
  accumulating steps near the crossover), its matmuls timed the same way (``calibrate`` compute
  events, each carrying its FLOPs in ``attrs``). At a few tokens a matmul is bound by reading
  its weights, not by its FLOPs, so ``F`` is measured at these shapes, not taken from a peak;
* right after it, as a step's all-reduce follows a compute, one ``all_reduce`` of the step's own
  bucket size, then one of a smaller calibration size, ``sizes[(round + i) % (len(sizes) - 1)]``
  (``calibrate`` collectives, in that order on every rank), for the α-β fit.

Rounds interleave every point, so a burst of load on shared cores slows one point of each curve,
not a whole curve; the parent keeps the fastest round. Ranks line up at a barrier before each
timed block, as nccl-tests does. Step ``s = round * len(accumulation) + i`` times
``accumulation[i]`` microbatches.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..core.schema import GRAD_SYNC
from ..engine.context import RankContext
from ..strategy_map.model import dense_weights, make_data, sq_error
from .config import SweepConfig

CALIBRATE = "calibrate"  # phase of the timings that give the formula its constants
MATMUL = "matmul"  # phase of each matmul inside a step's forward and backward
PROBE_MICROBATCHES = 2  # the matmul timing's microbatches: one with cold weights, one warm


def _leaves(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().requires_grad_(True) for k, v in weights.items()}


def _bucket(blocks: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    """One flat gradient buffer (Ψ,) with every parameter's ``.grad`` a view into it."""
    params = [p for w in blocks for p in w.values()]
    flat = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype)
    at = 0
    for p in params:
        p.grad = flat[at : at + p.numel()].view_as(p)
        at += p.numel()
    return flat


def timed_linear(
    ctx: RankContext,
    x: torch.Tensor,
    w: torch.Tensor,
    b: torch.Tensor,
    step: int,
    phase: str = MATMUL,
) -> torch.Tensor:
    """``x W^T + b`` on (T, h_in) @ (h_in, h_out) as one ``addmm``, its forward and its backward
    node each a compute event of ``phase`` (the backward's FLOPs are dX's and dW's)."""
    start = ctx.tracer.now()
    z = torch.addmm(b, x, w.t())  # (T, h_out)
    fwd = 2 * x.shape[0] * w.shape[0] * w.shape[1]
    ctx.record_compute(
        "addmm", 0, start, ctx.tracer.now(), step=step, phase=phase, attrs={"flops": fwd}
    )
    began: list[float] = []
    node = z.grad_fn
    node.register_prehook(lambda grad_out: began.append(ctx.tracer.now()))

    def done(grad_in: Any, grad_out: Any) -> None:
        flops = fwd * (1 + (grad_in[1] is not None))  # dW always; dX when x needs it
        ctx.record_compute(
            "addmm backward",
            0,
            began.pop(),
            ctx.tracer.now(),
            step=step,
            phase=phase,
            attrs={"flops": flops},
        )

    node.register_hook(done)
    return z


def dense_block(
    ctx: RankContext, x: torch.Tensor, w: dict[str, torch.Tensor], step: int, phase: str = MATMUL
) -> torch.Tensor:
    """The strategy map's block ``x + W2 GeLU(W1 x + b1) + b2`` on tokens (T, h), matmuls timed."""
    a = F.gelu(timed_linear(ctx, x, w["w1"], w["b1"], step, phase))  # (T, 4h)
    return x + timed_linear(ctx, a, w["w2"], w["b2"], step, phase)  # (T, h)


def dp_step(
    ctx: RankContext,
    blocks: list[dict[str, torch.Tensor]],
    flat: torch.Tensor,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    total: int,
    step: int,
) -> None:
    """Forward and backward of each microbatch ``(x, y)`` (T, h) in turn, every gradient adding
    into ``flat`` (accumulation), then ONE all-reduce of it: DDP's ``no_sync`` for all but the
    last microbatch (Li et al. 2020 §3.2.4)."""
    ctx.barrier()
    for x, y in batches:
        with ctx.compute("forward", step=step, phase="forward"):
            out = x
            for w in blocks:
                out = dense_block(ctx, out, w, step)  # (T, h)
            loss = sq_error(out, y, total)
        with ctx.compute("backward", step=step, phase="backward"):
            loss.backward()  # every gradient adds into ``flat``
    ctx.collective("all_reduce", flat, step=step, phase=GRAD_SYNC)
    flat.zero_()


def time_matmuls(
    ctx: RankContext,
    blocks: list[dict[str, torch.Tensor]],
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    step: int,
) -> None:
    """The model's forward and backward on the microbatches ``batches`` in turn, alone (two: the
    first finds the weights cold, the next warm, as in an accumulating step), its matmuls timed
    as the step times its own (``calibrate`` events carrying their FLOPs): the same kernels,
    shapes and bookkeeping, without the all-reduce and its wait."""
    ctx.barrier()
    for x, y in batches:  # (T, h) each
        out = x
        for w in blocks:
            out = dense_block(ctx, out, w, step, CALIBRATE)
        sq_error(out, y, y.numel()).backward()


def sweep_job(ctx: RankContext, cfg: SweepConfig, rnd: int) -> dict[str, Any]:
    """On every rank, round ``rnd`` of the sweep: per ``k``, the matmul timing, two calibration
    all-reduces and a DP step of ``k`` microbatches. Returns the parameter count."""
    model = cfg.model
    n, r = ctx.world_size, ctx.rank
    weights = dense_weights(model)  # the same bits on every rank
    blocks = [_leaves(w) for w in weights]
    flat = _bucket(blocks)  # (Ψ,)
    x, y = make_data(model)  # (batch, 1, h): rank r's rows, as tokens (rows, h)
    rows = model.batch // n
    x = x[r * rows : (r + 1) * rows].reshape(-1, model.hidden)
    y = y[r * rows : (r + 1) * rows].reshape(-1, model.hidden)
    t = cfg.microbatch
    micro = [(x[m * t : (m + 1) * t], y[m * t : (m + 1) * t]) for m in range(rows // t)]
    buffers = [torch.zeros(max(1, s // 4)) for s in cfg.calibration_sizes]  # float32, s bytes
    points = len(cfg.accumulation)
    ctx.tracer.where(f"roofline sweep, round {rnd}")
    for i, k in enumerate(cfg.accumulation):
        step = rnd * points + i
        time_matmuls(ctx, blocks, micro[:PROBE_MICROBATCHES], step)  # the step's weights
        flat.zero_()  # its gradients went into the bucket
        for buf in (buffers[-1], buffers[(rnd + i) % (len(buffers) - 1)]):
            ctx.collective("all_reduce", buf, step=step, phase=CALIBRATE)
        dp_step(ctx, blocks, flat, micro[:k], n * k * t * model.hidden, step)
        ctx.progress(i + 1, points)
    return {"params": flat.numel()}
