"""The tiny model, data, Adam and single-process reference behind ZeRO and FSDP runs.

Everything here is deterministic from a seed so that every ZeRO stage, plain data parallelism and
the single-process reference start from the same bits:

* the model is an MLP of ``nn.Linear`` layers (default 3 layers of 16x16 + bias, ReLU between
  them, ``Psi = 3 * (16*16 + 16) = 816`` parameters), stored as ONE flat vector in the order
  ``W1 (out, in) row-major, b1, W2, b2, ...`` so that a rank's 1/N shard is a contiguous slice;
* each rank has its own microbatch; the global batch is their concatenation (rank order);
* Adam is written out on a flat fp32 vector with exactly the update of ``torch.optim.Adam``
  (default betas ``(0.9, 0.999)``, eps ``1e-8``, no weight decay, the non-foreach code path).

Mixed precision follows Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models" (arXiv 1910.02054) §3.1: 16-bit parameters and gradients (bfloat16
here; the paper's fp16 has the same 2 bytes), fp32 master weights and fp32 Adam momentum and
variance, ``K = 12`` bytes of optimizer state per parameter, ``2 + 2 + 12 = 16`` bytes in all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..core.errors import bad_value, check_int
from ..engine.execute import replay_plan
from ..plans.collectives import ring_reduce_scatter_plan

DEFAULT_DIMS: tuple[int, ...] = (16, 16, 16, 16)  # 3 Linear layers 16x16 (+ bias)
DEFAULT_MICROBATCH = 4  # rows of the batch each rank sees per step
BETAS = (0.9, 0.999)  # torch.optim.Adam defaults
EPS = 1e-8
PARAM_DTYPE = torch.bfloat16  # 16-bit params and grads (ZeRO §3.1 uses fp16: also 2 bytes)
MASTER_DTYPE = torch.float32  # master weights, Adam m and v


def check_dims(dims: Sequence[int]) -> tuple[int, ...]:
    """``dims`` = layer widths ``(d_in, h1, ..., d_out)``: at least 2 integers in [1, 4096]."""
    try:
        out = tuple(dims)
    except TypeError:
        raise bad_value(
            "dims", dims, "a sequence of at least 2 layer widths in [1, 4096]"
        ) from None
    if len(out) < 2:
        raise bad_value("dims", dims, "a sequence of at least 2 layer widths in [1, 4096]")
    return tuple(check_int("dims", d, 1, 4096) for d in out)


def num_params(dims: Sequence[int]) -> int:
    """Psi: weights plus biases of the MLP, ``sum(d_in * d_out + d_out)``."""
    return sum(a * b + b for a, b in zip(dims[:-1], dims[1:], strict=False))


def padded_numel(psi: int, world_size: int) -> int:
    """The flat length ``P >= Psi`` rounded up to a multiple of ``world_size``.

    Sharding a flat buffer of Psi elements over N ranks leaves ``P - Psi < N`` zero elements at
    the end so every shard has exactly ``P / N`` elements; those zeros are "the gap from rounding
    of uneven shards" that the memory ledger reports (FSDP pads the same way, see the PyTorch
    FSDP2 ``fully_shard`` docs: dim-0 shards padded to equal size).
    """
    return -(-psi // world_size) * world_size


def init_master(dims: Sequence[int], seed: int) -> torch.Tensor:
    """fp32 master weights (Psi,), like ``nn.Linear``'s init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    g = torch.Generator().manual_seed(seed)
    parts = []
    for d_in, d_out in zip(dims[:-1], dims[1:], strict=False):
        bound = 1.0 / math.sqrt(d_in)
        parts.append((torch.rand(d_out * d_in, generator=g) * 2 - 1) * bound)  # W (d_out, d_in)
        parts.append((torch.rand(d_out, generator=g) * 2 - 1) * bound)  # b (d_out,)
    return torch.cat(parts).to(MASTER_DTYPE)


def global_batch(
    dims: Sequence[int], world_size: int, microbatch: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (N*B, d_in) and targets (N*B, d_out) in fp32; rank r owns rows [r*B, (r+1)*B)."""
    g = torch.Generator().manual_seed(seed + 1_000_003)
    x = torch.randn(world_size * microbatch, dims[0], generator=g)
    y = torch.randn(world_size * microbatch, dims[-1], generator=g)
    return x, y


def microbatch_of(
    rank: int, dims: Sequence[int], world_size: int, microbatch: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s slice of :func:`global_batch`: (B, d_in), (B, d_out)."""
    x, y = global_batch(dims, world_size, microbatch, seed)
    rows = slice(rank * microbatch, (rank + 1) * microbatch)
    return x[rows].clone(), y[rows].clone()


def layer_views(flat: torch.Tensor, dims: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(W (d_out, d_in), b (d_out,)) views into a flat (>= Psi,) buffer, in storage order."""
    out, at = [], 0
    for d_in, d_out in zip(dims[:-1], dims[1:], strict=False):
        w = flat[at : at + d_in * d_out].view(d_out, d_in)
        at += d_in * d_out
        b = flat[at : at + d_out]
        at += d_out
        out.append((w, b))
    return out


def mlp_forward(
    flat16: torch.Tensor, x: torch.Tensor, dims: Sequence[int]
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Forward in 16-bit with the full params ``flat16`` (P,); returns out (B, d_out) and inputs.

    Only activations are kept for backward (never the weights), so ZeRO-3 can release the
    gathered parameters after forward and gather them again for backward (ZeRO §5.3).
    """
    h = x.to(flat16.dtype)
    saved = []
    layers = layer_views(flat16, dims)
    for i, (w, b) in enumerate(layers):
        saved.append(h)  # (B, d_in) input of layer i
        h = torch.nn.functional.linear(h, w, b)  # (B, d_out), the op nn.Linear runs
        if i < len(layers) - 1:
            h = torch.relu(h)
    return h, saved


def mlp_backward(
    flat16: torch.Tensor,
    saved: list[torch.Tensor],
    dout: torch.Tensor,
    dims: Sequence[int],
    grad_out: torch.Tensor,
) -> None:
    """Backward of :func:`mlp_forward` in 16-bit; writes dL/dparams into ``grad_out`` (P,)."""
    grad_out.zero_()
    layers = layer_views(flat16, dims)
    glayers = layer_views(grad_out, dims)
    g = dout  # (B, d_out) of the last layer
    for i in range(len(layers) - 1, -1, -1):
        w, _ = layers[i]
        gw, gb = glayers[i]
        gw.copy_(g.t() @ saved[i])  # (d_out, B) @ (B, d_in)
        gb.copy_(g.sum(0))  # (d_out,)
        if i > 0:
            g = g @ w  # (B, d_in)
            g = g * (saved[i] > 0)  # ReLU of layer i-1 (its output is saved[i])


def mse_grad(out: torch.Tensor, y: torch.Tensor) -> tuple[float, torch.Tensor]:
    """Loss ``mean((out - y)^2)`` over this microbatch and dL/dout (B, d_out) in 16-bit.

    The loss node alone goes through autograd so dL/dout has exactly the rounding that
    ``nn.functional.mse_loss(...).backward()`` gives the reference."""
    leaf = out.detach().requires_grad_(True)
    loss = torch.nn.functional.mse_loss(leaf, y.to(out.dtype))
    loss.backward()
    return float(loss.detach()), leaf.grad


def adam_update(
    param: torch.Tensor,
    grad: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    step: int,
    lr: float,
    betas: tuple[float, float] = BETAS,
    eps: float = EPS,
) -> None:
    """One Adam step in place on flat fp32 tensors, the same math as ``torch.optim.Adam``.

    ``m = lerp(m, g, 1-b1)``; ``v = b2 v + (1-b2) g^2``; ``p -= lr/(1-b1^t) * m /
    (sqrt(v)/sqrt(1-b2^t) + eps)`` (``torch/optim/adam.py``, ``_single_tensor_adam``).
    """
    b1, b2 = betas
    m.lerp_(grad, 1 - b1)
    v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    bias1 = 1 - b1**step
    bias2 = 1 - b2**step
    denom = (v.sqrt() / math.sqrt(bias2)).add_(eps)
    param.addcdiv_(m, denom, value=-(lr / bias1))


def reference_training(
    dims: Sequence[int], world_size: int, microbatch: int, steps: int, lr: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Single process: ``nn.Linear`` + autograd in bf16 over the global batch, fp32 master + Adam.

    The global batch is processed as its N microbatches (gradient accumulation: the gradient of
    the global mean loss is the mean of the microbatch gradients). The N bf16 gradients are summed
    by replaying the ranks' ring reduce-scatter (:func:`~edu_parallel.engine.execute.replay_plan` of
    :func:`~edu_parallel.plans.collectives.ring_reduce_scatter_plan` on the padded flat length), so
    each element is rounded after the same additions in the same order as on the cluster, then
    divided by N. Summing in the same order matters: Adam's first step is ``lr * g/|g|``, so a
    gradient element that rounds to 0 in one order and to 7e-5 in another moves its weight by 0
    vs ``lr``, and later steps drift apart from there.
    Returns the fp32 master weights (Psi,) after ``steps`` steps and a mask (Psi,) of the
    elements whose summed gradient was, at some step, within the bf16 rounding noise of the sum
    (``|sum| < N * 2^-7 * max_r |g_r|``): an implementation that sums in ANOTHER order (gloo's
    own collectives, FSDP2) may round those to another sign or to 0.
    """
    master = init_master(dims, seed)
    m, v = torch.zeros_like(master), torch.zeros_like(master)
    ambiguous = torch.zeros(master.numel(), dtype=torch.bool)
    x, y = global_batch(dims, world_size, microbatch, seed)  # (N*B, d_in), (N*B, d_out)
    layers = [torch.nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:], strict=False)]
    model = torch.nn.Sequential()
    for i, layer in enumerate(layers):
        model.append(layer)
        if i < len(layers) - 1:
            model.append(torch.nn.ReLU())
    model.to(PARAM_DTYPE)
    for step in range(1, steps + 1):
        with torch.no_grad():
            for (w, b), layer in zip(layer_views(master, dims), layers, strict=True):
                layer.weight.copy_(w)  # fp32 master -> bf16 params
                layer.bias.copy_(b)
        psi, padded = master.numel(), padded_numel(master.numel(), world_size)
        grads = [torch.zeros(padded, dtype=PARAM_DTYPE) for _ in range(world_size)]  # (P,) each
        biggest = torch.zeros(psi)  # (Psi,) max_r |g_r|
        for r in range(world_size):
            rows = slice(r * microbatch, (r + 1) * microbatch)
            model.zero_grad()
            out = model(x[rows].to(PARAM_DTYPE))
            torch.nn.functional.mse_loss(out, y[rows].to(PARAM_DTYPE)).backward()
            g = torch.cat(
                [t for layer in layers for t in (layer.weight.grad.flatten(), layer.bias.grad)]
            )
            grads[r][:psi] = g
            biggest = torch.maximum(biggest, g.float().abs())
        replay_plan(ring_reduce_scatter_plan(world_size), grads)  # rank r's chunk r: the sum
        total = torch.cat([torch.tensor_split(grads[r], world_size)[r] for r in range(world_size)])[
            :psi
        ]
        ambiguous |= total.float().abs() < world_size * 2.0**-7 * biggest
        adam_update(master, (total / world_size).to(MASTER_DTYPE), m, v, step, lr)
    return master, ambiguous


def formula_model_state_bytes(stage: int, psi: int | float, world_size: int) -> float:
    """Model-state bytes per rank for mixed-precision Adam (ZeRO §3.1 Figure 1, §5; errata E8).

    DP ``16 Psi``; ZeRO-1 ``4 Psi + 12 Psi/N``; ZeRO-2 ``2 Psi + 14 Psi/N``; ZeRO-3 ``16 Psi/N``.
    """
    n = world_size
    return {0: 16 * psi, 1: 4 * psi + 12 * psi / n, 2: 2 * psi + 14 * psi / n, 3: 16 * psi / n}[
        stage
    ]
