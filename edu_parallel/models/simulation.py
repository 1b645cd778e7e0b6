"""Run a plan in-process on virtual ranks: no processes, same trace shape as the real engine.

Each virtual rank holds a numpy buffer (or none, with ``with_data=False``, for thousands of
ranks). Transfers of a step read the state at the start of the step, exactly as the workers do.
Event times are step-based (step ``i`` spans ``[i, i+1)``) unless a cost model retimes them.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import check_int
from ..core.inputs import chunk_bounds, make_input, numel_for
from ..core.trace import SNAPSHOT_LIMIT, Event, Snapshot, Trace
from ..core.units import DTYPES, check_dtype
from ..plans.layout import chunk_bytes, plan_meta
from ..plans.plan import Plan


def plan_events(plan: Plan, chunk_bytes: list[int], rank: int | None = None) -> list[Event]:
    """The events a run of ``plan`` records, in the engine's order, with step-based times.

    For step ``i`` a rank records its sends, then its recvs, then one ``compute`` event
    (``op="reduce"``) per chunk it reduced. ``tag = i * num_chunks + chunk`` (the sender's chunk)
    matches send and recv; a recv's ``chunk`` is where the data lands (``Transfer.to_chunk``).
    """
    events: list[Event] = []
    c = plan.num_chunks
    for i, step in enumerate(plan.steps):
        t0, t1 = float(i), float(i + 1)
        mine = [t for t in step.transfers if rank is None or rank in (t.src, t.dst)]
        for t in mine:
            if rank is None or t.src == rank:
                nb = chunk_bytes[t.chunk]
                events.append(
                    Event(
                        kind="send",
                        rank=t.src,
                        op="isend",
                        peer=t.dst,
                        step=i,
                        phase=step.phase,
                        chunk=t.chunk,
                        nbytes=nb,
                        start=t0,
                        end=t1,
                        tag=i * c + t.chunk,
                    )
                )
        for t in mine:
            if rank is None or t.dst == rank:  # a recv's chunk is where the data lands
                nb = chunk_bytes[t.chunk]
                events.append(
                    Event(
                        kind="recv",
                        rank=t.dst,
                        op=t.op,
                        peer=t.src,
                        step=i,
                        phase=step.phase,
                        chunk=t.to_chunk,
                        nbytes=nb,
                        start=t0,
                        end=t1,
                        tag=i * c + t.chunk,
                    )
                )
        for t in mine:
            if t.op == "reduce" and (rank is None or t.dst == rank):
                nb = chunk_bytes[t.chunk]
                events.append(
                    Event(
                        kind="compute",
                        rank=t.dst,
                        op="reduce",
                        peer=None,
                        step=i,
                        phase=step.phase,
                        chunk=t.to_chunk,
                        nbytes=nb,
                        start=t1,
                        end=t1,
                    )
                )
    return events


def simulate(
    plan: Plan,
    nbytes: int,
    dtype: str = "float32",
    pattern: str = "powers_of_two",
    seed: int = 0,
    with_data: bool | None = None,
    snapshot_limit: int = SNAPSHOT_LIMIT,
) -> tuple[Trace, list[np.ndarray] | None]:
    """Execute ``plan`` on ``plan.world_size`` virtual ranks.

    Returns the trace and the final buffers (``None`` without data). ``with_data`` defaults to
    True up to 64 ranks. Snapshots are kept when a rank's buffer is at most ``snapshot_limit``
    bytes.
    """
    n = plan.world_size
    check_int("nbytes", nbytes, 1)
    check_dtype(dtype)
    numel = numel_for(nbytes, dtype)
    bounds = chunk_bounds(numel, plan.num_chunks)
    item = DTYPES[dtype]
    sizes = chunk_bytes(plan, numel, dtype)
    if with_data is None:
        with_data = n <= 64
    trace = Trace(
        meta={
            **plan_meta(plan, numel, dtype, pattern),
            "source": "simulation",
            "time_unit": "step",
        },
        events=plan_events(plan, sizes),
    )
    if not with_data:
        return trace, None
    bufs = [make_input(r, numel, dtype, pattern, seed) for r in range(n)]
    keep = numel * item <= snapshot_limit
    if keep:
        trace.snapshots.extend(Snapshot(r, -1, None, bufs[r].tolist()) for r in range(n))
    for i, step in enumerate(plan.steps):
        # Every transfer reads the state at the start of the step.
        incoming = [
            (t, bufs[t.src][bounds[t.chunk] : bounds[t.chunk + 1]].copy()) for t in step.transfers
        ]
        for t, data in incoming:
            view = bufs[t.dst][bounds[t.to_chunk] : bounds[t.to_chunk + 1]]
            if len(view) != len(data):
                raise ValueError(
                    f"transfer {t.text()} moves {len(data)} elements into a chunk of "
                    f"{len(view)}: use a size divisible by {plan.num_chunks} chunks"
                )
            if t.op == "reduce":
                view += data
            else:
                view[:] = data
        if keep:
            touched = sorted({t.dst for t in step.transfers} | {t.src for t in step.transfers})
            trace.snapshots.extend(Snapshot(r, i, step.phase, bufs[r].tolist()) for r in touched)
    return trace, bufs


def expected_result(plan: Plan, numel: int, dtype: str, pattern: str, seed: int = 0) -> np.ndarray:
    """The sum over ranks of the inputs: what every rank holds after an all-reduce."""
    total = np.zeros(numel, dtype=np.float64 if dtype not in ("int32", "int64") else np.int64)
    for r in range(plan.world_size):
        total += make_input(r, numel, dtype, pattern, seed)
    return total
