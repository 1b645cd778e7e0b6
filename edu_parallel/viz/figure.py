"""Matplotlib figures that show themselves in a notebook without pyplot.

The renderers build :class:`matplotlib.figure.Figure` objects directly (no pyplot global state, safe
headless). A bare Figure only displays once pyplot's inline backend is active; this subclass adds
``_repr_png_`` so a renderer's result displays in Jupyter as the last expression of a cell.
"""

from __future__ import annotations

import io
from functools import cache
from typing import Any

from .fonts import use_cjk_font


@cache
def figure_class() -> type:
    from matplotlib.figure import Figure

    class NotebookFigure(Figure):
        """A Figure that Jupyter renders as PNG."""

        def _repr_png_(self) -> bytes:
            buf = io.BytesIO()
            self.savefig(buf, format="png", dpi=100, bbox_inches="tight")
            return buf.getvalue()

    return NotebookFigure


def new_figure(**kwargs: Any) -> Any:
    """A new displayable matplotlib Figure (same arguments as ``Figure``), with CJK glyphs
    available (:func:`.fonts.use_cjk_font`) so that Chinese labels render."""
    use_cjk_font()
    return figure_class()(**kwargs)
