"""Small jobs for the tour, the tests and the benchmarks: each is ``fn(ctx, ...)``.

They show what a job is (``hello``), what the engine records (``traced_hello``), and what happens
when a rank raises, dies or skips a collective: the cluster turns each into an error that names
the rank and the step, within seconds. The tour imports this module when the command line
starts, so torch is imported inside the jobs, which run on ranks that have it loaded already.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, Any

from ..core.i18n import _

if TYPE_CHECKING:
    from .context import RankContext


def empty(ctx: RankContext) -> None:
    """Does nothing: measures the round trip of a job."""


def hello(ctx: RankContext) -> dict[str, Any]:
    """Who am I? Rank, world size, backend, device and process id."""
    return {
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "backend": ctx.backend,
        "device": str(ctx.device),
        "pid": os.getpid(),
    }


def traced_hello(ctx: RankContext, nbytes: int = 64) -> float:
    """Each rank sends ``nbytes`` to its right neighbour and sums what it got: one traced step."""
    import torch

    n = max(1, nbytes // 4)
    mine = torch.full((n,), float(ctx.rank), device=ctx.device)
    got = torch.empty_like(mine)
    right, left = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
    ctx.wait_all(
        [ctx.isend(mine, right, step=0, phase="shift"), ctx.irecv(got, left, step=0, phase="shift")]
    )
    total = torch.tensor([got.sum().item()])
    ctx.collective("all_reduce", total, step=1, phase="sum")
    return float(total.item())


def raise_on(ctx: RankContext, rank: int = 1) -> int:
    """Rank ``rank`` raises after one step; the others wait for it in an all-reduce."""
    import torch

    ctx.tracer.where(_("step 0: about to all-reduce"))
    if ctx.rank == rank:
        raise RuntimeError(_("rank {rank} failed on purpose").format(rank=rank))
    ctx.collective("all_reduce", torch.ones(1), step=0, phase="demo")
    return ctx.rank


def die_on(ctx: RankContext, rank: int = 1) -> int:
    """Rank ``rank``'s process is killed (as by the OOM killer) in the middle of a step."""
    import torch

    ctx.tracer.where(_("step 0: computing before the all-reduce"))
    if ctx.rank == rank:
        os.kill(os.getpid(), signal.SIGKILL)
    ctx.collective("all_reduce", torch.ones(1), step=0, phase="demo")
    return ctx.rank


def skip_collective(ctx: RankContext, rank: int = 1) -> int:
    """Rank ``rank`` skips the all-reduce that everyone else enters: a hang, caught by timeout."""
    import torch

    if ctx.rank != rank:
        ctx.collective("all_reduce", torch.ones(1), step=0, phase="demo")
    return ctx.rank


def sleep(ctx: RankContext, seconds: float = 60.0) -> None:
    """Sleeps on every rank (for interrupt and timeout demos)."""
    ctx.tracer.where(_("sleeping {seconds} s").format(seconds=seconds))
    time.sleep(seconds)
