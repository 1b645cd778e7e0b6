"""The comments of a lesson's code cells, in Chinese: the code is the same, its comments translated.

A Chinese lesson runs the English lesson's code, byte for byte; what it changes is the comments, so
that a Chinese learner reads a cell's explanation in Chinese too. A comment is either a *block*
(full-line comments at one indentation on consecutive lines: one sentence, wrapped) or an
*inline* comment after code on its line (each its own message, even where a sentence runs on over
the next lines' comments: a translation keeps its line, and the code its shape). Its text (a
block's lines joined by spaces, without the ``#``) is a message of the lesson's catalog, beside
the cell's prose (``notebook_i18n.py``), under the context ``"<cell id>#comment"``. In the
Chinese notebook each comment is replaced by its translation: a block re-wrapped by display width
(a CJK character takes two columns) to :data:`LINE_LENGTH`, an inline comment in place, after the
spaces that followed its ``#`` (a hanging indent under a numbered step stays).
:func:`strip_comments` gives the code without its comments, which the two languages share exactly
(``tests/test_course_i18n.py``).

Pragmas (``# noqa``, ``# fmt: skip``, ``# type: ignore``) are code to the tools that read them, and
stay as written.

Reference: the ``tokenize`` module (``COMMENT`` tokens), as Python's own tools find comments.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from babel.messages.catalog import Catalog

from ...core.width import width, wrap_text

LINE_LENGTH = 100  # ruff's line-length (pyproject.toml [tool.ruff]): lines of the lessons' code
CONTEXT = "#comment"  # the msgctxt suffix of a comment's message: "<cell id>#comment"
_PRAGMA = re.compile(r"^(noqa\b|fmt:|type:|pragma\b|ruff:)")


@dataclass(frozen=True)
class Comment:
    """One comment of a code cell: lines ``first``..``last`` (0-based), ``#`` at column ``col``."""

    first: int
    last: int
    col: int
    inline: bool  # after code on its line
    text: str  # without "#", a block's lines joined by single spaces
    pad: str = " "  # the spaces between "#" and the text (a hanging indent is more than one)


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    """The source's comment tokens; none for a cell that does not tokenize (IPython magics)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    return [t for t in tokens if t.type == tokenize.COMMENT]


def comments(source: str) -> list[Comment]:
    """Every translatable comment of ``source``, in order; consecutive full-line comments at one
    indentation form one block."""
    lines = source.split("\n")
    out: list[Comment] = []
    for t in _tokens(source):
        row, col = t.start[0] - 1, t.start[1]
        text = t.string[1:].strip()
        if not text or _PRAGMA.match(text):
            continue
        pad = t.string[1:][: len(t.string[1:]) - len(t.string[1:].lstrip())] or " "
        inline = bool(lines[row][:col].strip())
        prev = out[-1] if out else None
        if prev and not inline and not prev.inline and prev.col == col and prev.last == row - 1:
            out[-1] = Comment(prev.first, row, col, False, f"{prev.text} {text}", prev.pad)
        else:
            out.append(Comment(row, row, col, inline, text, pad))
    return out


def strip_comments(source: str) -> str:
    """``source`` without its comments (pragmas included): a full-line comment's line goes, an
    inline comment leaves its code with trailing spaces removed."""
    lines = source.split("\n")
    drop = set()
    for t in _tokens(source):
        row, col = t.start[0] - 1, t.start[1]
        code = lines[row][:col].rstrip()
        if code:
            lines[row] = code
        else:
            drop.add(row)
    return "\n".join(line for k, line in enumerate(lines) if k not in drop)


def with_comments(source: str, translations: Mapping[str, str]) -> str:
    """``source`` with each comment that ``translations`` (English text -> Chinese) translates
    replaced; the others, and every line of code, unchanged."""
    lines = source.split("\n")
    for c in reversed(comments(source)):
        zh = translations.get(c.text)
        if not zh:
            continue
        if c.inline:
            lines[c.first] = f"{lines[c.first][: c.col]}#{c.pad}{zh}"
        else:
            lead = " " * c.col + "#" + c.pad
            lines[c.first : c.last + 1] = wrap_text(zh, LINE_LENGTH, lead, lead)
    return "\n".join(lines)


def too_long(source: str) -> list[str]:
    """The lines of ``source`` wider than :data:`LINE_LENGTH` display columns."""
    return [line for line in source.split("\n") if width(line) > LINE_LENGTH]


def code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def is_comment(message: Any) -> bool:
    """Whether a catalog message is a code comment's (its context ends in :data:`CONTEXT`)."""
    return bool(message.context) and message.context.endswith(CONTEXT)


def lesson_comments(nb: dict) -> list[tuple[str, str]]:
    """``(cell id, comment text)`` of every comment of the lesson's code cells, once each."""
    found = [(c["id"], k.text) for c in code_cells(nb) for k in comments(_source(c))]
    return list(dict.fromkeys(found))


def translations(cat: Catalog) -> dict[tuple[str, str], str]:
    """``(cell id, English comment) -> Chinese`` for every translated comment of ``cat``."""
    return {
        (m.context.removesuffix(CONTEXT), m.id): m.string
        for m in cat
        if m.id and is_comment(m) and m.string
    }


def add_comments(new: Catalog, nb: dict, old: Mapping[tuple[str, str], str]) -> list[str]:
    """Add an entry to ``new`` for each comment of ``nb``, with its Chinese from ``old`` where it
    has one (``(cell id, English) -> Chinese``); return ``"<cell id>#comment: <English>"`` for each
    comment that has none."""
    todo = []
    for cid, text in lesson_comments(nb):
        zh = old.get((cid, text), "")
        new.add(text, zh, context=cid + CONTEXT)
        if not zh:
            todo.append(f"{cid}{CONTEXT}: {text}")
    return todo


def translated_cell(cell: dict, have: Mapping[tuple[str, str], str]) -> dict:
    """The code cell with its comments in Chinese, where ``have`` translates them."""
    mine = {text: zh for (cid, text), zh in have.items() if cid == cell["id"]}
    if not mine:
        return cell
    return {**cell, "source": with_comments(_source(cell), mine).splitlines(keepends=True)}
