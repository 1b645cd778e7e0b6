"""Display width: the terminal columns a string takes, where a CJK character takes two.

Fixed-width text (a report's table, a plan's grid) pads and cuts its cells by these columns, not
by ``len``: ``f"{'阶段':<15}"`` would leave a Chinese header two columns too wide for each
character. Widths are measured with ``wcwidth`` (Markus Kuhn's ``wcwidth()``, Unicode's East Asian
Width property: wide and fullwidth characters take two columns, combining marks none).

    >>> width("rank"), width("发送字节")
    (4, 8)
    >>> ljust("阶段", 6) + "|"
    '阶段  |'
"""

from __future__ import annotations

from wcwidth import wcswidth, wcwidth

# The widest fixed-width line a lesson prints without wrapping: JupyterLab 4's output area gives
# text 955 px (viz/fit.py), its 13 px monospace (DejaVu Sans Mono, 0.602 em a glyph) 7.8 px a
# character: 122 characters; two kept for a scrollbar's or a theme's margin.
MAX_TEXT_COLUMNS = 120


def width(text: str) -> int:
    """The columns ``text`` takes on a terminal (a control character counts as none)."""
    total = wcswidth(text)
    if total >= 0:
        return total
    return sum(max(wcwidth(ch), 0) for ch in text)


def ljust(text: str, columns: int) -> str:
    """``text`` padded on the right to ``columns`` display columns (unchanged if wider)."""
    return text + " " * max(columns - width(text), 0)


def rjust(text: str, columns: int) -> str:
    """``text`` padded on the left to ``columns`` display columns (unchanged if wider)."""
    return " " * max(columns - width(text), 0) + text


def cut(text: str, columns: int) -> str:
    """The longest start of ``text`` that fits in ``columns`` display columns."""
    out, used = [], 0
    for ch in text:
        w = max(wcwidth(ch), 0)
        if used + w > columns:
            break
        out.append(ch)
        used += w
    return "".join(out)
