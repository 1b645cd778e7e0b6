"""Exercise 08 (row-parallel linear): the reference passes on real ranks; planted wrong solutions
fail with the diagnosis a learner needs (an all-reduce in backward, a forgotten all-reduce, the
partial sums concatenated along the hidden dimension, a backward collective on one rank only)."""

from __future__ import annotations

import pytest
import torch

from edu_parallel.engine.context import ALL_GATHER
from edu_parallel.exercises import grade
from edu_parallel.exercises.problems.row_parallel import EXERCISE, picture, row_parallel_linear

pytestmark = pytest.mark.multiprocess


class AllReduceBothWays(torch.autograd.Function):
    """Megatron's f where g belongs: the all-reduce runs in backward too."""

    @staticmethod
    def forward(fc, x_shard, w_shard, ctx):
        fc.save_for_backward(x_shard, w_shard)
        fc.rank_ctx = ctx
        partial = x_shard @ w_shard.t()
        ctx.collective("all_reduce", partial)
        return partial

    @staticmethod
    def backward(fc, dy):
        x_shard, w_shard = fc.saved_tensors
        dy = dy.clone()
        fc.rank_ctx.collective("all_reduce", dy)  # the mistake: dY is already replicated
        return dy @ w_shard, dy.flatten(0, -2).t() @ x_shard.flatten(0, -2), None


def reduce_in_backward_too(ctx, x_shard, w_shard):
    return AllReduceBothWays.apply(x_shard, w_shard, ctx)


class NoReduce(torch.autograd.Function):
    """Right backward, but forward returns each rank's partial sum."""

    @staticmethod
    def forward(fc, x_shard, w_shard, ctx):
        fc.save_for_backward(x_shard, w_shard)
        return x_shard @ w_shard.t()

    @staticmethod
    def backward(fc, dy):
        x_shard, w_shard = fc.saved_tensors
        return dy @ w_shard, dy.flatten(0, -2).t() @ x_shard.flatten(0, -2), None


def forgot_the_allreduce(ctx, x_shard, w_shard):
    return NoReduce.apply(x_shard, w_shard, ctx)


class GatherAlongHidden(torch.autograd.Function):
    """The outline's collective (errata E4): the partial sums concatenated, not summed."""

    @staticmethod
    def forward(fc, x_shard, w_shard, ctx):
        partial = x_shard @ w_shard.t()
        out = partial.new_empty((ctx.world_size * partial.shape[0], *partial.shape[1:]))
        ctx.collective(ALL_GATHER, out, partial)
        return torch.cat(out.chunk(ctx.world_size), dim=-1)

    @staticmethod
    def backward(fc, dy):
        raise AssertionError("never reached: the output has the wrong shape")


def gathered_along_hidden(ctx, x_shard, w_shard):
    return GatherAlongHidden.apply(x_shard, w_shard, ctx)


class OnlyRankZeroReduces(torch.autograd.Function):
    """Backward all-reduces on rank 0 only: it waits for ranks that never call it."""

    @staticmethod
    def forward(fc, x_shard, w_shard, ctx):
        fc.save_for_backward(x_shard, w_shard)
        fc.rank_ctx = ctx
        partial = x_shard @ w_shard.t()
        ctx.collective("all_reduce", partial)
        return partial

    @staticmethod
    def backward(fc, dy):
        x_shard, w_shard = fc.saved_tensors
        if fc.rank_ctx.rank == 0:
            dy = dy.clone()
            fc.rank_ctx.collective("all_reduce", dy)
        return dy @ w_shard, dy.flatten(0, -2).t() @ x_shard.flatten(0, -2), None


def lopsided_backward(ctx, x_shard, w_shard):
    return OnlyRankZeroReduces.apply(x_shard, w_shard, ctx)


def test_the_reference_passes_every_case(cluster4):
    g = grade(EXERCISE, row_parallel_linear, cluster4)
    assert g.passed, g.report()
    cases = {f.case for f in g.findings}
    assert {c.world_size for c in cases} == {2, 4}
    assert {c.dtype for c in cases} == {"float64", "float32"}
    assert {f.check for f in g.findings} == {"result", "messages", "bytes"}
    ops = [(e.rank, e.op, e.phase) for e in g.trace.events if e.kind == "collective"]
    assert sorted(ops) == [(r, "all_reduce", "forward") for r in range(g.shown.world_size)]


def test_an_allreduce_in_backward_fails_the_gradient_and_the_collectives(cluster4):
    g = grade(EXERCISE, reduce_in_backward_too, cluster4)
    assert not g.passed
    assert g.shown.world_size == 2
    failed = [f.check for f in g.failures if f.case == g.shown]
    assert failed == ["result", "messages", "bytes"]
    grad, calls, sent = g.failures[:3]
    assert "rank 0's gradient of x_shard is not block r of the dense dX" in grad.message
    assert "it is t = 2 times the dense one" in grad.message
    assert calls.message.startswith("rank 0 ran all_reduce in backward; g's backward is the")
    assert (calls.rank, calls.step) == (0, 1)
    assert "the target is 2(t\u22121)/t\u00b7b\u00b7s\u00b7h\u00b7itemsize = 512 B" in sent.message
    assert sent.message.startswith("rank 0 sent 1 KiB (ring volume); the target is")
    figures = picture(g)
    assert len(figures) == 2 and figures[0].axes


def test_a_forgotten_allreduce_returns_the_partial_sums(cluster4):
    g = grade(EXERCISE, forgot_the_allreduce, cluster4)
    assert not g.passed
    checks = {f.check: f.ok for f in g.findings if f.case == g.shown}
    assert checks == {"result": False, "messages": False, "bytes": True}
    first = g.first_failure
    assert first.check == "result" and first.rank == 0
    assert "is X_r A_r, one of the partial sums, which add up to Y" in first.message
    calls = next(f for f in g.failures if f.check == "messages")
    assert calls.message.startswith("rank 0 ran no collective in forward; g's forward is one")


def test_concatenating_along_hidden_is_named_errata_e4(cluster4):
    g = grade(EXERCISE, gathered_along_hidden, cluster4)
    assert not g.passed
    first = g.first_failure
    assert first.check == "result"
    assert "shape (2, 4, 16)" in first.message and "expected (2, 4, 8)" in first.message
    assert "errata E4" in first.message
    calls = next(f for f in g.failures if f.check == "messages")
    assert "ran all_gather in forward" in calls.message


def test_a_collective_in_backward_on_one_rank_is_a_hang_in_backward(cluster4):
    g = grade(EXERCISE, lopsided_backward, cluster4, cases=[EXERCISE.cases[1]])
    (only,) = g.failures
    assert only.check == "deadlock" and (only.rank, only.step) == (0, 1)
    assert only.message == (
        "rank 0 waited in all_reduce at step 1; ranks [1, 2, 3] had returned without calling it"
    )
