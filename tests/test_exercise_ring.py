"""Exercise 03 (ring all-reduce): the reference passes on real ranks; planted wrong solutions fail
with the diagnosis a learner needs (too many bytes, the wrong chunk, a deadlock)."""

from __future__ import annotations

import pytest
import torch

from edu_parallel.exercises import Case, grade
from edu_parallel.exercises.problems.ring_allreduce import EXERCISE, ring_allreduce

pytestmark = pytest.mark.multiprocess


def whole_buffer_ring(ctx, tensor):
    """Right result, wrong volume: the whole buffer travels N-1 times around the ring."""
    n, r = ctx.world_size, ctx.rank
    total, passing = tensor.clone(), tensor.clone()
    for s in range(n - 1):
        with ctx.step(s, "ring"):
            incoming = torch.empty_like(tensor)
            ctx.wait_all([ctx.isend(passing, (r + 1) % n), ctx.irecv(incoming, (r - 1) % n)])
            total += incoming
            passing = incoming
    tensor.copy_(total)
    return tensor


def off_by_one_chunk(ctx, tensor):
    """Adds the incoming chunk into (r - s + 1) mod N instead of (r - s - 1) mod N."""
    n, r = ctx.world_size, ctx.rank
    right, left = (r + 1) % n, (r - 1) % n
    chunks = torch.tensor_split(tensor, n)
    for s in range(n - 1):
        send, recv = (r - s) % n, (r - s + 1) % n
        with ctx.step(s, "reduce-scatter"):
            incoming = torch.empty_like(chunks[recv])
            ctx.wait_all(
                [ctx.isend(chunks[send], right, chunk=send), ctx.irecv(incoming, left, chunk=recv)]
            )
            chunks[recv].add_(incoming)
    for s in range(n - 1):
        send, recv = (r + 1 - s) % n, (r - s) % n
        with ctx.step(n - 1 + s, "all-gather"):
            ctx.wait_all(
                [ctx.isend(chunks[send], right, chunk=send), ctx.irecv(chunks[recv], left)]
            )
    return tensor


def receive_first(ctx, tensor):
    """Every rank receives before it sends: nobody sends."""
    n, r = ctx.world_size, ctx.rank
    with ctx.step(0, "reduce-scatter"):
        incoming = torch.empty_like(tensor)
        ctx.recv(incoming, (r - 1) % n)
        ctx.send(tensor, (r + 1) % n)
    return tensor + incoming


def test_the_reference_passes_every_case(cluster4):
    g = grade(EXERCISE, ring_allreduce, cluster4)
    assert g.passed, g.report()
    cases = {f.case for f in g.findings}
    assert {c.world_size for c in cases} == {2, 4}
    assert {c.dtype for c in cases} == {"float32", "int64", "float64"}
    assert {f.check for f in g.findings} == {"result", "bytes", "messages"}
    assert g.trace is not None and g.reference_trace is not None
    assert g.trace.sent_bytes() == g.reference_trace.sent_bytes()


def test_the_whole_buffer_around_the_ring_fails_on_bytes(cluster4):
    g = grade(EXERCISE, whole_buffer_ring, cluster4)
    assert not g.passed
    checks = {f.check: f.ok for f in g.findings if f.case == g.shown}
    assert checks == {"result": True, "bytes": False, "messages": True}
    first = g.first_failure
    assert first.case.world_size == 4  # N=2 moves D/2 per step either way: only N=4 shows it
    assert "rank 0 sent 192 B; the target is 2(N\u22121)/N\u00b7D = 96 B" in first.message
    assert (g.mark.rank, g.mark.step) == (0, 1)  # its second send took it past the target


def test_the_wrong_chunk_is_found_at_its_first_step(cluster4):
    g = grade(EXERCISE, off_by_one_chunk, cluster4)
    assert not g.passed and g.first_failure.check == "result"
    mark = g.mark
    assert (mark.step, mark.rank, mark.chunk) == (0, 0, 1)
    assert "after step 0 (reduce-scatter), rank 0's chunk 1 held ranks {0, 3}" in mark.message
    assert "the reference held ranks {0}" in mark.message


def test_receiving_first_is_named_a_deadlock_and_the_cluster_goes_on(cluster4):
    before = cluster4.restarts
    g = grade(EXERCISE, receive_first, cluster4, cases=[Case(4, 16)])
    assert not g.passed
    (only,) = g.failures
    assert only.check == "deadlock" and only.step == 0
    assert only.message == (
        "ranks 0 \u2192 3 \u2192 2 \u2192 1 \u2192 0 each waited for the next at step 0: every one "
        "receives before it sends (a deadlock)"
    )
    again = grade(EXERCISE, ring_allreduce, cluster4)  # the same cluster, fresh workers
    assert again.passed and cluster4.restarts == before + 1
