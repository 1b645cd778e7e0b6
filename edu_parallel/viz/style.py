"""The one plot style of every renderer: the layout (font, width, title, legend) and the palette.

Layout: a figure is :data:`WIDTH` = :data:`~edu_parallel.viz.fit.MAX_WIDTH_PX` (940 px) wide, so
it fits the lesson's output column; text is :data:`FONT_PX` (12 px) and a title
:data:`TITLE_FONT_PX`; :func:`title_layout` puts the title top left, clear of plotly's modebar,
and :func:`legend_below` a horizontal legend under the plot area (``fit.py`` holds the rules a
figure is checked against, this module the choices every renderer makes).

Palette: Tableau 10 as Vega ships it (https://vega.github.io/vega/docs/schemes/#tableau10; Maureen
Stone's 2016 redesign for Tableau), one name per colour, and a lighter or darker partner mixed
from it (:func:`tint`, :func:`shade`) where a category needs a family. Every category keeps one
colour in every figure:

* per rank or series: :data:`SERIES` (:func:`series_color`), 20 with the tints (:data:`WIDE`);
* per phase: :data:`PHASE_COLORS` (forward blue, backward orange, optimizer green, communication
  red, idle grey), and :data:`COMPUTE`, :data:`COMMUNICATION`, :data:`IDLE`;
* per memory category: :data:`MEMORY_COLORS` (parameters blue, gradients orange, optimizer
  states green, activations purple: the phase that makes each);
* per parallel dimension: :data:`DIM_COLORS` (DP green, TP red, PP teal, EP purple);
* per collective op and per algorithm: :data:`OP_COLORS`, :data:`ALGORITHM_COLORS`;
* neutrals (ink, grid, empty cells, panels), :data:`ALERT` (a mark that draws the eye: a red
  outline, the time cursor, a budget line) and the HTML colours of a widget's status line.

Pure Python, no plotting library.
"""

from __future__ import annotations

from typing import Any

from .fit import MAX_WIDTH_PX

# ----------------------------------------------------------------- layout
WIDTH = MAX_WIDTH_PX  # every plotly figure: the lesson column's width
FONT_PX = 12  # labels, legends, ticks (>= fit.MIN_FONT_PX)
TITLE_FONT_PX = 15
TITLE_PAD_PX = 10  # the title and subtitle start this far from the figure's left edge, not on it
FONT = dict(size=FONT_PX)


def title_layout(text: str, subtitle: str | None = None) -> dict[str, Any]:
    """A left-aligned title (and subtitle) below the top edge, clear of plotly's modebar."""
    sub = {} if subtitle is None else dict(subtitle=dict(text=subtitle, font=FONT))
    return (
        dict(
            text=text,
            x=0.0,
            xanchor="left",
            y=0.98,
            yanchor="top",
            pad=dict(l=TITLE_PAD_PX),
            font=dict(size=TITLE_FONT_PX),
        )
        | sub
    )


def below(height: int, margin: dict[str, int], gap_px: int) -> float:
    """The paper ``y`` that lies ``gap_px`` pixels below the plot area."""
    return -gap_px / (height - margin["t"] - margin["b"])


def legend_below(height: int, margin: dict[str, int], gap_px: int) -> dict[str, Any]:
    """A horizontal legend ``gap_px`` pixels below the plot area (under the axis title)."""
    return dict(orientation="h", x=0.0, y=below(height, margin, gap_px), yanchor="top", font=FONT)


# ----------------------------------------------------------------- mixing
def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def mix(a: str, b: str, t: float) -> str:
    """``#rrggbb`` between ``a`` (t = 0) and ``b`` (t = 1)."""
    t = min(max(t, 0.0), 1.0)
    return "#" + "".join(
        f"{round(x + (y - x) * t):02x}" for x, y in zip(_rgb(a), _rgb(b), strict=True)
    )


def tint(color: str, amount: float = 0.45) -> str:
    """``color`` mixed with white (``amount`` 0 = unchanged, 1 = white)."""
    return mix(color, WHITE, amount)


def shade(color: str, amount: float = 0.35) -> str:
    """``color`` mixed with black (``amount`` 0 = unchanged, 1 = black)."""
    return mix(color, "#000000", amount)


def text_color(background: str) -> str:
    """Ink or white, whichever reads better on a ``#rrggbb`` background."""
    r, g, b = _rgb(background)
    return DARK_TEXT if 0.299 * r + 0.587 * g + 0.114 * b > 140 else WHITE


# ----------------------------------------------------------------- the palette
BLUE = "#4c78a8"
ORANGE = "#f58518"
RED = "#e45756"
TEAL = "#72b7b2"
GREEN = "#54a24b"
YELLOW = "#eeca3b"
PURPLE = "#b279a2"
PINK = "#ff9da6"
BROWN = "#9d755d"
GREY = "#bab0ac"

# neutrals
WHITE = "#ffffff"
DARK_TEXT = "#111111"  # text on a light cell
INK = "#222222"  # outlines and reference lines drawn in near-black
LABEL = "#444444"  # annotations and secondary labels
SOFT_INK = "#555555"  # a secondary line or outline
MUTED = "#7f7f7f"  # "other": an unknown op, a measured-here bar
PANEL_LINE = "#cccccc"
GRID = "#e0e0e0"
EMPTY = "#e6e6e6"  # a cell that holds nothing
PANEL = "#f4f4f4"  # the background of a group of marks
ALERT = "#d62728"  # a mark that draws the eye: an outline, the time cursor, a limit line
STAR = "#ffd700"  # the best configuration's star

# per rank, per series: blue, orange, green first, as the lessons' figures always drew them; then
# their tints (20 series)
SERIES = (BLUE, ORANGE, GREEN, RED, TEAL, PURPLE, BROWN, YELLOW, PINK, GREY)
WIDE = SERIES + tuple(tint(c) for c in SERIES)


def series_color(i: int, wide: bool = False) -> str:
    """The colour of series (or rank) ``i``, cycling through :data:`SERIES` (or :data:`WIDE`)."""
    colors = WIDE if wide else SERIES
    return colors[i % len(colors)]


# per phase of a training step
COMPUTE = BLUE  # forward + backward together
COMMUNICATION = RED
IDLE = GREY  # a bubble, a wait
IDLE_FILL = tint(IDLE, 0.7)  # a large idle area, hatched with IDLE
WAITING = MUTED  # communication that includes waiting for the others
PHASE_COLORS = {
    "forward": BLUE,
    "backward": ORANGE,
    "input_grad": ORANGE,  # zero bubble's I: the part of backward the previous stage waits for
    "weight_grad": YELLOW,  # zero bubble's W: the part that can wait
    "optimizer": GREEN,
    "communication": COMMUNICATION,
    "idle": IDLE,
}

# per memory category: the phase that makes it (the ledger's names and the report's)
PARAMETERS, GRADIENTS, OPTIMIZER_STATES, ACTIVATIONS = BLUE, ORANGE, GREEN, PURPLE
MEMORY_COLORS = {
    "param16": PARAMETERS,
    "param32": shade(PARAMETERS),  # fp32 training: the parameters are the master copy
    "grad16": GRADIENTS,
    "grad32": shade(GRADIENTS),
    "master32": shade(OPTIMIZER_STATES),
    "adam_m": OPTIMIZER_STATES,
    "adam_v": tint(OPTIMIZER_STATES),
    "gathered_params": RED,  # appears and is released
    "comm_buffer": MUTED,
    "parameters": PARAMETERS,
    "gradients": GRADIENTS,
    "optimizer": OPTIMIZER_STATES,
    "activations": ACTIVATIONS,
}
MEMORY_EXTRA = (TEAL, YELLOW, PINK, BROWN, GREY)  # categories the table does not know, in turn

# per parallel dimension (and the traffic of its groups)
DIM_COLORS = {"dp": GREEN, "tp": RED, "pp": TEAL, "ep": PURPLE}

# per collective op: what the receiver does (adds: red, copies: blue)
OP_COLORS = {
    "reduce": RED,
    "copy": BLUE,
    "all_gather": BLUE,
    "reduce_scatter": RED,
    "all_reduce": PURPLE,
}

# per all-reduce algorithm, as the cost models and NCCL name them
ALGORITHM_COLORS = {
    "ring": BLUE,
    "tree": RED,
    "double-tree": GREEN,
    "naive": MUTED,
    "ps": PURPLE,
    "rabenseifner": BROWN,
    "hierarchical": ORANGE,
    "Ring": BLUE,
    "Tree": RED,
    "CollNetDirect": BROWN,
    "CollNetChain": PINK,
    "NVLS": GREEN,
    "NVLSTree": TEAL,
    "PAT": PURPLE,
}

# the cells' scales (ColorBrewer colours): pale yellow to dark green, and blue, white, red
FEW_CONTRIBUTORS, ALL_CONTRIBUTORS = "#fff7bc", "#238b45"  # 1 rank .. every rank summed in
NEGATIVE, ZERO, POSITIVE = "#4575b4", "#f7f7f7", "#d73027"

# a widget's status line (HTML)
ERROR_HTML = "#bb0000"
OK_HTML = "#2a7a2a"
