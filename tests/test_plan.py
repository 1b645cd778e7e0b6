import dataclasses

import numpy as np
import pytest

from edu_parallel.core.inputs import chunk_bounds, contributors, make_input
from edu_parallel.models.simulation import simulate
from edu_parallel.plans.checker import check_plan, explain, holdings_after_each_step, validate
from edu_parallel.plans.naive import naive_allreduce_plan
from edu_parallel.plans.plan import Plan, PlanError, Step, Transfer
from edu_parallel.plans.ring import ring_allreduce_plan, ring_sent_bytes_formula

GOLDEN_RING_3 = """plan ring_allreduce all_reduce n=3 chunks=3
reduce-scatter | 0>1:c0+ 1>2:c1+ 2>0:c2+
reduce-scatter | 0>1:c2+ 1>2:c0+ 2>0:c1+
all-gather | 0>1:c1= 1>2:c2= 2>0:c0=
all-gather | 0>1:c0= 1>2:c1= 2>0:c2="""


def test_ring_plan_golden_and_round_trip():
    plan = ring_allreduce_plan(3)
    assert plan.to_text() == GOLDEN_RING_3
    assert Plan.from_text(GOLDEN_RING_3) == plan


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 16])
def test_plans_are_valid_and_have_textbook_shape(n):
    ring = ring_allreduce_plan(n)
    assert validate(ring) == []
    assert ring.steps_per_phase() == (
        {"reduce-scatter": n - 1, "all-gather": n - 1} if n > 1 else {}
    )
    # one transfer per rank per step: every rank sends N-1 chunks per phase
    assert ring.sent_chunks() == [2 * (n - 1)] * n
    naive = naive_allreduce_plan(n)
    assert validate(naive) == []
    assert Plan.from_text(naive.to_text()) == naive
    if n > 1:
        assert naive.sent_chunks() == [n - 1] + [1] * (n - 1)


def test_validator_marks_double_count_and_missing_chunks():
    plan = ring_allreduce_plan(3)
    broken = dataclasses.replace(plan, steps=plan.steps[:2] + plan.steps[1:2] + plan.steps[3:])
    problems = validate(broken)
    assert any(p.step == 2 and "counted twice" in p.message for p in problems)
    assert any(p.step is None for p in problems)
    text = explain(broken)
    grid_rows = text.split("\n\n")[0].splitlines()
    assert len(grid_rows) == 1 + 3
    assert all("!!" in row for row in grid_rows[1:])  # the bad step is marked on every rank
    with pytest.raises(PlanError, match="counted twice"):
        check_plan(broken)


def test_validator_explains_other_mistakes():
    def plan_with(transfers, collective="all_reduce"):
        return Plan("t", collective, 2, 2, (Step("x", tuple(transfers)),))

    assert "two different ranks" in validate(plan_with([Transfer(0, 0, 0)]))[0].message
    assert "outside 0..1" in validate(plan_with([Transfer(0, 1, 5)]))[0].message
    ag = Plan("ag", "all_gather", 2, 2, (Step("all-gather", (Transfer(0, 1, 1, "copy"),)),))
    assert any("holds nothing" in p.message for p in validate(ag))
    twice = plan_with([Transfer(0, 1, 0, "copy"), Transfer(0, 1, 0, "copy")])
    assert any("twice in one step" in p.message for p in validate(twice))
    assert explain(ring_allreduce_plan(4)).endswith("valid: it computes all_reduce in 6 steps")


def test_text_form_errors_name_the_line():
    with pytest.raises(ValueError, match="first line"):
        Plan.from_text("nonsense")
    with pytest.raises(ValueError, match="token"):
        Plan.from_text("plan a all_reduce n=2 chunks=2\nrs | 0>1:c0*")


def test_symbolic_holdings_follow_the_ring():
    states = holdings_after_each_step(ring_allreduce_plan(4))
    full = 0b1111
    after_rs = states[3]
    for r in range(4):  # after reduce-scatter rank r holds chunk r+1 complete
        assert after_rs[r][(r + 1) % 4] == full
        assert sum(1 for m in after_rs[r] if m == full) == 1
    assert all(m == full for row in states[-1] for m in row)


@pytest.mark.parametrize(
    "n,nbytes,dtype", [(2, 64, "float32"), (3, 40, "int64"), (4, 1000, "float32"), (5, 8, "int64")]
)
def test_simulation_computes_the_sum_and_counts_bytes(n, nbytes, dtype):
    plan = ring_allreduce_plan(n)
    trace, bufs = simulate(plan, nbytes, dtype, pattern="random", seed=3)
    numel = len(bufs[0])
    expected = sum(make_input(r, numel, dtype, "random", 3).astype(np.float64) for r in range(n))
    for b in bufs:
        np.testing.assert_allclose(b, expected, rtol=1e-5, atol=1e-5)
    per_phase = trace.sent_bytes(per_phase=True)
    bounds = chunk_bounds(numel, n)
    largest = max(bounds[k + 1] - bounds[k] for k in range(n)) * (4 if dtype == "float32" else 8)
    formula = ring_sent_bytes_formula(n, trace.meta["nbytes"])
    for phase in ("reduce-scatter", "all-gather"):
        for sent in per_phase[phase]:
            assert abs(sent - formula[phase]) < largest


def test_powers_of_two_partial_sums_name_their_ranks():
    trace, bufs = simulate(ring_allreduce_plan(4), 64, "int64", pattern="powers_of_two")
    assert contributors(bufs[2][0]) == [0, 1, 2, 3]
    first_step = {s.rank: s.values for s in trace.snapshots if s.step == 0}
    assert contributors(first_step[1][0]) == [0, 1]  # rank 1 added rank 0's chunk 0


def test_simulation_scales_without_data():
    trace, bufs = simulate(ring_allreduce_plan(256), 1 << 20)
    assert bufs is None
    assert trace.steps_per_phase() == {"reduce-scatter": 255, "all-gather": 255}
    assert len(trace.events) == 2 * 255 * 256 * 2 + 255 * 256


def _direct(collective, n, transfers, root=0, phase="direct"):
    return Plan(
        f"direct_{collective}", collective, n, n, (Step(phase, tuple(transfers)),), root=root
    )


def test_moving_chunks_round_trips_and_validates_every_collective():
    n = 3
    a2a = _direct(
        "all_to_all",
        n,
        [Transfer(r, k, k, "copy", r) for r in range(n) for k in range(n) if r != k],
    )
    assert validate(a2a) == []
    assert Plan.from_text(a2a.to_text()) == a2a and "0>1:c1>c0=" in a2a.to_text()
    gather = _direct("gather", n, [Transfer(r, 0, r, "copy") for r in (1, 2)])
    scatter = _direct("scatter", n, [Transfer(1, r, r, "copy") for r in (0, 2)], root=1)
    broadcast = _direct(
        "broadcast", n, [Transfer(2, r, k, "copy") for r in (0, 1) for k in range(n)], root=2
    )
    reduce = _direct("reduce", n, [Transfer(r, 0, k, "reduce") for r in (1, 2) for k in range(n)])
    for plan in (gather, scatter, broadcast, reduce):
        assert validate(plan) == [], explain(plan)
        assert Plan.from_text(plan.to_text()) == plan


def test_all_to_all_mistakes_name_the_items():
    n = 3
    wrong = _direct(
        "all_to_all", n, [Transfer(r, k, k, "copy") for r in range(n) for k in range(n) if r != k]
    )
    problems = validate(wrong)  # chunks landed at the sender's index, not the receiver's
    assert any("needs {" in p.message and ":c" in p.message for p in problems)
    missing = _direct("gather", n, [Transfer(1, 0, 1, "copy")])
    assert [p.message for p in validate(missing)] == ["ends with chunk 2 = nothing, needs {2:c2}"]
