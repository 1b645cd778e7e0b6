"""argparse's help wrapped by display width: a CJK character takes two columns of a terminal.

argparse wraps help text with :mod:`textwrap`, which counts characters: a Chinese help line of 60
characters is 120 columns wide and runs past the terminal. :class:`DisplayWidthHelpFormatter`
wraps with :func:`edu_parallel.core.width.wrap_text` instead, which measures what a terminal shows
(and breaks between CJK characters, never before closing punctuation); text without CJK wraps as
argparse's own formatter wraps it. The usage line is laid out with a stand-in for its prefix
("用法：", six columns in three characters) as wide as the prefix shows, so that its lines break
and its continuation lines align as they do in English.

Reference: ``argparse.HelpFormatter._split_lines`` and ``_fill_text``, the two methods argparse
documents as the ones a formatter overrides to wrap differently (``RawTextHelpFormatter`` does).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from ..core.width import width, wrap_text

_SPACES = re.compile(r"\s+")


class DisplayWidthHelpFormatter(argparse.HelpFormatter):
    """argparse's default layout, its help and descriptions wrapped by display width."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return wrap_text(_SPACES.sub(" ", text).strip(), width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(wrap_text(_SPACES.sub(" ", text).strip(), width, indent, indent))

    def _format_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None) -> str:
        if prefix is None:
            prefix = argparse._("usage: ")  # type: ignore[attr-defined]  # the language's word
        stand_in = "\0" * width(prefix)  # len() == the prefix's display width
        return super()._format_usage(usage, actions, groups, stand_in).replace(stand_in, prefix, 1)
