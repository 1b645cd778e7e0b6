"""The failure lab's jobs, as they run on the ranks: one function per case, ``fn(ctx, culprit,
seconds)``.

Every job is the same small training loop: :data:`STEPS` steps, each an all-reduce of
:data:`NUMEL` float32 "gradients" through ``ctx`` (so the flight record counts it), and rank
``culprit`` misbehaves at step :data:`AT_STEP`, each job in its own way (``cases.py`` says what
the engine finds). ``seconds``: how long the culprit sleeps or works, where it does. :func:`normal`
is the loop with nobody at fault: the cluster's check that it is usable again.

References: the failures are the ones PyTorch's debugging guide lists for collectives
(https://pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications): a
rank that dies, one that skips a collective or calls another one, mismatched sizes, a send/recv
deadlock, a straggler, a timeout too short for the work.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING

import torch

from ..core.i18n import _
from ..engine.context import ALL_GATHER
from .config import AT_STEP, NUMEL, STEPS, partner_of

if TYPE_CHECKING:
    from ..engine.context import RankContext

PHASE = "lab"
# each step's forward pass in ``killed``: the others compute while the culprit dies, and the parent
# sees the death before a peer's gloo does (a peer blocked in a collective with a dead rank raises
# "Connection closed by peer" within milliseconds, a second error that races the first)
FORWARD_S = 0.05


def _grad(ctx: RankContext, step: int, numel: int = NUMEL) -> torch.Tensor:
    return torch.full((numel,), float(ctx.rank + 1 + step))


def _all_reduce(ctx: RankContext, step: int, numel: int = NUMEL) -> float:
    """One step's all-reduce of ``numel`` float32; its first element after the sum."""
    grad = _grad(ctx, step, numel)
    ctx.collective("all_reduce", grad, step=step, phase=PHASE)
    return float(grad[0])


def normal_result(world_size: int) -> float:
    """What :func:`normal` returns on every rank: step ``s`` sums ``rank + 1 + s`` over ranks."""
    n = world_size
    return float(sum(n * (n + 1) // 2 + n * s for s in range(STEPS)))


def compute_for(seconds: float) -> int:
    """Compute for ``seconds`` on one thread (small matrix products, as a forward pass does);
    the number of products. One thread: a rank forked from a parent whose OpenMP pool already ran
    may hang in a parallel region (GNU OpenMP does not survive ``fork``), and the ranks share the
    cores anyway."""
    a = torch.randn(96, 96)
    done, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        a = torch.tanh(a @ a)
        done += 1
    return done


def normal(ctx: RankContext) -> float:
    """The loop with no culprit: every rank returns :func:`normal_result` (``world_size``)."""
    return sum(_all_reduce(ctx, step) for step in range(STEPS))


def killed(ctx: RankContext, culprit: int, seconds: float) -> float:
    """The culprit's process is killed (SIGKILL, as the out-of-memory killer does) as step 2's
    forward pass begins, while the others compute theirs (:data:`FORWARD_S`)."""
    out = 0.0
    for step in range(STEPS):
        ctx.tracer.where(_("step {step}: forward pass").format(step=step))
        if step == AT_STEP and ctx.rank == culprit:
            os.kill(os.getpid(), signal.SIGKILL)
        compute_for(FORWARD_S)
        out += _all_reduce(ctx, step)
    return out


def skips_collective(ctx: RankContext, culprit: int, seconds: float) -> float:
    """The culprit's data runs out after two steps: it leaves the loop and skips the all-reduce
    of step 2 (and the later ones), which the others enter and wait in."""
    out = 0.0
    for step in range(STEPS):
        if step >= AT_STEP and ctx.rank == culprit:
            break
        out += _all_reduce(ctx, step)
    return out


def sleeps(ctx: RankContext, culprit: int, seconds: float) -> float:
    """The culprit sleeps for ``seconds`` before step 2's all-reduce (waiting on something outside
    the group: a file, a lock, an input)."""
    out = 0.0
    for step in range(STEPS):
        if step == AT_STEP and ctx.rank == culprit:
            ctx.tracer.where(
                _("step {step}: sleeping {seconds} s").format(step=step, seconds=f"{seconds:g}")
            )
            time.sleep(seconds)
        out += _all_reduce(ctx, step)
    return out


def stopped(ctx: RankContext, culprit: int, seconds: float) -> float:
    """The culprit's process is stopped (SIGSTOP, as Ctrl-Z or a debugger would) at step 2: it
    exists, and does nothing, not even its heartbeat."""
    out = 0.0
    for step in range(STEPS):
        if step == AT_STEP and ctx.rank == culprit:
            os.kill(os.getpid(), signal.SIGSTOP)
        out += _all_reduce(ctx, step)
    return out


def mismatched_collectives(ctx: RankContext, culprit: int, seconds: float) -> float:
    """At step 2 the culprit calls all-gather where the others call all-reduce."""
    out = 0.0
    for step in range(STEPS):
        if step == AT_STEP and ctx.rank == culprit:
            gathered = torch.empty(NUMEL * ctx.world_size)
            ctx.collective(ALL_GATHER, gathered, _grad(ctx, step), step=step, phase=PHASE)
            out += float(gathered[0])
            continue
        out += _all_reduce(ctx, step)
    return out


def mismatched_sizes(ctx: RankContext, culprit: int, seconds: float) -> float:
    """At step 2 the culprit all-reduces twice as many elements as the others."""
    out = 0.0
    for step in range(STEPS):
        numel = 2 * NUMEL if step == AT_STEP and ctx.rank == culprit else NUMEL
        out += _all_reduce(ctx, step, numel)
    return out


def deadlock(ctx: RankContext, culprit: int, seconds: float) -> float:
    """At step 2 the culprit and its partner (the next rank) swap a tensor, and both receive
    first: each waits for the other's send, which comes after its receive. The other ranks go on
    to the all-reduce and wait in it for the two."""
    partner = partner_of(culprit, ctx.world_size)
    out = 0.0
    for step in range(STEPS):
        if step == AT_STEP and ctx.rank in (culprit, partner):
            peer = partner if ctx.rank == culprit else culprit
            got = torch.empty(NUMEL)
            ctx.recv(got, peer, step=step, phase=PHASE)  # the fix: even ranks send first
            ctx.send(_grad(ctx, step), peer, step=step, phase=PHASE)
            out += float(got[0])
        out += _all_reduce(ctx, step)
    return out


def straggler(ctx: RankContext, culprit: int, seconds: float) -> float:
    """The culprit computes ``seconds`` longer than the others before every all-reduce (a slower
    core, a larger batch): the others wait for it each step, and the job finishes."""
    out = 0.0
    for step in range(STEPS):
        if ctx.rank == culprit:
            compute_for(seconds)
        out += _all_reduce(ctx, step)
    return out


def timeout_too_short(ctx: RankContext, culprit: int, seconds: float) -> float:
    """Every rank computes a little each step; at step 2 the culprit's share of the work takes
    ``seconds``, longer than the job's timeout: working, not stuck (its main thread runs, or waits
    runnable for a core on a loaded machine: ``flight.demand_s``)."""
    out = 0.0
    for step in range(STEPS):
        late = step == AT_STEP and ctx.rank == culprit
        work = seconds if late else 0.01
        ctx.tracer.where(
            _("step {step}: computing for {seconds} s").format(step=step, seconds=f"{work:g}")
        )
        compute_for(work)
        out += _all_reduce(ctx, step)
    return out


JOBS = {
    "killed": killed,
    "skips_collective": skips_collective,
    "sleeps": sleeps,
    "stopped": stopped,
    "mismatched_collectives": mismatched_collectives,
    "mismatched_sizes": mismatched_sizes,
    "deadlock": deadlock,
    "straggler": straggler,
    "timeout_too_short": timeout_too_short,
}
