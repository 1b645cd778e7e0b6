"""One rank of a tensor-parallel run: the seeded problem, the sharded layers, the pieces returned.

Every rank receives the run's :class:`~edu_parallel.tensor_parallel.config.TPConfig` and builds the
same full weights, input and upstream gradient dY from its seed (:func:`make_problem`, as if rank 0
had broadcast them), keeps its shard, runs the layers of
:mod:`edu_parallel.tensor_parallel.layers` forward and ``backward(dY)`` (:func:`tp_job`), and
returns its pieces. :func:`dense_reference` is the same layer on one process, and
:func:`expected_piece` / :func:`classify_local` say which block of it a rank's piece must equal.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.units import torch_dtype
from ..engine.autograd import backward_from
from ..engine.context import RankContext
from .config import TPConfig
from .layers import (
    SEQ_DIM,
    GatherFromTensorParallel,
    all_gather,
    all_reduce,
    column_parallel_linear,
    dense_mlp,
    megatron_mlp,
    own_block,
    row_parallel_linear,
    shard_linear,
)


def make_problem(
    mode: str, batch: int, seq: int, hidden: int, ffn: int, seed: int, dtype: str
) -> dict[str, torch.Tensor]:
    """Full weights (``nn.Linear`` layout), input X and upstream gradient dY, from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    dt = torch_dtype(dtype)

    def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dt)

    p: dict[str, torch.Tensor] = {}
    if mode != "row":  # fc1 = nn.Linear(h, ffn): W1 (ffn, h)
        p["w1"], p["b1"] = rand(ffn, hidden, scale=hidden**-0.5), rand(ffn, scale=0.1)
    if mode != "column":  # fc2 = nn.Linear(ffn, h): W2 (h, ffn)
        p["w2"], p["b2"] = rand(hidden, ffn, scale=ffn**-0.5), rand(hidden, scale=0.1)
    p["x"] = rand(batch, seq, ffn if mode == "row" else hidden)
    p["dy"] = rand(batch, seq, ffn if mode == "column" else hidden)
    return p


def dense_reference(mode: str, p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same forward and backward with dense ``nn.Linear`` layers on one process."""

    def linear(w: torch.Tensor, b: torch.Tensor) -> torch.nn.Linear:
        lin = torch.nn.Linear(w.shape[1], w.shape[0], dtype=w.dtype)
        with torch.no_grad():
            lin.weight.copy_(w)
            lin.bias.copy_(b)
        return lin

    x = p["x"].clone().requires_grad_()
    fc1 = linear(p["w1"], p["b1"]) if "w1" in p else None
    fc2 = linear(p["w2"], p["b2"]) if "w2" in p else None
    if fc1 is not None and fc2 is not None:
        y = dense_mlp(x, fc1, fc2)
    else:
        y = (fc1 or fc2)(x)  # type: ignore[misc]
    backward_from(y, p["dy"])
    out = {"y": y.detach(), "dx": x.grad}
    for name, lin in (("1", fc1), ("2", fc2)):
        if lin is not None:
            out["dw" + name], out["db" + name] = lin.weight.grad, lin.bias.grad
    return out


def problem_of(config: TPConfig) -> dict[str, torch.Tensor]:
    """:func:`make_problem` of the run ``config`` describes."""
    c = config
    return make_problem(c.mode, c.batch, c.seq, c.hidden, c.ffn, c.seed, c.dtype)


def tp_job(ctx: RankContext, config: TPConfig) -> dict[str, Any]:
    """On every rank: shard, forward, ``backward(dY)``; returns this rank's pieces."""
    r, t = ctx.rank, ctx.world_size
    mode, rule, gather_output = config.mode, config.rule, config.gather_output
    p = problem_of(config)
    ctx.tracer.where(f"tp {mode}: forward")
    leaves: dict[str, torch.Tensor] = {}

    def leaf(name: str, x: torch.Tensor | None) -> torch.Tensor | None:
        if x is not None:
            leaves[name] = x.requires_grad_()
        return x

    w1, b1 = shard_linear(p["w1"], p["b1"], r, t, "column") if "w1" in p else (None, None)
    w2, b2 = shard_linear(p["w2"], p["b2"], r, t, "row") if "w2" in p else (None, None)
    x_in = p["x"]
    if mode == "row":
        x_in = own_block(x_in, r, t, -1)  # (b, s, ffn/t): X split along its last dim
    elif mode == "mlp-sp":
        x_in = own_block(x_in, r, t, SEQ_DIM)  # (b, s/t, h): the rank's sequence block
    if rule == "syllabus":  # errata E4, forward only: the collective the outline names
        with torch.no_grad():
            if mode == "column":  # slices of Y summed: (b, s, ffn/t)
                local = column_parallel_linear(ctx, x_in, w1, b1, step=1)
                y = all_reduce(ctx, local, "forward", 1)
            else:  # partial sums concatenated: (b, s, t*h)
                local = torch.nn.functional.linear(x_in, w2)  # (b, s, ffn/t) @ (ffn/t, h)
                y = all_gather(ctx, local, -1, "forward", 1)
        return {"y": y, "local": local}
    x = leaf("dx", x_in.clone())
    for name, tensor in (("dw1", w1), ("db1", b1), ("dw2", w2), ("db2", b2)):
        leaf(name, tensor)
    cap: dict[str, torch.Tensor] = {}
    if mode == "column":
        local = column_parallel_linear(ctx, x, w1, b1, step=1)  # (b, s, ffn/t)
        y = GatherFromTensorParallel.apply(local, ctx, 1, None) if gather_output else local
        dy = p["dy"] if gather_output else own_block(p["dy"], r, t, -1)
    elif mode == "row":
        y = row_parallel_linear(ctx, x, w2, b2, step=1, capture=cap)  # (b, s, h)
        local, dy = cap["partial"], p["dy"]
    else:
        sp = mode == "mlp-sp"
        y = megatron_mlp(ctx, x, w1, b1, w2, b2, sequence_parallel=sp, step=1, capture=cap)
        local, dy = cap["partial"], own_block(p["dy"], r, t, SEQ_DIM) if sp else p["dy"]
    ctx.tracer.where(f"tp {mode}: backward")
    backward_from(y, dy)
    out = {name: v.grad.detach().clone() for name, v in leaves.items()}
    return {**out, "y": y.detach(), "local": local.detach()}


def expected_piece(
    mode: str,
    name: str,
    dense: dict[str, torch.Tensor],
    rank: int,
    t: int,
    gather_output: bool = False,
) -> torch.Tensor | None:
    """What rank ``rank`` must hold of the dense result ``name``; None: the SUM over ranks must
    equal it."""
    full = dense[name]
    if name in ("dw1", "db1"):
        return shard_linear(dense["dw1"], dense["db1"], rank, t, "column")[name == "db1"]
    if name == "dw2":
        return shard_linear(full, None, rank, t, "row")[0]
    if mode == "mlp-sp":
        return None if name == "db2" else own_block(full, rank, t, SEQ_DIM)
    if (name == "y" and mode == "column" and not gather_output) or (name == "dx" and mode == "row"):
        return own_block(full, rank, t, -1)
    return full


def classify_local(
    locals_: list[torch.Tensor], full: torch.Tensor, rtol: float, atol: float
) -> list[str]:
    """What each rank's output was BEFORE its collective: "full", "slice" (block r of the last
    dim), "partial_sum" (full shape, and the ranks' sum is Y) or "other"."""
    t = len(locals_)

    def close(a: torch.Tensor, b: torch.Tensor) -> bool:
        return a.shape == b.shape and torch.allclose(a, b, rtol=rtol, atol=atol)

    same = all(loc.shape == full.shape for loc in locals_)
    summed = same and close(torch.stack(locals_).sum(0), full)
    kinds = []
    for r, loc in enumerate(locals_):
        block = own_block(full, r, t, -1) if full.shape[-1] % t == 0 else None
        if close(loc, full):
            kinds.append("full")
        elif block is not None and close(loc, block):
            kinds.append("slice")
        else:
            kinds.append("partial_sum" if summed else "other")
    return kinds
