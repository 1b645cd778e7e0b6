"""Figures in 简体中文: CJK glyphs in matplotlib (no missing-glyph box), Chinese titles and axes."""

from __future__ import annotations

import io
import re
import warnings

import matplotlib
import pytest
from matplotlib import font_manager
from matplotlib.figure import Figure

from edu_parallel.core.i18n import language
from edu_parallel.viz.figure import new_figure
from edu_parallel.viz.fonts import CJK_FAMILY, cjk_font_path, use_cjk_font

TITLE = "环形 AllReduce（全归约）ring all-reduce"
CJK = re.compile(r"[\u3400-\u9fff]")


def render(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=50)
    return buf.getvalue()


def titled(fig):
    ax = fig.subplots()
    ax.set_title(TITLE)
    ax.set_xlabel("字节 (bytes)")
    ax.set_ylabel("时间 (µs)")
    return fig


def test_the_cjk_font_ships_with_mplfonts():
    path = cjk_font_path()
    assert path is not None and path.name == "NotoSansCJKsc-Regular.otf"
    assert use_cjk_font() == CJK_FAMILY
    assert use_cjk_font() == CJK_FAMILY  # idempotent
    family = matplotlib.rcParams["font.family"]
    assert list(family).count(CJK_FAMILY) == 1 and family[-1] == CJK_FAMILY
    # Latin text keeps the default font: the first family still resolves to DejaVu Sans
    first = font_manager.findfont(font_manager.FontProperties(family=[family[0]]))
    assert "DejaVuSans" in first


def test_a_chinese_title_renders_with_no_missing_glyph():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" would raise here
        png = render(titled(new_figure(figsize=(4, 3))))
    assert png.startswith(b"\x89PNG")


def test_without_the_cjk_font_the_same_title_warns_about_missing_glyphs():
    """The test above can fail: DejaVu Sans alone has no CJK glyph."""
    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):
        fig = titled(Figure(figsize=(4, 3)))
        with pytest.warns(UserWarning, match="missing from font"):
            render(fig)


# ----------------------------------------------------------------- figures in Chinese
def _ring_trace():
    from edu_parallel.models.simulation import simulate
    from edu_parallel.plans.ring import ring_allreduce_plan

    return simulate(ring_allreduce_plan(4), 64)[0]


def _texts(fig) -> list[str]:
    """The title and axis titles a learner reads, plotly or matplotlib."""
    if hasattr(fig, "to_plotly_json"):
        layout = fig.layout
        out = [layout.title.text or ""]
        out += [f.layout.title.text or "" for f in fig.frames if f.layout.title.text]
        for key in ("xaxis", "yaxis"):
            axis = layout[key]
            out.append(axis.title.text or "" if axis is not None else "")
        out += [t.name or "" for t in fig.data if t.showlegend is not False]
        return [t for t in out if t]
    out = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        legend = ax.get_legend()
        out += [t.get_text() for t in legend.get_texts()] if legend else []
    return [t for t in out if t]


def _figures():
    from test_viz_zero import zero3_trace

    from edu_parallel.pipeline_parallel.builders import build_schedule
    from edu_parallel.pipeline_parallel.timing import time_schedule
    from edu_parallel.viz import (
        bytes_bars,
        memory_bars,
        memory_bars_animation,
        pipeline_gantt,
        ring_animation,
    )

    breakdown = {"param16": 2.0e9, "grad16": 2.0e9, "master32": 4.0e9, "adam_m": 4.0e9}
    return {
        "ring_animation": ring_animation(_ring_trace()),
        "pipeline_gantt": pipeline_gantt(time_schedule(build_schedule("1f1b", 4, 8, 1), 1, 2, 0)),
        "memory_bars_animation": memory_bars_animation(zero3_trace(world=2)),
        "memory_bars": memory_bars({"DP": breakdown}, gpu_bytes=20 * 1024**3),
        "bytes_bars": bytes_bars(_ring_trace()),
    }


def test_figures_are_drawn_in_chinese_and_english_is_unchanged():
    english = {name: _texts(fig) for name, fig in _figures().items()}
    with language("zh"), warnings.catch_warnings():
        warnings.simplefilter("error")  # no missing glyph in the matplotlib ones
        chinese = {name: _texts(fig) for name, fig in _figures().items()}
    for name in english:
        assert english[name] and chinese[name], name
        assert not any(CJK.search(t) for t in english[name]), (name, english[name])
        title = chinese[name][0]
        assert CJK.search(title), (name, title)  # the title is Chinese
        assert title != english[name][0]
        assert any(CJK.search(t) for t in chinese[name][1:]), (name, chinese[name])  # axes/legend


def test_matplotlib_figures_in_chinese_render_without_missing_glyphs():
    from edu_parallel.viz import before_after, step_grid

    with language("zh"), warnings.catch_warnings():
        warnings.simplefilter("error")
        for fig in (
            step_grid(_ring_trace()),
            before_after(_ring_trace()),
            _figures()["memory_bars"],
        ):
            assert CJK.search(" ".join(_texts(fig)))
            render(fig)
