"""Exercise 04: write a binary-tree (binomial) reduce to rank 0.

``my_tree_reduce(ctx, tensor)`` sums every rank's ``tensor`` into rank 0's, as
``dist.reduce(tensor, dst=0)`` does. In round k (k = 0 .. ⌈log2 N⌉−1) rank r with
``r mod 2^(k+1) == 2^k`` sends its partial sum to ``r − 2^k``, which adds it: the number of
partial sums halves every round, so the sum reaches the root after ⌈log2 N⌉ rounds where a chain
(everyone adds and passes to the next) takes N−1. This is the binomial-tree reduce MPICH uses for
short messages (Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication
Operations in MPICH"); ``plans/tree.py`` has the lesson's heap-numbered tree and
``plans/collectives.py`` the pipelined chain reduce (:func:`chain_reduce_plan`).

Graded on the root's result against ``dist.reduce`` to rank 0 on the same input (the other ranks'
buffers are left undefined by a reduce and are not checked); on the bytes each rank sent (``D``,
the root 0) and the bytes the root received (``⌈log2 N⌉·D``, where everyone sending straight to
the root puts ``(N−1)·D`` on its link); on one message per rank; and on the latency: the rounds
of the run (:func:`~edu_parallel.exercises.problems.broadcast_chain.message_rounds`) against
⌈log2 N⌉.
"""

from __future__ import annotations

import torch

from ...core.i18n import N_, _
from ...core.trace import Trace
from ...core.units import DTYPES, format_bytes, torch_dtype
from ...engine.context import RankContext
from ...plans.collectives import chain_reduce_plan
from ..checks import bytes_sent, rounds_finding, tensor_result, values_equal
from ..inputs import builtin_on_input, watched_input
from ..spec import Case, Exercise, Finding, RankOutcome


def tree_reduce(ctx: RankContext, tensor: torch.Tensor) -> torch.Tensor:
    """The reference solution: a binomial tree; rank 0 ends with the sum."""
    n, r = ctx.world_size, ctx.rank
    incoming = torch.empty_like(tensor)  # a partner's partial sum lands here, not in tensor
    for k in range((n - 1).bit_length()):  # ⌈log2 N⌉ rounds
        gap = 1 << k  # partners are 2^k apart in round k
        with ctx.step(k, "reduce"):
            if r % (2 * gap) == gap:  # hand my partial sum down; after this I am done
                ctx.send(tensor, r - gap)
            elif r % (2 * gap) == 0 and r + gap < n:  # my partner exists (N may be odd)
                ctx.recv(incoming, r + gap, op="reduce")
                tensor.add_(incoming)
    return tensor


def log2_rounds(n: int) -> int:
    """⌈log2 N⌉: the rounds of a binomial tree on N ranks."""
    return (n - 1).bit_length()


def finish(ctx: RankContext, case: Case, args: tuple, result: object) -> torch.Tensor:
    """torch's builtin on the same input (only rank 0's is defined)."""
    return builtin_on_input(ctx, case, "reduce", dst=0)


def root_received(trace: Trace, case: Case) -> Finding:
    """The root receives from its ⌈log2 N⌉ children in the binomial tree: ⌈log2 N⌉·D."""
    d = case.numel * DTYPES[case.dtype]
    most, got = log2_rounds(case.world_size) * d, trace.recv_bytes()[0]
    formula = "\u2308log2 N\u2309\u00b7D"
    if got <= most:
        msg = _("the root received at most {formula}").format(formula=formula)
        return Finding("bytes", True, msg, case)
    msg = _(
        "rank 0 (the root) received {got}; the target is {formula} = {most}: the root adds one "
        "partial sum per round, not every rank's buffer"
    ).format(got=format_bytes(got), formula=formula, most=format_bytes(most))
    return Finding("bytes", False, msg, case, rank=0)


def one_message(trace: Trace, case: Case) -> Finding:
    """Every rank sends its partial sum once: one message, one latency α."""
    counts = trace.message_counts()
    worst = max(range(len(counts)), key=counts.__getitem__)
    if counts[worst] <= 1:
        return Finding("messages", True, _("every rank sent at most one message"), case)
    msg = _(
        "rank {r} sent {count} messages; one is enough: a rank sends its partial sum once, then "
        "it is done (each message costs one latency α)"
    ).format(r=worst, count=counts[worst])
    return Finding("messages", False, msg, case, rank=worst)


def judge(case: Case, outputs: list[RankOutcome], trace: Trace) -> list[Finding]:
    n = case.world_size
    found = tensor_result(outputs, case, (case.numel,), torch_dtype(case.dtype))
    if found:
        return found
    exact = case.dtype in ("int32", "int64") or case.option("pattern", "powers_of_two") != "random"
    what = _("the sum of every rank's input")
    found = values_equal(outputs[:1], [outputs[0].facts], case, what, exact=exact)
    if found[0].ok:  # a reduce leaves the other ranks' buffers undefined
        note = _("rank 0 holds {what} (the other ranks' buffers are not checked)").format(what=what)
        found = [Finding("result", True, note, case)]
    d = case.numel * DTYPES[case.dtype]
    found += bytes_sent(trace, case, [0.0] + [float(d)] * (n - 1), _("D (0 at the root)"))
    found.append(root_received(trace, case))
    found.append(one_message(trace, case))
    chain = len(chain_reduce_plan(n, 0, 1).steps)
    fix = _(
        "a chain takes N\u22121 = {chain}; pair ranks 2^k apart in round k, so the number of "
        "partial sums halves every round"
    ).format(chain=chain)
    found.append(rounds_finding(trace, case, log2_rounds(n), "\u2308log2 N\u2309", fix))
    return found


def one_chunk(case: Case) -> int:
    return 1


STARTER = """\
def my_tree_reduce(ctx, tensor):
    n, r = ctx.world_size, ctx.rank
    incoming = torch.empty_like(tensor)  # receive a partner's partial sum here, not into tensor
    for k in range((n - 1).bit_length()):  # ceil(log2 N) rounds
        gap = 2**k
        with ctx.step(k, "reduce"):
            ...  # some ranks send their partial sum to r - gap; their partners add it
    return tensor
"""

EXERCISE = Exercise(
    lesson="04_ring_tree_ps",
    title=N_("A binary-tree reduce"),
    function="my_tree_reduce",
    params=("ctx", "tensor"),
    task=N_(
        "Write `my_tree_reduce(ctx, tensor)`: when it returns, rank 0's `tensor` holds the sum "
        "of all ranks' inputs, as after `dist.reduce(tensor, dst=0)` (the other ranks' buffers "
        "are not checked). Use a binomial tree: in round k, rank r with r mod 2^(k+1) = 2^k "
        "sends its partial sum to r \u2212 2^k, which adds it. Target: each rank sends D once "
        "(the root nothing), the root receives \u2308log2 N\u2309\u00b7D, and the sum arrives "
        "after \u2308log2 N\u2309 rounds instead of a chain's N\u22121."
    ),
    starter=STARTER,
    hints=(
        N_(
            "Round 0 pairs neighbours: every odd rank sends its buffer to the even rank below it. "
            "In the next round only the even ranks are left, so the gap doubles. A rank that has "
            "sent is done."
        ),
        N_(
            "In round k (gap = 2^k): rank r with r % (2\u00b7gap) == gap sends to r \u2212 gap; "
            "rank r with r % (2\u00b7gap) == 0 receives from r + gap, if that rank exists (N need "
            "not be a power of two), into `incoming`, and adds it to its own."
        ),
        N_(
            "`if r % (2 * gap) == gap: ctx.send(tensor, r - gap)` / `elif r % (2 * gap) == 0 and "
            "r + gap < n: ctx.recv(incoming, r + gap, op='reduce'); tensor.add_(incoming)`"
        ),
    ),
    reference=tree_reduce,
    prepare=watched_input,
    finish=finish,
    judge=judge,
    cases=(
        Case(2, 8),
        Case(3, 8),  # not a power of two: rank 2 has no partner in round 0
        Case(4, 12, "int64", (("pattern", "random"),)),
        Case(4, 4096, "float64", (("pattern", "random"),)),
        Case(4, 16),
    ),
    chunks=one_chunk,
    powers_of_two=True,
    point_to_point=True,
)
