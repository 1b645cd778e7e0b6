"""Exercise 07 (a ZeRO-1 step): the reference passes on real ranks and equals plain DP bit for bit;
planted wrong solutions fail with the diagnosis a learner needs (the whole optimizer state kept,
an all-reduce instead of a reduce-scatter, the wrong shard updated)."""

from __future__ import annotations

import pytest
import torch

from edu_parallel.engine.context import ALL_GATHER, REDUCE_SCATTER
from edu_parallel.exercises import grade
from edu_parallel.exercises.problems.zero1_step import EXERCISE, picture, zero1_step
from edu_parallel.task import adam_update

pytestmark = pytest.mark.multiprocess


def full_state(ctx, params, grad, state, step, lr):
    """Right parameters and traffic, but Adam's m and v kept for the whole model, as DP does."""
    n, r = ctx.world_size, ctx.rank
    size = params.numel() // n
    mine = slice(r * size, (r + 1) * size)
    g = torch.empty(size)
    ctx.collective(REDUCE_SCATTER, g, grad)
    state["m"], state["v"] = torch.zeros_like(params), torch.zeros_like(params)
    adam_update(params[mine], g / n, state["m"][mine], state["v"][mine], step, lr)
    ctx.collective(ALL_GATHER, params, params[mine].clone())
    return params


def all_reduce_first(ctx, params, grad, state, step, lr):
    """Right parameters and state, but the whole gradient is all-reduced, then all-gathered."""
    n, r = ctx.world_size, ctx.rank
    size = params.numel() // n
    mine = slice(r * size, (r + 1) * size)
    ctx.collective("all_reduce", grad)
    state["m"], state["v"] = torch.zeros(size), torch.zeros(size)
    adam_update(params[mine], grad[mine] / n, state["m"], state["v"], step, lr)
    ctx.collective(ALL_GATHER, params, params[mine].clone())
    return params


def ring_numbering(ctx, params, grad, state, step, lr):
    """Takes its reduced shard to be (r + 1) mod N, as after lesson 03's ring reduce-scatter."""
    n, r = ctx.world_size, ctx.rank
    size = params.numel() // n
    k = (r + 1) % n
    mine = slice(k * size, (k + 1) * size)
    g = torch.empty(size)
    ctx.collective(REDUCE_SCATTER, g, grad)
    state["m"], state["v"] = torch.zeros(size), torch.zeros(size)
    adam_update(params[mine], g / n, state["m"], state["v"], step, lr)
    ctx.collective(ALL_GATHER, params, params[mine].clone())
    return params


def test_the_reference_passes_every_case_bit_for_bit(cluster4):
    g = grade(EXERCISE, zero1_step, cluster4)
    assert g.passed, g.report()
    cases = {f.case for f in g.findings}
    assert {c.world_size for c in cases} == {2, 4}
    assert {c.numel for c in cases} == {816, 368}  # Ψ = 367 is padded to a multiple of 4
    assert {f.check for f in g.findings} == {"result", "bytes", "messages", "memory"}
    assert all(torch.equal(o.result, o.facts["expected"]) for o in g.outputs)


def test_keeping_the_whole_optimizer_state_fails_the_memory(cluster4):
    g = grade(EXERCISE, full_state, cluster4)
    assert not g.passed
    checks = {f.check: f.ok for f in g.findings if f.case == g.shown}
    assert checks == {"result": True, "bytes": True, "messages": True, "memory": False}
    first = g.first_failure
    assert (first.rank, first.case.world_size) == (0, 2)
    assert first.message == (
        "rank 0 keeps 6.375 KiB of optimizer state in `state` (m: 3.188 KiB, v: 3.188 KiB); "
        "ZeRO-1 keeps 1/N of DP's: 8\u03a8/N = 3.188 KiB (DP: 8\u03a8 = 6.375 KiB)"
    )
    (bars, _bytes) = picture(g)  # lesson 07's memory bars: DP, ZeRO-1, yours
    labels = [t.get_text() for t in bars.axes[0].get_xticklabels()]
    assert labels == ["DP", "ZeRO-1", "yours (rank 0)"]


def test_an_all_reduce_instead_of_a_reduce_scatter_fails_the_bytes(cluster4):
    g = grade(EXERCISE, all_reduce_first, cluster4)
    assert not g.passed
    first = g.first_failure
    assert (first.check, first.rank, first.case.world_size) == ("bytes", 0, 2)
    assert first.message == (
        "rank 0 sent 4.781 KiB; the target is 2(N\u22121)/N\u00b7\u03a8\u00b74 = 3.188 KiB"
    )
    assert {f.check for f in g.failures} == {"bytes"}


def test_updating_the_ring_s_shard_fails_the_result(cluster4):
    g = grade(EXERCISE, ring_numbering, cluster4)
    assert not g.passed
    first = g.first_failure
    assert (first.check, first.rank, first.case.world_size) == ("result", 0, 2)
    assert "rank 0's parameters after the step differ from plain DP's" in first.message
    assert "in shards [0, 1] of S = 408 elements (shard k is rank k's)" in first.message
