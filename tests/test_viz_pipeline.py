"""Pipeline renderers draw what the Timeline (or trace) says; the widget says where it came from."""

from __future__ import annotations

import html
from dataclasses import FrozenInstanceError, replace
from types import SimpleNamespace

import pytest
from helpers import fresh_python

from edu_parallel.core.trace import Trace
from edu_parallel.pipeline_parallel.builders import build_schedule
from edu_parallel.pipeline_parallel.timing import time_schedule
from edu_parallel.viz import (
    PipelineState,
    PipelineWidget,
    activation_memory_figure,
    bubble_vs_microbatches_figure,
    pipeline_gantt,
)
from edu_parallel.viz import pipeline_widget as widget_module

CASES = [  # (schedule, P, M, v, t_f, t_b, t_w, t_comm)
    ("gpipe", 4, 8, 1, 1.0, 2.0, 0.0, 0.0),
    ("gpipe", 3, 5, 1, 1.0, 1.5, 0.5, 0.25),
    ("1f1b", 4, 8, 1, 1.0, 1.0, 1.0, 0.0),
    ("1f1b", 2, 3, 1, 0.5, 1.25, 0.0, 0.1),
    ("zb-h1", 4, 8, 1, 1.0, 1.0, 1.0, 0.0),
    ("zb-h1", 3, 6, 1, 1.0, 1.5, 0.75, 0.0),
    ("interleaved", 2, 4, 2, 1.0, 2.0, 0.0, 0.0),
]


def timed(name, p, m, v=1, t_f=1.0, t_b=1.0, t_w=0.0, t_comm=0.0):
    return time_schedule(build_schedule(name, p, m, v), t_f, t_b, t_w, t_comm)


def boxes(fig) -> list[tuple[int, str, int, int, float, float]]:
    """(rank, kind, stage, microbatch, start, width) of every F/B/W box of a Gantt."""
    out = []
    for tr in fig.data:
        if (tr.meta or {}).get("role") != "box":
            continue
        assert len(tr.y) == len(tr.base) == len(tr.x) == len(tr.customdata) == len(tr.text)
        for y, base, width, (rank, stage, mb), text in zip(
            tr.y, tr.base, tr.x, tr.customdata, tr.text, strict=True
        ):
            assert y == rank and text.split("<br>")[0] == str(mb)
            out.append((int(rank), tr.meta["kind"], int(stage), int(mb), base, width))
    return sorted(out)


def bubbles(fig) -> list[tuple[int, float, float]]:
    (tr,) = [t for t in fig.data if (t.meta or {}).get("role") == "bubble"]
    return sorted((int(y), b, b + w) for y, b, w in zip(tr.y, tr.base, tr.x, strict=True))


def idle_oracle(tl) -> list[tuple[int, float, float]]:
    """Gaps between a rank's consecutive spans (and before the first / after the last)."""
    out = []
    for r in range(tl.num_ranks):
        t = 0.0
        for s in sorted((s for s in tl.spans if s.rank == r), key=lambda s: s.start):
            if s.start > t + 1e-9:
                out.append((r, t, s.start))
            t = max(t, s.end)
        if tl.makespan > t + 1e-9:
            out.append((r, t, tl.makespan))
    return sorted(out)


# ----------------------------------------------------------------- Gantt
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c[:4])))
def test_gantt_boxes_are_the_timeline_spans(case):
    name, p, m, v, *times = case
    tl = timed(name, p, m, v, *times)
    fig = pipeline_gantt(tl)
    want = sorted(
        (s.rank, s.action.kind, s.action.stage, s.action.microbatch, s.start, s.end - s.start)
        for s in tl.spans
    )
    got = boxes(fig)
    assert len(got) == len(tl.spans) == p * v * m * (3 if name == "zb-h1" else 2)
    for g, w in zip(got, want, strict=True):
        assert g[:4] == w[:4] and g[4:] == pytest.approx(w[4:], abs=1e-12)
    kinds = {tr.meta["kind"]: tr.marker.color for tr in fig.data if tr.meta.get("role") == "box"}
    assert set(kinds) == ({"F", "I", "W"} if name == "zb-h1" else {"F", "B"})  # torch names
    assert list(fig.layout.yaxis.ticktext) == [f"rank {r}" for r in range(p)]
    assert fig.layout.yaxis.range[0] > fig.layout.yaxis.range[1]  # reversed: rank 0 on top
    assert fig.layout.xaxis.title.text == (
        "time (t_f = 1)" if times[0] == 1 else f"modelled time (t_f = {times[0]:g})"
    )
    assert f"bubble {tl.bubble_fraction():.1%}" in fig.layout.title.text


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c[:4])))
def test_bubble_shading_is_the_idle_time(case):
    name, p, m, v, *times = case
    tl = timed(name, p, m, v, *times)
    got = bubbles(pipeline_gantt(tl))
    want = idle_oracle(tl)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[0] == w[0] and g[1:] == pytest.approx(w[1:], abs=1e-12)
    for r in range(p):  # and the per-rank total is the Timeline's own idle()
        assert sum(b - a for q, a, b in got if q == r) == pytest.approx(tl.idle(r))


def test_gantt_textbook_gpipe_bubble():
    p, m = 4, 8
    tl = timed("gpipe", p, m, t_b=2.0)
    shaded = sum(b - a for _, a, b in bubbles(pipeline_gantt(tl)))
    assert shaded / (p * tl.makespan) == pytest.approx((p - 1) / (m + p - 1))


def test_interleaved_boxes_are_labelled_with_stage_and_coloured_per_chunk():
    tl = timed("interleaved", 2, 4, 2)
    fig = pipeline_gantt(tl)
    box_traces = [tr for tr in fig.data if tr.meta.get("role") == "box"]
    assert {(tr.meta["kind"], tr.meta["chunk"]) for tr in box_traces} == {
        ("F", 0),
        ("F", 1),
        ("B", 0),
        ("B", 1),
    }
    assert len({tr.marker.color for tr in box_traces}) == 4
    for tr in box_traces:
        for text, (_, stage, mb) in zip(tr.text, tr.customdata, strict=True):
            assert text == f"{mb}<br>s{stage}"
            assert stage // 2 == tr.meta["chunk"]


def test_gantt_cursor_frames_move_across_time_and_count_busy_ranks():
    tl = timed("1f1b", 3, 4, t_b=2.0)
    fig = pipeline_gantt(tl, cursor_frames=21)
    cursor = len(fig.data) - 1
    assert fig.data[cursor].meta["role"] == "cursor"
    assert len(fig.frames) == 21
    times = [f.data[0].x[0] for f in fig.frames]
    assert times == pytest.approx([tl.makespan * i / 20 for i in range(21)])
    for frame, t in zip(fig.frames, times, strict=True):
        assert list(frame.traces) == [cursor]
        assert frame.data[0].x[0] == frame.data[0].x[1]
        busy = len({s.rank for s in tl.spans if s.start <= t < s.end})
        assert f"{busy} of 3 ranks busy" in frame.data[0].text[0]
    assert len(fig.layout.sliders[0].steps) == 21
    assert [s.args[0][0] for s in fig.layout.sliders[0].steps] == [f.name for f in fig.frames]
    assert fig.layout.updatemenus[0].buttons[0].method == "animate"


def test_gantt_html_export_contains_the_cursor_frames(tmp_path):
    fig = pipeline_gantt(timed("zb-h1", 4, 8, t_w=1.0), cursor_frames=15)
    path = tmp_path / "gantt.html"
    fig.write_html(path, include_plotlyjs="cdn", auto_play=False)
    html = path.read_text()
    assert "addFrames" in html and "time cursor" in html
    # the JSON encoder may write the play symbol literally (orjson) or escaped (json)
    assert "ranks busy" in html and ("\u25b6 play" in html or "\\u25b6 play" in html)


def test_gantt_of_a_measured_trace_says_measured_and_starts_at_zero():
    tl = timed("1f1b", 2, 4, t_b=2.0)
    trace = tl.to_trace({"source": "engine"})
    shifted = Trace(
        trace.meta, [replace(e, start=e.start + 7.5, end=e.end + 7.5) for e in trace.events]
    )
    fig = pipeline_gantt(shifted)
    assert fig.layout.xaxis.title.text == "wall-clock seconds (measured), 0 = first compute"
    assert "(measured)" in fig.layout.title.text
    want = sorted(
        (s.rank, s.action.kind, s.action.stage, s.action.microbatch, s.start, s.end - s.start)
        for s in tl.spans
    )
    for g, w in zip(boxes(fig), want, strict=True):
        assert g[:4] == w[:4] and g[4:] == pytest.approx(w[4:])
    # Timeline.to_trace with no meta is modelled, and says so.
    assert pipeline_gantt(tl.to_trace()).layout.xaxis.title.text == "time (t_f = 1)"
    with pytest.raises(ValueError, match="no compute events"):
        pipeline_gantt(Trace({}, []))
    with pytest.raises(TypeError, match="timeline_or_trace=list"):
        pipeline_gantt([])
    with pytest.raises(ValueError, match=r"cursor_frames=1 .*\[2, 1000\]"):
        pipeline_gantt(tl, cursor_frames=1)
    retimed = Trace({**trace.meta, "retimed_with": "alpha-beta"}, trace.events)
    fig = pipeline_gantt(retimed)
    assert fig.layout.xaxis.title.text.startswith("modelled seconds (retimed: alpha-beta)")
    assert "(simulated)" in fig.layout.title.text


# ----------------------------------------------------------------- activations
def peak_points(fig) -> dict[int, tuple[float, float]]:
    """{stage: (time, peak)} of the peak markers (one panel each, or one trace on a heatmap)."""
    out = {}
    for tr in fig.data:
        if (tr.meta or {}).get("role") != "peak":
            continue
        for (stage, peak), x, y in zip(tr.customdata, tr.x, tr.y, strict=True):
            assert y == (peak if "stage" in tr.meta else stage)  # panel: height; heatmap: row
            out[int(stage)] = (x, peak)
    return out


@pytest.mark.parametrize(
    "case",
    CASES + [("interleaved", 4, 8, 3, 1.0, 1.0, 0.0, 0.0)],
    ids=lambda c: "-".join(map(str, c[:4])),
)
def test_memory_peaks_are_the_timelines_peaks(case):
    name, p, m, v, *times = case
    tl = timed(name, p, m, v, *times)
    fig = activation_memory_figure(tl)
    peaks = peak_points(fig)
    assert [peaks[s][1] for s in range(tl.num_stages)] == tl.peak_activations_per_stage()
    for s, steps in enumerate(tl.live_activations()):  # marker at the first time of the peak
        assert peaks[s][0] == next(t for t, c in steps if c == max(c for _, c in steps))
    if tl.num_stages <= 8:
        for tr in fig.data:
            if tr.meta["role"] == "live":
                steps = tl.live_activations()[tr.meta["stage"]]
                assert list(tr.x[:-1]) == [t for t, _ in steps] and tr.x[-1] == tl.makespan
                assert list(tr.y[:-1]) == [c for _, c in steps]


def test_memory_textbook_peaks_gpipe_holds_m_1f1b_holds_p_minus_s():
    p, m = 4, 8
    assert [y for _, y in peak_points(activation_memory_figure(timed("gpipe", p, m))).values()] == [
        m
    ] * p
    one = peak_points(activation_memory_figure(timed("1f1b", p, m)))
    assert [one[s][1] for s in range(p)] == [p - s for s in range(p)]


def test_memory_figure_from_a_trace_in_bytes():
    tl = timed("1f1b", 3, 5, t_b=2.0)
    fig = activation_memory_figure(tl.to_trace({"source": "engine"}, activation_bytes=4096))
    peaks = peak_points(fig)
    assert [peaks[s][1] for s in range(3)] == [4096 * c for c in tl.peak_activations_per_stage()]
    assert "bytes" in fig.layout.title.text and "measured" in fig.layout.title.text
    counted = activation_memory_figure(tl.to_trace())
    assert "microbatches, simulated" in counted.layout.title.text


# ----------------------------------------------------------------- bubble against M
def test_bubble_vs_microbatches_curves_are_time_schedule_results():
    p, ms = 4, [1, 2, 4, 6, 8, 16]
    fig = bubble_vs_microbatches_figure(p, ms, v=2, t_f=1, t_b=2, t_w=1)
    sims = {tr.meta["schedule"]: tr for tr in fig.data if tr.meta["role"] == "simulated"}
    assert set(sims) == {"gpipe", "1f1b", "interleaved", "zb-h1"}
    for name, tr in sims.items():
        v = 2 if name == "interleaved" else 1
        want_ms = [m for m in ms if name != "interleaved" or m % p == 0]
        assert list(tr.x) == want_ms
        assert list(tr.y) == [timed(name, p, m, v, 1, 2, 1).bubble_fraction() for m in want_ms]
    (formula,) = [tr for tr in fig.data if tr.meta["role"] == "formula"]
    assert list(formula.x) == ms
    assert list(formula.y) == pytest.approx([(p - 1) / (m + p - 1) for m in ms])
    assert list(sims["gpipe"].y) == pytest.approx(list(formula.y))  # exact for GPipe
    inter = sims["interleaved"]
    assert set(inter.meta["skipped"]) == {"1", "2", "6"}
    assert "skipped M=1, 2, 6" in inter.name and "multiple of num_ranks=4" in inter.name
    assert "skipped" not in sims["1f1b"].name


def test_bubble_vs_microbatches_rejects_bad_arguments():
    with pytest.raises(ValueError, match="schedules='pipedream'"):
        bubble_vs_microbatches_figure(4, [4], schedules=("pipedream",))
    with pytest.raises(ValueError, match="Ms=0"):
        bubble_vs_microbatches_figure(4, [0, 4])


# ----------------------------------------------------------------- widget
def test_pipeline_state_is_validated():
    s = PipelineState("zb-h1", 64, 512, 4, 0.5, 0.0)
    assert s.chunks == 1 and s.times(2.0) == (2.0, 1.0, 0.0)
    assert PipelineState("interleaved", 4, 8, 3).chunks == 3
    bad = [
        (dict(schedule="pipedream"), r"schedule='pipedream' .*'gpipe'"),
        (dict(P=1), r"P=1 .*\[2, 64\]"),
        (dict(P=65), r"P=65 .*\[2, 64\]"),
        (dict(M=0), r"M=0 .*\[1, 512\]"),
        (dict(M=513), r"M=513 .*\[1, 512\]"),
        (dict(v=5), r"v=5 .*\[1, 4\]"),
        (dict(tb_over_tf=0), r"tb_over_tf=0 .*> 0"),
        (dict(tw_over_tf=-1), r"tw_over_tf=-1 .*>= 0"),
    ]
    for kwargs, pattern in bad:
        with pytest.raises(ValueError, match=pattern):
            PipelineState(**kwargs)
    with pytest.raises(ValueError, match=r"M=1000 .*\[1, 512\]"):
        replace(s, M=1000)
    assert s.M == 512
    with pytest.raises(FrozenInstanceError):
        s.M = 8  # a state changes only through dataclasses.replace, which checks it
    with pytest.raises(ValueError, match=r"^P=1 is not valid.*; v=0 is not valid") as err:
        PipelineState(P=1, v=0)  # every bad field, in one line
    assert "\n" not in str(err.value)


def test_widget_bounds_and_messages_are_the_configs():
    w = PipelineWidget(None)
    for control, name in [(w.ranks_slider, "P"), (w.microbatches_box, "M"), (w.chunks_slider, "v")]:
        assert (control.min, control.max) == PipelineState.LIMITS[name]
    with pytest.raises(ValueError) as err:
        replace(w.state, tw_over_tf=-0.5)
    w.tw_box.value = -0.5
    assert html.escape(str(err.value), quote=False) in w.status.value  # the config's own line
    assert "last valid setting" in w.status.value and w.state.tw_over_tf == 1.0


def fake_runner(calls):
    """A stand-in for the real engine: the simulated timeline with times scaled to seconds."""

    def run_small(schedule, p, m, v, t_f, t_b, t_w):
        calls.append((schedule, p, m, v, t_f, t_b, t_w))
        tl = time_schedule(build_schedule(schedule, p, m, v), t_f, t_b, t_w, t_comm=0.001)
        return SimpleNamespace(
            timeline=tl.to_trace({"source": "engine"}),
            bubble_fraction_measured=tl.bubble_fraction(),
            peak_activations_per_stage=tl.peak_activations_per_stage(),
        )

    return run_small


def test_widget_without_a_runner_simulates_and_says_so():
    w = PipelineWidget(None, "gpipe", P=4, M=8)
    tl = timed("gpipe", 4, 8, t_w=1.0)
    assert w.source == "simulation" and "SIMULATION" in w.source_html.value
    assert "run_small=None" in w.source_html.value
    assert f"{tl.bubble_fraction():.1%}" in w.bubble_html.value
    assert "27.3% of total time" in w.bubble_html.value  # formula: 3 / 11
    assert "37.5% relative to the ideal" in w.bubble_html.value  # formula: 3 / 8
    assert "s0 8 · s1 8 · s2 8 · s3 8" in w.peaks_html.value
    assert len(boxes(w.gantt)) == len(tl.spans)
    assert "SIMULATION" in w.gantt.layout.title.text
    assert w.gantt.layout.xaxis.title.text == "time (t_f = 1)"


def test_widget_runs_small_configurations_for_real_and_large_ones_in_simulation():
    calls = []
    w = PipelineWidget(
        fake_runner(calls), "1f1b", P=2, M=4, tb_over_tf=2.0, tw_over_tf=0.0, real_t_f=0.01
    )
    assert calls == [("1f1b", 2, 4, 1, 0.01, 0.02, 0.0)]
    assert w.source == "real" and "REAL run" in w.source_html.value
    assert "the run's trace (wall-clock seconds (measured))" in w.source_html.value
    assert "measured" in w.bubble_html.value and "REAL" in w.gantt.layout.title.text
    assert w.gantt.layout.xaxis.title.text == "wall-clock seconds (measured)"
    assert w.peaks == [2, 1]
    w.run_button.click()  # run again
    assert len(calls) == 2
    w.ranks_slider.value = 16  # too large: no real run
    assert len(calls) == 2 and w.source == "simulation"
    assert "P=16, M=4 is too large for a real run" in w.source_html.value
    assert w.state.P == 16 and len(boxes(w.gantt)) == 16 * 4 * 2
    w.ranks_slider.value = 4  # P=4, M=4: small again
    assert len(calls) == 3 and calls[-1][:4] == ("1f1b", 4, 4, 1) and w.source == "real"
    w.microbatches_box.value = 9
    assert len(calls) == 3 and "P <= 4 and M <= 8" in w.source_html.value
    w.microbatches_box.value = 8
    assert len(calls) == 4 and calls[-1][:4] == ("1f1b", 4, 8, 1) and w.source == "real"


def test_widget_controls_change_the_state_and_errors_keep_the_last_figure():
    w = PipelineWidget(None)
    w.schedule_dropdown.value = "interleaved"
    assert w.state.schedule == "interleaved" and w.state.chunks == 2
    assert not w.chunks_slider.disabled
    assert len(boxes(w.gantt)) == 4 * 2 * 8 * 2
    w.chunks_slider.value = 3
    assert w.state.v == 3 and "v=3" in w.source_html.value
    w.microbatches_box.value = 6  # interleaved needs M % P == 0
    assert "cannot be built" in w.status.value and "num_microbatches=6" in w.status.value
    assert w.state.M == 8 and len(boxes(w.gantt)) == 4 * 3 * 8 * 2
    w.tb_box.value = -1.0
    assert "tb_over_tf=-1.0 is not valid" in w.status.value and w.state.tb_over_tf == 1.0
    w.tb_box.value = 3.0
    w.schedule_dropdown.value = "zb-h1"
    assert w.status.value == "" and w.chunks_slider.disabled and w.state.chunks == 1
    tl = timed("zb-h1", 4, 6, 1, 1.0, 3.0, 1.0)
    assert w.bubble == pytest.approx(tl.bubble_fraction())
    assert w.peaks == tl.peak_activations_per_stage()
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_widget_real_run_with_a_retimed_timeline_is_labelled_in_units_of_t_f():
    def run_small(schedule, p, m, v, t_f, t_b, t_w):  # like run_pipeline's report
        tl = time_schedule(build_schedule(schedule, p, m, v), t_f, t_b, t_w)
        return SimpleNamespace(
            timeline=tl,
            bubble_fraction_measured=tl.bubble_fraction(),
            peak_activations_per_stage=tl.peak_activations_per_stage,
        )

    w = PipelineWidget(run_small, "zb-h1", P=3, M=6)
    assert w.source == "real" and "a Timeline: times in units of t_f" in w.source_html.value
    assert w.gantt.layout.xaxis.title.text == "time (t_f = 1)"
    # a method is called; ZB-H1 keeps the stash until W: more than 1F1B's [3, 2, 1]
    assert w.peaks == timed("zb-h1", 3, 6, 1, 1.0, 1.0, 1.0).peak_activations_per_stage()
    assert len(boxes(w.gantt)) == 3 * 6 * 3


def test_widget_falls_back_to_simulation_when_the_real_run_fails():
    def broken(*args):
        raise RuntimeError("rank 1 died")

    w = PipelineWidget(broken, "gpipe", P=2, M=2)
    assert w.source == "simulation"
    assert "the real run failed: RuntimeError: rank 1 died" in w.source_html.value


def test_widget_skips_an_illegible_gantt(monkeypatch):
    monkeypatch.setattr(widget_module, "MAX_GANTT_BOXES", 50)
    w = PipelineWidget(None, "1f1b", P=4, M=8)
    assert w.gantt is None and "Gantt not drawn: 64 boxes" in w.status.value
    assert w.memory_figure is not None and w.bubble == pytest.approx(3 / 11)


# ----------------------------------------------------------------- no torch
def test_pipeline_renderers_import_no_torch():
    code = (
        "import edu_parallel.viz as v\n"
        "from edu_parallel.pipeline_parallel.builders import build_schedule\n"
        "from edu_parallel.pipeline_parallel.timing import time_schedule\n"
        "tl = time_schedule(build_schedule('zb-h1', 3, 4), 1, 1, 1)\n"
        "v.pipeline_gantt(tl); v.pipeline_gantt(tl.to_trace()); v.activation_memory_figure(tl)\n"
        "v.bubble_vs_microbatches_figure(3, [3, 6])\n"
        "w = v.PipelineWidget(None, 'gpipe', 2, 2)\n"
    )
    fresh_python(code)
