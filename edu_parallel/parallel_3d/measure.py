"""A 3D run's numbers per rank, read off its trace: memory, bytes and messages per group, idle.

Pure Python over :class:`~edu_parallel.core.trace.Trace` events (no torch):

* memory: the sum of the rank's "params", "grads" and "optimizer" events (model states) and the
  peak of its "activations" events replayed in order (bytes autograd saved for backward);
* bytes sent per group type: a ``send`` is pipeline traffic (the only point-to-point messages of
  the step); a collective belongs to the group whose ranks it recorded (``attrs["group"]``) and
  counts the bytes one rank sends in a ring (:func:`edu_parallel.core.metrics.ring_sent_bytes`);
  an all-to-all counts what went to other ranks, from its split mark (EP);
* messages per group type: sends plus collective calls;
* idle: the rank's span from its first to its last compute, less the time it computed (waiting
  for a neighbour stage, a collective or the CPU); the bubble fraction is that share of the span.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.dims import ParallelDims
from ..core.metrics import ring_sent_bytes
from ..core.schema import ACTIVATIONS, GRADS, OPTIMIZER, PARAMS, SPLITS_MARK
from ..core.trace import Event, Trace

GROUP_TYPES = ("tp", "pp", "dp", "ep")
MODEL_STATE_CATEGORIES = (PARAMS, GRADS, OPTIMIZER)


def group_kinds(dims: ParallelDims) -> dict[tuple[int, ...], str]:
    """Global ranks of each TP, DP and expert-DP group -> ``"tp"`` / ``"dp"`` (an expert's
    gradient all-reduce over its replicas is data-parallel traffic too)."""
    kinds = {tuple(g): "dp" for g in dims.groups("edp") if len(g) > 1} if dims.ep > 1 else {}
    kinds.update({tuple(g): dim for dim in ("tp", "dp") for g in dims.groups(dim) if len(g) > 1})
    return kinds


def _memory(events: Sequence[Event]) -> tuple[dict[str, int], int]:
    totals = dict.fromkeys(MODEL_STATE_CATEGORIES, 0)
    level = peak = 0
    for e in events:
        if e.kind != "memory":
            continue
        cat = (e.attrs or {}).get("category")
        if cat in totals:
            totals[cat] += e.nbytes
        elif cat == ACTIVATIONS:
            level += e.nbytes
            peak = max(peak, level)
    return totals, peak


def _traffic(events: Sequence[Event], rank: int, dims: ParallelDims) -> tuple[dict, dict]:
    kinds = group_kinds(dims)
    sent = dict.fromkeys(GROUP_TYPES, 0.0)
    messages = dict.fromkeys(GROUP_TYPES, 0)
    for e in events:
        if e.kind == "send":
            sent["pp"] += e.nbytes
            messages["pp"] += 1
        elif e.kind == "collective":
            ranks = tuple((e.attrs or {}).get("group") or range(dims.world_size))
            if e.op.startswith("all_to_all"):
                messages["ep"] += 1
                continue
            kind = kinds.get(ranks)
            if kind is None:
                raise ValueError(
                    f"rank {rank}: {e.op} on ranks {list(ranks)}, not a TP or DP group"
                )
            sent[kind] += ring_sent_bytes(e.op, e.nbytes, len(ranks))
            messages[kind] += 1
        elif e.kind == "mark" and e.op == SPLITS_MARK:
            a = e.attrs or {}
            own = a["peers"].index(rank) if "peers" in a else rank
            sent["ep"] += sum(a["send_bytes"]) - a["send_bytes"][own]
    return sent, messages


def measure_3d(trace: Trace, dims: ParallelDims) -> list[dict[str, Any]]:
    """One row per rank: coordinates, model-state and activation bytes, bytes and messages per
    group type, compute and idle seconds, and the idle share of the span."""
    rows = []
    for r in range(dims.world_size):
        ev = [e for e in trace.events if e.rank == r]
        states, act_peak = _memory(ev)
        sent, messages = _traffic(ev, r, dims)
        compute = [e for e in ev if e.kind == "compute" and e.op in ("F", "B")]
        span = max(e.end for e in compute) - min(e.start for e in compute) if compute else 0.0
        busy = sum(e.end - e.start for e in compute)
        rows.append(
            {
                "rank": r,
                **dims.coords(r),
                "param_bytes": states[PARAMS],
                "grad_bytes": states[GRADS],
                "optimizer_bytes": states[OPTIMIZER],
                "model_state_bytes": sum(states.values()),
                "activation_bytes": act_peak,
                "sent_bytes_by_group": sent,
                "messages_by_group": messages,
                "compute_s": busy,
                "idle_s": max(0.0, span - busy),
                "idle_fraction": max(0.0, span - busy) / span if span > 0 else 0.0,
            }
        )
    return rows


def bubble_fraction(rows: Sequence[dict[str, Any]]) -> float:
    """The mean idle share of the ranks' compute spans: the pipeline bubble as measured (on a
    shared CPU it also holds the time the OS gave another rank)."""
    return sum(r["idle_fraction"] for r in rows) / len(rows) if rows else 0.0
