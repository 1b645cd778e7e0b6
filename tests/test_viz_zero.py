"""ZeRO memory renderers: the ledger and the animated bars.

Traces are built by hand (the event format of :mod:`edu_parallel.zero.stages`), so every
expected byte count below is written out, not recomputed by the code under test. The static
bars and the explorer widget are in ``test_viz_zero_widget.py``.
"""

from __future__ import annotations

import pytest

from edu_parallel.core.trace import Event, Trace
from edu_parallel.viz.memory_ledger import CATEGORIES, CATEGORY_COLORS, Ledger, ledger
from edu_parallel.viz.zero import memory_bars_animation

MiB = 1024**2


def mem(rank: int, op: str, nbytes: int, t: float, cat: str, step=None, phase=None) -> Event:
    """A memory event as edu_parallel.zero.stages writes it (signed nbytes)."""
    signed = nbytes if op == "alloc" else -nbytes
    return Event(
        kind="memory",
        rank=rank,
        op=op,
        nbytes=signed,
        start=t,
        end=t,
        step=step,
        phase=phase,
        attrs={"category": cat},
    )


def zero3_trace(world: int = 2, shard: int = 4 * MiB, steps: int = 1) -> Trace:
    """ZeRO-3 on ``world`` ranks: shards allocated up front (step None), then per step each rank
    gathers the full bf16 parameters (world * shard) in forward and in backward and frees them."""
    ev: list[Event] = []
    t = 0.0
    for r in range(world):
        for cat, size in (
            ("param16", shard),
            ("master32", 2 * shard),
            ("adam_m", 2 * shard),
            ("adam_v", 2 * shard),
        ):
            t += 1
            ev.append(mem(r, "alloc", size, t, cat))
    for s in range(steps):
        for r in range(world):
            t += 1
            ev.append(mem(r, "alloc", world * shard, t, "gathered_params", s, "forward"))
            t += 1
            ev.append(mem(r, "free", world * shard, t, "gathered_params", s, "forward"))
        for r in range(world):
            t += 1
            ev.append(mem(r, "alloc", world * shard, t, "gathered_params", s, "backward"))
            t += 1
            ev.append(mem(r, "alloc", shard, t, "grad16", s, "backward"))
            t += 1
            ev.append(mem(r, "free", world * shard, t, "gathered_params", s, "backward"))
            ev.append(
                Event(
                    kind="collective",
                    rank=r,
                    op="reduce_scatter_tensor",
                    nbytes=world * shard,
                    start=t,
                    end=t + 0.5,
                    step=s,
                    phase="backward",
                )
            )
        for r in range(world):
            t += 1
            ev.append(mem(r, "free", shard, t, "grad16", s, "optimizer"))
    return Trace(meta={"concept": "zero", "world_size": world, "zero_stage": 3}, events=ev)


def dp_trace(world: int = 2, full: int = 8 * MiB) -> Trace:
    """Plain data parallel: every rank holds everything; gradients live during backward."""
    ev: list[Event] = []
    t = 0.0
    for r in range(world):
        for cat, size in (
            ("param16", full),
            ("master32", 2 * full),
            ("adam_m", 2 * full),
            ("adam_v", 2 * full),
        ):
            t += 1
            ev.append(mem(r, "alloc", size, t, cat))
    for r in range(world):
        t += 1
        ev.append(mem(r, "alloc", full, t, "grad16", 0, "backward"))
    for r in range(world):
        t += 1
        ev.append(mem(r, "alloc", full, t, "comm_buffer", 0, "backward"))
        t += 1
        ev.append(mem(r, "free", full, t, "comm_buffer", 0, "backward"))
    return Trace(meta={"concept": "dp", "world_size": world}, events=ev)


# ----------------------------------------------------------------- the ledger
def test_ledger_running_sums_after_every_event():
    s = 4 * MiB
    lg = ledger(zero3_trace(world=2, shard=s))
    frames = lg.frames()
    assert len(frames) == 8 + 2 * 6 + 1  # memory events + the start
    assert all(v == 0 for f in frames[:1] for c in f.per_rank.values() for v in c.values())
    after_setup = frames[8]
    for r in (0, 1):
        assert after_setup.per_rank[r] == {
            "param16": s,
            "grad16": 0,
            "master32": 2 * s,
            "adam_m": 2 * s,
            "adam_v": 2 * s,
            "gathered_params": 0,
        }
    # Rank 0 gathers 2 shards in forward: they appear ...
    assert frames[9].per_rank[0]["gathered_params"] == 2 * s
    assert frames[9].per_rank[1]["gathered_params"] == 0
    assert "r0 +8 MiB gathered_params (forward, step 0)" == frames[9].label
    # ... and are released.
    assert frames[10].per_rank[0]["gathered_params"] == 0
    assert frames[10].label.startswith("r0 -8 MiB gathered_params")
    # Backward on rank 0: gathered 2s + grads s held together, then the gather goes.
    assert frames[13].per_rank[0]["gathered_params"] == 2 * s
    assert frames[14].per_rank[0]["grad16"] == s
    assert frames[14].total(0) == s + 6 * s + 2 * s + s
    assert frames[15].per_rank[0]["gathered_params"] == 0
    end = frames[-1]
    assert end.per_rank[0] == after_setup.per_rank[0]
    assert lg.bytes(0) == 7 * s and lg.bytes(1, "grad16") == 0
    assert [f.index for f in frames] == list(range(len(frames)))
    times = [f.time for f in frames[1:]]
    assert times == sorted(times)


def test_ledger_orders_events_by_time_and_accepts_unsigned_frees():
    ev = [
        Event(
            kind="memory",
            rank=0,
            op="free",
            nbytes=100,
            start=3.0,
            end=3.0,
            attrs={"category": "comm_buffer"},
        ),
        Event(
            kind="memory",
            rank=0,
            op="alloc",
            nbytes=100,
            start=1.0,
            end=1.0,
            attrs={"category": "comm_buffer"},
        ),
        Event(
            kind="memory",
            rank=0,
            op="alloc",
            nbytes=40,
            start=2.0,
            end=2.0,
            attrs={"category": "adam_m"},
        ),
    ]
    lg = ledger(Trace(events=ev))
    assert [f.per_rank[0]["comm_buffer"] for f in lg.frames()] == [0, 100, 100, 0]
    assert lg.peaks_by_category(0) == {"adam_m": 40, "comm_buffer": 100}
    assert lg.categories == ["adam_m", "comm_buffer"]  # CATEGORIES order, not appearance


def test_peaks_by_category_and_peak_model_state():
    s = 1000
    lg = ledger(zero3_trace(world=4, shard=s))
    peaks = lg.peaks_by_category(2)
    assert peaks == {
        "param16": s,
        "grad16": s,
        "master32": 2 * s,
        "adam_m": 2 * s,
        "adam_v": 2 * s,
        "gathered_params": 4 * s,
    }
    # Model states peak while the gradient shard is alive: 1 + 1 + 2 + 2 + 2 shards.
    assert lg.peak_model_state(2) == 8 * s
    assert lg.peak_total(2) == 8 * s + 4 * s
    with pytest.raises(ValueError, match=r"rank=9 is not valid: expected one of \[0, 1, 2, 3\]"):
        lg.peaks_by_category(9)
    assert lg.steps() == [0]


def test_peak_model_state_is_the_peak_of_the_sum_not_the_sum_of_peaks():
    ev = [
        mem(0, "alloc", 10, 1, "grad16"),
        mem(0, "free", 10, 2, "grad16"),
        mem(0, "alloc", 7, 3, "adam_m"),
        mem(0, "alloc", 50, 4, "gathered_params"),
    ]
    lg = ledger(Trace(events=ev))
    assert lg.peak_model_state(0) == 10
    assert sum(lg.peaks_by_category(0)[c] for c in ("grad16", "adam_m")) == 17


def test_ledger_of_a_trace_without_memory_events_has_one_frame():
    lg = Ledger(
        Trace(meta={"world_size": 2}, events=[Event(kind="collective", rank=0, op="all_reduce")])
    )
    assert len(lg.frames()) == 1 and lg.ranks == [0, 1] and lg.peak_total(1) == 0


# ----------------------------------------------------------------- animation
def bars(frame_data) -> dict[tuple[int, str], tuple[float, int]]:
    """{(rank, category): (bar height, exact bytes)} of a frame's bar traces."""
    out = {}
    for bar in frame_data:
        for (r, cat, b), y in zip(bar.customdata, bar.y, strict=True):
            out[(int(r), str(cat))] = (float(y), int(b))
    return out


def test_animation_bar_heights_equal_the_ledger():
    trace = zero3_trace(world=2, shard=4 * MiB, steps=2)
    fig = memory_bars_animation(trace, title="ZeRO-3")
    lg = ledger(trace)
    first, last = lg.step_range(1)  # default: the last step
    assert len(fig.frames) == last - first + 1 == 12 + 1
    assert fig.layout.meta["unit"] == "MiB" and fig.layout.meta["scale"] == MiB
    for k, frame in enumerate(fig.frames):
        want = lg.frames()[first + k].per_rank
        got = bars(frame.data)
        assert len(got) == 2 * len(lg.categories)
        for (r, cat), (height, exact) in got.items():
            assert exact == want[r][cat], (k, r, cat)
            assert height == pytest.approx(want[r][cat] / MiB)
    # The gather appears in frame 1 on rank 0 and is gone in frame 2.
    assert bars(fig.frames[1].data)[(0, "gathered_params")][1] == 8 * MiB
    assert bars(fig.frames[2].data)[(0, "gathered_params")][1] == 0
    assert "gathered_params" in fig.frames[1].layout.xaxis.title.text
    assert len(fig.layout.sliders[0].steps) == len(fig.frames)
    assert fig.layout.updatemenus[0].buttons[0].method == "animate"
    assert fig.layout.barmode == "stack"
    assert "ZeRO-3" in fig.layout.title.text and "step 1" in fig.layout.title.text


def test_animation_of_every_event_has_memory_events_plus_one_frames():
    trace = zero3_trace(world=2, steps=2)
    fig = memory_bars_animation(trace, step=None)
    n_memory = len(trace.select("memory"))
    assert len(fig.frames) == n_memory + 1 == len(ledger(trace).frames())
    fig0 = memory_bars_animation(trace, step=0)
    assert len(fig0.frames) == 12 + 1
    with pytest.raises(ValueError, match="step=7 is not valid: expected one of 0, 1"):
        memory_bars_animation(trace, step=7)


def test_animation_colours_and_legend_are_consistent():
    fig = memory_bars_animation(zero3_trace())
    names = {}
    for bar in fig.data:
        names[bar.legendgroup] = bar.marker.color
    for cat, color in names.items():
        assert CATEGORY_COLORS[cat] == color
    assert [b.legendgroup for b in fig.data if b.showlegend] == [
        c for c in CATEGORIES if c in names
    ]
    assert "8,388,608 B" in fig.frames[1].data[list(names).index("gathered_params")].hovertext[0]


def test_side_by_side_traces_share_the_y_axis_and_hold_their_last_state():
    t_dp, t_z3 = dp_trace(world=2, full=8 * MiB), zero3_trace(world=2, shard=4 * MiB)
    fig = memory_bars_animation({"DP": t_dp, "ZeRO-3": t_z3})
    lg_dp, lg_z3 = ledger(t_dp), ledger(t_z3)
    r_dp, r_z3 = lg_dp.step_range(0), lg_z3.step_range(0)
    assert len(fig.frames) == max(r_dp[1] - r_dp[0], r_z3[1] - r_z3[0]) + 1 == 13
    cats = ["param16", "grad16", "master32", "adam_m", "adam_v", "gathered_params", "comm_buffer"]
    per_panel = len(cats)
    assert len(fig.data) == 2 * per_panel
    assert {b.xaxis for b in fig.data[:per_panel]} == {"x"}
    assert {b.xaxis for b in fig.data[per_panel:]} == {"x2"}
    assert fig.layout.yaxis2.matches == "y" or fig.layout.yaxis2.showticklabels is False
    # One fixed y range: the tallest stack of either run over the animation, plus headroom.
    dp_peak = max(f.total(r) for f in lg_dp.frames() for r in (0, 1))
    assert dp_peak == 8 * MiB * 9
    assert fig.layout.yaxis.range[1] == pytest.approx(dp_peak / MiB * 1.08)
    for k, frame in enumerate(fig.frames):
        dp = bars(frame.data[:per_panel])
        z3 = bars(frame.data[per_panel:])
        want_dp = lg_dp.frames()[min(r_dp[0] + k, r_dp[1])].per_rank
        want_z3 = lg_z3.frames()[min(r_z3[0] + k, r_z3[1])].per_rank
        for (r, cat), (_, b) in dp.items():
            assert b == want_dp[r].get(cat, 0)
        for (r, cat), (_, b) in z3.items():
            assert b == want_z3[r].get(cat, 0)
    titles = [a.text for a in fig.layout.annotations]
    assert "<b>DP</b>" in titles and "<b>ZeRO-3</b>" in titles
    assert sum(b.showlegend for b in fig.data) == per_panel


def test_a_run_with_no_event_in_its_steps_shows_what_setup_allocated_from_frame_0():
    """ZeRO-1 gathers and buffers nothing during a step: every memory event of its run is setup
    (step None). Beside runs with step events, its panel shows what setup allocated at every
    frame, frame 0 included, and says so, instead of starting from an empty "start"."""
    t_dp = dp_trace(world=2, full=8 * MiB)
    setup_only = Trace(
        meta={"concept": "zero", "world_size": 2},
        events=[e for e in t_dp.events if e.step is None],
    )
    fig = memory_bars_animation({"DP": t_dp, "ZeRO-1": setup_only})
    per_panel = len(fig.data) // 2
    setup = {"param16": 8 * MiB, "master32": 16 * MiB, "adam_m": 16 * MiB, "adam_v": 16 * MiB}
    held = {(r, cat): b for r in (0, 1) for cat, b in setup.items()}
    for frame in [fig, *fig.frames]:
        shown = {key: b for key, (_, b) in bars(frame.data[per_panel:]).items() if b}
        assert shown == held
    caption = fig.layout.xaxis2.title.text
    assert caption.startswith("no memory event in the step") and "start" not in caption
    assert "events of step 0" in fig.layout.title.text  # the DP panel's step names the title


def test_animation_rejects_bad_input():
    with pytest.raises(ValueError, match="trace_or_traces"):
        memory_bars_animation({})
    with pytest.raises(ValueError, match="a trace with memory events"):
        memory_bars_animation(Trace(events=[Event(kind="collective", rank=0, op="all_reduce")]))


def test_animation_exports_playable_html(tmp_path):
    path = tmp_path / "mem.html"
    memory_bars_animation({"DP": dp_trace(), "ZeRO-3": zero3_trace()}).write_html(
        path, include_plotlyjs="cdn", auto_play=False
    )
    html = path.read_text()
    assert "Plotly.addFrames" in html or "frames" in html
    assert "gathered parameters" in html


def test_the_16_bit_categories_name_the_dtype_the_engine_trains_in():
    """The legend of lesson 07's ZeRO figures names the 2-byte parameters and gradients by the
    dtype ``zero/stages.py`` allocates them in (``task.mlp.PARAM_DTYPE``), as the prose does."""
    import torch

    from edu_parallel.core.i18n import language
    from edu_parallel.task.mlp import PARAM_DTYPE
    from edu_parallel.viz.memory_ledger import category_name

    short = {torch.bfloat16: "bf16", torch.float16: "fp16"}[PARAM_DTYPE]
    assert torch.empty(0, dtype=PARAM_DTYPE).element_size() == 2
    for lang in ("en", "zh"):
        with language(lang):
            for cat in ("param16", "grad16"):
                name = category_name(cat)
                assert name.startswith(short), (lang, name)
                assert ({"bf16", "fp16"} - {short}).pop() not in name
