"""Workers interpret plans: :func:`run_plan` executes a :class:`~edu_parallel.plan.Plan` on a rank.

For every step, the rank posts an ``irecv`` into a scratch buffer for each chunk it receives and an
``isend`` for each chunk it sends, waits for all of them (non-blocking on both sides, so the order
of posting cannot deadlock), then adds (``reduce``) or copies (``copy``) what arrived into its
buffer. Sends read the buffer before any update of that step, which is the plan's semantics.
Every send, recv and reduction is recorded with its step, phase, chunk and tag
``step * num_chunks + chunk``, the same events :func:`edu_parallel.simulate.plan_events` plans.
"""

from __future__ import annotations

import torch

from .context import RankContext
from .plan import Plan


def run_plan(ctx: RankContext, plan: Plan, buf: torch.Tensor) -> torch.Tensor:
    """Run ``plan`` on this rank's contiguous 1-D ``buf`` in place and return it."""
    if plan.world_size != ctx.world_size:
        raise ValueError(
            f"plan.world_size={plan.world_size} is not valid: expected the cluster's {ctx.world_size}"
        )
    if buf.dim() != 1 or not buf.is_contiguous():
        raise ValueError(
            f"buf.shape={tuple(buf.shape)} is not valid: expected a contiguous 1-D tensor"
        )
    r, c = ctx.rank, plan.num_chunks
    chunks = torch.tensor_split(buf, c)  # views; the first numel % c chunks are one longer
    largest = max(x.numel() for x in chunks)
    pool: list[torch.Tensor] = []  # scratch receive buffers, reused across steps
    ctx.tracer.snapshot(-1, None, buf)
    for i, step in enumerate(plan.steps):
        incoming = [t for t in step.transfers if t.dst == r]
        outgoing = [t for t in step.transfers if t.src == r]
        if not incoming and not outgoing:
            continue
        while len(pool) < len(incoming):
            pool.append(torch.empty(largest, dtype=buf.dtype, device=buf.device))
        scratch = [pool[j][: chunks[t.chunk].numel()] for j, t in enumerate(incoming)]
        posted = [
            ctx.isend(
                chunks[t.chunk], t.dst, tag=i * c + t.chunk, step=i, phase=step.phase, chunk=t.chunk
            )
            for t in outgoing
        ]
        posted += [
            ctx.irecv(
                s, t.src, tag=i * c + t.chunk, op=t.op, step=i, phase=step.phase, chunk=t.chunk
            )
            for s, t in zip(scratch, incoming, strict=True)
        ]
        ctx.wait_all(posted)
        for s, t in zip(scratch, incoming, strict=True):
            target = chunks[t.chunk]
            if t.op == "reduce":
                with ctx.compute(
                    "reduce", s.numel() * s.element_size(), step=i, phase=step.phase, chunk=t.chunk
                ):
                    target.add_(s)
            else:
                target.copy_(s)
        ctx.tracer.snapshot(i, step.phase, buf)
    return buf
