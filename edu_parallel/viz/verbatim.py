"""Text a lesson shows as another program prints it, and tables of prose that fit the page.

* :func:`quoted`: another program's own words (torch's error messages, NCCL's log lines), shown
  verbatim and marked as English with HTML's ``lang="en"``, the attribute that marks a passage in
  another language than the page's; the caption above it is in the learner's language. A Chinese
  lesson reads torch exactly as a Chinese engineer on a cluster will: in English, said so.
* :func:`wrapped`: a table with long words (URLs, module paths) allowed to break, so that a table of
  prose fits the notebook's width instead of scrolling sideways; ``english`` names its columns of
  quoted text, marked as :func:`quoted` marks a passage.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd
from pandas.io.formats.style import Styler

from ..core.i18n import _
from ..core.shown import ShownFrame


def _english(text: str) -> str:
    return f'<span lang="en">{html.escape(str(text))}</span>'


@dataclass(frozen=True)
class Quoted:
    """Passages of another program's output, as it printed them (see the module docstring)."""

    passages: tuple[str, ...]
    by: str
    """Who printed them: ``torch``."""

    def caption(self) -> str:
        return _("{by}'s own words, as it prints them (in English):").format(by=self.by)

    def __str__(self) -> str:
        return "\n\n".join([self.caption(), *self.passages])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        style = "white-space: pre-wrap; overflow-wrap: anywhere; font-family: monospace"
        blocks = "".join(
            f'<div lang="en" style="{style}; margin: 0.4em 0 0.8em 1em">{html.escape(p)}</div>'
            for p in self.passages
        )
        return f"<div><i>{html.escape(self.caption())}</i>{blocks}</div>"


def quoted(*passages: str, by: str) -> Quoted:
    """``passages`` of ``by``'s output, shown verbatim under a caption in the learner's
    language."""
    return Quoted(tuple(passages), by)


def wrapped(table: pd.DataFrame, english: Iterable[str] = ()) -> Styler:
    """``table`` with long words allowed to break, left-aligned; the columns named in ``english``
    (their names in code, English) hold quoted text, marked ``lang="en"``."""
    marked = table.copy()
    for column in english:
        marked[column] = [_english(v) for v in marked[column]]
    if isinstance(marked, ShownFrame):  # a Styler shows the frame's own labels: translate first
        marked = marked.translated()
    return marked.style.set_properties(**{"overflow-wrap": "anywhere", "text-align": "left"})
