"""The pipeline widget says where its picture came from: its state's checks, a real run for
small configurations, the simulation for large ones or when the run fails."""

from __future__ import annotations

import html
from dataclasses import FrozenInstanceError, replace
from types import SimpleNamespace

import pytest
from helpers import boxes, timed

from edu_parallel.pipeline_parallel.builders import build_schedule
from edu_parallel.pipeline_parallel.timing import time_schedule
from edu_parallel.viz import PipelineState, PipelineWidget
from edu_parallel.viz import pipeline_widget as widget_module


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
            bubble_fraction_retimed=tl.bubble_fraction(),
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
    assert "executed order retimed" in w.bubble_html.value and "REAL" in w.gantt.layout.title.text
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
            bubble_fraction_retimed=tl.bubble_fraction(),
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
