"""Jobs the benchmarks time on every rank (importable, so workers can run them)."""

from __future__ import annotations

from typing import Any


def time_allreduce(ctx: Any, nbytes: int, iters: int, impl: str) -> list[float]:
    """Seconds per iteration of ``impl`` ("builtin" = dist.all_reduce, "ring" = the hand ring
    interpreting its plan) on a float32 buffer of ``nbytes``; ranks line up at a barrier first."""
    import torch
    import torch.distributed as dist

    from .execute import run_plan
    from .ring import ring_allreduce_plan

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
