"""Display width: the terminal columns a string takes, where a CJK character takes two.

Fixed-width text (a report's table, a plan's grid) pads and cuts its cells by these columns, not
by ``len``: ``f"{'阶段':<15}"`` would leave a Chinese header two columns too wide for each
character. Widths are measured with ``wcwidth`` (Markus Kuhn's ``wcwidth()``, Unicode's East Asian
Width property: wide and fullwidth characters take two columns, combining marks none).

    >>> width("rank"), width("发送字节")
    (4, 8)
    >>> ljust("阶段", 6) + "|"
    '阶段  |'

A report's prose line that would pass :data:`MAX_TEXT_COLUMNS` wraps at a space (or between two
CJK characters) with :func:`fit`, its continuation indented under it, so that the output area
never wraps it mid-number. A line that fits is left as it is: a table is never rewrapped.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Callable
from typing import ParamSpec

from wcwidth import wcswidth, wcwidth

P = ParamSpec("P")

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


_WIDE = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef"  # CJK, Hangul, fullwidth forms
_TOKENS = re.compile(rf"\s+|[{_WIDE}]|[^\s{_WIDE}]+")
_LABEL = re.compile(r" *[^ ]{1,24} {2,}(?=[^ ])")  # a one-word label, then its column
_NO_BREAK_BEFORE = set("，。：；、！？）》」』】,.:;!?)]}")


def wrap_text(text: str, columns: int, indent: str = "", hanging: str = "") -> list[str]:
    """``textwrap.wrap(text, columns)`` by display width: a CJK character counts two columns, and a
    line may break between two CJK characters (Chinese has no spaces), never before closing
    punctuation. The first line starts with ``indent``, the others with ``hanging``. Text without
    CJK characters wraps exactly as ``textwrap.wrap`` does."""
    if not re.search(f"[{_WIDE}]", text):
        return textwrap.wrap(text, columns, initial_indent=indent, subsequent_indent=hanging)
    lines: list[str] = []
    line: list[str] = []  # the tokens of the line being filled
    lead = indent
    for token in _TOKENS.findall(text):
        if token.isspace():
            line += [token] if line else []  # a run of spaces kept: it may align a column
            continue
        if line and width(lead + "".join(line) + token) > columns:
            carried = []  # closing punctuation never starts a line: its word comes along
            if token[0] in _NO_BREAK_BEFORE and len(line) > 1:
                carried = [line.pop()]
            lines.append(lead + "".join(line).rstrip())
            line, lead = carried, hanging
        line.append(token)
    if "".join(line).strip():
        lines.append(lead + "".join(line).rstrip())
    return lines


def fit(text: str, columns: int = MAX_TEXT_COLUMNS) -> str:
    """``text`` with every line wider than ``columns`` wrapped at a space, its continuation
    indented two columns under the line's own indent (under its text, after a one-word label
    and two spaces or more: ``"formula        ..."``); lines that fit are kept as they are."""
    out = []
    for line in text.split("\n"):
        if width(line) <= columns:
            out.append(line)
            continue
        body = line.lstrip(" ")
        indent = line[: len(line) - len(body)]
        label = _LABEL.match(line)  # "formula        text": the text continues under itself
        hanging = " " * width(label.group(0)) if label else indent + "  "
        out += wrap_text(body, columns, indent=indent, hanging=hanging) or [line]
    return "\n".join(out)


def fitted(format_fn: Callable[P, str]) -> Callable[P, str]:
    """A report's ``format`` function whose text is passed through :func:`fit`."""

    @functools.wraps(format_fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> str:
        return fit(format_fn(*args, **kwargs))

    return wrapper
