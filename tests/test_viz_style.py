"""One plot style: every colour a renderer draws is named once, in viz/style.py, and a category
keeps its colour in every figure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from edu_parallel.viz import ddp, mesh_bars, pipeline, planner, strategy_map, style
from edu_parallel.viz.fit import MAX_WIDTH_PX
from edu_parallel.viz.memory_ledger import CATEGORY_COLORS, category_color
from edu_parallel.viz.tp import KIND_COLORS

VIZ = Path(style.__file__).parent
HEX = re.compile(r"#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b")


def test_no_renderer_types_a_colour_of_its_own():
    typed = {
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(VIZ.glob("*.py"))
        if path.name != "style.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if HEX.search(line.split("  # ")[0])
    }
    assert typed == set(), "\n".join(sorted(typed))


def test_the_checker_above_sees_a_typed_colour():
    assert HEX.search('marker=dict(color="#e45756")') and HEX.search("style='color:#b00'")
    assert not HEX.search('name=f"#{x} {op}"')  # an issue-order label is not a colour


def test_a_phase_keeps_its_colour_in_every_figure():
    forward, backward = style.PHASE_COLORS["forward"], style.PHASE_COLORS["backward"]
    assert ddp.COMPUTE_COLORS["forward"] == pipeline.KIND_COLORS["F"] == forward
    assert strategy_map.PASS_COLORS["forward"] == forward == style.COMPUTE
    assert ddp.COMPUTE_COLORS["backward"] == pipeline.KIND_COLORS["B"] == backward
    assert strategy_map.PASS_COLORS["backward"] == backward
    assert ddp.COMPUTE_COLORS["optimizer"] == style.PHASE_COLORS["optimizer"]
    assert planner.TERM_COLORS["compute"] == style.COMPUTE
    assert planner.TERM_COLORS["bubble"] == style.IDLE == style.PHASE_COLORS["idle"]
    assert len(set(pipeline.KIND_COLORS.values()) - {forward, backward}) == 1  # W's own colour


def test_a_memory_category_and_a_dimension_keep_their_colour():
    parts = {key: color for key, _name, color in mesh_bars.MEMORY_PARTS}
    assert parts["param_bytes"] == CATEGORY_COLORS["param16"] == style.PARAMETERS
    assert parts["grad_bytes"] == CATEGORY_COLORS["grad16"] == style.GRADIENTS
    assert parts["optimizer_bytes"] == CATEGORY_COLORS["adam_m"] == style.OPTIMIZER_STATES
    assert parts["activation_bytes"] == style.ACTIVATIONS
    assert len(set(CATEGORY_COLORS.values())) == len(CATEGORY_COLORS)  # told apart in a stack
    assert category_color("mystery", 0) not in CATEGORY_COLORS.values()
    for dim in ("tp", "pp", "dp", "ep"):
        assert planner.TERM_COLORS[dim] == style.DIM_COLORS[dim]
    assert strategy_map.PASS_COLORS["grad_sync"] == style.DIM_COLORS["dp"]
    assert len(set(planner.TERM_COLORS.values())) == len(planner.TERM_COLORS)
    assert (KIND_COLORS["slice"], KIND_COLORS["partial"], KIND_COLORS["full"]) == (
        style.BLUE,
        style.ORANGE,
        style.GREEN,
    )  # lesson 08's prose: blue slice, orange partial sum, green full tensor


def test_series_cycle_and_the_wide_series_is_twenty_distinct_colours():
    assert [style.series_color(i) for i in range(3)] == [style.BLUE, style.ORANGE, style.GREEN]
    assert style.series_color(len(style.SERIES)) == style.BLUE
    assert len(set(style.WIDE)) == 20
    assert style.series_color(10, wide=True) == style.tint(style.BLUE)


@pytest.mark.parametrize("color", [style.BLUE, style.YELLOW, style.GREY])
def test_mixing_and_ink(color):
    assert style.mix(color, style.WHITE, 0) == color and style.tint(color, 1) == style.WHITE
    assert style.shade(color, 1) == "#000000" and style.mix(color, style.INK, 2) == style.INK
    assert style.text_color(style.WHITE) == style.DARK_TEXT
    assert style.text_color(style.INK) == style.WHITE


def test_layout_helpers():
    assert style.WIDTH == MAX_WIDTH_PX
    title = style.title_layout("head", "sub")
    assert (title["x"], title["xanchor"], title["text"]) == (0.0, "left", "head")
    assert title["subtitle"] == {"text": "sub", "font": style.FONT}
    assert "subtitle" not in style.title_layout("head")
    margin = {"t": 100, "b": 100}
    assert style.below(400, margin, 50) == -0.25
    assert style.legend_below(400, margin, 50)["y"] == -0.25
