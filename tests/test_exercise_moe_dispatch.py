"""Exercise 09 (MoE dispatch): the reference passes on real ranks; planted wrong solutions fail with
the diagnosis a learner needs (no capacity, every token to every rank, the wrong home rank for an
expert, a token-major queue)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from edu_parallel.engine.context import ALL_TO_ALL
from edu_parallel.exercises import grade
from edu_parallel.exercises.problems.moe_dispatch import (
    EXERCISE,
    moe_dispatch,
    picture,
    target_bytes,
)

pytestmark = pytest.mark.multiprocess


def queue_positions(expert_ids, num_experts, choice_major=True):
    t, k = expert_ids.shape
    flat = expert_ids.t().reshape(-1) if choice_major else expert_ids.reshape(-1)
    onehot = F.one_hot(flat, num_experts)
    pos = ((onehot.cumsum(0) - 1) * onehot).sum(1)
    return pos.view(k, t).t() if choice_major else pos.view(t, k)


def dispatch(ctx, tokens, expert_ids, kept, num_experts, home=None):
    """Counts, then the kept rows; ``home(e)`` is the (rank, local index) the learner believes."""
    n = ctx.world_size
    per = num_experts // n
    home = home or (lambda e: (e // per, e % per))
    t, k = expert_ids.shape
    token = torch.arange(t).unsqueeze(1).expand(t, k)[kept]
    slot = torch.tensor([r * per + j for r, j in map(home, expert_ids[kept].tolist())])
    order = torch.argsort(slot, stable=True)
    token, slot = token[order], slot[order]
    send_counts = torch.bincount(slot, minlength=num_experts)
    recv_counts = torch.empty_like(send_counts)
    ctx.collective(ALL_TO_ALL, recv_counts, send_counts)
    recv_counts = recv_counts.view(n, per)
    send_splits = send_counts.view(n, per).sum(1).tolist()
    recv_splits = recv_counts.sum(1).tolist()
    rows = tokens.new_empty(sum(recv_splits), tokens.shape[1])
    ctx.collective(ALL_TO_ALL, rows, tokens[token], recv_splits, send_splits)
    local = torch.arange(per).repeat(n).repeat_interleave(recv_counts.reshape(-1))
    return [rows[local == j] for j in range(per)]


def no_capacity(ctx, tokens, expert_ids, capacity, num_experts):
    """Every routed assignment travels: the hot expert's rank gets more than N·C rows."""
    return dispatch(
        ctx, tokens, expert_ids, torch.ones_like(expert_ids, dtype=torch.bool), num_experts
    )


def round_robin_home(ctx, tokens, expert_ids, capacity, num_experts):
    """Expert e placed on rank e mod N (the package puts it on rank e // (E/N))."""
    kept = queue_positions(expert_ids, num_experts) < capacity
    n = ctx.world_size
    return dispatch(ctx, tokens, expert_ids, kept, num_experts, lambda e: (e % n, e // n))


def token_major_queue(ctx, tokens, expert_ids, capacity, num_experts):
    """A token's second choice queues before the next token's first choice."""
    kept = queue_positions(expert_ids, num_experts, choice_major=False) < capacity
    return dispatch(ctx, tokens, expert_ids, kept, num_experts)


def every_token_everywhere(ctx, tokens, expert_ids, capacity, num_experts):
    """The right rows in the end, but every rank first receives every rank's tokens."""
    n, t = ctx.world_size, tokens.shape[0]
    per = num_experts // n
    kept = queue_positions(expert_ids, num_experts) < capacity
    tags = torch.where(kept, expert_ids, -1)
    all_rows = tokens.new_empty(n * t, tokens.shape[1])
    ctx.collective(ALL_TO_ALL, all_rows, tokens.repeat(n, 1))
    all_tags = tags.new_empty(n * t, tags.shape[1])
    ctx.collective(ALL_TO_ALL, all_tags, tags.repeat(n, 1))
    first = ctx.rank * per
    return [all_rows[(all_tags == first + j).any(1)] for j in range(per)]


def test_the_reference_passes_every_case(cluster4):
    g = grade(EXERCISE, moe_dispatch, cluster4)
    assert g.passed, g.report()
    cases = {f.case for f in g.findings}
    assert {c.world_size for c in cases} == {2, 4} and {c.option("k") for c in cases} == {1, 2}
    assert {f.check for f in g.findings} == {"result", "bytes", "messages"}
    verdicts = [f.message for f in g.findings if f.check == "result"]
    assert all(m.endswith("dropped") and "; 0 of" not in m for m in verdicts)  # drops everywhere
    shown = range(g.shown.world_size)
    arrived = [
        sum(e.nbytes for e in g.trace.events if (e.rank, e.kind) == (r, "collective"))
        for r in shown
    ]
    assert arrived == target_bytes(g.shown)


def test_ignoring_capacity_fails_the_rows_and_the_bytes(cluster4):
    g = grade(EXERCISE, no_capacity, cluster4)
    assert not g.passed and g.shown.world_size == 2
    checks = {f.check: f.ok for f in g.findings if f.case == g.shown}
    assert checks == {"result": False, "bytes": False, "messages": True}
    first = g.first_failure
    assert first.message.startswith("rank 0's local expert 0 (expert 0) received token")
    assert "which is past expert 0's capacity" in first.message and "C = 4" in first.message
    sent = next(f for f in g.failures if f.check == "bytes")
    assert "arrived on rank 0; the target is its experts' kept rows" in sent.message
    figures = picture(g)
    assert len(figures) == 2
    assert figures[0].layout.meta["matrices"][0] != figures[0].layout.meta["matrices"][1]


def test_every_token_to_every_rank_fails_on_bytes_only(cluster4):
    g = grade(EXERCISE, every_token_everywhere, cluster4)
    assert not g.passed
    assert {f.check for f in g.failures} == {"bytes"}
    first = g.first_failure
    assert first.case.world_size == 2 and first.rank == 0
    # 8 tokens of 4 floats from each of 2 ranks, then their (8, 2) int64 tags from each
    assert first.message.startswith("512 B arrived on rank 0; the target is")


def test_the_wrong_home_rank_is_named(cluster4):
    g = grade(EXERCISE, round_robin_home, cluster4)
    assert not g.passed
    first = g.first_failure
    assert first.check == "result" and first.rank == 0
    assert first.message.startswith("rank 0's local expert 1 (expert 1) received token")
    assert "routed to experts 0 (on rank 0) and 2 (on rank 1), not 1" in first.message
    assert "expert e lives on rank e // (E/N)" in first.message


def test_a_token_major_queue_drops_the_wrong_tokens(cluster4):
    g = grade(EXERCISE, token_major_queue, cluster4)
    assert not g.passed
    first = g.first_failure
    assert first.check == "result" and first.case.option("k") == 2
    assert first.message.startswith(
        "rank 0's local expert 0 (expert 0) received token 3 of rank 0, which is past expert 0's "
        "capacity: it is number 7 in rank 0's queue for it and C = 4"
    )
