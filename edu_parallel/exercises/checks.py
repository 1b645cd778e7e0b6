"""Checks that several exercises' judges share: the result's type and value, bytes per rank against
a target volume, messages per rank and rounds (the latency of the longest chain of messages)
against a latency target. Each returns :class:`Finding` s that
name the rank, and where it can, the step, of the first divergence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..core.trace import Event, Trace
from ..core.units import format_bytes
from .spec import Case, Finding, RankOutcome


def tensor_result(
    outputs: Sequence[RankOutcome], case: Case, shape: tuple[int, ...], dtype: torch.dtype
) -> list[Finding]:
    """Every rank returned a tensor of ``shape`` and ``dtype``: one finding per wrong rank."""
    bad = []
    for r, out in enumerate(outputs):
        got = out.result
        if not isinstance(got, torch.Tensor):
            bad.append(
                Finding(
                    "result",
                    False,
                    f"rank {r} returned {type(got).__name__}, expected a tensor of shape "
                    f"{tuple(shape)} ({dtype})",
                    case,
                    rank=r,
                )
            )
        elif tuple(got.shape) != tuple(shape) or got.dtype != dtype:
            bad.append(
                Finding(
                    "result",
                    False,
                    f"rank {r} returned a tensor of shape {tuple(got.shape)} ({got.dtype}), "
                    f"expected {tuple(shape)} ({dtype})",
                    case,
                    rank=r,
                )
            )
    return bad


def values_equal(
    outputs: Sequence[RankOutcome],
    expected: Sequence[torch.Tensor],
    case: Case,
    what: str,
    exact: bool = True,
) -> list[Finding]:
    """Each rank's result equals ``expected[rank]`` (``what`` says what it should be)."""
    for r, (out, want) in enumerate(zip(outputs, expected, strict=True)):
        got = out.result
        same = torch.equal(got, want) if exact else torch.allclose(got, want, rtol=1e-5, atol=1e-6)
        if not same:
            diff = (got != want).nonzero().flatten().tolist() if exact else []
            where = f" (first wrong element: index {diff[0]})" if diff else ""
            return [
                Finding(
                    "result",
                    False,
                    f"rank {r}'s result is not {what}{where}: got {_head(got)}, "
                    f"expected {_head(want)}",
                    case,
                    rank=r,
                )
            ]
    return [Finding("result", True, f"every rank holds {what}", case)]


def _head(t: torch.Tensor, k: int = 4) -> str:
    values = t.flatten()[:k].tolist()
    more = ", \u2026" if t.numel() > k else ""
    return "[" + ", ".join(f"{v:g}" for v in values) + more + "]"


def bytes_sent(
    trace: Trace, case: Case, target: Sequence[float], formula: str, slack: float = 0.0
) -> list[Finding]:
    """Bytes each rank sent (from the trace) against ``target`` per rank, with ``formula`` named
    in the message. More than the target by over ``slack`` (a fraction) fails; the first rank
    that sent more than its share is the divergence."""
    sent = trace.sent_bytes()
    for r, (got, want) in enumerate(zip(sent, target, strict=True)):
        if got > want * (1 + slack):
            return [
                Finding(
                    "bytes",
                    False,
                    f"rank {r} sent {format_bytes(got)}; the target is {formula} = "
                    f"{format_bytes(want)}",
                    case,
                    rank=r,
                    step=_first_step_over(trace, r, want),
                )
            ]
    return [Finding("bytes", True, f"every rank sent at most {formula}", case)]


def _first_step_over(trace: Trace, rank: int, budget: float) -> int | None:
    """The step of ``rank``'s send that took it past ``budget`` bytes."""
    total = 0
    for e in sorted(trace.events, key=lambda e: e.start):
        if e.rank == rank and e.kind == "send":
            total += e.nbytes
            if total > budget:
                return e.step
    return None


def messages_sent(trace: Trace, case: Case, most: int, formula: str) -> list[Finding]:
    """Messages each rank sent (latency: each costs one alpha) against ``most``."""
    counts = [0] * trace.world_size
    for e in trace.events:
        if e.kind == "send":
            counts[e.rank] += 1
    worst = max(range(len(counts)), key=counts.__getitem__)
    if counts[worst] > most:
        return [
            Finding(
                "messages",
                False,
                f"rank {worst} sent {counts[worst]} messages; {formula} = {most} is enough "
                "(each message costs one latency \u03b1)",
                case,
                rank=worst,
            )
        ]
    return [Finding("messages", True, f"at most {formula} messages per rank", case)]


def message_rounds(trace: Trace) -> tuple[int, Event | None]:
    """The latency of a run in rounds, from its trace, in the one-port model (Bar-Noy & Kipnis
    1994): each message takes one round, and starts after the previous message its sender sent
    and the previous one its receiver received (a rank has one port each way), and after every
    message its sender had received (waited for) before posting it (data it may forward). Step
    labels play no part, so a run cannot look faster by its labels. Returns the rounds of the
    longest such chain and the receive that ends it (None when nothing was sent)."""
    pairs = sorted(trace.matched_transfers(), key=lambda p: (p[0].start, p[0].rank))
    n = trace.world_size
    last_out: list[int] = [0] * n  # rounds of the last message each rank sent
    last_in: list[int] = [0] * n  # ... and received
    arrived: list[list[tuple[float, int]]] = [[] for _ in range(n)]  # (wait ended, rounds)
    best, end = 0, None
    for send, recv in pairs:
        had = [k for t, k in arrived[send.rank] if t <= send.start]
        k = 1 + max([last_out[send.rank], last_in[recv.rank], *had])
        last_out[send.rank] = last_in[recv.rank] = k
        arrived[recv.rank].append((recv.end, k))
        if k > best:
            best, end = k, recv
    return best, end


def rounds_finding(trace: Trace, case: Case, target: int, formula: str, fix: str) -> Finding:
    """The run's rounds (:func:`message_rounds`) against ``target`` (``formula`` names it)."""
    try:
        rounds, last = message_rounds(trace)
    except ValueError as err:  # a send without its receive: the run cannot be timed
        return Finding("steps", False, f"the messages do not pair up: {err}", case)
    if rounds <= target:
        said = f"{rounds} round{'' if rounds == 1 else 's'}"
        return Finding("steps", True, f"{said}, at most {formula} = {target}", case)
    msg = (
        f"the last message reached rank {last.rank} after {rounds} rounds (a rank sends one "
        f"message and receives one per round, and forwards only what it has received); "
        f"{formula} = {target} is enough: {fix}"
    )
    return Finding("steps", False, msg, case, rank=last.rank, step=last.step)


def as_dtype(name: str) -> torch.dtype:
    """torch.float32 from "float32"."""
    return getattr(torch, name)


def shape_of(result: Any) -> str:
    return str(tuple(result.shape)) if isinstance(result, torch.Tensor) else type(result).__name__
