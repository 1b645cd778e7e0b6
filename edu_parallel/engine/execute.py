"""Workers interpret plans: :func:`run_plan` executes a plan of ``plans/`` on one rank.

For every step, the rank posts an ``irecv`` for each chunk it receives and an ``isend`` for each
chunk it sends, both non-blocking, so the order of posting cannot deadlock. A ``copy`` lands
straight in the buffer (unless this rank also sends that chunk in the step); a ``reduce`` lands in
a scratch buffer and is added segment by segment as the segments arrive, so the addition overlaps
the rest of the transfer. Sends read the buffer before any update of that step: the plan's
semantics. Every send, recv and reduction is recorded once per transfer, with its step, phase,
chunk and tag ``step * num_chunks + chunk``: the events
:func:`~edu_parallel.models.simulation.plan_events` plans.
"""

from __future__ import annotations

import torch

from ..core.errors import bad_value
from ..core.i18n import _
from ..plans.layout import SEGMENT_BYTES, staged_transfers
from ..plans.plan import Plan
from .context import RankContext

# Scratch buffers up to this size are kept between jobs (a 64 MiB ring on 2 ranks stages 32 MiB);
# a larger one is freed with its job, so an idle rank does not hold a big run's scratch.
_SCRATCH_LIMIT = 64 << 20
_scratch: dict[tuple[torch.dtype, str], torch.Tensor] = {}


def scratch(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A receive buffer of at least ``numel`` elements, reused across jobs (no page faults); a
    smaller kept one is let go before the new one is allocated, so never two are held."""
    key = (dtype, str(device))
    buf = _scratch.get(key)
    if buf is None or buf.numel() < numel:
        buf = None
        _scratch.pop(key, None)
        buf = _scratch[key] = torch.empty(numel, dtype=dtype, device=device)
    return buf


def release_scratch(keep_bytes: int = 0) -> None:
    """Free the kept receive buffers larger than ``keep_bytes`` (default: all of them)."""
    for key, buf in list(_scratch.items()):
        if buf.numel() * buf.element_size() > keep_bytes:
            del _scratch[key]


def run_plan(
    ctx: RankContext,
    plan: Plan,
    buf: torch.Tensor,
    segment_bytes: int = SEGMENT_BYTES,
    *,
    step: int | None = None,
    phase: str | None = None,
    snapshots: bool = True,
) -> torch.Tensor:
    """Run ``plan`` on this rank's contiguous 1-D ``buf`` in place and return it.

    Events carry the plan's step index and phase, unless the plan runs inside a larger job
    (a training step): then ``step``/``phase`` label every event, and ``snapshots=False`` keeps
    per-step copies of the buffer out of the trace. :func:`replay_plan` is the same plan on
    in-process tensors, with the same additions in the same order.
    """
    if plan.world_size != ctx.world_size:
        raise bad_value(
            "plan.world_size",
            plan.world_size,
            _("the cluster's {n}").format(n=ctx.world_size),
        )
    if buf.dim() != 1 or not buf.is_contiguous():
        raise bad_value("buf.shape", tuple(buf.shape), _("a contiguous 1-D tensor"))
    r, c = ctx.rank, plan.num_chunks
    chunks = torch.tensor_split(buf, c)  # views; the first numel % c chunks are one longer
    largest = max(x.numel() for x in chunks)
    staging = [staged_transfers(pstep, r) for pstep in plan.steps]
    # one scratch for every step: the most chunks one step stages (the ring: one)
    pool = scratch(largest * max(map(len, staging), default=0), buf.dtype, buf.device)
    if snapshots:
        ctx.tracer.snapshot(-1, None, buf)
    for i, pstep in enumerate(plan.steps):
        incoming = [t for t in pstep.transfers if t.dst == r]
        outgoing = [t for t in pstep.transfers if t.src == r]
        if not incoming and not outgoing:
            continue
        staged = staging[i]
        where = {}  # transfer -> tensor its data lands in
        for t in incoming:
            if chunks[t.chunk].numel() != chunks[t.to_chunk].numel():
                raise ValueError(
                    _(
                        "transfer {transfer} moves {moved} elements into a chunk of {size}: use a"
                        " size divisible by {c} chunks"
                    ).format(
                        transfer=t.text(),
                        moved=chunks[t.chunk].numel(),
                        size=chunks[t.to_chunk].numel(),
                        c=c,
                    )
                )
        for j, t in enumerate(staged):
            where[t] = pool[j * largest : j * largest + chunks[t.to_chunk].numel()]
        for t in incoming:
            where.setdefault(t, chunks[t.to_chunk])  # a copy into a chunk nobody reads: in place
        label = (i, pstep.phase) if step is None else (step, phase or pstep.phase)
        kw = {"step": label[0], "phase": label[1], "segment_bytes": segment_bytes}
        sends = [
            ctx.isend(chunks[t.chunk], t.dst, tag=i * c + t.chunk, chunk=t.chunk, **kw)
            for t in outgoing
        ]
        recvs = [
            (t, ctx.irecv(where[t], t.src, tag=i * c + t.chunk, op=t.op, chunk=t.to_chunk, **kw))
            for t in incoming
        ]
        for t, pending in recvs:
            ctx.tracer.where(
                _("{phase} step {step}: waiting on recv from rank {peer}").format(
                    phase=pstep.phase, step=i, peer=t.src
                )
            )
            if t.op == "reduce":
                target, offset, start = chunks[t.to_chunk], 0, None
                for seg in pending.segments():
                    start = ctx.tracer.now() if start is None else start
                    target[offset : offset + seg.numel()].add_(seg)
                    offset += seg.numel()
                nbytes = target.numel() * target.element_size()
                ctx.record_compute(
                    "reduce",
                    nbytes,
                    start or ctx.tracer.now(),
                    ctx.tracer.now(),
                    step=label[0],
                    phase=label[1],
                    chunk=t.to_chunk,
                )
            else:
                pending.wait()
        ctx.wait_all(sends)
        for t, _pending in recvs:
            if t.op == "copy" and where[t] is not chunks[t.to_chunk]:
                chunks[t.to_chunk].copy_(where[t])
        if snapshots:
            ctx.tracer.snapshot(i, pstep.phase, buf)
    release_scratch(_SCRATCH_LIMIT)  # a big run's scratch goes with it
    return buf


def replay_plan(plan: Plan, bufs: list[torch.Tensor]) -> list[torch.Tensor]:
    """:func:`run_plan` on in-process tensors ``bufs[r]`` (rank r's 1-D buffer), in place.

    The same chunks (``torch.tensor_split``), the same reads (every transfer of a step reads the
    state at the start of the step) and the same additions in the same order (``local += received``,
    incoming transfers in plan order), so a 16-bit sum rounds exactly as on the ranks: a
    single-process reference that reduces with this function agrees with the cluster bit for bit.
    """
    if len(bufs) != plan.world_size:
        raise bad_value("len(bufs)", len(bufs), f"plan.world_size={plan.world_size}")
    chunks = [torch.tensor_split(b, plan.num_chunks) for b in bufs]
    for step in plan.steps:
        before = {(t.src, t.chunk): chunks[t.src][t.chunk].clone() for t in step.transfers}
        for t in step.transfers:
            target = chunks[t.dst][t.to_chunk]
            if t.op == "reduce":
                target.add_(before[(t.src, t.chunk)])
            else:
                target.copy_(before[(t.src, t.chunk)])
    return bufs


def same_result(got: torch.Tensor, expected: torch.Tensor, world_size: int, exact: bool) -> bool:
    """Equal bit for bit when ``exact`` (integers, moved data), else equal up to the rounding of
    another order of additions: ``rtol = atol = 1e-5 * N`` (float32/64), ``2e-2 * N`` (16-bit)."""
    if exact:
        return bool(torch.equal(got, expected))
    tol = (1e-5 if got.dtype in (torch.float32, torch.float64) else 2e-2) * world_size
    return bool(torch.allclose(got.float(), expected.float(), rtol=tol, atol=tol))
