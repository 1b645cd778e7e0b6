"""Tensor parallelism, executed: Megatron's column- and row-parallel linear layers on real ranks.

Shoeybi et al. 2019, "Megatron-LM" (arXiv 1909.08053) §3 and Fig. 3; sequence parallelism from
Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
(arXiv 2205.05198) §4.2.2. Notation: ``Y = X A + b`` with ``A = W^T`` of shape ``(h_in, h_out)``;
PyTorch's ``nn.Linear`` stores ``W`` as ``(h_out, h_in)``, so "columns of A" are ROWS of ``W``.
``t`` is the tensor-parallel degree (the size of ``group``).

* Column-parallel: ``A = [A_1 ... A_t]`` split along its columns (output features), X replicated.
  Rank r computes ``Y_r = X A_r``, a **slice** of Y: no communication in forward (all-gather only
  if the full Y is needed). Backward: ``dX = sum_r dY_r A_r^T``, each rank holds a **partial sum**
  of dX, so dX is all-reduced: Megatron's ``f`` (identity forward, all-reduce backward).
* Row-parallel: ``A`` split along its rows (input features), X split along its last dim. Rank r
  computes ``X_r A_r``, a **partial sum** of the full Y, all-reduced in forward: Megatron's ``g``
  (all-reduce forward, identity backward). The bias is added once, after the reduction.
* Megatron's MLP ``Y = GeLU(X A) B``: A column-parallel, B row-parallel, so GeLU acts on whole
  columns and needs no communication; one all-reduce forward (``g``), one backward (``f``).
* Sequence parallelism: X and Y are split along the sequence; ``f`` becomes all-gather (forward) /
  reduce-scatter (backward) and ``g`` reduce-scatter / all-gather (Korthikanti's ``g`` and
  ``g-bar``). The column layer saves only its input's sequence block and gathers it again in
  backward.

Every collective goes through ``ctx.collective`` (also inside backward) with ``phase`` "forward"
or "backward", so the trace says which one ran, when, and on how many bytes.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.autograd import Function

from ..core.errors import bad_value, check_choice
from ..engine.context import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, RankContext

SHARD_MODES = ("column", "row")
SEQ_DIM = 1  # activations are (b, s, h)


def tp_rank_size(ctx: RankContext, group: Any = None) -> tuple[int, int]:
    """(rank, t) of this process in ``group`` (default: the whole world)."""
    if group is None:
        return ctx.rank, ctx.world_size
    return dist.get_rank(group), dist.get_world_size(group)


# ---------------------------------------------------------------- traced collectives
def all_reduce(
    ctx: RankContext, t: torch.Tensor, phase: str, step: int | None = None, group: Any = None
) -> torch.Tensor:
    """Sum of ``t`` over the group (a new tensor; ``t`` is left alone)."""
    out = t.contiguous().clone()
    ctx.collective(ALL_REDUCE, out, group=group, step=step, phase=phase)
    return out


def all_gather(
    ctx: RankContext,
    t: torch.Tensor,
    dim: int,
    phase: str,
    step: int | None = None,
    group: Any = None,
) -> torch.Tensor:
    """Concatenation of every rank's ``t`` along ``dim``, in rank order."""
    _, size = tp_rank_size(ctx, group)
    src = t.movedim(dim, 0).contiguous()  # the collective concatenates along dim 0
    out = src.new_empty((size * src.shape[0], *src.shape[1:]))
    ctx.collective(ALL_GATHER, out, src, group=group, step=step, phase=phase)
    return out.movedim(0, dim).contiguous()


def reduce_scatter(
    ctx: RankContext,
    t: torch.Tensor,
    dim: int,
    phase: str,
    step: int | None = None,
    group: Any = None,
) -> torch.Tensor:
    """Rank r's block r (along ``dim``) of the sum of ``t`` over the group."""
    _, size = tp_rank_size(ctx, group)
    src = t.movedim(dim, 0).contiguous()
    if src.shape[0] % size:
        raise bad_value(f"dimension {dim} of the tensor", src.shape[0], f"a multiple of {size}")
    out = src.new_empty((src.shape[0] // size, *src.shape[1:]))
    ctx.collective(REDUCE_SCATTER, out, src, group=group, step=step, phase=phase)
    return out.movedim(0, dim).contiguous()


def own_block(t: torch.Tensor, rank: int, size: int, dim: int) -> torch.Tensor:
    """Block ``rank`` of ``size`` equal blocks of ``t`` along ``dim`` (a contiguous copy)."""
    if t.shape[dim] % size:
        raise bad_value(f"dimension {dim} of the tensor", t.shape[dim], f"a multiple of {size}")
    return t.chunk(size, dim)[rank].contiguous()


# ---------------------------------------------------------------- the paper's operators
class CopyToTensorParallel(Function):
    """Megatron's ``f``: identity forward, all-reduce of the gradient backward (arXiv 1909.08053
    §3)."""

    @staticmethod
    def forward(
        fc: Any, x: torch.Tensor, ctx: RankContext, step: int | None, group: Any
    ) -> torch.Tensor:
        fc.rank_ctx, fc.step, fc.group = ctx, step, group
        return x.view_as(x)

    @staticmethod
    def backward(fc: Any, dx: torch.Tensor) -> tuple[Any, ...]:
        return all_reduce(fc.rank_ctx, dx, "backward", fc.step, fc.group), None, None, None


class ReduceFromTensorParallel(Function):
    """Megatron's ``g``: all-reduce forward, identity backward (arXiv 1909.08053 §3)."""

    @staticmethod
    def forward(
        fc: Any, x: torch.Tensor, ctx: RankContext, step: int | None, group: Any
    ) -> torch.Tensor:
        return all_reduce(ctx, x, "forward", step, group)

    @staticmethod
    def backward(fc: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        return dy, None, None, None


class GatherFromTensorParallel(Function):
    """All-gather along the last dim forward; backward keeps the own slice (no communication)."""

    @staticmethod
    def forward(
        fc: Any, y: torch.Tensor, ctx: RankContext, step: int | None, group: Any
    ) -> torch.Tensor:
        fc.rank, fc.size = tp_rank_size(ctx, group)
        return all_gather(ctx, y, -1, "forward", step, group)

    @staticmethod
    def backward(fc: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        return own_block(dy, fc.rank, fc.size, -1), None, None, None


# ---------------------------------------------------------------- the two layers
class ColumnParallelLinearFn(Function):
    """``Y_r = X A_r + b_r``, A split along its columns; backward all-reduces dX (``f``).

    With ``sequence_parallel`` the input is the rank's sequence block: all-gathered in forward,
    and dX is reduce-scattered back to sequence blocks in backward (Korthikanti §4.2.2). Only the
    block is saved for backward, which all-gathers it again for dW: one more all-gather of
    ``(t-1)/t·b·s·h`` bytes buys the activation memory SP exists for (Megatron-LM does the same,
    overlapping that gather with the dX matmul).
    Written out like Megatron-LM's ``LinearWithGradAccumulationAndAsyncCommunication``.
    """

    @staticmethod
    def forward(
        fc: Any,
        x: torch.Tensor,
        w: torch.Tensor,
        b: torch.Tensor | None,
        ctx: RankContext,
        sequence_parallel: bool,
        step: int | None,
        group: Any,
    ) -> torch.Tensor:
        fc.save_for_backward(x, w)  # with SP only the (b, s/t, h) block: the point of SP
        fc.has_bias, fc.rank_ctx, fc.sp, fc.step, fc.group = (
            b is not None,
            ctx,
            sequence_parallel,
            step,
            group,
        )
        if sequence_parallel:  # (b, s/t, h) -> (b, s, h), used here and dropped
            x = all_gather(ctx, x, SEQ_DIM, "forward", step, group)
        return F.linear(x, w, b)  # (b, s, h_in) @ (h_in, h_out/t) -> (b, s, h_out/t): a slice of Y

    @staticmethod
    def backward(fc: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        x, w = fc.saved_tensors
        if fc.sp:  # dW needs the whole sequence: gather X again (Megatron overlaps it with dX)
            x = all_gather(fc.rank_ctx, x, SEQ_DIM, "backward", fc.step, fc.group)  # (b, s, h_in)
        dx = dy @ w  # (b, s, h_out/t) @ (h_out/t, h_in) -> (b, s, h_in): a PARTIAL SUM of dX
        if fc.sp:  # -> (b, s/t, h_in), summed
            dx = reduce_scatter(fc.rank_ctx, dx, SEQ_DIM, "backward", fc.step, fc.group)
        else:  # f's backward
            dx = all_reduce(fc.rank_ctx, dx, "backward", fc.step, fc.group)
        dy2, x2 = dy.reshape(-1, dy.shape[-1]), x.reshape(-1, x.shape[-1])  # tokens first
        dw = dy2.t() @ x2  # (h_out/t, tokens) @ (tokens, h_in) -> (h_out/t, h_in)
        db = dy2.sum(0) if fc.has_bias else None  # (h_out/t,)
        return dx, dw, db, None, None, None, None


class RowParallelLinearFn(Function):
    """``Y = sum_r X_r A_r + b``, A split along its rows, X along its last dim; forward all-reduce
    (``g``).

    With ``sequence_parallel`` the partial sums are reduce-scattered into sequence blocks and
    backward all-gathers dY (Korthikanti §4.2.2). ``capture["partial"]`` receives ``X_r A_r``.
    """

    @staticmethod
    def forward(
        fc: Any,
        x: torch.Tensor,
        w: torch.Tensor,
        b: torch.Tensor | None,
        ctx: RankContext,
        sequence_parallel: bool,
        step: int | None,
        group: Any,
        capture: dict[str, torch.Tensor] | None,
    ) -> torch.Tensor:
        fc.save_for_backward(x, w)
        fc.has_bias, fc.rank_ctx, fc.sp, fc.step, fc.group = (
            b is not None,
            ctx,
            sequence_parallel,
            step,
            group,
        )
        partial = F.linear(x, w)  # (b, s, h_in/t) @ (h_in/t, h_out) -> (b, s, h_out): a PARTIAL SUM
        if capture is not None:
            capture["partial"] = partial.detach().clone()
        if sequence_parallel:  # -> (b, s/t, h_out), summed
            y = reduce_scatter(ctx, partial, SEQ_DIM, "forward", step, group)
        else:  # g's forward
            y = all_reduce(ctx, partial, "forward", step, group)
        return y + b if b is not None else y  # the bias once, after the reduction

    @staticmethod
    def backward(fc: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        x, w = fc.saved_tensors
        # (h_out,); with SP only this rank's tokens (the ranks' db sum to the dense db)
        db = dy.reshape(-1, dy.shape[-1]).sum(0) if fc.has_bias else None
        if fc.sp:  # (b, s/t, h_out) -> (b, s, h_out)
            dy = all_gather(fc.rank_ctx, dy, SEQ_DIM, "backward", fc.step, fc.group)
        dx = dy @ w  # (b, s, h_out) @ (h_out, h_in/t) -> (b, s, h_in/t): a slice of dX, no comm
        dw = dy.reshape(-1, dy.shape[-1]).t() @ x.reshape(-1, x.shape[-1])  # (h_out, h_in/t)
        return dx, dw, db, None, None, None, None, None


def column_parallel_linear(
    ctx: RankContext,
    x: torch.Tensor,
    w_shard: torch.Tensor,
    b_shard: torch.Tensor | None = None,
    *,
    gather_output: bool = False,
    sequence_parallel: bool = False,
    step: int | None = None,
    group: Any = None,
) -> torch.Tensor:
    """Column-parallel ``nn.Linear``: ``w_shard`` (h_out/t, h_in), ``b_shard`` (h_out/t,).

    ``x`` is (..., h_in), replicated (with ``sequence_parallel``: (b, s/t, h_in), the rank's
    sequence block). Returns the rank's slice (..., h_out/t) of Y, or with ``gather_output`` the
    full Y (all-gather forward; backward takes the own slice).
    """
    y = ColumnParallelLinearFn.apply(x, w_shard, b_shard, ctx, sequence_parallel, step, group)
    return GatherFromTensorParallel.apply(y, ctx, step, group) if gather_output else y


def row_parallel_linear(
    ctx: RankContext,
    x_shard: torch.Tensor,
    w_shard: torch.Tensor,
    b: torch.Tensor | None = None,
    *,
    sequence_parallel: bool = False,
    step: int | None = None,
    group: Any = None,
    capture: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Row-parallel ``nn.Linear``: ``x_shard`` (..., h_in/t), ``w_shard`` (h_out, h_in/t), ``b``
    (h_out,).

    Returns the full Y (..., h_out) on every rank (with ``sequence_parallel``: the rank's
    sequence block (b, s/t, h_out)). ``b`` is the full bias, the same on every rank.
    """
    return RowParallelLinearFn.apply(
        x_shard, w_shard, b, ctx, sequence_parallel, step, group, capture
    )


def megatron_mlp(
    ctx: RankContext,
    x: torch.Tensor,
    w1_shard: torch.Tensor,
    b1_shard: torch.Tensor | None,
    w2_shard: torch.Tensor,
    b2: torch.Tensor | None,
    *,
    sequence_parallel: bool = False,
    step: int | None = None,
    group: Any = None,
    capture: dict[str, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Megatron's MLP ``GeLU(X A) B`` (arXiv 1909.08053 §3, Fig. 3a): column, GeLU, row.

    ``x`` (b, s, h) replicated (SP: (b, s/t, h)); ``w1_shard`` (ffn/t, h); ``w2_shard`` (h, ffn/t).
    One all-reduce forward (g, after B) and one backward (f, before A); with SP an all-gather and a
    reduce-scatter in each pass instead, plus the backward re-gather of X (column layer).
    """
    z = column_parallel_linear(
        ctx, x, w1_shard, b1_shard, sequence_parallel=sequence_parallel, step=step, group=group
    )  # (b, s, h) @ (h, ffn/t) -> (b, s, ffn/t)
    z = F.gelu(z)  # elementwise on whole columns of XA: no communication
    return row_parallel_linear(
        ctx,
        z,
        w2_shard,
        b2,
        sequence_parallel=sequence_parallel,
        step=step,
        group=group,
        capture=capture,
    )  # (b, s, ffn/t) @ (ffn/t, h)


# ---------------------------------------------------------------- sharding and dense references
def shard_linear(
    weight: torch.Tensor, bias: torch.Tensor | None, rank: int, world: int, mode: str
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Rank ``rank``'s part of an ``nn.Linear`` (``weight`` (h_out, h_in)) for ``mode``.

    "column": rows ``r`` of W (= columns of A) and the matching bias slice; "row": columns ``r``
    of W (= rows of A) and the FULL bias (added once after the all-reduce).
    """
    check_choice("mode", mode, SHARD_MODES)
    dim = 0 if mode == "column" else 1
    if weight.dim() != 2 or weight.shape[dim] % world:
        raise bad_value(
            "weight.shape",
            tuple(weight.shape),
            f"(h_out, h_in) with {'h_out' if dim == 0 else 'h_in'} a multiple of world={world}",
        )
    w = own_block(weight.detach(), rank, world, dim)
    if bias is None:
        return w, None
    b = own_block(bias.detach(), rank, world, 0) if mode == "column" else bias.detach().clone()
    return w, b


def dense_mlp(x: torch.Tensor, fc1: torch.nn.Linear, fc2: torch.nn.Linear) -> torch.Tensor:
    """The naive version on one process, same math: ``fc2(GeLU(fc1(x)))``."""
    return fc2(F.gelu(fc1(x)))  # (b, s, h) -> (b, s, ffn) -> (b, s, h)


def f_then_linear(
    ctx: RankContext,
    x: torch.Tensor,
    w_shard: torch.Tensor,
    b_shard: torch.Tensor | None,
    step: int | None = None,
    group: Any = None,
) -> torch.Tensor:
    """The paper's view of the column layer: ``F.linear(f(X), A_r)`` with autograd doing the
    rest."""
    return F.linear(CopyToTensorParallel.apply(x, ctx, step, group), w_shard, b_shard)


def linear_then_g(
    ctx: RankContext,
    x_shard: torch.Tensor,
    w_shard: torch.Tensor,
    b: torch.Tensor | None,
    step: int | None = None,
    group: Any = None,
) -> torch.Tensor:
    """The paper's view of the row layer: ``g(F.linear(X_r, A_r)) + b``."""
    y = ReduceFromTensorParallel.apply(F.linear(x_shard, w_shard), ctx, step, group)
    return y + b if b is not None else y
