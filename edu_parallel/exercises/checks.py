"""Checks that several exercises' judges share: the result's type and value, bytes per rank against
a target volume, messages per rank and rounds (the latency of the longest chain of messages)
against a latency target. Each returns :class:`Finding` s that
name the rank, and where it can, the step, of the first divergence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch

from ..core.i18n import _
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
                    _(
                        "rank {r} returned {type}, expected a tensor of shape {shape} ({dtype})"
                    ).format(r=r, type=type(got).__name__, shape=tuple(shape), dtype=dtype),
                    case,
                    rank=r,
                )
            )
        elif tuple(got.shape) != tuple(shape) or got.dtype != dtype:
            bad.append(
                Finding(
                    "result",
                    False,
                    _(
                        "rank {r} returned a tensor of shape {got} ({got_dtype}), expected "
                        "{shape} ({dtype})"
                    ).format(
                        r=r,
                        got=tuple(got.shape),
                        got_dtype=got.dtype,
                        shape=tuple(shape),
                        dtype=dtype,
                    ),
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
    """Each rank's result equals ``expected[rank]`` (``what`` says what it should be, in the
    learner's language)."""
    for r, (out, want) in enumerate(zip(outputs, expected, strict=True)):
        got = out.result
        same = torch.equal(got, want) if exact else torch.allclose(got, want, rtol=1e-5, atol=1e-6)
        if not same:
            diff = (got != want).nonzero().flatten().tolist() if exact else []
            if diff:
                msg = _(
                    "rank {r}'s result is not {what} (first wrong element: index {i}): got {got}, "
                    "expected {want}"
                )
            else:
                msg = _("rank {r}'s result is not {what}: got {got}, expected {want}")
            text = msg.format(
                r=r, what=what, i=diff[0] if diff else 0, got=_head(got), want=_head(want)
            )
            return [Finding("result", False, text, case, rank=r)]
    return [Finding("result", True, _("every rank holds {what}").format(what=what), case)]


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
                    _("rank {r} sent {got}; the target is {formula} = {want}").format(
                        r=r, got=format_bytes(got), formula=formula, want=format_bytes(want)
                    ),
                    case,
                    rank=r,
                    step=_first_step_over(trace, r, want),
                )
            ]
    msg = _("every rank sent at most {formula}").format(formula=formula)
    return [Finding("bytes", True, msg, case)]


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
                _(
                    "rank {r} sent {count} messages; {formula} = {most} is enough "
                    "(each message costs one latency \u03b1)"
                ).format(r=worst, count=counts[worst], formula=formula, most=most),
                case,
                rank=worst,
            )
        ]
    msg = _("at most {formula} messages per rank").format(formula=formula)
    return [Finding("messages", True, msg, case)]


def message_rounds(trace: Trace) -> tuple[int, Event | None]:
    """The latency of a run in rounds, from its trace, in the one-port model (Bar-Noy & Kipnis
    1994): each message takes one round, after the previous message its sender sent (in the
    sender's program order), after the previous one its receiver received (in the order the
    receiver's receives completed: one port each way), and after every message its sender had
    received (waited for) before posting it (data it may forward). Step labels play no part, so
    a run cannot look faster by its labels, and every order is read on one rank's own clock, so
    the count does not depend on how the ranks were scheduled. Returns the rounds of the longest
    chain and the receive that ends it (None when nothing was sent)."""
    pairs = trace.matched_transfers()
    at = {id(e): i for i, e in enumerate(trace.events)}  # a rank's events in program order
    sent: dict[int, list[tuple[Event, Event]]] = defaultdict(list)
    got: dict[int, list[tuple[Event, Event]]] = defaultdict(list)
    for pair in pairs:
        sent[pair[0].rank].append(pair)
        got[pair[1].rank].append(pair)
    for mine in sent.values():
        mine.sort(key=lambda p: at[id(p[0])])
    for mine in got.values():
        mine.sort(key=lambda p: (p[1].end, at[id(p[1])]))

    def after(pair: tuple[Event, Event]) -> list[tuple[Event, Event]]:
        send, recv = pair
        by_sender, by_receiver = sent[send.rank], got[recv.rank]
        i, j = by_sender.index(pair), by_receiver.index(pair)
        prior = ([by_sender[i - 1]] if i else []) + ([by_receiver[j - 1]] if j else [])
        held = [q for q in got[send.rank] if q[1].end <= send.start and at[id(q[1])] < at[id(send)]]
        return prior + held

    memo: dict[int, int] = {}
    open_: set[int] = set()  # on the current path: an edge back to it is dropped (no cycles)

    def rounds(pair: tuple[Event, Event]) -> int:
        key = id(pair[1])
        if key not in memo:
            open_.add(key)
            memo[key] = 1 + max(
                (rounds(q) for q in after(pair) if id(q[1]) not in open_), default=0
            )
            open_.discard(key)
        return memo[key]

    best, end = 0, None
    for pair in pairs:
        k = rounds(pair)
        if k > best:
            best, end = k, pair[1]
    return best, end


def rounds_finding(trace: Trace, case: Case, target: int, formula: str, fix: str) -> Finding:
    """The run's rounds (:func:`message_rounds`) against ``target`` (``formula`` names it;
    ``fix``, in the learner's language, says how to get there)."""
    try:
        rounds, last = message_rounds(trace)
    except ValueError as err:  # a send without its receive: the run cannot be timed
        msg = _("the messages do not pair up: {error}").format(error=err)
        return Finding("steps", False, msg, case)
    if rounds <= target:
        if rounds == 1:
            said = _("1 round, at most {formula} = {target}")
        else:
            said = _("{rounds} rounds, at most {formula} = {target}")
        msg = said.format(rounds=rounds, formula=formula, target=target)
        return Finding("steps", True, msg, case)
    msg = _(
        "the last message reached rank {r} after {rounds} rounds (a rank sends one message and "
        "receives one per round, and forwards only what it has received); {formula} = {target} "
        "is enough: {fix}"
    ).format(r=last.rank, rounds=rounds, formula=formula, target=target, fix=fix)
    return Finding("steps", False, msg, case, rank=last.rank, step=last.step)
