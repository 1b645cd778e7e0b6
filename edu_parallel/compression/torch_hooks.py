"""torch's own compression hooks on the same ranks, model and data: the references of lesson 13.

:func:`torch_hook_run` wraps the classifier in ``DistributedDataParallel`` (DDP's default
buckets), registers ``fp16_compress_hook``, ``bf16_compress_hook`` or ``powerSGD_hook`` (with a
``PowerSGDState`` of the same rank, error feedback, ``start_powerSGD_iter = start_step`` and
``random_seed = seed``) from ``torch.distributed.algorithms.ddp_comm_hooks``, and trains the same
steps with the same SGD update. Returns the final parameters and the losses. Two runs have no
reference: torch accepts ``start_powerSGD_iter >= 2`` only (DDP rebuilds its buckets after the
first iteration), so a PowerSGD run with ``start_step < 2``; and ``register_comm_hook`` refuses
``bf16_compress_hook`` unless the backend is NCCL (CUDA 11+, NCCL 2.10+) or XCCL, so bf16 on gloo.
"""

from __future__ import annotations

from typing import Any

import torch
import torch._dynamo  # noqa: F401 - DDP's constructor imports it (1.5 s): here, before ranks fork
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

from ..data_parallel.model import build_model, loss_of, microbatch, sgd_step, trained_params
from ..engine.context import RankContext
from .config import CompressConfig

TORCH_HOOKS = ("fp16", "bf16", "powersgd")  # the methods torch ships a hook for


def has_torch_reference(config: CompressConfig, backend: str) -> bool:
    """Whether torch runs a hook for this run on ``backend`` (see the module doc)."""
    if config.method == "powersgd":
        return config.start_step >= 2
    if config.method == "bf16":
        return backend in ("nccl", "xccl")
    return config.method in TORCH_HOOKS


def torch_hook_run(ctx: RankContext, config: CompressConfig) -> dict[str, Any]:
    """Train with torch DDP and torch's hook for ``config.method``; see the module doc."""
    ddp_config = config.ddp()
    model = build_model(ddp_config)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if config.method == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=config.rank,
            start_powerSGD_iter=config.start_step,
            use_error_feedback=config.error_feedback,
            warm_start=True,
            random_seed=config.seed,
        )
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    else:
        hook = {"fp16": default_hooks.fp16_compress_hook, "bf16": default_hooks.bf16_compress_hook}
        ddp.register_comm_hook(None, hook[config.method])
    params = [p for _, p in trained_params(model)]
    losses = []
    for step in range(1, config.steps + 1):
        model.zero_grad(set_to_none=True)
        x, y = microbatch(ddp_config, step, ctx.rank, 0)  # (b, 32), (b,)
        loss = loss_of(ddp_config, ddp(x), y)
        loss.backward()
        sgd_step(params, config.lr)
        losses.append(float(loss.detach()))
        ctx.progress(step, config.steps)
    final = torch.cat([p.detach().reshape(-1) for p in params])
    return {"params": final, "losses": losses}
