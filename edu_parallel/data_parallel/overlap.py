"""Overlap of gradient all-reduce with backward: measured from a trace, and modelled for a GPU.

Reads the trace of :func:`~edu_parallel.data_parallel.ddp.train_ddp` (no torch here):

* :func:`measure` per rank and step: the step time (``step_start`` to ``step_end`` mark), the
  communication time (the ``all_reduce`` collectives of phase ``grad_sync``), how much of it ran
  while the synchronising micro-batch's backward was running (*hidden*), bytes and messages.
  The first step warms up allocators and threads; with more than one step it is left out.
* :func:`gpu_retime` keeps the run's structure (layers in backward order, buckets, which layer a
  bucket was issued in) and times it as a GPU would: a layer takes ``flops / flops_per_s`` (its
  FLOPs scaled to ``rows`` rows per rank), a bucket of ``S`` bytes the ring all-reduce time
  ``2(N-1) (alpha + S/(N bw))`` of a link preset (:func:`~edu_parallel.models.retiming.
  ring_allreduce_time`), one bucket after another on the communication stream (FIFO), each
  starting when issued and the stream is free. The optimizer step is left out. Tiny buckets pay
  ``alpha`` per message; one bucket cannot start before backward ends: the U-shape of Li et al.
  2020 (arXiv 2006.15704) Figure 2 and §5.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ..core.schema import GRAD_SYNC, STEP_END_MARK, STEP_START_MARK
from ..core.trace import Event, Trace
from ..models.retiming import cost_model, ring_allreduce_time


def training_steps(trace: Trace) -> list[int]:
    """The training steps of the trace (those of its compute events), in order."""
    return sorted({e.step for e in trace.events if e.kind == "compute" and e.step is not None})


def measured_steps(trace: Trace) -> list[int]:
    """The steps that are timed: all but the first (warm-up), unless there is only one."""
    steps = training_steps(trace)
    return steps[1:] if len(steps) > 1 else steps


def _marks(trace: Trace, name: str) -> dict[tuple[int, int], float]:
    return {
        (e.rank, e.attrs["step"]): e.start
        for e in trace.events
        if e.kind == "mark" and e.op == name and e.attrs
    }


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


@dataclass
class Measured:
    """What the ranks did, per step (median over measured steps of the max over ranks)."""

    step_time_s: float
    backward_s: float
    comm_s: float  # all-reduce time per step (mean over ranks)
    hidden_s: float  # of which ran during backward
    overlap_fraction: float  # hidden / comm
    exposed_s: float  # from the end of backward until the last bucket was reduced
    per_rank_sent_bytes: list[float]  # per step
    messages_per_step: float  # ring messages each rank sent per step
    collectives_per_step: float


def measure(trace: Trace) -> Measured:
    """See the module doc; ``trace`` is a :func:`train_ddp` trace."""
    n = trace.world_size
    steps = measured_steps(trace)
    starts, ends = _marks(trace, STEP_START_MARK), _marks(trace, STEP_END_MARK)
    last_micro = max(
        (e.attrs or {}).get("microbatch", 0) for e in trace.events if e.kind == "compute"
    )
    by: dict[tuple[int, int], list[Event]] = {}
    for e in trace.events:
        if e.step in steps:
            by.setdefault((e.rank, e.step), []).append(e)
    rows = []
    for s in steps:
        per_rank = []
        for r in range(n):
            evs = by.get((r, s), [])
            back = [
                e
                for e in evs
                if e.op == "backward" and (e.attrs or {}).get("microbatch") == last_micro
            ]
            window = (min(e.start for e in back), max(e.end for e in back)) if back else (0, 0)
            comm = [e for e in evs if e.kind == "collective" and e.phase == GRAD_SYNC]
            released = max(
                ((e.attrs or {}).get("released") or e.end for e in comm), default=window[1]
            )
            per_rank.append(
                {
                    "step": ends[(r, s)] - starts[(r, s)],
                    "backward": window[1] - window[0],
                    "comm": sum(e.duration for e in comm),
                    "hidden": sum(_overlap((e.start, e.end), window) for e in comm),
                    "exposed": max(0.0, released - window[1]),
                    "sent": sum(e.nbytes for e in evs if e.kind == "send"),
                    "messages": sum(1 for e in evs if e.kind == "send"),
                    "collectives": len(comm),
                }
            )
        rows.append(per_rank)

    def mean(vals: Any) -> float:
        vals = list(vals)
        return sum(vals) / len(vals)

    def med(key: str, agg: Any = max) -> float:
        return statistics.median(agg(x[key] for x in row) for row in rows)

    comm, hidden = med("comm", mean), med("hidden", mean)
    return Measured(
        step_time_s=med("step"),
        backward_s=med("backward"),
        comm_s=comm,
        hidden_s=hidden,
        overlap_fraction=hidden / comm if comm > 0 else 0.0,
        exposed_s=med("exposed"),
        per_rank_sent_bytes=[mean([row[r]["sent"] for row in rows]) for r in range(n)],
        messages_per_step=mean([mean([x["messages"] for x in row]) for row in rows]),
        collectives_per_step=mean([mean([x["collectives"] for x in row]) for row in rows]),
    )


@dataclass
class Modelled:
    """One step of rank 0 retimed for a GPU (see the module doc)."""

    link: str
    flops_per_s: float
    rows: int
    step_time_s: float
    compute_s: float
    comm_s: float
    hidden_s: float
    overlap_fraction: float
    trace: Trace = field(repr=False)


def gpu_retime(
    trace: Trace, link: str = "ib-ndr-400", flops_per_s: float = 400e12, rows: int | None = None
) -> Modelled:
    """The last step of rank 0 of ``trace`` timed by a GPU compute model and a link preset."""
    model = cost_model(link)
    n = trace.world_size
    step = max(measured_steps(trace))
    mine = [e for e in trace.events if e.rank == 0 and e.step == step]
    compute = [e for e in mine if e.kind == "compute" and e.op in ("forward", "backward")]
    comm = sorted(
        (e for e in mine if e.kind == "collective" and e.phase == GRAD_SYNC),
        key=lambda e: e.attrs["bucket"],
    )
    recorded_rows = (compute[0].attrs or {}).get("rows", 1) if compute else 1
    scale = (rows or recorded_rows) / recorded_rows
    last_micro = max((e.attrs or {}).get("microbatch", 0) for e in compute) if compute else 0
    out: list[Event] = []
    t, layer_end = 0.0, {}
    for e in sorted(compute, key=lambda e: e.start):
        a = e.attrs or {}
        d = a.get("flops", 0) * scale / flops_per_s
        out.append(
            Event(
                kind="compute",
                rank=0,
                op=e.op,
                step=step,
                phase=e.phase,
                start=t,
                end=t + d,
                attrs=dict(a),
            )
        )
        t += d
        if e.op == "backward" and a.get("microbatch") == last_micro:
            layer_end[a["layer"]] = t
    backward_end = t
    free, comm_total, hidden = 0.0, 0.0, 0.0
    back_start = min(
        (
            ev.start
            for ev in out
            if ev.op == "backward" and ev.attrs.get("microbatch") == last_micro
        ),
        default=t,
    )
    for e in comm:
        after = e.attrs.get("after_layer")
        issued = layer_end.get(after, backward_end) if after is not None else backward_end
        d = ring_allreduce_time(n, e.nbytes, model)
        start = max(issued, free)
        free = start + d
        comm_total += d
        hidden += _overlap((start, free), (back_start, backward_end))
        # the compute thread waits from the end of backward until the bucket is reduced
        waits = {"waited": backward_end, "released": max(free, backward_end)}
        attrs = {**e.attrs, "issued": issued, **waits}
        out.append(
            Event(
                kind="collective",
                rank=0,
                op="all_reduce",
                step=step,
                phase=GRAD_SYNC,
                nbytes=e.nbytes,
                start=start,
                end=free,
                attrs=attrs,
            )
        )
    end = max(backward_end, free)
    meta = {k: v for k, v in trace.meta.items() if k not in ("source", "fn", "backend")}
    meta.update(source="retime", retimed_with=link, time_unit="s", world_size=n)
    return Modelled(
        link=link,
        flops_per_s=flops_per_s,
        rows=int(rows or recorded_rows),
        step_time_s=end,
        compute_s=backward_end,
        comm_s=comm_total,
        hidden_s=hidden,
        overlap_fraction=hidden / comm_total if comm_total > 0 else 0.0,
        trace=Trace(meta, out),
    )
