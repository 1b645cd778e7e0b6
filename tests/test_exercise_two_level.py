"""Exercise 05 (two-level all-reduce): the reference passes on real ranks split into pretend nodes,
sending 2(K-1)/K·S/g across nodes per rank; planted mistakes fail with the diagnosis a learner
needs: a flat all-reduce (right sum, too many bytes over the node boundary), a leader per node
(right sum, one NIC of g carries everything), a missing cross-node step (the node's sum only);
and so does the starter."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from edu_parallel.engine.context import ALL_GATHER, REDUCE_SCATTER
from edu_parallel.exercises import check, get_exercise, grade
from edu_parallel.exercises.problems.two_level import (
    EXERCISE,
    STARTER,
    crossing_bytes,
    picture,
    target_bytes,
    two_level_allreduce,
)
from edu_parallel.exercises.progress import WORKSPACE_VAR

pytestmark = pytest.mark.multiprocess


def flat(ctx, x, node, rail):
    """One all-reduce over every rank: the right sum, but whole-buffer chunks cross nodes."""
    ctx.collective("all_reduce", x)
    return x


def leader(ctx, x, node, rail):
    """Reduce to local rank 0, all-reduce the whole buffer among the leaders, broadcast."""
    g = dist.get_world_size(node)
    first = dist.get_process_group_ranks(node)[0]
    ctx.collective("reduce", x, dst=first, group=node)
    if ctx.rank % g == 0:
        ctx.collective("all_reduce", x, group=rail)
    ctx.collective("broadcast", x, src=first, group=node)
    return x


def no_cross_step(ctx, x, node, rail):
    """Reduce-scatter and all-gather inside the node, and nothing across nodes."""
    g = dist.get_world_size(node)
    shard = torch.empty(x.numel() // g, dtype=x.dtype)
    ctx.collective(REDUCE_SCATTER, shard, x, group=node)
    ctx.collective(ALL_GATHER, x, shard, group=node)
    return x


def starter():
    space: dict = {"__name__": "learner", "torch": torch, "dist": dist}
    exec(STARTER, space)
    return space["my_two_level_allreduce"]


def test_the_reference_passes_with_the_target_bytes_across_nodes(cluster8):
    g = grade(EXERCISE, two_level_allreduce, cluster8)
    assert g.passed, g.report()
    assert {(f.case.world_size, f.case.option("nodes")) for f in g.findings} == {
        (4, 2),
        (8, 2),
        (8, 4),
    }
    assert {f.check for f in g.findings} == {"result", "bytes"}
    case = g.shown
    across, inside = crossing_bytes(g.trace, case)
    k, n, s = case.option("nodes"), case.world_size, case.numel * 4
    gpn = n // k
    assert across == [pytest.approx(2 * (k - 1) / k * s / gpn)] * n
    assert across[0] == pytest.approx(target_bytes(case))
    assert inside == [pytest.approx(2 * (gpn - 1) / gpn * s)] * n  # reduce-scatter + all-gather
    for out in g.outputs:
        assert torch.equal(out.result, torch.full((case.numel,), float(2**n - 1)))
        assert torch.equal(out.result, out.facts["expected"])
    assert get_exercise("05") is EXERCISE and get_exercise(5) is EXERCISE
    (fig,) = picture(g)
    assert len(fig.axes) == 2


def test_a_flat_all_reduce_is_right_but_crosses_nodes_with_whole_chunks(cluster8):
    g = grade(EXERCISE, flat, cluster8, reference=False)
    assert not g.passed
    assert {f.check for f in g.failures} == {"bytes"}
    first = g.first_failure
    assert (first.case.world_size, first.rank) == (4, 1)  # rank 1's ring successor is on node 1
    assert "a flat ring over every rank sends whole-buffer chunks over the node boundary" in (
        first.message
    )
    assert first.message.startswith("rank 1 sent 288 B across nodes")  # 2(4-1)/4 * 192 B
    assert first.message.endswith("target 2(K\u22121)/K\u00b7S/g = 96 B (K = 2, g = 2)")


def test_a_leader_per_node_loads_one_nic_of_g(cluster8):
    g = grade(EXERCISE, leader, cluster8, reference=False)
    assert not g.passed
    assert {f.check for f in g.failures} == {"bytes"}
    first = g.first_failure
    assert (first.case.world_size, first.rank) == (4, 0)
    assert first.message.startswith("rank 0 sent 192 B across nodes while ranks [1, 3] sent")
    assert "one NIC of 2 carries the whole buffer (a leader per node)" in first.message


def test_no_cross_node_step_leaves_the_node_sum(cluster8):
    g = grade(EXERCISE, no_cross_step, cluster8, reference=False)
    assert not g.passed
    first = g.first_failure
    assert (first.check, first.rank, first.case.world_size) == ("result", 0, 4)
    assert first.message == (
        "rank 0 holds the sum over its node only (3 at element 0, the whole sum is 15): "
        "all-reduce your shard across nodes, over `rail`, between the reduce-scatter and the "
        "all-gather"
    )
    assert any(
        f.check == "bytes" and "no rank sent anything across" in f.message for f in g.failures
    )


def test_the_starter_returns_and_fails(cluster8, tmp_path, monkeypatch):
    monkeypatch.setenv(WORKSPACE_VAR, str(tmp_path))
    feedback = check("05", starter(), cluster8)
    grade_ = feedback.grade
    assert not grade_.passed and grade_.first_failure.check == "result"
    assert "rank 0's result differs from dist.all_reduce at element 0: got 1, expected 15" == (
        grade_.first_failure.message
    )
