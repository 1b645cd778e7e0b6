"""Exercise 04 (binomial-tree reduce): the reference passes on real ranks; planted wrong solutions
fail with the diagnosis a learner needs (a chain, everyone sending to the root, receiving into the
own buffer, sending again after sending)."""

from __future__ import annotations

import pytest
import torch

from edu_parallel.exercises import Case, grade
from edu_parallel.exercises.checks import message_rounds
from edu_parallel.exercises.problems.tree_reduce import EXERCISE, tree_reduce

pytestmark = pytest.mark.multiprocess


def chain_reduce(ctx, tensor):
    """Right result and bytes, N-1 rounds: each rank adds what comes from above and passes on."""
    n, r = ctx.world_size, ctx.rank
    for s in range(n - 1):
        with ctx.step(s, "reduce"):
            if r == n - 1 - s:
                ctx.send(tensor, r - 1)
            elif r == n - 2 - s:
                incoming = torch.empty_like(tensor)
                ctx.recv(incoming, r + 1, op="reduce")
                tensor.add_(incoming)
    return tensor


def straight_to_root(ctx, tensor):
    """Right result, every rank sends once, but the root receives (N-1)·D one after the other."""
    n, r = ctx.world_size, ctx.rank
    with ctx.step(0, "reduce"):
        if r == 0:
            for src in range(1, n):
                incoming = torch.empty_like(tensor)
                ctx.recv(incoming, src, op="reduce")
                tensor.add_(incoming)
        else:
            ctx.send(tensor, 0)
    return tensor


def receive_into_own_buffer(ctx, tensor):
    """The partner's partial sum overwrites the own one instead of being added to it."""
    n, r = ctx.world_size, ctx.rank
    for k in range((n - 1).bit_length()):
        gap = 2**k
        with ctx.step(k, "reduce"):
            if r % (2 * gap) == gap:
                ctx.send(tensor, r - gap)
            elif r % (2 * gap) == 0 and r + gap < n:
                ctx.recv(tensor, r + gap)
    return tensor


def keeps_sending(ctx, tensor):
    """Forgets that a rank that has sent is done: rank 3 sends again in round 1 (to rank 1)."""
    n, r = ctx.world_size, ctx.rank
    for k in range((n - 1).bit_length()):
        gap = 2**k
        with ctx.step(k, "reduce"):
            if r & gap:
                ctx.send(tensor, r - gap)
            elif r + gap < n:
                incoming = torch.empty_like(tensor)
                ctx.recv(incoming, r + gap, op="reduce")
                tensor.add_(incoming)
    return tensor


def test_the_reference_passes_every_case(cluster4):
    g = grade(EXERCISE, tree_reduce, cluster4)
    assert g.passed, g.report()
    cases = {f.case for f in g.findings}
    assert {c.world_size for c in cases} == {2, 3, 4}
    assert {c.dtype for c in cases} == {"float32", "int64", "float64"}
    assert {f.check for f in g.findings} == {"result", "bytes", "messages", "steps"}
    result = next(f for f in g.findings if f.check == "result")
    assert "the other ranks' buffers are not checked" in result.message
    d = g.shown.numel * 4
    assert g.shown == Case(4, 16)
    assert g.trace.sent_bytes() == [0, d, d, d]
    assert g.trace.recv_bytes() == [2 * d, 0, d, 0]
    assert message_rounds(g.trace)[0] == 2
    assert g.outputs[0].result.tolist() == [15.0] * 16  # 1 + 2 + 4 + 8: every rank's input


def test_a_chain_reduce_fails_on_steps_only(cluster4):
    g = grade(EXERCISE, chain_reduce, cluster4)
    assert not g.passed
    assert {(f.check, f.case.world_size) for f in g.failures} == {("steps", 4)}  # N<=3: no gap
    first = g.first_failure
    assert (first.rank, first.step) == (0, 2)  # the root's receive in the chain's third step
    assert "the last message reached rank 0 after 3 rounds" in first.message
    assert "\u2308log2 N\u2309 = 2 is enough: a chain takes N\u22121 = 3" in first.message


def test_everyone_sending_to_the_root_fails_on_the_roots_bytes(cluster4):
    g = grade(EXERCISE, straight_to_root, cluster4)
    assert not g.passed
    failed = {f.check for f in g.failures if f.case == g.shown}
    assert g.shown.world_size == 4  # on 3 ranks the flat tree is the binomial tree
    assert failed == {"bytes", "steps"}  # the sum is right and every rank sends once
    first = g.first_failure
    assert first.check == "bytes" and first.rank == 0
    assert "rank 0 (the root) received 288 B; the target is \u2308log2 N\u2309\u00b7D = 192 B" in (
        first.message
    )
    late = next(f for f in g.failures if f.check == "steps")
    assert "the last message reached rank 0 after 3 rounds" in late.message


def test_receiving_into_the_own_buffer_is_found_at_the_first_round(cluster4):
    g = grade(EXERCISE, receive_into_own_buffer, cluster4)
    assert not g.passed and g.first_failure.check == "result"
    assert g.shown.world_size == 2
    assert "rank 0's result is not the sum of every rank's input" in g.first_failure.message
    mark = g.mark
    assert (mark.step, mark.rank, mark.chunk) == (0, 0, 0)
    assert "after step 0 (reduce), rank 0's chunk 0 held ranks {1}" in mark.message
    assert "the reference held ranks {0, 1}" in mark.message


def test_sending_again_after_sending_fails_on_bytes_and_messages(cluster4):
    g = grade(EXERCISE, keeps_sending, cluster4)
    assert not g.passed
    failed = {f.check for f in g.failures if f.case == g.shown}
    assert g.shown.world_size == 4  # on 2 and 3 ranks no rank is left to send twice
    assert failed == {"bytes", "messages"}  # the root's sum and the rounds are right
    first = g.first_failure
    assert (first.check, first.rank, first.step) == ("bytes", 3, 1)  # its second send, round 1
    assert "rank 3 sent 192 B; the target is D (0 at the root) = 96 B" in first.message
    again = next(f for f in g.failures if f.check == "messages")
    assert "rank 3 sent 2 messages; one is enough" in again.message
