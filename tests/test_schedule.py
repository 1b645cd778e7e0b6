"""Pipeline schedules: builders, validator, text form, broken schedules, the builders' argument
errors. Timing, bubble formulas and activations are in ``test_schedule_timing.py``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from edu_parallel.pipeline_parallel.builders import SCHEDULES, build_schedule
from edu_parallel.pipeline_parallel.schedule import (
    KINDS,
    Action,
    Schedule,
    dependencies,
    explain_schedule,
    validate_schedule,
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
