"""Pipeline schedules: builders, validator, text form, timing, bubble formulas, activations."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from edu_parallel.core.trace import Trace
from edu_parallel.pipeline_parallel.builders import SCHEDULES, build_schedule
from edu_parallel.pipeline_parallel.schedule import (
    KINDS,
    Action,
    Schedule,
    dependencies,
    explain_schedule,
    validate_schedule,
)
from edu_parallel.pipeline_parallel.timing import (
    Timeline,
    bubble_formula,
    gpipe_bubble,
    interleaved_bubble,
    megatron_bubble,
    time_schedule,
)

# Checked by hand against GPipe Fig. 2c (all F, then all B) and Megatron 2021 Fig. 4 (top: 1F1B,
# rank i warms up with P-1-i forwards; bottom: interleaved, forwards in groups of P microbatches
# per chunk) and Zero Bubble Fig. 3 (top: ZB-H1, every rank idles P-1 slots, W's fill the tail).
# The grids are data (tests/data/golden_schedules.txt), one schedule's text form per block.
GOLDEN = (Path(__file__).parent / "data" / "golden_schedules.txt").read_text().strip().split("\n\n")


def all_cases():
    """(name, P, M, v) for many shapes of every schedule."""
    for p in range(1, 7):
        for m in (1, 2, 3, p, p + 1, 2 * p, 9):
            for name in ("gpipe", "1f1b", "zb-h1"):
                yield name, p, m, 1
        for k in (1, 2, 3):
            for v in (1, 2, 3, 4):
                yield "interleaved", p, k * p, v


CASES = sorted(set(all_cases()))


# ----------------------------------------------------------------------------- data types
def test_action_text_round_trip_and_errors():
    a = Action(1, "F", 0)
    assert a.text() == "1F0" and str(a) == "1F0"
    assert Action.from_text("12W34") == Action(12, "W", 34)
    assert Action.from_text("3I1") == Action(3, "I", 1)
    for bad in ("1X0", "F0", "1F", "-1F0", ""):
        with pytest.raises(ValueError, match="action="):
            Action.from_text(bad)
    assert KINDS == ("F", "B", "I", "W") and SCHEDULES == ("gpipe", "1f1b", "interleaved", "zb-h1")


@pytest.mark.parametrize(("name", "p", "m", "v"), CASES)
def test_every_built_schedule_is_valid_and_round_trips(name, p, m, v):
    s = build_schedule(name, p, m, v)
    assert validate_schedule(s) == []
    assert (s.num_ranks, s.num_microbatches, s.chunks, s.num_stages) == (p, m, v, p * v)
    assert s.split_backward == (name == "zb-h1")
    assert len({len(row) for row in s.actions}) == 1  # a rectangular grid
    assert all(s.rank_of(a.stage) == r for r, row in enumerate(s.orders()) for a in row)
    assert Schedule.from_text(s.to_text()) == s
    assert "is valid" in explain_schedule(s)


@pytest.mark.parametrize("text", GOLDEN, ids=lambda text: text.splitlines()[0])
def test_golden_texts(text):
    golden = Schedule.from_text(text)
    s = build_schedule(golden.name, golden.num_ranks, golden.num_microbatches, golden.chunks)
    assert s.to_text() == text and s == golden
    assert len(GOLDEN) == 4 and {g.splitlines()[0].split()[1] for g in GOLDEN} == set(SCHEDULES)


def test_golden_shapes_match_the_papers():
    p, m = 4, 8
    assert build_schedule("gpipe", p, m).num_slots == 2 * (m + p - 1)  # GPipe: (M+P-1)(F+B)
    one = build_schedule("1f1b", p, m)
    assert one.num_slots == 2 * (m + p - 1)  # 1F1B: same length, same bubble (E2)
    for r in range(p):  # warm-up: P-1-r forwards before the first backward
        kinds = [a.kind for a in one.orders()[r]]
        assert kinds.index("B") == p - r
    zb = build_schedule("zb-h1", p, m)
    assert zb.num_slots == 3 * m + p - 1  # every rank idles exactly P-1 slots (Qi et al. Fig. 3)
    assert all(row.count(None) == p - 1 for row in zb.actions)


def test_old_text_with_b_before_w_is_rejected_naming_the_fix():
    """This package once wrote ZB-H1's input-gradient pass as B; under torch's names B is the
    full backward, so B then W would compute the weight gradient twice."""
    new = build_schedule("zb-h1", 2, 2).to_text()
    old = new.replace("I", "B")
    assert "0B0" in old and "0W0" in old
    with pytest.raises(ValueError, match=r"text='0B0 with 0W0'.*write .* as I \(0I0\)"):
        Schedule.from_text(old)
    assert Schedule.from_text(new) == build_schedule("zb-h1", 2, 2)


def test_from_text_errors():
    with pytest.raises(ValueError, match="text="):
        Schedule.from_text("plan x")
    with pytest.raises(ValueError, match="text line 2="):
        Schedule.from_text("schedule x ranks=1 microbatches=1 chunks=1\nr1: 0F0 0B0")
    with pytest.raises(ValueError, match="action='0Q0'"):
        Schedule.from_text("schedule x ranks=1 microbatches=1 chunks=1\nr0: 0Q0 0B0")


def test_dependencies():
    assert dependencies(Action(0, "F", 3), 4) == []
    assert dependencies(Action(2, "F", 3), 4) == [Action(1, "F", 3)]
    assert dependencies(Action(3, "B", 1), 4) == [Action(3, "F", 1)]  # the loss: last stage
    assert dependencies(Action(1, "B", 1), 4) == [Action(1, "F", 1), Action(2, "B", 1)]
    assert dependencies(Action(1, "I", 1), 4) == [Action(1, "F", 1), Action(2, "I", 1)]
    assert dependencies(Action(1, "W", 1), 4) == [Action(1, "I", 1)]
    # a mixed schedule: stage 2 ran a full backward, stage 1 an I; present decides
    present = {Action(2, "B", 1), Action(1, "I", 1)}
    assert dependencies(Action(1, "I", 1), 4, present) == [Action(1, "F", 1), Action(2, "B", 1)]
    present = {Action(2, "I", 1), Action(1, "B", 1)}
    assert dependencies(Action(1, "B", 1), 4, present) == [Action(1, "F", 1), Action(2, "I", 1)]


# ----------------------------------------------------------------------------- broken schedules
def edit(s: Schedule, changes: dict[tuple[int, int], Action | None]) -> Schedule:
    rows = [list(row) for row in s.actions]
    for (r, t), a in changes.items():
        rows[r][t] = a
    return dataclasses.replace(s, actions=tuple(tuple(row) for row in rows))


def test_forward_in_the_same_slot_as_its_dependency_is_caught_and_marked():
    s = build_schedule("1f1b", 3, 4)
    bad = edit(s, {(1, 0): Action(1, "F", 0), (1, 1): None})  # 1F0 in the slot of 0F0
    problems = validate_schedule(bad)
    assert [(q.step, q.rank) for q in problems] == [(0, 1)]
    assert "1F0 at slot 0 needs 0F0 (rank 0) in an earlier slot" in problems[0].message
    grid = explain_schedule(bad)
    assert grid.splitlines()[2].split()[:2] == ["r1", "!!1F0"]
    assert "!! slot 0, rank 1: 1F0" in grid


def test_backward_before_the_next_stage_backward_is_caught():
    s = build_schedule("gpipe", 2, 2)  # r0: 0F0 0F1 . . 0B0 0B1 ; r1: . 1F0 1F1 1B0 1B1 .
    assert s.actions[0][4] == Action(0, "B", 0) and s.actions[1][3] == Action(1, "B", 0)
    bad = edit(s, {(0, 3): Action(0, "B", 0), (0, 4): None})  # in the slot of 1B0
    problems = validate_schedule(bad)
    assert len(problems) == 1 and problems[0].step == 3
    assert (
        problems[0].message
        == "0B0 at slot 3 needs 1B0 (rank 1) in an earlier slot; it is at slot 3"
    )
    assert "!!0B0" in explain_schedule(bad)


def test_wrong_rank_duplicate_missing_out_of_range_and_w_before_i():
    s = build_schedule("zb-h1", 2, 2)
    swapped = edit(s, {(0, 0): Action(1, "F", 0)})  # stage 1 on rank 0, 0F0 gone
    msgs = [q.message for q in validate_schedule(swapped)]
    assert any("is on rank 0, but stage 1 runs on rank 1" in m for m in msgs)
    assert any(m == "0F0 never runs" for m in msgs)
    t = s.actions[0].index(Action(0, "W", 0))
    b = s.actions[0].index(Action(0, "I", 0))
    moved = edit(s, {(0, t): Action(0, "I", 0), (0, b): Action(0, "W", 0)})
    assert any(
        "0W0 at slot" in q.message and "needs 0I0" in q.message for q in validate_schedule(moved)
    )
    full = edit(s, {(0, b): Action(0, "B", 0)})  # the old convention, built in code
    msgs = [q.message for q in validate_schedule(full)]
    assert msgs == [
        "0W0 follows the full backward 0B0, which computed the weight gradient already: write"
        " the input-gradient pass as 0I0 (torch's names)"
    ]
    both = edit(s, {(0, t): Action(0, "B", 0)})  # 0I0 and 0B0, no 0W0
    assert [q.message for q in validate_schedule(both)] == [
        "0B0 and 0I0 both run: a backward is one B, or one I then one W"
    ]
    dup = edit(s, {(1, 0): Action(1, "F", 1)})
    assert any("runs twice" in q.message for q in validate_schedule(dup))
    far = edit(s, {(1, 0): Action(3, "F", 0)})
    assert any("stage in [0, 1]" in q.message for q in validate_schedule(far))
    no_w = dataclasses.replace(
        s,
        actions=tuple(
            tuple(a if a is None or a != Action(1, "W", 1) else None for a in row)
            for row in s.actions
        ),
    )
    assert [q.message for q in validate_schedule(no_w)] == ["1W1 never runs"]
    wrong_rows = dataclasses.replace(s, num_ranks=3)
    assert "one row per rank" in validate_schedule(wrong_rows)[0].message


def test_explain_lists_at_most_max_problems():
    s = build_schedule("1f1b", 4, 8)
    empty = dataclasses.replace(s, actions=tuple((None,) * 3 for _ in range(4)))
    text = explain_schedule(empty, max_problems=5)
    assert text.count("never runs") == 5 and "... and 59 more problems" in text


# ----------------------------------------------------------------------------- timing and bubbles
def timed(name, p, m, v=1, t_f=1.0, t_b=1.0, t_w=0.0, t_comm=0.0) -> Timeline:
    return time_schedule(build_schedule(name, p, m, v), t_f, t_b, t_w, t_comm)


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p", range(2, 9))
def test_measured_bubble_equals_gpipe_formula_exactly(name, p):
    for m in (1, 2, p - 1, p, p + 1, 2 * p, 3 * p + 1, 32):
        if m < 1:
            continue
        tl = timed(name, p, m)
        measured = tl.bubble_fraction()
        assert measured == pytest.approx(gpipe_bubble(p, m), rel=1e-12)
        assert measured == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)
        # Megatron's convention: the same bubble relative to the ideal time (E3)
        assert measured / (1 - measured) == pytest.approx(megatron_bubble(p, m), rel=1e-12)
        assert tl.makespan == pytest.approx(2 * (m + p - 1), rel=1e-12)
        assert all(tl.busy(r) == pytest.approx(2 * m) for r in range(p))


@pytest.mark.parametrize(("t_f", "t_b", "t_w"), [(1.0, 2.0, 0.0), (0.3, 1.7, 0.4), (2.0, 1.0, 1.0)])
def test_gpipe_formula_holds_for_unequal_times_too(t_f, t_b, t_w):
    for name in ("gpipe", "1f1b"):
        for p, m in [(2, 1), (3, 7), (4, 8), (8, 5)]:
            tl = timed(name, p, m, 1, t_f, t_b, t_w)
            f = bubble_formula(name, p, m, 1, t_f, t_b, t_w)
            assert tl.bubble_fraction() == pytest.approx(f["share_of_total"], rel=1e-12)
            assert tl.idle(0) == pytest.approx(f["bubble_time"], rel=1e-12)


def test_one_f_one_b_does_not_shrink_the_bubble_errata_e2():
    for p, m in [(2, 4), (4, 8), (8, 16), (4, 3)]:
        g, o = timed("gpipe", p, m, t_b=2.0), timed("1f1b", p, m, t_b=2.0)
        assert o.bubble_fraction() == pytest.approx(g.bubble_fraction(), rel=1e-12)
        assert o.makespan == pytest.approx(g.makespan, rel=1e-12)
        peaks_o, peaks_g = o.peak_activations_per_stage(), g.peak_activations_per_stage()
        assert all(a <= b for a, b in zip(peaks_o, peaks_g, strict=True))  # what 1F1B does fix
        assert sum(peaks_o) < sum(peaks_g)


@pytest.mark.parametrize("p", [2, 3, 4, 6])
@pytest.mark.parametrize("v", [2, 3, 4])
def test_interleaved_bubble_formula(p, v):
    """With t_comm = 0 Megatron's interleaved order reproduces (1/v)(P-1)/M exactly (tolerance
    rel 1e-12, float rounding only). With point-to-point time t_comm > 0 it is only close: the
    run is longer by exactly 2(Pv-1) t_comm, one send per hop forward through all Pv stages and
    back, so the relative error is 2(Pv-1) t_comm / bubble time (here 1e-3 per hop)."""
    for k in (1, 2, 3):
        m = k * p
        for t_f, t_b in [(1.0, 1.0), (1.0, 2.0)]:
            tl = timed("interleaved", p, m, v, t_f, t_b)
            ideal = v * m * (t_f + t_b)
            measured_rel = (tl.makespan - ideal) / ideal
            assert measured_rel == pytest.approx(interleaved_bubble(p, m, v), rel=1e-12)
            f = bubble_formula("interleaved", p, m, v, t_f, t_b)
            assert tl.bubble_fraction() == pytest.approx(f["share_of_total"], rel=1e-12)
            slow = timed("interleaved", p, m, v, t_f, t_b, t_comm=1e-3)
            extra = slow.makespan - tl.makespan
            assert extra == pytest.approx(2 * (p * v - 1) * 1e-3, rel=1e-9)
            assert slow.bubble_fraction() == pytest.approx(f["share_of_total"], rel=0.05)
        assert interleaved_bubble(p, m, v) < megatron_bubble(p, m)  # interleaving helps


def test_zb_h1_bubble_smaller_than_1f1b_and_equal_without_w():
    for p, m in [(2, 4), (4, 8), (8, 16), (4, 4)]:
        for t_w in (0.5, 1.0, 2.0):
            z, o = timed("zb-h1", p, m, t_w=t_w), timed("1f1b", p, m, t_w=t_w)
            assert o.busy(0) == pytest.approx(z.busy(0))  # same work, B+W = full backward
            assert z.bubble_fraction() < o.bubble_fraction()
        z0, o0 = timed("zb-h1", p, m, t_w=0.0), timed("1f1b", p, m, t_w=0.0)
        assert z0.bubble_fraction() == pytest.approx(o0.bubble_fraction(), rel=1e-12)
    # t_f = t_b = t_w: one third of 1F1B's bubble time (Qi et al. §2.1)
    z, o = timed("zb-h1", 4, 8, t_w=1.0), timed("1f1b", 4, 8, t_w=1.0)
    assert z.idle(0) * 3 == pytest.approx(o.idle(0))


def test_zb_h1_formula_exact_exactly_when_documented():
    exact = bubble_formula("zb-h1", 4, 8, 1, 1, 1, 1)["exact_when"]
    assert exact == "t_comm = 0, M >= P, t_w <= min(t_f, t_b)"
    for p in range(2, 7):
        for m in (p, p + 1, 2 * p + 1):
            for t_f, t_b, t_w in [(1, 1, 1), (1, 2, 0.5), (2, 1, 1), (1, 3, 1), (1, 1, 0)]:
                tl = timed("zb-h1", p, m, 1, t_f, t_b, t_w)
                f = bubble_formula("zb-h1", p, m, 1, t_f, t_b, t_w)
                assert tl.idle(0) == pytest.approx(f["bubble_time"], rel=1e-12)
                assert tl.bubble_fraction() == pytest.approx(f["share_of_total"], rel=1e-12)
            for t_f, t_b, t_w in [(1, 1, 1.5), (2, 1, 1.5), (1, 0.5, 0.7)]:  # W longer than F or B
                tl = timed("zb-h1", p, m, 1, t_f, t_b, t_w)
                f = bubble_formula("zb-h1", p, m, 1, t_f, t_b, t_w)
                assert tl.bubble_fraction() > f["share_of_total"] + 1e-9
        tl = timed("zb-h1", p, p - 1, 1, 1, 1, 1)  # M < P: the formula does not apply
        assert (
            tl.bubble_fraction() > bubble_formula("zb-h1", p, p - 1, 1, 1, 1, 1)["share_of_total"]
        )


def test_formulas_and_conventions():
    assert gpipe_bubble(4, 8) == pytest.approx(3 / 11)
    assert megatron_bubble(4, 8) == pytest.approx(3 / 8)
    assert interleaved_bubble(4, 8, 2) == pytest.approx(3 / 16)
    for name in SCHEDULES:
        f = bubble_formula(name, 4, 8, 2 if name == "interleaved" else 1, 1.0, 2.0, 0.5)
        s, r = f["share_of_total"], f["relative_to_ideal"]
        assert r == pytest.approx(s / (1 - s)) and f["source"] and f["formula"] and f["exact_when"]
    assert gpipe_bubble(1, 5) == 0.0 and timed("1f1b", 1, 5).bubble_fraction() == 0.0


# ----------------------------------------------------------------------------- activations
@pytest.mark.parametrize("p", range(1, 9))
def test_peak_activations(p):
    for m in (1, p - 1, p, 2 * p + 1):
        if m < 1:
            continue
        assert timed("gpipe", p, m).peak_activations_per_stage() == [m] * p
        assert timed("1f1b", p, m).peak_activations_per_stage() == [min(p - i, m) for i in range(p)]
        zb = timed("zb-h1", p, m, t_w=1.0).peak_activations_per_stage()
        assert max(zb) == min(p, m)  # the first rank's 1F1B peak, on every rank (Qi et al. §2.1)


def test_live_activations_step_function_by_hand():
    tl = timed("1f1b", 2, 2)  # r0: 0F0 0F1 . 0B0 . 0B1 ; r1: . 1F0 1B0 1F1 1B1
    live = tl.live_activations()
    assert live[0] == [(0.0, 1), (1.0, 2), (4.0, 1), (6.0, 0)]
    assert live[1] == [(0.0, 0), (1.0, 1), (3.0, 1), (5.0, 0)]  # 1B0 ends as 1F1 starts: stays 1
    zb = timed("zb-h1", 2, 2, t_w=1.0)
    assert zb.live_activations()[1][-1][1] == 0 and zb.peak_activations_per_stage() == [2, 2]


# ----------------------------------------------------------------------------- traces and orders
def test_to_trace_and_retime_from_recovered_orders():
    tl = timed("zb-h1", 3, 5, t_f=1.0, t_b=1.5, t_w=0.5, t_comm=0.1)
    trace = tl.to_trace({"source": "test"}, activation_bytes=64)
    assert isinstance(trace, Trace) and trace.world_size == 3 and trace.meta["source"] == "test"
    compute = trace.select("compute")
    memory = trace.select("memory")
    assert len(compute) == 3 * 5 * 3 and len(memory) == 2 * 3 * 5
    assert sum(e.nbytes for e in memory) == 0
    assert all(e.attrs["category"] == "activation" for e in memory)
    e = compute[0]
    assert (e.op, e.chunk, e.attrs) == ("F", 0, {"microbatch": 0, "stage": 0})
    assert Trace.from_json(trace.to_json()).events == trace.events
    orders = []
    for r in range(3):
        events = sorted(trace.select("compute", rank=r), key=lambda x: x.start)
        orders.append([Action(x.attrs["stage"], x.op, x.attrs["microbatch"]) for x in events])
    again = time_schedule(orders, 1.0, 1.5, 0.5, 0.1)
    assert again.makespan == pytest.approx(tl.makespan)
    assert sorted(again.spans) == sorted(tl.spans)
    for r in range(3):  # a rank never runs two actions at once
        spans = sorted((s.start, s.end) for s in tl.spans if s.rank == r)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(spans, spans[1:], strict=False))


def test_bad_orders_raise():
    good = build_schedule("1f1b", 2, 2).orders()
    with pytest.raises(ValueError, match="orders="):
        time_schedule([], 1, 1)
    with pytest.raises(ValueError, match=r"orders=.*missing 1B1"):
        time_schedule([good[0], good[1][:-1]], 1, 1)
    with pytest.raises(ValueError, match=r"orders\[0\]='1F0'"):
        time_schedule([good[0] + [Action(1, "F", 0)], good[1]], 1, 1)
    with pytest.raises(ValueError, match="twice"):
        time_schedule([good[0] + [good[0][0]], good[1]], 1, 1)
    deadlock = [list(reversed(good[0])), good[1]]
    with pytest.raises(ValueError, match="do not deadlock"):
        time_schedule(deadlock, 1, 1)
    with pytest.raises(ValueError, match=r"orders\[1\]"):
        time_schedule([good[0], ["1F0"]], 1, 1)


# ----------------------------------------------------------------------------- argument errors
@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (("pipedream", 4, 8), r"name='pipedream' is not valid: expected one of 'gpipe'"),
        (("1f1b", 0, 8), r"num_ranks=0 is not valid: expected an integer >= 1"),
        (("1f1b", 4, 0), r"num_microbatches=0 is not valid: expected an integer >= 1"),
        (("gpipe", 4, 2.5), r"num_microbatches=2.5 is not valid"),
        (
            ("interleaved", 4, 2, 2),
            r"num_microbatches=2 is not valid: expected a multiple of num_ranks=4",
        ),
        (
            ("interleaved", 4, 6, 2),
            r"num_microbatches=6 is not valid: expected a multiple of num_ranks=4 .*v=2",
        ),
        (("interleaved", 4, 8, 0), r"chunks=0 is not valid: expected an integer >= 1"),
        (("1f1b", 4, 8, 2), r"chunks=2 is not valid: expected 1 for schedule '1f1b'"),
    ],
)
def test_build_errors(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        build_schedule(*args)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"t_f": 0}, r"t_f=0 is not valid: expected a finite number > 0"),
        ({"t_b": -1}, r"t_b=-1 is not valid"),
        ({"t_f": math.nan}, r"t_f=nan is not valid"),
        ({"t_w": -0.5}, r"t_w=-0.5 is not valid: expected a finite number >= 0"),
        ({"t_comm": -1e-3}, r"t_comm=-0.001 is not valid: expected a finite number >= 0"),
        ({"t_comm": math.inf}, r"t_comm=inf is not valid"),
        ({"t_w": "x"}, r"t_w='x' is not valid"),
    ],
)
def test_time_errors(kwargs, pattern):
    args = {"t_f": 1.0, "t_b": 1.0} | kwargs
    with pytest.raises(ValueError, match=pattern):
        time_schedule(build_schedule("1f1b", 2, 2), **args)


def test_formula_errors():
    with pytest.raises(ValueError, match="num_ranks=0"):
        gpipe_bubble(0, 4)
    with pytest.raises(ValueError, match="num_microbatches=0"):
        megatron_bubble(2, 0)
    with pytest.raises(ValueError, match="chunks=0"):
        interleaved_bubble(2, 4, 0)
    with pytest.raises(ValueError, match="name='x'"):
        bubble_formula("x", 2, 4)
    with pytest.raises(ValueError, match="t_b=0"):
        bubble_formula("gpipe", 2, 4, t_b=0)
    with pytest.raises(ValueError, match="rank=5 is not valid: expected an integer in"):
        timed("1f1b", 2, 2).busy(5)
    with pytest.raises(ValueError, match="activation_bytes=-1"):
        timed("1f1b", 2, 2).to_trace(activation_bytes=-1)
