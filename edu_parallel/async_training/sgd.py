"""Lesson 14 on the ranks: synchronous SGD and local SGD, and what every regime shares.

The regimes and their conventions are in :mod:`edu_parallel.async_training.config`; the
server regimes (``async-ps``, ``backup``) are in :mod:`edu_parallel.async_training.param_server`.
Every function that changes parameters here is also what the one-process replay
(:mod:`edu_parallel.async_training.replay_run`) calls, so a replay of the same order of updates
gives the same bits.

* ``sync`` (:func:`sync_sgd`): each step, every worker computes a gradient on its batch, the
  gradients are averaged with the engine's ring all-reduce (``g * (1/W)`` then a ring sum, DDP's
  order), and every rank applies the mean with ``lr``. A straggler stalls everybody: the ring
  cannot finish before its slowest rank sends (Chen et al. 2016, §2).
* ``local-sgd`` (:func:`local_sgd`): every rank applies its own gradient to its own replica; every
  ``H`` steps (and after the last) the replicas are averaged with the same ring all-reduce on the
  parameters (Lin et al. 2018; Stich 2019; DiLoCo, Douillard et al. 2023, with SGD as the outer
  optimizer and outer lr 1). ``H = 1`` is synchronous SGD; ``H`` steps cost one all-reduce.

The trace, per rank: ``compute`` events ``gradient`` (forward and backward; ``attrs``: worker, t,
rows) and ``delay`` (the injected straggler sleep; ``attrs["delay_s"]``), ``apply`` (the SGD update;
``attrs["grads"]``: ``[worker, t, pulled version]`` of every gradient it applies, and
``attrs["version"]``, the version it was applied to: staleness is their difference), the ring's
``send``/``recv`` events inside a ``collective`` event ``all_reduce`` (phase ``grad_sync``) or
``average`` (phase ``average``), and a ``step_start`` mark when the ranks, lined up, start.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import torch

from ..core.schema import GRAD_SYNC, STEP_END_MARK, STEP_START_MARK
from ..data_parallel.model import build_model, trained_params
from ..engine.context import RankContext
from ..engine.execute import run_plan
from ..plans.plan import Plan
from ..plans.ring import ring_allreduce_plan
from ..task.classifier import labelled, task_loss
from .config import AsyncConfig, batch_seed, delay_s

AVERAGE = "average"  # phase of local SGD's parameter all-reduce


@functools.cache
def ring(world_size: int) -> Plan:
    return ring_allreduce_plan(world_size)


def build(config: AsyncConfig) -> tuple[torch.nn.Sequential, list[torch.nn.Parameter]]:
    """The seeded classifier (the same initial weights in every regime) and its parameters."""
    model = build_model(config.classifier)
    return model, [p for _, p in trained_params(model)]


def batch(config: AsyncConfig, worker: int, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Worker ``worker``'s ``t``-th batch: inputs (rows, 32) and labels (rows,)."""
    return labelled(batch_seed(config.seed, worker, t), config.rows)


def gradient(
    model: torch.nn.Sequential, params: list[torch.nn.Parameter], x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """The flat gradient (Psi,) of the mean cross-entropy on ``(x, y)`` at the model's values."""
    model.zero_grad(set_to_none=True)
    task_loss(model(x), y).backward()  # (rows, 32) -> (rows, 10)
    return torch.cat([p.grad.reshape(-1) for p in params])


def flat_params(params: list[torch.nn.Parameter]) -> torch.Tensor:
    """A flat copy (Psi,) of the parameters, in registration order."""
    return torch.cat([p.detach().reshape(-1) for p in params])


def load(params: list[torch.nn.Parameter], flat: torch.Tensor) -> None:
    """Copy a flat vector (at least Psi long) into the parameters."""
    at = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[at : at + p.numel()].view_as(p))
            at += p.numel()


def apply(params: list[torch.nn.Parameter], grad: torch.Tensor, lr: float) -> None:
    """SGD: ``p -= lr * g`` for every parameter, ``g`` read from the flat gradient."""
    at = 0
    with torch.no_grad():
        for p in params:
            p.add_(grad[at : at + p.numel()].view_as(p), alpha=-lr)
            at += p.numel()


def mean_of(grads: list[torch.Tensor]) -> torch.Tensor:
    """The backup server's mean: add in arrival order, then multiply by ``1/k``."""
    total = grads[0].clone()
    for g in grads[1:]:
        total.add_(g)
    return total.mul_(1.0 / len(grads))


def worker_gradient(
    ctx: RankContext,
    config: AsyncConfig,
    model: torch.nn.Sequential,
    params: list[torch.nn.Parameter],
    worker: int,
    t: int,
) -> torch.Tensor:
    """Worker ``worker``'s ``t``-th gradient, traced, then its straggler delay (slept)."""
    ctx.tracer.where(f"{config.mode}: worker {worker} gradient {t}")
    start = ctx.tracer.now()
    x, y = batch(config, worker, t)
    g = gradient(model, params, x, y)
    attrs = {"worker": worker, "t": t, "rows": config.rows}
    ctx.record_compute("gradient", 0, start, ctx.tracer.now(), step=t, phase="compute", attrs=attrs)
    pause = delay_s(config, worker, t)
    if pause > 0:
        start = ctx.tracer.now()
        time.sleep(pause)
        attrs = {"worker": worker, "t": t, "delay_s": pause}
        ctx.record_compute("delay", 0, start, ctx.tracer.now(), step=t, phase="delay", attrs=attrs)
    return g


def record_apply(
    ctx: RankContext, start: float, step: int, grads: list[list[int]], version: int
) -> None:
    """The ``apply`` event: which gradients ``[worker, t, pulled]`` moved version ``version``."""
    attrs = {"grads": grads, "version": version}
    ctx.record_compute("apply", 0, start, ctx.tracer.now(), step=step, phase="apply", attrs=attrs)


def ring_mean(ctx: RankContext, flat: torch.Tensor, step: int, phase: str, op: str) -> None:
    """``flat * (1/W)`` summed over the ranks by the engine's ring, in place, traced."""
    start = ctx.tracer.now()
    flat.mul_(1.0 / ctx.world_size)
    if ctx.world_size > 1:
        run_plan(ctx, ring(ctx.world_size), flat, step=step, phase=phase, snapshots=False)
    nbytes = flat.numel() * flat.element_size()
    ctx.record("collective", op, start, step=step, phase=phase, nbytes=nbytes)


def line_up(ctx: RankContext) -> None:
    """Barrier, then the ``step_start`` mark every regime's clock starts from."""
    ctx.barrier()
    ctx.mark(STEP_START_MARK, step=1)


def sync_sgd(ctx: RankContext, config: AsyncConfig) -> dict[str, Any]:
    """Synchronous all-reduce SGD on this rank (see module doc)."""
    model, params = build(config)
    w = ctx.rank
    line_up(ctx)
    for t in range(1, config.steps + 1):
        g = worker_gradient(ctx, config, model, params, w, t)
        ring_mean(ctx, g, t, GRAD_SYNC, "all_reduce")
        start = ctx.tracer.now()
        apply(params, g, config.lr)
        record_apply(ctx, start, t, [[r, t, t - 1] for r in range(config.workers)], t - 1)
        ctx.mark(STEP_END_MARK, step=t)
        ctx.progress(t, config.steps)
    return {"params": flat_params(params)}


def local_sgd(ctx: RankContext, config: AsyncConfig) -> dict[str, Any]:
    """Local SGD: ``H`` local steps per replica, then a parameter average (see module doc)."""
    model, params = build(config)
    w = ctx.rank
    line_up(ctx)
    for t in range(1, config.steps + 1):
        g = worker_gradient(ctx, config, model, params, w, t)
        start = ctx.tracer.now()
        apply(params, g, config.lr)
        record_apply(ctx, start, t, [[w, t, t - 1]], t - 1)  # its own replica's version t - 1
        if t % config.local_steps == 0 or t == config.steps:
            flat = flat_params(params)
            ring_mean(ctx, flat, t, AVERAGE, AVERAGE)
            load(params, flat)
        ctx.mark(STEP_END_MARK, step=t)
        ctx.progress(t, config.steps)
    return {"params": flat_params(params)}
