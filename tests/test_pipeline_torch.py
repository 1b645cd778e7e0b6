"""Our pipeline schedules against torch.distributed.pipelining (torch 2.13): interleaved 1F1B's
order equals ``ScheduleInterleaved1F1B``'s, GPipe's and 1F1B's equal ``ScheduleGPipe``'s and
``Schedule1F1B``'s, every schedule exports to torch's pipeline order and CSV, and torch's own
validator, send/recv lowering and simulator accept GPipe, 1F1B, interleaved and ZB-H1."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from torch.distributed.pipelining.schedules import (
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    _Action,
    _ComputationType,
    _PipelineScheduleRuntime,
    _validate_schedule,
)

from edu_parallel.pipeline_parallel import (
    Action,
    Schedule,
    build_schedule,
    from_torch_csv,
    from_torch_order,
    interleaved_warmup,
    mock_stages,
    time_schedule,
    to_torch_csv,
    to_torch_order,
    torch_check,
    torch_format,
    validate_schedule,
)
from edu_parallel.pipeline_parallel import torch_interleaved as torch_interleaved_schedule

INTERLEAVED = [(p, k * p, v) for p in (2, 3, 4) for v in (2, 3) for k in (1, 2, 3)]


def torch_interleaved(p: int, m: int, v: int) -> dict[int, list]:
    """torch's order, computed in ``__init__`` from stand-in stages (no process group)."""
    return ScheduleInterleaved1F1B(mock_stages(p, p * v), m).pipeline_order


def compute_only(order: dict[int, list]) -> list[list[str]]:
    """Each rank's compute actions in order: idle steps and REDUCE_GRAD dropped."""
    return [[str(a) for a in order[r] if a is not None and a.is_compute_op] for r in sorted(order)]


@pytest.mark.parametrize(("p", "m", "v"), INTERLEAVED)
def test_interleaved_order_equals_torch(p, m, v):
    ours = build_schedule("interleaved", p, m, v)
    want = compute_only(torch_interleaved(p, m, v))
    assert [[a.text() for a in row] for row in ours.orders()] == want
    for r in range(p):  # the warm-up rule: then 1F1B starts with one more forward
        warm = interleaved_warmup(p, m, v, r)
        assert warm == min(2 * (p - 1 - r) + (v - 1) * p, m * v)
        assert [a.kind for a in ours.orders()[r]].index("B") == min(warm + 1, m * v)


@pytest.mark.parametrize(("p", "v"), [(2, 2), (3, 2), (4, 2), (4, 3)])
def test_old_megatron_rule_differs_from_torch_only_when_m_equals_p(p, v):
    old = build_schedule("interleaved", p, p, v, rule="megatron-2021")
    assert all([a.kind for a in row][: p * v] == ["F"] * (p * v) for row in old.orders())
    assert compute_only(to_torch_order(old)) != compute_only(torch_interleaved(p, p, v))
    assert validate_schedule(old) == [] and torch_check(old)["simulated_steps"] > 0
    for m in (2 * p, 3 * p):  # M > P: the two rules agree
        assert build_schedule("interleaved", p, m, v, rule="megatron-2021") == build_schedule(
            "interleaved", p, m, v
        )


def test_interleaved_peaks_current_and_old_rule():
    """P = M = 4, v = 2: per-rank peaks in microbatch-chunks [8, 8, 7, 5] (torch 2.13, current
    Megatron); the pre-2024-11 rule ran all 8 forwards first on every rank. Same bubble."""
    new = time_schedule(build_schedule("interleaved", 4, 4, 2), 1.0, 2.0)
    old = time_schedule(build_schedule("interleaved", 4, 4, 2, rule="megatron-2021"), 1.0, 2.0)
    assert new.peak_activations_per_rank() == [8, 8, 7, 5]
    assert old.peak_activations_per_rank() == [8, 8, 8, 8]
    assert new.makespan == pytest.approx(old.makespan)
    torch_sched = torch_interleaved_schedule(4, 4, 2)
    assert torch_sched.orders() == build_schedule("interleaved", 4, 4, 2).orders()
    torch_peaks = time_schedule(torch_sched, 1.0, 2.0).peak_activations_per_rank()
    assert torch_peaks == [8, 8, 7, 5]
    with pytest.raises(ValueError, match="rule='x' is not valid"):
        build_schedule("interleaved", 4, 4, 2, rule="x")


@pytest.mark.parametrize(("name", "cls"), [("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)])
@pytest.mark.parametrize(("p", "m"), [(2, 2), (2, 5), (4, 4), (4, 8), (3, 7)])
def test_single_stage_orders_equal_torch(name, cls, p, m):
    """torch 2.13's ``Schedule1F1B._get_pipeline_order`` (the IR it prints, not what its
    runtime executes) numbers the last rank's forwards 1..M: with no warm-up, ``forward_mb`` is
    incremented before the first steady forward. Every other rank, and GPipe, are equal."""
    want = {}
    for r in range(p):
        stage = SimpleNamespace(num_stages=p, group_size=p, group_rank=r, stage_index=r)
        want[r] = cls(stage, m).pipeline_order[r]
    ours = [[a.text() for a in row] for row in build_schedule(name, p, m).orders()]
    theirs = compute_only(want)
    if name == "1f1b":
        last = [Action.from_text(t) for t in theirs[-1]]
        shifted = [Action(a.stage, a.kind, a.microbatch - (a.kind == "F")) for a in last]
        assert [a.text() for a in shifted] == ours[-1]
        ours, theirs = ours[:-1], theirs[:-1]
    assert ours == theirs


CHECKED = [
    ("gpipe", 4, 8, 1),
    ("1f1b", 4, 8, 1),
    ("interleaved", 4, 8, 2),
    ("zb-h1", 4, 8, 1),
    ("gpipe", 2, 1, 1),
    ("1f1b", 3, 2, 1),
    ("interleaved", 2, 2, 3),
    ("interleaved", 4, 4, 2),
    ("zb-h1", 3, 2, 1),
    ("zb-h1", 2, 5, 1),
]


@pytest.mark.parametrize(("name", "p", "m", "v"), CHECKED)
def test_torch_validator_accepts_our_schedules(name, p, m, v):
    s = build_schedule(name, p, m, v)
    got = torch_check(s)
    assert got["stage_to_rank"] == {st: st % p for st in range(p * v)}
    assert got["comm_actions"] == 2 * 2 * (p * v - 1) * m  # a send and a recv per message
    assert got["simulated_steps"] >= len(s.orders()[0])
    order = to_torch_order(s)
    assert sorted(order) == list(range(p)) and all(
        len(row) == s.num_slots for row in order.values()
    )
    kinds = {a.computation_type for row in order.values() for a in row if a is not None}
    split = {_ComputationType.BACKWARD_INPUT, _ComputationType.BACKWARD_WEIGHT}
    assert kinds == {_ComputationType.FORWARD} | (
        split if name == "zb-h1" else {_ComputationType.FULL_BACKWARD}
    )
    assert from_torch_order(order, name) == s
    text = to_torch_csv(s)
    assert from_torch_csv(text, name) == s
    assert text.splitlines()[0].split(",")[0] == "0F0"
    if name == "zb-h1":
        assert "0I0" in text and "0W0" in text and "0B0" not in text
    assert "Rank 0" in torch_format(s)


def test_our_csv_is_what_torch_dump_csv_writes(tmp_path):
    sched = ScheduleInterleaved1F1B(mock_stages(4, 8), 8)
    path = tmp_path / "order.csv"
    sched._dump_csv(str(path), format="compute_only")
    ours = build_schedule("interleaved", 4, 8, 2)
    from_torch = from_torch_csv(path.read_text(), "interleaved")
    assert from_torch.orders() == ours.orders()  # torch pads idle steps its own way
    assert validate_schedule(from_torch) == []
    assert from_torch_csv(to_torch_csv(from_torch), "interleaved") == from_torch


@pytest.mark.parametrize(("name", "p", "m", "v"), CHECKED[:4])
def test_torch_load_csv_reads_our_text(tmp_path, name, p, m, v):
    """``_PipelineScheduleRuntime._load_csv``: parse, validate, add UNSHARD/RESHARD, REDUCE_GRAD
    and the sends/receives; the order it keeps is ours."""
    s = build_schedule(name, p, m, v)
    path = tmp_path / f"{name}.csv"
    path.write_text(to_torch_csv(s))
    runtime = _PipelineScheduleRuntime(mock_stages(p, p * v), m)
    runtime._load_csv(str(path))
    assert from_torch_order(runtime.pipeline_order, name) == s
    lowered = [str(a) for a in runtime.pipeline_order_with_comms[0]]
    assert "0SEND_F0" in lowered and lowered.count("0REDUCE_GRAD") == 1


def test_torch_rejects_the_old_b_then_w_and_a_deadlock():
    s = build_schedule("zb-h1", 2, 2)
    old = Schedule(
        s.name,
        s.num_ranks,
        s.num_microbatches,
        s.chunks,
        tuple(
            tuple(
                a if a is None or a.kind != "I" else Action(a.stage, "B", a.microbatch) for a in r
            )
            for r in s.actions
        ),
    )
    with pytest.raises(AssertionError, match="Backward Weight .* without first running Backward"):
        _validate_schedule(to_torch_order(old), 2, 2, 2)
    with pytest.raises(AssertionError):
        torch_check(old)
    one = build_schedule("1f1b", 2, 2)
    rows = [list(reversed(one.orders()[0])), one.orders()[1]]
    stuck = Schedule("stuck", 2, 2, 1, tuple(map(tuple, rows)))
    with pytest.raises((AssertionError, ValueError)):
        torch_check(stuck)


def test_from_torch_order_errors():
    f = _ComputationType.FORWARD
    v_shape = {0: [_Action(0, f, 0), _Action(3, f, 0)], 1: [_Action(1, f, 0), _Action(2, f, 0)]}
    with pytest.raises(ValueError, match=r"order='3F0 on rank 0' is not valid"):
        from_torch_order(v_shape)
    with pytest.raises(ValueError, match="order=.*keys 0..P-1"):
        from_torch_order({1: []})
    unshard = {0: [_Action(0, _ComputationType.UNSHARD, None)]}
    with pytest.raises(ValueError, match=r"order\[0\]='0UNSHARD'"):
        from_torch_order(unshard)
