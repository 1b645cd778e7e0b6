"""The model a pipeline lesson trains: a seeded MLP cut into consecutive stages.

``layers`` blocks of ``Linear(h, h) + GeLU`` in float64, built from ``seed`` so that every rank
(and the parent's single-process reference) builds bit-identical weights without sending them.
Stage ``s`` holds the blocks ``stage_bounds(layers, S)[s]``; with ``v`` chunks per rank
(Megatron-LM 2021, interleaved 1F1B, arXiv 2104.04473) there are ``S = P * v`` stages and stage
``s`` lives on rank ``s % P``.

The batch is ``M`` microbatches of ``microbatch_size`` rows (GPipe, arXiv 1811.06965); the loss
is ``sum_m MSE(model(x_m), y_m) / M``, so the gradients equal those of one full-batch step.
"""

from __future__ import annotations

from collections.abc import Collection

import torch

from ..core.units import torch_dtype
from .config import DTYPE as DTYPE_NAME
from .config import stage_bounds

DTYPE = torch_dtype(DTYPE_NAME)  # float64: a pipeline and the reference agree to ~1e-15


def build_blocks(
    layers: int, hidden: int, seed: int, keep: Collection[int] | None = None
) -> dict[int, torch.nn.Sequential]:
    """Blocks ``Linear(h, h) + GeLU`` of the seeded model, by index: those in ``keep`` (default:
    all ``layers``), the same on every process. Every block's numbers are drawn, in order, so a
    kept block equals the whole model's; a block not kept is drawn into one scratch buffer and
    dropped, so a rank holds only its own stages' weights."""
    gen = torch.Generator().manual_seed(seed)
    scale = 1.0 / hidden**0.5  # keeps activations O(1) through many layers
    keep = range(layers) if keep is None else keep
    scratch = torch.empty(hidden, hidden, dtype=DTYPE) if len(keep) < layers else None
    blocks = {}
    for i in range(max(keep, default=-1) + 1):  # the blocks after the last kept one: not drawn
        if i not in keep:  # advance the stream as the kept blocks' draw does: (h, h) then (h,)
            torch.randn(hidden, hidden, generator=gen, dtype=DTYPE, out=scratch)
            torch.randn(hidden, generator=gen, dtype=DTYPE, out=scratch[0])  # type: ignore[index]
            continue
        lin = torch.nn.Linear(hidden, hidden, dtype=DTYPE)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(hidden, hidden, generator=gen, dtype=DTYPE) * scale)
            lin.bias.copy_(torch.randn(hidden, generator=gen, dtype=DTYPE) * 0.1)
        blocks[i] = torch.nn.Sequential(lin, torch.nn.GELU())
    return blocks


def build_stages(
    stages: list[int], num_stages: int, layers: int, hidden: int, seed: int
) -> dict[int, torch.nn.Sequential]:
    """The chunks of the seeded model that ``stages`` hold, drawn in one pass over the model (a
    rank with v chunks draws the stream once, and holds only its own blocks)."""
    bounds = stage_bounds(layers, num_stages)
    mine = {i for s in stages for i in range(*bounds[s])}
    blocks = build_blocks(layers, hidden, seed, mine)
    return {s: torch.nn.Sequential(*(blocks[i] for i in range(*bounds[s]))) for s in stages}


def make_batch(
    microbatches: int, microbatch_size: int, hidden: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets, both ``(M, mb, h)``, seeded by ``seed + 1`` (not the weights' stream)."""
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(microbatches, microbatch_size, hidden, generator=gen, dtype=DTYPE)
    y = torch.randn(microbatches, microbatch_size, hidden, generator=gen, dtype=DTYPE)
    return x, y


def microbatch_loss(out: torch.Tensor, target: torch.Tensor, microbatches: int) -> torch.Tensor:
    """This microbatch's share of the loss: ``MSE(out, target) / M`` (a scalar)."""
    return torch.nn.functional.mse_loss(out, target) / microbatches


def reference_grads(
    num_stages: int, layers: int, hidden: int, microbatches: int, microbatch_size: int, seed: int
) -> dict[int, list[torch.Tensor]]:
    """Weight gradients per stage from one process: the whole model, every microbatch, one backward.

    What a correct pipeline schedule must reproduce (up to float rounding from summation order).
    """
    blocks = list(build_blocks(layers, hidden, seed).values())
    model = torch.nn.Sequential(*blocks)
    x, y = make_batch(microbatches, microbatch_size, hidden, seed)
    loss = sum(microbatch_loss(model(x[m]), y[m], microbatches) for m in range(microbatches))
    loss.backward()  # type: ignore[union-attr]
    out = {}
    for s, (lo, hi) in enumerate(stage_bounds(layers, num_stages)):
        params = [p for b in blocks[lo:hi] for p in b.parameters()]
        out[s] = [p.grad.detach().clone() for p in params]  # type: ignore[union-attr]
    return out


def grads_match(
    got: dict[int, list[torch.Tensor]], want: dict[int, list[torch.Tensor]], rtol: float = 1e-9
) -> bool:
    """Every stage present in both, every gradient ``allclose`` (float64: summation order only)."""
    if set(got) != set(want):
        return False
    for s, ref in want.items():
        if len(got[s]) != len(ref):
            return False
        for g, r in zip(got[s], ref, strict=True):
            if g is None or g.shape != r.shape or not torch.allclose(g, r, rtol=rtol, atol=1e-12):
                return False
    return True
