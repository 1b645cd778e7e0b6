"""How a plan cuts each rank's buffer: chunk bounds, chunk bytes, and the trace ``meta`` of a run.

A plan names chunks ``0..num_chunks-1``; a buffer of ``numel`` elements is cut into near-equal
chunks like ``torch.tensor_split`` (:func:`~edu_parallel.core.inputs.chunk_bounds`). Every runner
of a plan (real ranks, the simulation) describes its run with :func:`plan_meta`, the keys of
:data:`edu_parallel.core.schema.META` that renderers read back.
"""

from __future__ import annotations

from typing import Any

from ..core.inputs import chunk_bounds
from ..core.units import DTYPES
from .plan import Plan, Step, Transfer

# Messages above this travel in 4 MiB pieces, so a receiver adds piece k while k+1 is on the wire.
SEGMENT_BYTES = 4 << 20


def chunk_bytes(plan: Plan, numel: int, dtype: str) -> list[int]:
    """Bytes of each of the plan's chunks of a buffer of ``numel`` elements of ``dtype``."""
    bounds = chunk_bounds(numel, plan.num_chunks)
    return [(bounds[k + 1] - bounds[k]) * DTYPES[dtype] for k in range(plan.num_chunks)]


def staged_transfers(step: Step, rank: int) -> list[Transfer]:
    """The transfers ``rank`` receives in ``step`` into a scratch buffer rather than straight into
    its chunk: a ``reduce`` (added after it lands) and a ``copy`` into a chunk the rank also sends
    in that step (every send reads the state before the step). The plan interpreter stages them;
    the memory a rank needs counts them."""
    sent = {t.chunk for t in step.transfers if t.src == rank}
    return [t for t in step.transfers if t.dst == rank and (t.op == "reduce" or t.to_chunk in sent)]


def plan_meta(plan: Plan, numel: int, dtype: str, pattern: str) -> dict[str, Any]:
    """The ``meta`` of a run of ``plan`` on buffers of ``numel`` elements of ``dtype`` filled with
    ``pattern``: what ran, on what, cut how."""
    return {
        "concept": plan.name,
        "collective": plan.collective,
        "world_size": plan.world_size,
        "nbytes": numel * DTYPES[dtype],
        "dtype": dtype,
        "input": pattern,
        "plan": plan.to_text(),
        "chunk_bounds": chunk_bounds(numel, plan.num_chunks),
        "chunk_bytes": chunk_bytes(plan, numel, dtype),
    }
