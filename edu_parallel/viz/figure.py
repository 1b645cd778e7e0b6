"""Matplotlib figures that show themselves in a notebook without pyplot.

The renderers build :class:`matplotlib.figure.Figure` objects directly (no pyplot global state, safe
headless). A bare Figure only displays once pyplot's inline backend is active; this subclass adds
``_repr_png_`` so a renderer's result displays in Jupyter as the last expression of a cell. The
PNG's output metadata carries the figure's visible text (:func:`figure_text`, under
:data:`TEXT_KEY`): what a reader of the image reads, kept as text beside its pixels, where a scan of
a lesson's outputs (the Chinese lessons' English check) or a page's alt text can read it.

The PNG is cropped to the figure's tight bounding box, as ``savefig(bbox_inches="tight")`` crops
it, from a single draw (:func:`tight_png`): ``savefig`` draws a figure twice for that (once to
find the box, once to render into it), and the first draw, text layout and constrained layout
included, costs about as much as the second.
"""

from __future__ import annotations

import io
import math
from functools import cache
from typing import Any

from .fit import PNG_DPI
from .fonts import use_cjk_font

TEXT_KEY = "edu_parallel/text"  # the output metadata key of a PNG figure's visible text


def tight_png(fig: Any, dpi: float = PNG_DPI) -> bytes:
    """``fig`` as PNG bytes at ``dpi``, cropped to its tight bounding box padded by
    ``rcParams["savefig.pad_inches"]``: what ``fig.savefig(buf, format="png", dpi=dpi,
    bbox_inches="tight")`` writes, drawn once. The figure is drawn on an Agg canvas and the box
    cut from its pixels; a pad that reaches past the figure's edge is filled with the figure's
    face colour, as ``savefig`` fills it. A figure whose artists reach past its edge (the box is
    larger than the figure) is saved by ``savefig`` itself, which moves it into the box."""
    import matplotlib as mpl
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgba

    plain_canvas, plain_dpi = fig.canvas, fig.dpi
    canvas = FigureCanvasAgg(fig)
    try:
        fig.dpi = dpi
        canvas.draw()
        box = fig.get_tightbbox(canvas.get_renderer())
        pixels = np.asarray(canvas.buffer_rgba())
        rows, cols = pixels.shape[:2]
        if box.x0 * dpi < -0.5 or box.y0 * dpi < -0.5 or box.x1 * dpi > cols + 0.5:
            return _savefig_tight(fig, dpi)
        if box.y1 * dpi > rows + 0.5:
            return _savefig_tight(fig, dpi)
        pad = box.padded(mpl.rcParams["savefig.pad_inches"])
        width, height = int(pad.width * dpi), int(pad.height * dpi)  # as Agg sizes its canvas
        left, top = round(pad.x0 * dpi), round(rows - pad.y1 * dpi)  # rows count from the top
        face = np.array([round(255 * v) for v in to_rgba(fig.get_facecolor())], dtype=np.uint8)
        out = np.empty((height, width, 4), dtype=np.uint8)
        out[:] = face
        r0, r1 = max(top, 0), min(top + height, rows)
        c0, c1 = max(left, 0), min(left + width, cols)
        out[r0 - top : r1 - top, c0 - left : c1 - left] = pixels[r0:r1, c0:c1]
    finally:
        fig.dpi = plain_dpi
        fig.set_canvas(plain_canvas)
    buf = io.BytesIO()
    mpl.image.imsave(buf, out, format="png", dpi=dpi)
    return buf.getvalue()


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")  # for the exponent of 10^k


def decade_label(value: float, _pos: Any = None) -> str:
    """``10³`` for 1000 (a power of ten, in plain text with superscript digits), else ``%g``."""
    if value > 0:
        k = round(math.log10(value))
        if math.isclose(value, 10.0**k, rel_tol=1e-9):
            return "10" + str(k).translate(_SUPERSCRIPT)
    return f"{value:g}"


def plain_log_ticks(*axes: Any) -> None:
    """Log axes (``ax.xaxis``, ``ax.yaxis``) labelled ``10⁰, 10¹, …`` in plain text, without
    minor ticks. matplotlib's default labels look the same but go through its mathtext parser
    (pyparsing, several ms per distinct label), and its minor ticks (2..9 of every decade, no
    labels) are ~50 Tick objects per axis to build and lay out. Call it after the axis' scale is
    set (``set_xscale`` resets the formatter)."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    for axis in axes:
        axis.set_major_formatter(FuncFormatter(decade_label))
        axis.set_minor_locator(NullLocator())


def _savefig_tight(fig: Any, dpi: float) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


@cache
def figure_class() -> type:
    from matplotlib.figure import Figure

    class NotebookFigure(Figure):
        """A Figure that Jupyter renders as PNG."""

        def _repr_png_(self) -> tuple[bytes, dict[str, list[str]]]:
            png = tight_png(self)  # drawn: the text artists are laid out
            return png, {TEXT_KEY: figure_text(self)}

    return NotebookFigure


def figure_text(fig: Any) -> list[str]:
    """The text of every visible text artist of ``fig`` (titles, axis and tick labels, legend
    entries, annotations), once each, in the order matplotlib holds them."""
    from matplotlib.text import Text

    texts = (t.get_text().strip() for t in fig.findobj(Text) if t.get_visible())
    return list(dict.fromkeys(t for t in texts if t))


def new_figure(**kwargs: Any) -> Any:
    """A new displayable matplotlib Figure (same arguments as ``Figure``), with CJK glyphs
    available (:func:`.fonts.use_cjk_font`) so that Chinese labels render."""
    use_cjk_font()
    return figure_class()(**kwargs)
