"""Lesson 14's renderers, on traces built by hand in the event format of the regimes.

Sync, two ranks, ranks lined up at t = 1 s. Rank 0: gradient 0-2 ms, all-reduce 2-12 ms (waiting
for rank 1), update 12-13 ms. Rank 1: gradient 0-2 ms, straggler delay 2-10 ms, all-reduce
10-12 ms, update 12-13 ms; inside its all-reduce a ring send (not drawn). So in a 20 ms window
rank 0 computes 3 ms (waits 85 %), rank 1 computes 3 ms and is delayed 8 ms (waits 45 %).

Async, a server and one worker: the worker pulls 0-1 ms, computes 1-3 ms, pushes 3-4 ms; the
server waits for the push 0-4 ms, applies 4-5 ms and replies (a send, not drawn).
"""

from __future__ import annotations

import pandas as pd
import pytest

from edu_parallel import Cluster
from edu_parallel.async_training.report import run_async
from edu_parallel.core.schema import STEP_START_MARK
from edu_parallel.core.trace import Event, Trace
from edu_parallel.viz import (
    loss_curves_figure,
    regime_timeline,
    staleness_figure,
    time_to_target_figure,
)
from edu_parallel.viz.async_timeline import CATEGORIES, REGIME_COLORS, timeline_frame
from edu_parallel.viz.style import RED

T0 = 1.0
MS = 1e-3


def ev(kind, rank, op, start_ms, end_ms, phase=None, **attrs):
    return Event(
        kind=kind,
        rank=rank,
        op=op,
        start=T0 + start_ms * MS,
        end=T0 + end_ms * MS,
        phase=phase,
        attrs=attrs or None,
    )


def sync_trace() -> Trace:
    events = [ev("mark", r, STEP_START_MARK, 0, 0, step=1) for r in (0, 1)]
    events += [
        ev("compute", 0, "gradient", 0, 2, "compute"),
        ev("collective", 0, "all_reduce", 2, 12, "grad_sync"),
        ev("compute", 0, "apply", 12, 13, "apply"),
        ev("compute", 1, "gradient", 0, 2, "compute"),
        ev("compute", 1, "delay", 2, 10, "delay", delay_s=0.008),
        ev("collective", 1, "all_reduce", 10, 12, "grad_sync"),
        ev("send", 1, "isend", 10, 11, "grad_sync"),
        ev("compute", 1, "apply", 12, 13, "apply"),
        ev("compute", 0, "gradient", 30, 32, "compute"),  # outside a 20 ms window
    ]
    return Trace(events=events, meta={"regime": "sync", "straggler": "worker 1, fixed 8 ms"})


def async_trace() -> Trace:
    events = [ev("mark", r, STEP_START_MARK, 0, 0, step=1) for r in (0, 1)]
    events += [
        ev("recv", 1, "copy", 0, 1, "pull"),
        ev("compute", 1, "gradient", 1, 3, "compute"),
        ev("send", 1, "isend", 3, 4, "push"),
        ev("recv", 0, "reduce", 0, 4, "push"),
        ev("compute", 0, "apply", 4, 5, "apply"),
        ev("send", 0, "isend", 5, 5.5, "pull"),
    ]
    return Trace(events=events, meta={"regime": "async-ps", "straggler": "none"})


def test_timeline_frame_sorts_events_into_the_lesson_categories():
    frame = timeline_frame(sync_trace(), window_s=0.020)
    cols = [frame[k] for k in ("rank", "what", "start_ms", "end_ms")]
    got = sorted(zip(*cols, strict=True))
    want = [
        (0, "all-reduce / average (incl. waiting)", 2.0, 12.0),
        (0, "gradient", 0.0, 2.0),
        (0, "update", 12.0, 13.0),
        (1, "all-reduce / average (incl. waiting)", 10.0, 12.0),
        (1, "gradient", 0.0, 2.0),
        (1, "straggler delay", 2.0, 10.0),
        (1, "update", 12.0, 13.0),
    ]
    assert [(r, w) for r, w, *_ in got] == [(r, w) for r, w, *_ in want]
    for (*_, s, e), (*_, ws, we) in zip(got, want, strict=True):
        assert s == pytest.approx(ws) and e == pytest.approx(we)
    clipped = timeline_frame(sync_trace(), window_s=0.005)
    assert clipped["end_ms"].max() == pytest.approx(5.0)  # the all-reduce is cut at 5 ms


def test_server_timeline_shows_pushes_pulls_and_the_servers_wait():
    frame = timeline_frame(async_trace(), window_s=0.010)
    assert set(zip(frame["rank"], frame["what"], strict=True)) == {
        (1, "pull (incl. waiting)"),
        (1, "gradient"),
        (1, "push"),
        (0, "server waits for a push"),
        (0, "update"),
    }
    fig = regime_timeline(async_trace(), window_s=0.010)
    assert {t.name for t in fig.data} <= set(CATEGORIES)
    assert {y for t in fig.data for y in t.y} == {"r0 server", "r1 worker"}


def test_regime_timeline_bars_and_waiting_shares():
    fig = regime_timeline(sync_trace(), window_s=0.020)
    bars = {t.name: t for t in fig.data}
    assert set(bars) == {
        "gradient",
        "straggler delay",
        "update",
        "all-reduce / average (incl. waiting)",
    }
    delay = bars["straggler delay"]
    assert list(delay.y) == ["r1 worker"] and list(delay.base) == pytest.approx([2.0])
    assert list(delay.x) == pytest.approx([8.0])
    assert "r0 worker 85%" in fig.layout.title.text and "r1 worker 45%" in fig.layout.title.text
    assert "worker 1, fixed 8 ms" in fig.layout.title.text


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: regime_timeline("trace"), "trace"),
        (lambda: regime_timeline(sync_trace(), window_s=0), "window_s"),
        (lambda: regime_timeline(Trace(events=[], meta={})), "trace"),
        (lambda: staleness_figure({}), "histograms"),
        (lambda: loss_curves_figure([]), "curves"),
        (lambda: time_to_target_figure(pd.DataFrame({"x": [1]})), "table"),
    ],
)
def test_bad_inputs_are_named(call, name):
    with pytest.raises(ValueError, match=f"^{name}="):
        call()


def test_staleness_figure_plots_shares_per_run():
    fig = staleness_figure({"sync": {0: 40}, "async-ps": {0: 10, 2: 30}})
    bars = {t.name: t for t in fig.data}
    assert list(bars["sync"].x) == [0] and list(bars["sync"].y) == [1.0]
    assert list(bars["async-ps"].x) == [0, 2] and list(bars["async-ps"].y) == [0.25, 0.75]


def test_loss_curves_have_a_time_and_a_step_panel():
    curve = pd.DataFrame({"step": [1, 2], "time_s": [0.1, 0.3], "loss": [2.0, 1.5]})
    fig = loss_curves_figure({"sync": curve})
    xs = sorted(tuple(t.x) for t in fig.data)
    assert xs == [(0.1, 0.3), (1.0, 2.0)] or xs == [(0.1, 0.3), (1, 2)]
    labels = {a.text for a in fig.layout.annotations}
    assert labels == {"wall-clock time (s)", "steps"}


def test_time_to_target_figure_names_runs_that_missed():
    table = pd.DataFrame(
        {
            "regime": ["sync", "async-ps", "backup"],
            "straggler": ["none", "none", "none"],
            "time to target (s)": [1.0, 0.5, None],
        }
    )
    fig = time_to_target_figure(table)
    assert sorted(t.name for t in fig.data) == ["async-ps", "sync"]
    assert "never reached the target: backup with straggler none" in fig.layout.title.text
    assert "every run reached the target" in time_to_target_figure(table.dropna()).layout.title.text
    # each regime its own colour of the palette, the same in the loss curves: sync and backup
    # were plotly's near-identical blue and purple
    colors = {t.name: t.marker.color for t in fig.data}
    assert colors == {r: REGIME_COLORS[r] for r in ("sync", "async-ps")}
    assert len(set(REGIME_COLORS.values())) == 4 and REGIME_COLORS["backup"] == RED
    curves = {r: pd.DataFrame({"step": [1], "time_s": [0.1], "loss": [1.0]}) for r in REGIME_COLORS}
    lines = {t.name: t.line.color for t in loss_curves_figure(curves).data}
    assert lines == REGIME_COLORS


def test_the_real_run_draws():
    """A regime's own trace, from real ranks, is drawn with the same categories."""
    with Cluster(3) as c:
        r = run_async(c, "async-ps", steps=6, straggler="rank", delay_ms=5)
    fig = regime_timeline(r.trace, window_s=1.0)
    names = {t.name for t in fig.data}
    assert {"gradient", "push", "pull (incl. waiting)", "update", "straggler delay"} <= names
    assert "server waits for a push" in names
    assert staleness_figure({"a": r.staleness_histogram}).data
