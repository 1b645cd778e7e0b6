"""The strategy map's table, read off a strategy's trace: one row per rank.

Every number of the table is read from a strategy's trace (:func:`measure`):

* parameter bytes: the sum of the rank's "params" memory events (one per tensor it holds);
* activation bytes: the peak of the rank's "activations" memory events replayed in order (bytes
  autograd saved for backward; for PP the microbatches alive at once under the schedule);
* bytes sent per step: ``send`` events count their bytes; a collective event records the size of
  its first buffer, converted to the bytes ONE rank SENDS with the ring algorithm
  (:func:`edu_parallel.core.metrics.ring_sent_bytes`: all-reduce ``2(N-1)/N S``, reduce-scatter and
  all-gather ``(N-1)/N S``); an ``all_to_all_single`` counts the bytes sent to OTHER ranks, read
  from the split mark :func:`edu_parallel.expert_parallel.dispatch.exchange` writes (the own block
  is a local copy);
* messages: point-to-point sends plus collective calls (a ring all-reduce is 2(N-1) transfers
  underneath; one call is counted once);
* collectives: the op names of the collective events (and ``isend`` for point-to-point), also
  counted per pass (``calls_by_pass``);
* data: the batch rows and sequence positions the rank computes on, from its "data" mark (EP:
  with the ranks each of its tokens visits in the first block).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..core.metrics import ring_sent_bytes
from ..core.schema import ACTIVATIONS, DATA_MARK, HOLDS_MARK, PARAMS, SPLITS_MARK
from ..core.trace import Trace
from ..engine.context import ALL_TO_ALL
from .formulas import SYNC

PASSES = ("forward", "backward", SYNC)


def pass_of(phase: str | None) -> str:
    """``"grad_sync"``, ``"backward"`` or ``"forward"`` (every other phase: MoE's exchanges)."""
    return phase if phase in (SYNC, "backward") else "forward"


def measure(trace: Trace, world_size: int) -> list[dict[str, Any]]:
    """Per rank: params, peak activations, sent bytes (total and by pass), messages, ops (also
    by pass), holds, data."""
    rows = []
    for r in range(world_size):
        ev = [e for e in trace.events if e.rank == r]
        params = sum(
            e.nbytes for e in ev if e.kind == "memory" and (e.attrs or {}).get("category") == PARAMS
        )
        level = peak = 0
        for e in ev:
            if e.kind == "memory" and (e.attrs or {}).get("category") == ACTIVATIONS:
                level += e.nbytes
                peak = max(peak, level)
        by_pass = dict.fromkeys(PASSES, 0.0)
        ops: Counter[str] = Counter()
        calls: dict[str, Counter[str]] = {p: Counter() for p in PASSES}
        a2a_calls = 0
        for e in ev:
            if e.kind in ("send", "collective"):
                calls[pass_of(e.phase)][e.op] += 1
            if e.kind == "send":
                by_pass[pass_of(e.phase)] += e.nbytes
                ops[e.op] += 1
            elif e.kind == "collective":
                ops[e.op] += 1
                if e.op == ALL_TO_ALL:
                    a2a_calls += 1
                else:
                    by_pass[pass_of(e.phase)] += ring_sent_bytes(e.op, e.nbytes, world_size)
            elif e.kind == "mark" and e.op == SPLITS_MARK:
                a = e.attrs or {}
                by_pass[pass_of(a.get("phase"))] += sum(a["send_bytes"]) - a["send_bytes"][r]
                a2a_calls -= 1
        if a2a_calls:
            raise ValueError(
                f"rank {r}: {ALL_TO_ALL} calls and split marks do not pair up ({a2a_calls:+d})"
            )
        data = next((e.attrs for e in ev if e.kind == "mark" and e.op == DATA_MARK), None)
        holds = {}
        for e in ev:
            if e.kind == "mark" and e.op == HOLDS_MARK:
                a = e.attrs or {}
                frac = 1.0
                for (lo, hi), full in zip(a["index"], a["shape"], strict=True):
                    frac *= (hi - lo) / full if full else 1.0
                holds[a["tensor"]] = {
                    "index": a["index"],
                    "shape": a["shape"],
                    "fraction": frac,
                    "nbytes": a["nbytes"],
                }
        rows.append(
            {
                "param_bytes": params,
                "activation_bytes": peak,
                "sent_bytes": sum(by_pass.values()),
                "sent_by_pass": by_pass,
                "messages": sum(ops.values()),
                "ops": dict(sorted(ops.items())),
                "calls_by_pass": {p: dict(sorted(c.items())) for p, c in calls.items() if c},
                "holds": holds,
                "data": data,
            }
        )
    return rows


# ---------------------------------------------------------------- the report
