"""Data-parallel renderers (lesson 06): streams, bucket fill animation, bucket-size sweep.

Traces are built by hand in the event format of :mod:`edu_parallel.data_parallel.ddp` (two
Linear layers, two buckets, two ranks), so every expected time below is written out, not
recomputed by the code under test. Times are in ms after the step's ``step_start`` mark.

Overlap run, per step: forward 1-5, backward layer 1 5-9 (grads of ``1.bias`` at 7 and
``1.weight`` at 8, bucket b0 issued at 8.5, reduced 9-20), layer 0 9-13 (``0.bias`` 11,
``0.weight`` 12, b1 issued at 12.5, reduced 20-30), optimizer 30-32. The bucketed run issues both
buckets at 13.5, after backward (b0 14-24, b1 24-34). Rank 1 runs everything 0.2 ms later.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from edu_parallel.core.trace import Event, Trace
from edu_parallel.data_parallel.overlap import gpu_retime
from edu_parallel.viz import bucket_fill_animation, cap_label, streams_figure, sweep_figure
from edu_parallel.viz.ddp import ISSUED_ABOVE

PLAN = (
    "buckets first=1048576 cap=26214400\n"
    "b0 float32 cpu 1056: 1.bias 1.weight\n"
    "b1 float32 cpu 2112: 0.bias 0.weight"
)
MS = 1e-3
STEP_S = 0.1  # step s starts at s * 100 ms
GRADS = {"1.bias": (7.0, 0, 1), "1.weight": (8.0, 0, 1), "0.bias": (11.0, 1, 0)}
GRADS["0.weight"] = (12.0, 1, 0)
# sync -> per bucket (issued, start, end, after_layer, waited, released), ms; optimizer, end
RUNS = {
    "overlap": (
        [(8.5, 9.0, 20.0, 1, 13.0, 20.0), (12.5, 20.0, 30.0, 0, 20.0, 30.0)],
        (30.0, 32.0),
    ),
    "bucketed": (
        [(13.5, 14.0, 24.0, None, 13.6, 24.0), (13.5, 24.0, 34.0, None, 24.0, 34.0)],
        (34.0, 36.0),
    ),
}


def _mark(r: int, op: str, t: float, **attrs: object) -> Event:
    return Event(kind="mark", rank=r, op=op, start=t, end=t, attrs=attrs)


def _compute(r: int, s: int, op: str, a: float, b: float, **attrs: object) -> Event:
    return Event(
        kind="compute", rank=r, op=op, step=s, phase=op, start=a, end=b, attrs=attrs or None
    )


def ddp_trace(sync: str = "overlap", world: int = 2, steps: int = 2) -> Trace:
    buckets, (opt0, opt1) = RUNS[sync]
    events: list[Event] = []
    for s in range(steps):
        for r in range(world):
            t0 = s * STEP_S + r * 0.2 * MS
            at = [t0 + ms * MS for ms in range(40)]  # at[ms] for whole ms

            def t(ms: float, t0: float = t0) -> float:
                return t0 + ms * MS

            events += [
                _mark(r, "step_start", at[0], step=s),
                _compute(r, s, "forward", at[1], at[5], microbatch=0, flops=4_000_000, rows=8),
                _compute(r, s, "backward", at[5], at[9], layer=1, microbatch=0, flops=2_000_000),
                _compute(r, s, "backward", at[9], at[13], layer=0, microbatch=0, flops=1_000_000),
            ]
            for param, (ms, bucket, layer) in GRADS.items():
                events.append(
                    _mark(r, "grad_ready", t(ms), param=param, bucket=bucket, step=s, layer=layer)
                )
            for b, (issued, start, end, after, waited, released) in enumerate(buckets):
                events.append(_mark(r, "bucket_ready", t(issued), bucket=b, step=s, layer=after))
                attrs = dict(
                    bucket=b,
                    issued=t(issued),
                    waited=t(waited),
                    released=t(released),
                    after_layer=after,
                )
                events.append(
                    Event(
                        kind="collective",
                        rank=r,
                        op="all_reduce",
                        step=s,
                        phase="grad_sync",
                        nbytes=1056 * (b + 1),
                        start=t(start),
                        end=t(end),
                        attrs=attrs,
                    )
                )
            events.append(_compute(r, s, "optimizer", t(opt0), t(opt1)))
            events.append(_mark(r, "step_end", t(opt1), step=s))
    meta = dict(world_size=world, concept="ddp", sync=sync, buckets=PLAN, steps=steps)
    return Trace(meta, events)


def by_name(fig, name: str):
    found = [t for t in fig.data if t.name == name]
    assert len(found) == 1, [t.name for t in fig.data]
    return found[0]


def fonts_ok(fig) -> None:
    assert fig.layout.width is not None and fig.layout.width <= 960
    assert fig.layout.font.size >= 11
    assert fig.layout.title.font.size >= 11
    assert fig.layout.margin.t >= 60  # the title sits below plotly's modebar
    for a in fig.layout.annotations:
        assert a.font.size is None or a.font.size >= 11, a.text


# ------------------------------------------------------------------ streams
def test_streams_rows_bars_and_issue_markers() -> None:
    fig = streams_figure(ddp_trace("overlap"))
    assert list(fig.layout.yaxis.categoryarray) == [
        "r0 compute",
        "r0 comm",
        "r1 compute",
        "r1 comm",
    ]
    assert fig.layout.meta["step"] == 1 and fig.layout.meta["unit"] == "ms"
    for b, (start, end) in enumerate([(9.0, 20.0), (20.0, 30.0)]):
        bars = by_name(fig, f"b{b} all-reduce")
        assert list(bars.y) == ["r0 comm", "r1 comm"]  # one bar per bucket per rank
        assert list(bars.base) == pytest.approx([start, start + 0.2])
        assert list(bars.x) == pytest.approx([end - start] * 2)
        assert list(bars.text) == [f"b{b}"] * 2
    issued = by_name(fig, "bucket issued")
    assert list(issued.x) == pytest.approx([8.5, 12.5, 8.7, 12.7])
    # on the top edge of the comm row (rows 1 and 3 of the reversed axis), clear of the bar's label
    rows = list(fig.layout.yaxis.categoryarray)
    assert issued.yaxis == "y2" and tuple(fig.layout.yaxis2.range) == tuple(fig.layout.yaxis.range)
    assert list(issued.y) == pytest.approx(
        [rows.index(r) - ISSUED_ABOVE for r in ["r0 comm", "r0 comm", "r1 comm", "r1 comm"]]
    )
    assert 0.4 < ISSUED_ABOVE < 0.5  # above the bar (0.8 of a row), below the compute row's bar
    waits = by_name(fig, "compute waits on a bucket")
    assert list(waits.x)[:2] == pytest.approx([13.0, 20.0])
    back = by_name(fig, "backward")
    assert list(back.text) == ["L1", "L0", "L1", "L0"]
    assert "layer 1" in back.hovertext[0] and "2.00 MFLOP" in back.hovertext[0]
    shade = [s for s in fig.layout.shapes if s.type == "rect"]
    assert [v for s in shade for v in (s.x0, s.x1)] == pytest.approx([5.0, 13.0, 5.2, 13.2])
    assert "wall-clock" in fig.layout.xaxis.title.text
    fonts_ok(fig)


def test_bars_that_run_at_once_keep_one_label() -> None:
    """Measured all-reduces of a rank can overlap in time (an async one waits later): the later
    bar's label would be drawn on the earlier's, so it has none (its hover still names it)."""
    trace = ddp_trace()
    late = [e for e in trace.events if e.kind == "collective" and e.attrs["bucket"] == 1]
    early = {
        (e.rank, e.step): e
        for e in trace.events
        if e.kind == "collective" and e.attrs["bucket"] == 0
    }
    shifted = [  # half a millisecond after b0, on the same row: the two centres 10 px apart
        dataclasses.replace(e, start=early[k].start + 0.5 * MS, end=early[k].end + 0.5 * MS)
        for e in late
        if (k := (e.rank, e.step))
    ]
    trace = Trace(trace.meta, [e for e in trace.events if e not in late] + shifted)
    fig = streams_figure(trace, step=0)
    assert list(by_name(fig, "b0 all-reduce").text) == ["b0", "b0"]
    assert list(by_name(fig, "b1 all-reduce").text) == ["", ""]
    assert list(by_name(streams_figure(ddp_trace(), step=0), "b1 all-reduce").text) == ["b1"] * 2


def test_streams_hidden_fraction_differs_between_overlap_and_bucketed() -> None:
    over, buck = streams_figure(ddp_trace("overlap")), streams_figure(ddp_trace("bucketed"))
    assert over.layout.meta["hidden"] == pytest.approx(4 / 21)  # b0 9-20 under backward 5-13
    assert (
        "19%" in over.layout.title.subtitle.text and "measured" in over.layout.title.subtitle.text
    )
    assert buck.layout.meta["hidden"] == 0.0
    assert list(by_name(buck, "bucket issued").x)[:2] == pytest.approx([13.5, 13.5])


def test_streams_default_ranks_step_and_errors() -> None:
    four = streams_figure(ddp_trace(world=4), step=0)
    assert list(four.layout.yaxis.categoryarray) == [
        "r0 compute",
        "r0 comm",
        "r3 compute",
        "r3 comm",
    ]
    assert four.layout.meta["step"] == 0
    one = streams_figure(ddp_trace(world=4), ranks=[2])
    assert list(by_name(one, "b0 all-reduce").y) == ["r2 comm"]
    with pytest.raises(ValueError, match="ranks"):
        streams_figure(ddp_trace(), ranks=[5])
    with pytest.raises(ValueError, match="step"):
        streams_figure(ddp_trace(), step=7)


def test_streams_on_a_gpu_retimed_trace_reads_as_modelled() -> None:
    modelled = gpu_retime(ddp_trace("overlap"), flops_per_s=1e12)
    fig = streams_figure(modelled.trace)
    assert (
        "modelled" in fig.layout.xaxis.title.text and "measured" not in fig.layout.xaxis.title.text
    )
    assert list(fig.layout.yaxis.categoryarray) == ["r0 compute", "r0 comm"]
    assert list(by_name(fig, "b1 all-reduce").y) == ["r0 comm"]
    assert fig.layout.meta["hidden"] == pytest.approx(modelled.overlap_fraction)
    assert "modelled" in fig.layout.title.subtitle.text
    assert not [t for t in fig.data if t.name == "compute waits on a bucket"]
    fonts_ok(fig)


# ------------------------------------------------------------------ bucket fill animation
def states_at(fig, k: int) -> dict[str, str]:
    return {p: s for p, _, s in fig.frames[k].data[0].customdata}


def test_fill_frames_in_time_order_with_labels() -> None:
    fig = bucket_fill_animation(ddp_trace("overlap"))
    times = fig.layout.meta["times"]
    assert times == pytest.approx([5.0, 7.0, 8.0, 8.5, 11.0, 12.0, 12.5, 20.0, 30.0])
    names = [f.name for f in fig.frames]
    assert names[0] == "t=5.0 ms: backward starts"
    assert names[3] == "t=8.5 ms: b0 issued" and names[-1] == "t=30.0 ms: b1 reduced"
    assert [s["args"][0][0] for s in fig.layout.sliders[0]["steps"]] == names
    assert list(fig.data[0].x) == ["1.bias", "1.weight", "0.bias", "0.weight"]  # the plan's order
    fonts_ok(fig)


@pytest.mark.parametrize("sync", ["overlap", "bucketed"])
def test_a_parameter_fills_exactly_from_its_grad_ready_time(sync: str) -> None:
    fig = bucket_fill_animation(ddp_trace(sync))
    times = fig.layout.meta["times"]
    for param, (ms, _, _) in GRADS.items():
        filled = [states_at(fig, k)[param] != "empty" for k in range(len(times))]
        assert filled == [t >= ms - 1e-9 for t in times], param
        assert any(filled) and not all(filled)


@pytest.mark.parametrize("sync", ["overlap", "bucketed"])
def test_a_bucket_is_reduced_only_after_its_all_reduce_ends(sync: str) -> None:
    fig = bucket_fill_animation(ddp_trace(sync))
    times = fig.layout.meta["times"]
    for b, params in enumerate([("1.bias", "1.weight"), ("0.bias", "0.weight")]):
        end = RUNS[sync][0][b][2]
        for k, t in enumerate(times):
            st = states_at(fig, k)
            assert all((st[p] == "reduced") == (t >= end - 1e-9) for p in params), (sync, b, t)


def test_overlap_issues_during_backward_bucketed_after() -> None:
    over, buck = (
        bucket_fill_animation(ddp_trace("overlap")),
        bucket_fill_animation(ddp_trace("bucketed")),
    )
    # overlap: b0 is on the wire while backward has not produced 0.weight yet
    st = states_at(over, 3)
    assert st["1.bias"] == "issued" and st["0.weight"] == "empty"
    assert "backward running (layer 1)" in over.frames[3].layout.annotations[0].text
    # bucketed: no bucket is issued before every gradient is in (backward ends at 13)
    for k, t in enumerate(buck.layout.meta["times"]):
        st = states_at(buck, k)
        if "issued" in st.values():
            assert "empty" not in st.values() and t >= 13.0
    assert any("issued" in states_at(buck, k).values() for k in range(len(buck.frames)))
    last_issue = [f.name for f in buck.frames if "issued" in f.name]
    assert last_issue == ["t=13.5 ms: b0 issued", "t=13.5 ms: b1 issued"]


def test_fill_animation_needs_grad_ready_marks() -> None:
    with pytest.raises(ValueError, match="grad_ready"):
        bucket_fill_animation(gpu_retime(ddp_trace()).trace)


# ------------------------------------------------------------------ sweep
def sweep_table() -> pd.DataFrame:
    rows = [
        (1e-6, 16, 120.0, 900.0),
        (1.0, 8, 90.0, 600.0),
        (2.0, 4, 80.0, 500.0),
        ("default", 2, 85.0, 560.0),
        (25.0, 1, 95.0, 700.0),
    ]
    return pd.DataFrame(
        [
            {
                "bucket_cap_mb": cap,
                "buckets": n,
                "messages": 6 * n,
                "sent MiB": 12.0,
                "step ms (measured)": ms,
                "hidden (measured)": 0.2,
                "step us (modelled)": us,
                "hidden (modelled)": 0.4,
            }
            for cap, n, ms, us in rows
        ]
    )


def test_sweep_marks_the_default() -> None:
    fig = sweep_figure(sweep_table())
    stars = [t for t in fig.data if t.name.startswith("DDP default")]
    assert [list(t.x) for t in stars] == [["DDP default"], ["DDP default"]]
    assert [list(t.y) for t in stars] == [[85.0], [560.0]]
    measured = by_name(fig, "step (ms), measured here")
    labels = ["1 param each", "1 MiB", "2 MiB", "DDP default", "25 MiB"]
    assert list(measured.x) == labels  # the table's order: smallest cap to largest
    assert list(measured.y) == [120.0, 90.0, 80.0, 85.0, 95.0]
    # buckets per step; the default's count is the star's, drawn above it (not under it)
    assert list(measured.text) == ["16", "8", "4", "", "1"]
    assert [(list(t.text), t.textposition) for t in stars] == [(["2"], "top center")] * 2
    assert list(fig.layout.xaxis.categoryarray) == labels
    assert fig.layout.yaxis.title.text == "step (ms), measured here"
    assert fig.layout.yaxis2.title.text == "step (µs), GPU model"
    fonts_ok(fig)
    with pytest.raises(ValueError, match="sweep_buckets"):
        sweep_figure(sweep_table().drop(columns=["step us (modelled)"]))


def test_cap_labels_name_the_sweep_points_whatever_number_type() -> None:
    assert [cap_label(c) for c in (1e-6, 2, 2.0, "default", 25)] == [
        "1 param each",
        "2 MiB",
        "2 MiB",
        "DDP default",
        "25 MiB",
    ]


def test_a_bad_rank_or_a_non_trace_is_named_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"rank=5 is not valid: expected one of the trace's ranks"):
        bucket_fill_animation(ddp_trace(), rank=5)
    with pytest.raises(ValueError, match="trace='report' is not valid: expected a Trace"):
        streams_figure("report")
