"""Exercise 16: a ring shift that hangs, and the one-line fix.

``my_ring_shift(ctx, tensor)`` returns, on rank r, the ``tensor`` of its left neighbour
``(r - 1) mod N``: every rank sends its buffer one place to the right, as one step of a ring
all-reduce does. The starter the learner gets *hangs*: every rank calls a blocking ``ctx.recv``
from its left neighbour before its ``ctx.send`` to the right, so every rank waits for a message
that its neighbour will only send after its own receive: a cycle of N waits, a deadlock. (With
gloo, a blocking send also waits until the receiver has posted its receive, so "every rank sends
first" deadlocks the same way.) The grader stops the case at the exercise's timeout and its
feedback names the cycle (``diagnose.py``: "ranks 0 → 3 → 2 → 1 → 0 each waited for the next:
every one receives before it sends (a deadlock)").

Two fixes, each a line or two: post the send without waiting (``ctx.isend``), receive, then wait
for the send: no rank blocks before its message is on its way (the reference); or break the
symmetry, even ranks send first and odd ranks receive first. The second is right on an odd ring
too: on 3 ranks, rank 0 and rank 2 both send first, rank 1 receives rank 0's message, so rank 0
goes on to receive rank 2's, and rank 2 then receives rank 1's; the waits form a chain, not a
cycle (it takes more rounds than the isend fix, which finishes in one).

Graded on the result (each rank holds its left neighbour's input), on the bytes (each rank sends
its D bytes once) and on the messages (one per rank), on 2, 3 and 4 ranks.

References: the "unsafe" exchange of the MPI standard's point-to-point semantics; Gropp, Lusk and
Skjellum, *Using MPI* (MIT Press), on ordering the sends and receives of a ring shift.
"""

from __future__ import annotations

import torch

from ...core.i18n import N_, _
from ...core.trace import Trace
from ...core.units import DTYPES, torch_dtype
from ...engine.context import RankContext
from ..checks import bytes_sent, messages_sent, tensor_result, values_equal
from ..inputs import case_input
from ..spec import Case, Exercise, Finding, RankOutcome

PHASE = "shift"


def ring_shift(ctx: RankContext, tensor: torch.Tensor) -> torch.Tensor:
    """The reference solution: post the send, receive, then wait for the send."""
    n, r = ctx.world_size, ctx.rank
    left, right = (r - 1) % n, (r + 1) % n
    received = torch.empty_like(tensor)
    with ctx.step(0, PHASE):
        sending = ctx.isend(tensor, right)  # on its way: the receive below cannot wait for it
        ctx.recv(received, left)
        ctx.wait_all([sending])
    return received


def prepare(ctx: RankContext, case: Case) -> tuple[tuple, None]:
    """Rank r holds 2^r (or random numbers); nothing is watched (the result is a new buffer)."""
    return (case_input(ctx.rank, case),), None


def finish(ctx: RankContext, case: Case, args: tuple, result: object) -> torch.Tensor:
    """What rank r should return: rank r-1's input."""
    return case_input((ctx.rank - 1) % ctx.world_size, case)


def judge(case: Case, outputs: list[RankOutcome], trace: Trace) -> list[Finding]:
    n = case.world_size
    found = tensor_result(outputs, case, (case.numel,), torch_dtype(case.dtype))
    if found:
        return found
    want = [o.facts for o in outputs]
    found = values_equal(outputs, want, case, _("its left neighbour's (rank r\u22121's) input"))
    found += bytes_sent(trace, case, [case.numel * DTYPES[case.dtype]] * n, "D")
    found += messages_sent(trace, case, 1, "1")
    return found


STARTER = """\
def my_ring_shift(ctx, tensor):
    n, r = ctx.world_size, ctx.rank
    left, right = (r - 1) % n, (r + 1) % n
    received = torch.empty_like(tensor)
    with ctx.step(0, "shift"):
        ctx.recv(received, left)  # every rank waits here for its left neighbour,
        ctx.send(tensor, right)   # which waits there too: no rank gets here
    return received
"""

EXERCISE = Exercise(
    lesson="16_debugging",
    title=N_("Fix the ring shift that hangs"),
    function="my_ring_shift",
    params=("ctx", "tensor"),
    task=N_(
        "The starter `my_ring_shift(ctx, tensor)` hangs: run it and read the grader's diagnosis. "
        "Each rank should send its `tensor` to its right neighbour and return what its left "
        "neighbour sent, so that rank r returns rank r\u22121's input (mod N). Change the order "
        "of the sends and receives, one line or two, so that the job finishes on 2, 3 and 4 "
        "ranks (an odd ring too). Target: each rank sends its D bytes once, in one message."
    ),
    starter=STARTER,
    hints=(
        N_(
            "`ctx.recv` and `ctx.send` both block. Every rank waits in its receive for a message "
            "its left neighbour sends only after its own receive: who can go first?"
        ),
        N_(
            "Either no rank blocks before its message is on its way (post the send with "
            "`ctx.isend`, receive, then wait for the send), or the ranks do not all do the same: "
            "even ranks send first, odd ranks receive first."
        ),
        N_(
            "`sending = ctx.isend(tensor, right)`, then `ctx.recv(received, left)`, then "
            "`ctx.wait_all([sending])`"
        ),
    ),
    reference=ring_shift,
    prepare=prepare,
    finish=finish,
    judge=judge,
    cases=(
        Case(2, 8),
        Case(3, 6),
        Case(4, 8),
        Case(4, 16, "int64", (("pattern", "random"),)),
    ),
    timeout_s=2.0,
    point_to_point=True,
)
