"""Renderers read traces and draw what the trace says: checked against simulate() traces."""

from __future__ import annotations

import html
from dataclasses import FrozenInstanceError, replace

import pytest
from helpers import fresh_python

from edu_parallel.core.dims import MAX_LOCAL_WORLD_SIZE
from edu_parallel.core.inputs import chunk_bounds
from edu_parallel.models.simulation import simulate
from edu_parallel.plans.checker import holdings_after_each_step
from edu_parallel.plans.naive import naive_allreduce_plan, naive_sent_bytes_formula
from edu_parallel.plans.plan import Plan
from edu_parallel.plans.ring import ring_allreduce_plan, ring_sent_bytes_formula
from edu_parallel.viz import (
    PlayerState,
    RingPlayer,
    build_frames,
    bytes_bars,
    bytes_bars_plotly,
    ring_animation,
    ring_step_figure,
    step_grid,
    time_axis_label,
    timeline,
)
from edu_parallel.viz.figure import TEXT_KEY
from edu_parallel.viz.model import ranks_text
from edu_parallel.viz.ring import RingDrawing

RING_CASES = [(2, 64), (3, 40), (4, 64), (4, 12), (8, 256)]  # (4, 12): 3 elements, chunk 3 empty


def ring(n: int, nbytes: int, **kw):
    return simulate(ring_allreduce_plan(n), nbytes, **kw)


def cells(frame_data) -> dict[tuple[int, int], float | None]:
    """{(rank, chunk): value} of a frame's cell trace."""
    return {(int(r), int(k)): v for r, k, v in frame_data[0].customdata}


def arrows(frame_data) -> list[tuple[int, int, int, str]]:
    """(src, dst, chunk, op) of a frame's arrow heads (traces 2: reduce, 4: copy)."""
    out = []
    for index, op in ((2, "reduce"), (4, "copy")):
        for src, dst, chunk, _ in frame_data[index].customdata or []:
            out.append((int(src), int(dst), int(chunk), op))
    return sorted(out)


# ----------------------------------------------------------------- ring animation
@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_ring_animation_has_one_frame_per_step_plus_input(n):
    trace, _ = ring(n, 4 * n)
    fig = ring_animation(trace, title="ring")
    assert len(fig.frames) == 2 * (n - 1) + 1
    titles = [f.layout.title.text for f in fig.frames]
    assert titles[0].startswith("<b>ring</b><br>input")
    assert f"reduce-scatter, step 2 of {n - 1}" in titles[2] or n == 2
    assert f"all-gather, step {n - 1} of {n - 1}" in titles[-1]
    assert "right neighbour" in titles[1] and "adds" in titles[1]
    assert "overwrites" in titles[-1]
    assert len(fig.layout.sliders[0].steps) == len(fig.frames)
    assert fig.layout.updatemenus[0].buttons[0].method == "animate"


@pytest.mark.parametrize("n,nbytes", RING_CASES)
def test_frame_values_equal_the_simulated_buffers_after_each_step(n, nbytes):
    plan = ring_allreduce_plan(n)
    trace, final = simulate(plan, nbytes)
    fig = ring_animation(trace)
    bounds = trace.meta["chunk_bounds"]
    for k, frame in enumerate(fig.frames):
        # Oracle: an independent simulation of the first k steps only.
        _, bufs = simulate(replace(plan, steps=plan.steps[:k]), nbytes)
        got = cells(frame.data)
        assert len(got) == n * n
        for (r, c), value in got.items():
            want = bufs[r][bounds[c]] if bounds[c] < bounds[c + 1] else None
            assert value == want, (k, r, c)
    last = cells(fig.frames[-1].data)
    full = 2**n - 1
    assert all(v == full for (r, c), v in last.items() if bounds[c] < bounds[c + 1])
    assert all(b[0] == full for b in final)
    labels = [t for t in fig.frames[-1].data[0].text if t != "0 B"]
    assert set(labels) == ({str(n)} if n >= 8 else {ranks_text(full)})  # 8 ranks: counts fit


@pytest.mark.parametrize("n,nbytes", RING_CASES)
def test_arrows_per_frame_equal_the_steps_sends(n, nbytes):
    trace, _ = ring(n, nbytes)
    fig = ring_animation(trace)
    assert arrows(fig.frames[0].data) == []
    for k, frame in enumerate(fig.frames[1:]):
        sends = trace.select("send")
        want_op = "reduce" if k < n - 1 else "copy"
        want = sorted((e.rank, e.peer, e.chunk, want_op) for e in sends if e.step == k)
        assert arrows(frame.data) == want
        line_index = 1 if want_op == "reduce" else 3
        assert list(frame.data[line_index].x).count(None) == len(want)  # one segment each


def test_naive_allreduce_animation():
    n = 5
    trace, _ = simulate(naive_allreduce_plan(n, root=2), 32)
    fig = ring_animation(trace)
    assert len(fig.frames) == 3
    reduce_arrows = arrows(fig.frames[1].data)
    assert reduce_arrows == [(r, 2, 0, "reduce") for r in range(n) if r != 2]
    assert arrows(fig.frames[2].data) == [(2, r, 0, "copy") for r in range(n) if r != 2]
    assert "to rank 2, which adds them" in fig.frames[1].layout.title.text
    assert cells(fig.frames[1].data)[(2, 0)] == 2**n - 1
    assert cells(fig.frames[1].data)[(0, 0)] == 1  # not yet broadcast
    assert set(cells(fig.frames[2].data).values()) == {2**n - 1}


def test_html_export_contains_the_frames(tmp_path):
    trace, _ = ring(4, 64)
    path = tmp_path / "ring.html"
    ring_animation(trace).write_html(path, include_plotlyjs="cdn", auto_play=False)
    html = path.read_text()
    assert "addFrames" in html
    assert "reduce-scatter, step 3 of 3" in html and "all-gather, step 1 of 3" in html


def test_no_snapshots_falls_back_to_symbolic_holdings_and_says_so():
    plan = ring_allreduce_plan(4)
    trace, _ = simulate(plan, 1 << 20)  # too big for snapshots
    assert trace.snapshots == []
    fig = ring_animation(trace)
    held = holdings_after_each_step(plan)
    for k, frame in enumerate(fig.frames):
        assert "symbolic" in frame.layout.title.text
        assert all(v is None for v in cells(frame.data).values())
        want = [ranks_text(held[k][r][c]) for r in range(4) for c in range(4)]
        assert list(frame.data[0].text) == want
    bare = replace(trace, meta={k: v for k, v in trace.meta.items() if k != "plan"})
    with pytest.raises(ValueError, match="no snapshots and no meta"):
        ring_animation(bare)


def test_other_inputs_show_values():
    trace, final = ring(3, 24, pattern="random")
    frames = build_frames(trace)
    assert frames.mode == "value"
    last = frames.steps[-1]
    bounds = chunk_bounds(6, 3)
    for r in range(3):
        for c in range(3):
            assert last.values[r][c] == pytest.approx(float(final[r][bounds[c]]))
            assert frames.label(last, r, c) == f"{last.values[r][c]:.3g}"


def test_ring_step_figure_is_one_frame():
    trace, _ = ring(4, 64)
    fig = ring_step_figure(trace, 4)
    assert "all-gather, step 1 of 3" in fig.layout.title.text
    assert not fig.frames
    with pytest.raises(ValueError, match=r"step=7 .*\[0, 6\]"):
        ring_step_figure(trace, 7)


# ----------------------------------------------------------------- grid and bars
@pytest.mark.parametrize(
    "make", [lambda: ring(4, 40), lambda: simulate(naive_allreduce_plan(3), 8)]
)
def test_step_grid_draws_every_cell_and_transfer(make, tmp_path):
    trace, _ = make()
    plan = Plan.from_text(trace.meta["plan"])
    fig = step_grid(trace)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if p.get_gid() == "cell"]
    assert len(boxes) == (len(plan.steps) + 1) * plan.world_size * plan.num_chunks
    marks = [t.get_text() for t in ax.texts if t.get_gid() == "transfer"]
    senders = {(e.step, e.rank) for e in trace.select("send")}
    assert len(marks) == len(senders)
    for e in trace.select("send"):
        assert any(f"r{e.peer}" in m and f"c{e.chunk}" in m for m in marks)
    fig.savefig(tmp_path / "grid.png")
    assert (tmp_path / "grid.png").stat().st_size > 1000


@pytest.mark.parametrize("n, nbytes", [(3, 40), (4, 64), (8, 256)])
def test_step_grid_and_animation_legends_say_what_their_labels_show(n, nbytes):
    """The legend names what the cells print: rank sets, counts where sets do not fit, or no
    label at all where the cells are too small for text."""
    trace, _ = ring(n, nbytes)
    fr = build_frames(trace)
    every = [(v, r, k) for v in fr.steps for r in range(n) for k in range(fr.num_chunks)]
    ax = step_grid(trace).axes[0]
    drawn = [t.get_text() for t in ax.texts if t.get_gid() == "label"]
    forms = {"ranks": [fr.label(*c) for c in every], "counts": [fr.label(*c, True) for c in every]}
    shown = next((k for k, texts in forms.items() if drawn == texts), "none" if not drawn else "?")
    assert shown != "?", drawn
    legend = " ".join(t.get_text() for t in ax.figure.legends[0].get_texts())
    assert fr.legend_text(shown) in legend
    assert ("label: which ranks" in legend) is (shown == "ranks")
    assert ("and label" in legend) is (shown == "counts")
    drawing = RingDrawing(trace)
    fig = drawing.figure(len(drawing) - 1)
    (note,) = [a.text for a in fig.layout.annotations if a.text.startswith("cell")]
    assert note == fr.legend_text(drawing.labels_shown)
    texts = {t for d in fig.data if d.text is not None for t in d.text if t}
    assert ("label" in note) is bool(texts & (set(forms["ranks"]) | set(forms["counts"])))


def test_step_grid_draws_into_a_given_axes():
    from matplotlib.figure import Figure

    given = Figure().add_subplot()
    assert step_grid(ring(2, 8)[0], ax=given) is given.figure


def bar_heights(fig) -> list[float]:
    return [p.get_height() for p in fig.axes[0].patches if p.get_gid() == "bar"]


def test_bytes_bars_heights_are_the_traces_sent_bytes():
    trace, _ = ring(4, 40)
    fig = bytes_bars(trace)
    per_phase = trace.sent_bytes(per_phase=True)
    assert bar_heights(fig) == [b for phase in per_phase.values() for b in phase]
    line = [ln for ln in fig.axes[0].lines if ln.get_gid() == "formula"]
    assert line[0].get_ydata()[0] == pytest.approx(ring_sent_bytes_formula(4, 40)["total"])
    totals = bytes_bars(trace, per_phase=False)
    assert bar_heights(totals) == trace.sent_bytes()


def test_bytes_bars_naive_formula_per_rank_and_units():
    trace, _ = simulate(naive_allreduce_plan(4), 64 * 1024)
    fig = bytes_bars(trace)
    segments = [c for c in fig.axes[0].collections if c.get_gid() == "formula"]
    ys = [seg[0][1] for col in segments for seg in col.get_segments()]
    assert ys == naive_sent_bytes_formula(4, 64 * 1024)
    fig.canvas.draw()
    assert any("KiB" in t.get_text() for t in fig.axes[0].get_yticklabels())
    assert bar_heights(fig) == [b for p in trace.sent_bytes(per_phase=True).values() for b in p]


def test_bytes_bars_custom_formula():
    trace, _ = ring(3, 30)
    line = bytes_bars(trace, formula=10.0).axes[0].lines[0]
    assert line.get_ydata()[0] == 10.0
    with pytest.raises(ValueError, match="formula="):
        bytes_bars(trace, formula=[1.0, 2.0])


def test_bytes_bars_plotly():
    trace, _ = simulate(naive_allreduce_plan(3), 16)
    fig = bytes_bars_plotly(trace)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [list(b.y) for b in bars] == list(trace.sent_bytes(per_phase=True).values())
    assert list(fig.data[-1].y) == naive_sent_bytes_formula(3, 16)


# ----------------------------------------------------------------- timeline
def test_timeline_axis_is_honest_about_its_clock():
    trace, _ = ring(3, 24)
    assert time_axis_label(trace) == "plan steps (simulated, not measured)"
    measured = replace(trace, meta={**trace.meta, "time_unit": "s", "source": "cluster"})
    assert timeline(measured).layout.xaxis.title.text == "wall-clock seconds (measured)"
    retimed = replace(trace, meta={**trace.meta, "time_unit": "s", "retimed_with": "nvlink4"})
    assert timeline(retimed).layout.xaxis.title.text == "modelled seconds (retimed: nvlink4)"


def test_timeline_draws_every_event_with_its_line():
    trace, _ = ring(3, 24)
    fig = timeline(trace)
    hover = [h for t in fig.data for h in t.hovertext]
    events = [e for e in trace.events if e.kind in ("send", "recv", "compute", "collective")]
    assert sorted(hover) == sorted(e.line() for e in events)
    assert {t.name for t in fig.data} == {"reduce-scatter", "all-gather"}


# ----------------------------------------------------------------- player
def test_player_state_is_validated():
    with pytest.raises(ValueError, match=r"world_size=1 .*\[2, 16\]"):
        PlayerState(1, 64)
    with pytest.raises(ValueError, match=r"nbytes=5000 .*\[1, 4096\]"):
        PlayerState(4, 5000)
    with pytest.raises(ValueError, match=r"^world_size=1 .*; nbytes=0 "):  # every bad field
        PlayerState(1, 0)
    state = replace(PlayerState(4, 64, 0, num_frames=7), step=6)
    with pytest.raises(ValueError, match=r"step=7 .*\[0, 6\]"):
        replace(state, step=7)
    with pytest.raises(ValueError, match="world_size=17"):
        replace(state, world_size=17)
    with pytest.raises(FrozenInstanceError):
        state.step = 5  # a state changes only through dataclasses.replace, which checks it
    assert (state.world_size, state.step) == (4, 6)
    assert PlayerState.LIMITS["world_size"] == (2, MAX_LOCAL_WORLD_SIZE)  # the local cluster's


def test_player_is_driven_without_a_browser():
    calls = []

    def runner(world_size: int, nbytes: int):
        calls.append((world_size, nbytes))
        return ring(world_size, nbytes)[0]

    player = RingPlayer(runner, world_size=4, nbytes=64)
    assert calls == [(4, 64)]
    assert "input" in player.figure.layout.title.text
    player.step_slider.value = 2
    assert player.state.step == 2
    assert "reduce-scatter, step 2 of 3" in player.figure.layout.title.text
    player.forward_button.click()
    assert player.state.step == 3 and player.play.value == 3
    assert "reduce-scatter, step 3 of 3" in player.figure.layout.title.text
    # the step is said once, by the figure's title: no text widget repeats it
    boxes = player.widget.children
    texts = [getattr(c, "value", "") for b in boxes for c in getattr(b, "children", [b])]
    assert not any("step 3 of 3" in str(t) for t in texts)
    player.back_button.click()
    player.back_button.click()
    assert player.step_slider.value == 1
    player.play.value = 6
    assert (
        player.step_slider.value == 6
        and "all-gather, step 3 of 3" in player.figure.layout.title.text
    )
    player.forward_button.click()  # already at the end: stays
    assert player.state.step == 6
    shown = cells(player.figure.data)
    assert set(shown.values()) == {15.0}

    player.world_slider.value = 3
    player.size_dropdown.value = 256
    player.run_button.click()
    assert calls[-1] == (3, 256)
    assert (player.state.world_size, player.state.nbytes, player.state.step) == (3, 256, 0)
    assert player.step_slider.max == 4 and player.play.max == 4
    assert len(cells(player.figure.data)) == 9
    assert "3 ranks" in player.status.value
    bundle = player._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_player_bounds_and_messages_are_the_configs():
    player = RingPlayer(lambda n, b: ring(n, b)[0], world_size=3, nbytes=24)
    low, high = PlayerState.LIMITS["world_size"]
    assert (player.world_slider.min, player.world_slider.max) == (low, high)
    assert max(o[1] for o in player.size_dropdown.options) == PlayerState.LIMITS["nbytes"][1]
    player.world_slider.max = high + 4  # a slider the config's limit no longer bounds
    player.world_slider.value = high + 1
    player.run_button.click()
    with pytest.raises(ValueError) as err:
        replace(player.state, world_size=high + 1)
    assert html.escape(str(err.value), quote=False) in player.status.value
    assert player.state.world_size == 3 and player.trace.world_size == 3  # the last run kept


def test_player_shows_a_failed_run_and_keeps_the_last_one():
    def runner(world_size: int, nbytes: int):
        if world_size == 5:
            raise RuntimeError("rank 3 died")
        return ring(world_size, nbytes)[0]

    player = RingPlayer(runner, world_size=3, nbytes=24)
    player.step_slider.value = 2
    player.world_slider.value = 5
    player.run_button.click()
    assert "run failed: RuntimeError: rank 3 died" in player.status.value
    assert player.trace.world_size == 3 and player.state.step == 2


# ----------------------------------------------------------------- renderers never import torch
def test_viz_imports_no_torch_and_no_plotting_library_at_import():
    code = (
        "import sys\n"
        "import edu_parallel.viz as v\n"
        "assert not {'torch', 'plotly', 'matplotlib', 'ipywidgets'} & set(sys.modules), "
        "sorted(m for m in sys.modules if m.split('.')[0] in ('torch','plotly','matplotlib'))\n"
        "from edu_parallel.models.simulation import simulate\n"
        "from edu_parallel.plans.ring import ring_allreduce_plan\n"
        "t, _ = simulate(ring_allreduce_plan(3), 24)\n"
        "v.ring_animation(t); v.step_grid(t); v.bytes_bars(t); v.timeline(t)\n"
        "v.RingPlayer(lambda n, b: simulate(ring_allreduce_plan(n), b)[0], 3, 24)\n"
    )
    fresh_python(code)


def test_matplotlib_renderers_display_in_a_notebook_without_pyplot():
    from matplotlib.axes import Axes

    from edu_parallel.viz import bytes_bars, step_grid

    trace = simulate(ring_allreduce_plan(3), 48, "int64", pattern="powers_of_two")[0]
    for fig in (step_grid(trace), bytes_bars(trace)):
        png, meta = fig._repr_png_()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
        # the figure's visible text rides beside its pixels: its title and its axis labels
        text = meta[TEXT_KEY]
        labels = {f(ax) for ax in fig.axes for f in (Axes.get_title, Axes.get_xlabel)} - {""}
        assert labels and labels <= set(text), (labels, text)
        assert len(text) == len(set(text)) and "" not in text


def _png_array(png: bytes):
    import io

    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")).astype(int)


def _savefig_tight(fig) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def test_the_notebook_png_is_savefigs_tight_crop_drawn_once():
    """``_repr_png_`` draws once and cuts the tight box (padded with the face colour where the pad
    passes the edge): the same size as ``savefig(bbox_inches="tight")`` and the same picture up to
    sub-pixel shifts; a figure whose artists leave its edge falls back to savefig; the figure's
    dpi and canvas are as before."""
    import numpy as np

    from edu_parallel.viz.figure import new_figure, tight_png

    trace = simulate(ring_allreduce_plan(4), 64, "int64", pattern="powers_of_two")[0]
    for make in (lambda: step_grid(trace), lambda: bytes_bars(trace)):
        fig, ref = make(), make()
        canvas, dpi = fig.canvas, fig.dpi
        mine, theirs = _png_array(fig._repr_png_()[0]), _png_array(_savefig_tight(ref))
        assert fig.canvas is canvas and fig.dpi == dpi
        assert mine.shape == theirs.shape
        assert (np.abs(mine - theirs).max(axis=-1) > 60).mean() < 0.05  # anti-aliasing only
    fig = new_figure(figsize=(3, 2))  # a word at the left edge: the pad passes the edge
    fig.set_facecolor((0.2, 0.4, 0.6))
    fig.text(0.0, 0.5, "x", fontsize=40)
    img = _png_array(tight_png(fig))
    assert img.shape == _png_array(_savefig_tight(fig)).shape and img.shape[1] < 60
    assert {tuple(p) for p in img[:, :5].reshape(-1, 4)} == {(51, 102, 153, 255)}  # face colour
    wide = new_figure(figsize=(3, 2))  # a label past the right edge: the box grows, as savefig's
    wide.add_subplot().plot([0, 1])
    wide.text(0.9, 0.5, "a label that runs far past the figure's right edge")
    assert _png_array(tight_png(wide)).shape == _png_array(_savefig_tight(wide)).shape
    assert _png_array(tight_png(wide)).shape[1] > 300 + 100


def test_log_axes_are_labelled_in_plain_text_decades():
    from edu_parallel.viz import crossover_figure
    from edu_parallel.viz.figure import decade_label

    assert [decade_label(v) for v in (1, 10, 1e3, 1e-6, 2e-6)] == [
        "10⁰",
        "10¹",
        "10³",
        "10⁻⁶",
        "2e-06",
    ]
    fig = crossover_figure(64, "ib-ndr-400")
    fig._repr_png_()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels() + ax.get_xticklabels()]
    assert "10⁰" in labels and not any("$" in t for t in labels)  # no mathtext to parse
    assert not ax.yaxis.get_minorticklocs().size and not ax.xaxis.get_minorticklocs().size
