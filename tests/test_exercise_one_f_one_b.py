"""Exercise 10 (1F1B as a plan): the reference passes on real ranks; planted wrong plans fail with
the diagnosis a learner needs (GPipe's stash, a backward before its forward, a missing action,
a warm-up off by one)."""

from __future__ import annotations

import pytest

from edu_parallel.exercises import grade
from edu_parallel.exercises.problems.one_f_one_b import EXERCISE, one_f_one_b, picture, target_peaks
from edu_parallel.pipeline_parallel import build_schedule

pytestmark = pytest.mark.multiprocess


def gpipe_order(stages, microbatches):
    """Every forward, then every backward: a valid plan with 1F1B's bubble, but M stashes."""
    return [
        [f"{s}F{m}" for m in range(microbatches)] + [f"{s}B{m}" for m in range(microbatches)]
        for s in range(stages)
    ]


def backward_first(stages, microbatches):
    """The last stage runs its first backward before the forward it needs."""
    plan = one_f_one_b(stages, microbatches)
    plan[-1][0], plan[-1][1] = plan[-1][1], plan[-1][0]
    return plan


def forgets_last_backward(stages, microbatches):
    plan = one_f_one_b(stages, microbatches)
    plan[0].pop()
    return plan


def warmup(stages, microbatches, extra):
    """1F1B with ``extra`` warm-up forwards more than min(P-1-s, M) (fewer when negative)."""
    plan = []
    for s in range(stages):
        w = max(0, min(stages - 1 - s + extra, microbatches))
        actions = [f"{s}F{m}" for m in range(w)]
        for m in range(microbatches):
            if w + m < microbatches:
                actions.append(f"{s}F{w + m}")
            actions.append(f"{s}B{m}")
        plan.append(actions)
    return plan


def warmup_one_short(stages, microbatches):
    return warmup(stages, microbatches, -1)


def warmup_one_long(stages, microbatches):
    return warmup(stages, microbatches, +1)


def package_schedule(stages, microbatches):
    return build_schedule("1f1b", stages, microbatches)


def returns_nothing(stages, microbatches):
    plan = one_f_one_b(stages, microbatches)  # noqa: F841 - forgot to return it


def test_the_reference_passes_every_case(cluster4):
    g = grade(EXERCISE, one_f_one_b, cluster4)
    assert g.passed, g.report()
    cases = {f.case for f in g.findings}
    pm = {(c.world_size, c.option("microbatches")) for c in cases}
    for p in (2, 4):  # M below, at and above P on both world sizes
        ms = {m for q, m in pm if q == p}
        assert min(ms) < p and p in ms and max(ms) > p
    assert {f.check for f in g.findings} == {"result", "steps", "memory"}
    assert any("gradients equal one process's" in f.message for f in g.findings)


def test_the_package_schedule_object_is_accepted(cluster4):
    g = grade(EXERCISE, package_schedule, cluster4)
    assert g.passed, g.report()


def test_gpipe_order_fails_on_stashed_activations_only(cluster4):
    g = grade(EXERCISE, gpipe_order, cluster4)
    assert not g.passed
    assert {f.check for f in g.failures} == {"memory"}  # valid, right gradients, same bubble
    first = g.first_failure
    assert (first.case.world_size, first.case.option("microbatches")) == (2, 2)
    assert (first.rank, first.step) == (1, 2)
    assert "stage 1 stashed 2 microbatches at once" in first.message
    assert f"min(P\u2212s, M) = {target_peaks(2, 2)[1]}" in first.message
    figs = picture(g)
    assert len(figs) == 4
    assert figs[0].layout.title.text.startswith("your plan, P=2, M=2: stage 1 stashed")


def test_a_backward_before_its_forward_is_named_and_not_executed(cluster4):
    g = grade(EXERCISE, backward_first, cluster4)
    assert not g.passed and {f.check for f in g.failures} == {"result"}
    shown = [f for f in g.findings if f.case == g.shown]
    assert "your orders deadlock" in shown[0].message
    assert "rank 1 waits at 1B0 for 1F0" in shown[0].message
    assert any(
        "1B0 at slot 1 needs 1F0 (rank 1) in an earlier slot; it is at slot 2" in f.message
        for f in shown
    )
    assert shown[-1].note and "not executed" in shown[-1].message
    assert (g.mark.rank, g.mark.step) == (0, 1)
    assert len(picture(g)) == 4  # an invalid plan is drawn too


def test_a_missing_action_is_named(cluster4):
    g = grade(EXERCISE, forgets_last_backward, cluster4)
    assert not g.passed
    first = g.first_failure
    assert first.check == "result" and first.rank == 0
    assert first.message == "1 of 4 actions never run: 0B0"
    biggest = [
        f for f in g.failures if f.case.world_size == 4 and f.case.option("microbatches") == 8
    ]
    assert biggest[0].message == "1 of 64 actions never run: 0B7"


def test_a_warmup_one_short_fails_on_the_bubble(cluster4):
    g = grade(EXERCISE, warmup_one_short, cluster4)
    assert not g.passed and {f.check for f in g.failures} == {"steps"}
    first = g.first_failure
    assert (first.case.world_size, first.case.option("microbatches")) == (2, 2)
    assert "the bubble is 0.500 of rank-time" in first.message
    assert "(P\u22121)/(M+P\u22121) = 1/3 = 0.333" in first.message


def test_a_warmup_one_long_fails_on_stashed_activations(cluster4):
    g = grade(EXERCISE, warmup_one_long, cluster4)
    assert not g.passed and {f.check for f in g.failures} == {"memory"}
    worst = [f for f in g.failures if f.case.option("microbatches") == 8]
    assert "stage 0 stashed 5 microbatches" in worst[0].message
    assert "(all stages: [5, 4, 3, 2], 1F1B: [4, 3, 2, 1])" in worst[0].message


def test_no_plan_at_all_says_what_to_return(cluster4):
    g = grade(EXERCISE, returns_nothing, cluster4, reference=False)
    assert not g.passed
    assert g.first_failure.message.startswith("my_1f1b returned NoneType: expected a list")
    assert picture(g) == []
