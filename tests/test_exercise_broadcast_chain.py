"""Exercise 02 (pipelined chain broadcast): the reference passes on real ranks; planted wrong
solutions fail with the diagnosis a learner needs (the root sending to everyone, no pipelining,
a chain that always starts at rank 0)."""

from __future__ import annotations

import pytest
import torch

from edu_parallel.core.trace import Event, Trace
from edu_parallel.exercises import grade
from edu_parallel.exercises.checks import message_rounds
from edu_parallel.exercises.feedback import default_picture
from edu_parallel.exercises.problems.broadcast_chain import EXERCISE, chain_broadcast
from edu_parallel.plans.collectives import chain_broadcast_plan

pytestmark = pytest.mark.multiprocess


def root_sends_to_everyone(ctx, tensor, root, segments):
    """Right result, wrong volume: the root sends the whole buffer to every other rank."""
    n, r = ctx.world_size, ctx.rank
    with ctx.step(0, "broadcast"):
        if r == root:
            ctx.wait_all([ctx.isend(tensor, dst) for dst in range(n) if dst != root])
        else:
            ctx.recv(tensor, root)
    return tensor


def store_and_forward(ctx, tensor, root, segments):
    """Right result and bytes, no pipeline: a rank forwards only once it has every segment."""
    n, r = ctx.world_size, ctx.rank
    pos = (r - root) % n
    parts = torch.tensor_split(tensor, segments)
    with ctx.step(pos, "broadcast"):
        if pos > 0:
            for k in range(segments):
                ctx.recv(parts[k], (r - 1) % n, chunk=k)
        if pos < n - 1:
            for k in range(segments):
                ctx.send(parts[k], (r + 1) % n, chunk=k)
    return tensor


def chain_from_rank_0(ctx, tensor, root, segments):
    """The reference with the root forgotten: the chain always starts at rank 0."""
    return chain_broadcast(ctx, tensor, 0, segments)


def test_the_reference_passes_every_case(cluster4):
    g = grade(EXERCISE, chain_broadcast, cluster4)
    assert g.passed, g.report()
    cases = {f.case for f in g.findings}
    assert {c.world_size for c in cases} == {2, 4}
    assert {c.option("root") for c in cases} == {0, 1, 2, 3}
    assert {f.check for f in g.findings} == {"result", "bytes", "messages", "steps"}
    shown = g.shown
    d = shown.numel * 4
    assert g.trace.sent_bytes() == [
        d if r != (shown.option("root") - 1) % 4 else 0 for r in range(4)
    ]
    steps = len(chain_broadcast_plan(4, shown.option("root"), shown.option("segments")).steps)
    assert message_rounds(g.trace)[0] == steps == 4 + 4 - 2
    assert max(s.step for s in g.trace.snapshots) == steps - 1  # the grid's last column


def test_the_root_sending_to_everyone_fails_on_bytes(cluster4):
    g = grade(EXERCISE, root_sends_to_everyone, cluster4)
    assert not g.passed
    failed = {(f.case.world_size, f.case.option("root"), f.check) for f in g.failures}
    assert "result" not in {check for *_, check in failed}
    # on 2 ranks it is a chain without segments; on 4 the root sends (N-1)·D
    assert (2, 0, "messages") in failed and (2, 0, "bytes") not in failed
    assert g.first_failure.check == "messages" and g.first_failure.rank == 0
    assert "a message of 32 B; a segment is \u2308D/S\u2309 = 8 B" in g.first_failure.message
    bytes_ = next(f for f in g.failures if f.check == "bytes")
    assert (bytes_.case.world_size, bytes_.case.option("root"), bytes_.rank) == (4, 1, 1)
    assert (
        "rank 1 sent 120 B; the target is D (0 on the chain's last rank, root\u22121) = 40 B"
        in (bytes_.message)
    )
    assert not any(f.check == "steps" for f in g.failures)  # N-1 sends fit in S + N - 2 rounds


def test_forwarding_only_the_whole_buffer_fails_on_steps(cluster4):
    g = grade(EXERCISE, store_and_forward, cluster4)
    assert not g.passed
    # N=2 has nothing to pipeline; on 4 ranks every case is late, and only late
    assert {(f.check, f.case.world_size) for f in g.failures} == {("steps", 4)}
    only = g.first_failure
    assert only.rank == 0 and only.case.option("root") == 1  # the chain's last rank
    assert "the last message reached rank 0 after 9 rounds" in only.message
    assert "S + N \u2212 2 = 5 is enough: forward each segment as soon as it has arrived" in (
        only.message
    )
    assert default_picture(g)  # the grid and the bytes of the failing run


def test_a_chain_that_ignores_the_root_is_found_at_its_first_step(cluster4):
    g = grade(EXERCISE, chain_from_rank_0, cluster4)
    assert not g.passed and g.first_failure.check == "result"
    assert g.shown.option("root") == 1 and g.shown.world_size == 2
    assert "rank 0's result is not the root's (rank 1's) input" in g.first_failure.message
    mark = g.mark
    assert (mark.step, mark.rank, mark.chunk) == (0, 0, 0)  # rank 0 never received the root's
    assert "after step 0 (broadcast), rank 0's chunk 0 held ranks {0}" in mark.message
    assert "the reference held ranks {1}" in mark.message
    last = next(f for f in g.failures if f.check == "bytes")  # with root 1, rank 0 ends the chain
    assert (last.case, last.rank) == (g.shown, 0)
    assert "rank 0 sent 24 B; the target is D (0 on the chain's last rank, root\u22121) = 0 B" in (
        last.message
    )


def test_rounds_count_one_port_each_way_and_forwarding():
    def msg(src, dst, t_send, t_recv):
        return [
            Event(kind="send", rank=src, peer=dst, start=t_send, end=t_recv),
            Event(kind="recv", rank=dst, peer=src, start=0.0, end=t_recv),
        ]

    fan_in = Trace({"world_size": 4}, msg(1, 0, 0.0, 1.0) + msg(2, 0, 0.0, 1.0) + msg(3, 0, 0, 1))
    assert message_rounds(fan_in)[0] == 3  # the root receives one message per round
    relay = Trace({"world_size": 3}, msg(0, 1, 0.0, 1.0) + msg(1, 2, 2.0, 3.0))
    assert message_rounds(relay)[0] == 2  # rank 1 forwards after its receive ended
    apart = Trace({"world_size": 4}, msg(0, 1, 0.0, 1.0) + msg(2, 3, 0.5, 1.5))
    assert message_rounds(apart)[0] == 1
    # A binomial tree on 4 ranks whose rank 1 was scheduled late: it posts its round-0 send
    # after rank 2 posted its round-1 send. Each rank's own order decides, not the wall clock.
    late = Trace({"world_size": 4}, msg(3, 2, 0.0, 1.0) + msg(2, 0, 1.5, 4.0) + msg(1, 0, 2.0, 3.0))
    assert message_rounds(late)[0] == 2
