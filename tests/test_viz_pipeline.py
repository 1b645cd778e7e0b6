"""Pipeline renderers draw what the Timeline (or trace) says: the Gantt, the activation memory,
the bubble against M; they load without torch. The widget is in
``test_viz_pipeline_widget.py``."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import boxes, fresh_python, timed

from edu_parallel.core.trace import Trace
from edu_parallel.viz import activation_memory_figure, bubble_vs_microbatches_figure, pipeline_gantt

CASES = [  # (schedule, P, M, v, t_f, t_b, t_w, t_comm)
    ("gpipe", 4, 8, 1, 1.0, 2.0, 0.0, 0.0),
    ("gpipe", 3, 5, 1, 1.0, 1.5, 0.5, 0.25),
    ("1f1b", 4, 8, 1, 1.0, 1.0, 1.0, 0.0),
    ("1f1b", 2, 3, 1, 0.5, 1.25, 0.0, 0.1),
    ("zb-h1", 4, 8, 1, 1.0, 1.0, 1.0, 0.0),
    ("zb-h1", 3, 6, 1, 1.0, 1.5, 0.75, 0.0),
    ("interleaved", 2, 4, 2, 1.0, 2.0, 0.0, 0.0),
]


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
    times = [f.data[cursor].x[0] for f in fig.frames]
    assert times == pytest.approx([tl.makespan * i / 20 for i in range(21)])
    for frame, t in zip(fig.frames, times, strict=True):
        # every frame names every trace (plotly.js erases the bars a frame leaves out); the
        # boxes and the bubble are stubs of their type, so they stay as drawn
        assert list(frame.traces) == list(range(len(fig.data)))
        assert [d.to_plotly_json() for d in frame.data[:cursor]] == [{"type": "bar"}] * cursor
        assert frame.data[cursor].x[0] == frame.data[cursor].x[1]
        busy = len({s.rank for s in tl.spans if s.start <= t < s.end})
        assert f"{busy} of 3 ranks busy" in frame.data[cursor].text[0]
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
