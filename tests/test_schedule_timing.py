"""Pipeline schedules timed: the measured bubble against the formulas (GPipe, 1F1B,
interleaved, ZB-H1), activations, traces and orders, and the timing's argument errors."""

from __future__ import annotations

import math

import pytest
from helpers import timed

from edu_parallel.core.trace import Trace
from edu_parallel.pipeline_parallel.builders import SCHEDULES, build_schedule
from edu_parallel.pipeline_parallel.schedule import Action
from edu_parallel.pipeline_parallel.timing import (
    bubble_formula,
    gpipe_bubble,
    interleaved_bubble,
    megatron_bubble,
    time_schedule,
)

# ----------------------------------------------------------------------------- timing and bubbles


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
