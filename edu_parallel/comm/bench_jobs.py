"""Jobs the benchmarks time on every rank (importable, so workers can run them)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ..engine.context import RankContext
from ..engine.execute import run_plan
from ..plans.ring import ring_allreduce_plan


def time_allreduce(ctx: RankContext, nbytes: int, iters: int, impl: str) -> list[float]:
    """Seconds per iteration of ``impl`` ("builtin" = dist.all_reduce, "ring" = the hand ring
    interpreting its plan) on a float32 buffer of ``nbytes``; ranks line up at a barrier first."""
    x = torch.ones(max(1, nbytes // 4))
    plan = ring_allreduce_plan(ctx.world_size)
    times = []
    for _ in range(iters + 1):  # the first iteration warms up and is dropped
        ctx.barrier()
        start = ctx.tracer.now()
        if impl == "builtin":
            dist.all_reduce(x)
        else:
            run_plan(ctx, plan, x)
        times.append(ctx.tracer.now() - start)
    return times[1:]


def time_traced_allreduce(ctx: RankContext, nbytes: int, iters: int) -> list[float]:
    """Seconds per ``ctx.collective("all_reduce")`` on a float32 buffer of ``nbytes``: the
    path whose flight record, and on a checking cluster its signature check, a job pays for
    (``benchmarks/bench_collective_check.py``); ranks line up at a barrier first."""
    x = torch.ones(max(1, nbytes // 4))
    times = []
    with ctx.tracer.paused():
        for _ in range(iters + 1):  # the first iteration warms up and is dropped
            ctx.barrier()
            start = ctx.tracer.now()
            ctx.collective("all_reduce", x)
            times.append(ctx.tracer.now() - start)
    return times[1:]


def ping_pong(ctx: RankContext, nbytes: int, repeats: int) -> list[float] | None:
    """One-way seconds of a message of ``nbytes`` between ranks 0 and 1: rank 0 sends, rank 1
    sends it back, half the round trip, ``repeats`` times after one warm-up. Rank 0 returns the
    times, every other rank None (ranks >= 2 wait)."""
    x = torch.zeros(max(1, nbytes // 4), dtype=torch.float32)
    times = []
    for _ in range(repeats + 1):  # the first round trip warms up and is dropped
        if ctx.rank == 0:
            start = time.perf_counter()
            dist.send(x, 1)
            dist.recv(x, 1)
            times.append((time.perf_counter() - start) / 2)
        elif ctx.rank == 1:
            dist.recv(x, 0)
            dist.send(x, 0)
    return times[1:] if ctx.rank == 0 else None


def time_reduce(ctx: RankContext, nbytes: int, repeats: int) -> list[float]:
    """Seconds of ``a.add_(b)`` on float32 buffers of ``nbytes`` (the reduction of every plan)."""
    a = torch.ones(max(1, nbytes // 4))
    b = torch.ones_like(a)
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        a.add_(b)
        times.append(time.perf_counter() - start)
    return times[1:]


def ring_shift(
    ctx: RankContext, nbytes: int, steps: int, repeats: int, reduce: bool = False
) -> list[float]:
    """Seconds per step of ``steps`` back-to-back ring shifts, timed as :func:`time_allreduce`
    times a ring (ranks line up at a barrier, then the clock runs): every rank sends ``nbytes`` to
    ``rank + 1`` while it receives from ``rank - 1``, and with ``reduce`` adds what it received to
    an accumulator (a reduce-scatter step; without: an all-gather step). One value per repeat,
    after one warm-up repeat."""
    n, r = ctx.world_size, ctx.rank
    out = torch.zeros(max(1, nbytes // 4), dtype=torch.float32)
    into, acc = torch.zeros_like(out), torch.zeros_like(out)
    times = []
    for _ in range(repeats + 1):  # the first repeat warms up and is dropped
        ctx.barrier()
        start = ctx.tracer.now()
        for i in range(steps):
            send = dist.isend(out, (r + 1) % n, tag=i)
            dist.irecv(into, (r - 1) % n, tag=i).wait()
            if reduce:
                acc.add_(into)
            send.wait()
        times.append((ctx.tracer.now() - start) / steps)
    return times[1:]
