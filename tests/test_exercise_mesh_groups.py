"""Exercise 12 (the 3D mesh's groups): the reference passes on real ranks and its groups are used
in real all-reduces; planted wrong solutions fail with the diagnosis a learner needs (DP fastest,
one rank that disagrees, PP and DP swapped), and so does the starter."""

from __future__ import annotations

import pytest

from edu_parallel.core.dims import ParallelDims
from edu_parallel.exercises import check, get_exercise, grade
from edu_parallel.exercises.problems.mesh_groups import EXERCISE, STARTER, mesh_groups, picture
from edu_parallel.exercises.progress import WORKSPACE_VAR

pytestmark = pytest.mark.multiprocess


def dp_fastest(rank, dp, tp, pp):
    """The mesh (pp, tp, dp): DP is the fastest coordinate, so TP groups are dp ranks apart."""
    dp_rank, tp_rank, pp_rank = rank % dp, rank // dp % tp, rank // (dp * tp)
    return {
        "tp": [(pp_rank * tp + t) * dp + dp_rank for t in range(tp)],
        "dp": [(pp_rank * tp + tp_rank) * dp + d for d in range(dp)],
        "pp": [(p * tp + tp_rank) * dp + dp_rank for p in range(pp)],
    }


def pp_dp_swapped(rank, dp, tp, pp):
    """The mesh (dp, pp, tp): TP right, but PP and DP traded places."""
    tp_rank, pp_rank, dp_rank = rank % tp, rank // tp % pp, rank // (tp * pp)
    return {
        "tp": [(dp_rank * pp + pp_rank) * tp + t for t in range(tp)],
        "dp": [(d * pp + pp_rank) * tp + tp_rank for d in range(dp)],
        "pp": [(dp_rank * pp + p) * tp + tp_rank for p in range(pp)],
    }


def last_rank_disagrees(rank, dp, tp, pp):
    """The reference, except that the last rank's TP group starts one rank too early."""
    groups = mesh_groups(rank, dp, tp, pp)
    if rank == dp * tp * pp - 1:
        groups["tp"][0] -= 1
    return groups


def starter():
    space: dict = {"__name__": "learner"}
    exec(STARTER, space)
    return space["my_mesh_groups"]


def group_events(trace):
    return [e for e in trace.events if e.kind == "collective" and "group" in (e.attrs or {})]


def test_the_reference_passes_and_its_groups_carry_real_all_reduces(cluster8):
    g = grade(EXERCISE, mesh_groups, cluster8)
    assert g.passed, g.report()
    cases = {f.case for f in g.findings}
    assert {(c.world_size, c.option("dp"), c.option("tp"), c.option("pp")) for c in cases} == {
        (4, 2, 2, 1),
        (8, 2, 2, 2),
        (8, 2, 4, 1),
        (8, 1, 2, 4),
    }
    assert {f.check for f in g.findings} == {"result", "messages"}
    dims = ParallelDims(g.shown.world_size, *(g.shown.option(d) for d in ("dp", "tp", "pp")))
    events = group_events(g.trace)
    for dim in ("tp", "dp", "pp"):  # every group of size > 1: one all-reduce per member
        for group in dims.groups(dim):
            ran = [e for e in events if e.phase == dim and e.attrs["group"] == group]
            assert sorted(e.rank for e in ran) == (group if len(group) > 1 else [])
    for r, out in enumerate(g.outputs):
        want = mesh_groups(r, *(g.shown.option(d) for d in ("dp", "tp", "pp")))
        assert out.result == want
        assert {d: s for d, (_, s) in out.facts["sums"].items()} == {d: sum(want[d]) for d in want}
    assert get_exercise("12") is EXERCISE and get_exercise(12) is EXERCISE


def test_dp_fastest_fails_on_the_tp_group_that_skips_a_rank(cluster8):
    g = grade(EXERCISE, dp_fastest, cluster8, reference=False)
    assert not g.passed
    first = g.first_failure
    assert (first.check, first.rank, first.case.world_size) == ("result", 0, 4)
    assert first.message.startswith("your TP group [0, 2] skips rank 1: with TP fastest, TP groups")
    assert "so that on a node of g GPUs a TP group of t | g stays on NVLink" in first.message
    # the groups were made and used: the all-reduce over [0, 2] summed the wrong ranks
    sums = next(f for f in g.failures if f.check == "messages" and f.case == first.case)
    assert sums.message == (
        "rank 0's all-reduce over its TP group [0, 2] summed 2; over the mesh's TP group "
        "[0, 1] it is 1"
    )
    assert [e.attrs["group"] for e in group_events(g.trace) if e.rank == 0] == [[0, 2], [0, 1]]
    # (1, 2, 4) is DP-free: DP fastest or not, the mesh is the same there
    assert (8, 1) not in {(f.case.world_size, f.case.option("dp")) for f in g.failures}


def test_one_rank_that_disagrees_is_named_and_no_group_is_made(cluster8):
    g = grade(EXERCISE, last_rank_disagrees, cluster8, reference=False)
    assert not g.passed
    assert {f.check for f in g.failures} == {"result"}
    assert len({f.case for f in g.failures}) == 4  # every case, one finding each
    first = g.first_failure
    assert (first.rank, first.case.world_size) == (3, 4)
    assert first.message == (
        "rank 2 says its TP group is [2, 3] but rank 3 says [1, 3]: every member of a group "
        "must return the same list"
    )
    assert group_events(g.trace) == []  # inconsistent groups would deadlock new_group
    assert all(o.facts["sums"] is None for o in g.outputs)


def test_pp_and_dp_swapped_fails_only_where_both_are_split(cluster8):
    g = grade(EXERCISE, pp_dp_swapped, cluster8, reference=False)
    assert not g.passed
    failed = {(f.case.option("dp"), f.case.option("tp"), f.case.option("pp")) for f in g.failures}
    assert failed == {(2, 2, 2)}
    first = g.first_failure
    assert (first.check, first.rank) == ("result", 0)
    assert first.message.startswith(
        "PP and DP are swapped: rank 0's DP group [0, 4] is its PP group and its PP group "
        "[0, 2] its DP group."
    )
    (fig,) = picture(g)
    assert [ax.get_title().split(":")[0] for ax in fig.axes] == ["yours", "the mesh (pp, dp, tp)"]


def test_the_starter_returns_and_fails_on_the_group_sizes(cluster8, tmp_path, monkeypatch):
    monkeypatch.setenv(WORKSPACE_VAR, str(tmp_path))
    feedback = check("12", starter(), cluster8)
    g = feedback.grade
    assert not g.passed and {f.check for f in g.failures} == {"result"}
    assert g.first_failure.message == (
        "rank 0's TP group [0] has 1 rank; tp = 2, so it has 2 (3 other ranks' answers are "
        "wrong too)"
    )


def test_a_malformed_answer_is_one_line_naming_the_rank(cluster8):
    def wrong_types(rank, dp, tp, pp):
        groups = mesh_groups(rank, dp, tp, pp)
        if rank == 1:
            groups["dp"] = [float(x) for x in groups["dp"]]
        return groups

    g = grade(EXERCISE, wrong_types, cluster8, cases=EXERCISE.cases[:1], reference=False)
    (only,) = g.failures
    assert (only.rank, only.message) == (
        1,
        "rank 1's DP group [1.0, 3.0] holds 1.0 (float): list int ranks",
    )
