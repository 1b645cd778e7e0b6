"""Exercise 16 (fix the ring shift that hangs): the reference passes on real ranks, and so does the
other fix (even ranks send first, right on an odd ring too); the starter hangs and is diagnosed as
a cycle of receives; planted mistakes fail with the diagnosis a learner needs (every rank sending
first, a partner swap instead of a ring, the shift the wrong way round)."""

from __future__ import annotations

import time

import pytest
import torch

from edu_parallel.core.i18n import language
from edu_parallel.exercises import Case, get_exercise, grade
from edu_parallel.exercises.problems.hang_fix import EXERCISE, STARTER, ring_shift

pytestmark = pytest.mark.multiprocess


def starter():
    """The learner's starter, run as the notebook cell defines it."""
    cell = {"torch": torch, "__name__": "notebook_cell"}
    exec(compile(STARTER, "<starter>", "exec"), cell)
    return cell["my_ring_shift"]


def even_ranks_send_first(ctx, tensor):
    """The other fix: break the symmetry."""
    n, r = ctx.world_size, ctx.rank
    left, right = (r - 1) % n, (r + 1) % n
    received = torch.empty_like(tensor)
    with ctx.step(0, "shift"):
        if r % 2 == 0:
            ctx.send(tensor, right)
            ctx.recv(received, left)
        else:
            ctx.recv(received, left)
            ctx.send(tensor, right)
    return received


def every_rank_sends_first(ctx, tensor):
    """The order swapped for everyone: a gloo send waits for its receive, so still a cycle."""
    n, r = ctx.world_size, ctx.rank
    received = torch.empty_like(tensor)
    with ctx.step(0, "shift"):
        ctx.send(tensor, (r + 1) % n)
        ctx.recv(received, (r - 1) % n)
    return received


def swaps_with_a_partner(ctx, tensor):
    """The pairwise exchange's fix (0 <-> 1, 2 <-> 3) where a ring was asked for."""
    partner = ctx.rank ^ 1
    received = torch.empty_like(tensor)
    with ctx.step(0, "shift"):
        sending = ctx.isend(tensor, partner)
        ctx.recv(received, partner)
        ctx.wait_all([sending])
    return received


def shifts_the_wrong_way(ctx, tensor):
    """Sends left and receives from the right: no hang, the right neighbour's input."""
    n, r = ctx.world_size, ctx.rank
    received = torch.empty_like(tensor)
    with ctx.step(0, "shift"):
        sending = ctx.isend(tensor, (r - 1) % n)
        ctx.recv(received, (r + 1) % n)
        ctx.wait_all([sending])
    return received


def test_exercise_16_is_the_debugging_lessons():
    assert get_exercise("16") is EXERCISE and get_exercise(16) is EXERCISE
    assert EXERCISE.lesson == "16_debugging" and EXERCISE.world_sizes() == [2, 3, 4]
    assert EXERCISE.point_to_point and EXERCISE.timeout_s == 2.0


def test_the_reference_and_the_even_first_fix_pass_every_case(cluster4):
    for fn in (ring_shift, even_ranks_send_first):
        g = grade(EXERCISE, fn, cluster4)
        assert g.passed, g.report()
        assert {f.case.world_size for f in g.findings} == {2, 3, 4}
        assert {f.check for f in g.findings} == {"result", "bytes", "messages"}
        assert g.trace.sent_bytes() == [g.shown.numel * 8] * 4  # the int64 case: D each


def test_the_starter_hangs_and_is_named_a_cycle_of_receives(cluster4):
    t0 = time.perf_counter()
    g = grade(EXERCISE, starter(), cluster4, cases=[Case(4, 8)])
    assert time.perf_counter() - t0 < EXERCISE.timeout_s + 4  # the timeout, a restart, the ref
    assert not g.passed and [f.check for f in g.failures] == ["deadlock"]
    msg = g.first_failure.message
    assert msg == (
        "ranks 0 \u2192 3 \u2192 2 \u2192 1 \u2192 0 each waited for the next at step 0: every "
        "one receives before it sends (a deadlock)"
    )
    g2 = grade(EXERCISE, starter(), cluster4)  # every case: it stops at the first, N=2
    assert [f.case.world_size for f in g2.failures] == [2]
    assert g2.first_failure.message == (
        "ranks 0 and 1 each waited for the other at step 0: both receive before they send"
    )


def test_sending_first_everywhere_still_deadlocks(cluster4):
    g = grade(EXERCISE, every_rank_sends_first, cluster4, cases=[Case(3, 6)])
    assert not g.passed and g.first_failure.check == "deadlock"
    assert g.first_failure.message == (
        "ranks 0 \u2192 1 \u2192 2 \u2192 0 each waited for the next at step 0: each waits on a "
        "message the next is not posting (a deadlock)"
    )


def test_a_partner_swap_is_right_on_two_ranks_and_breaks_on_three(cluster4):
    g = grade(EXERCISE, swaps_with_a_partner, cluster4)
    assert not g.passed
    assert not [f for f in g.failures if f.case.world_size == 2]  # on 2 ranks a swap is a ring
    first = g.first_failure
    assert (first.check, first.case.world_size, first.rank) == ("error", 3, 2)
    assert "dst=3 is not valid: expected another rank of this group: 0..2" in first.message
    assert "ctx.isend(tensor, partner)" in first.message  # the learner's line


def test_the_shift_the_wrong_way_round_fails_on_the_result(cluster4):
    g = grade(EXERCISE, shifts_the_wrong_way, cluster4)
    assert not g.passed
    assert {(f.check, f.case.world_size) for f in g.failures} == {("result", 3), ("result", 4)}
    first = g.first_failure
    assert first.rank == 0 and first.case == Case(3, 6)
    assert first.message == (
        "rank 0's result is not its left neighbour's (rank r\u22121's) input (first wrong "
        "element: index 0): got [2, 2, 2, 2, \u2026], expected [4, 4, 4, 4, \u2026]"
    )


def test_the_starters_cycle_is_named_in_chinese_too(cluster4):
    """The ranks publish their steps in the learner's language; the cycle is still found."""
    with language("zh"):
        g = grade(EXERCISE, starter(), cluster4, cases=[Case(2, 8)])
    assert [f.check for f in g.failures] == ["deadlock"]
    assert g.first_failure.message == "rank 0 和 rank 1 在第 0 步互相等待：双方都先接收再发送"
