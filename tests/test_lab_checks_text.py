"""The learner path's text checks (``lab_text.py``) catch what they look for, in Chromium.

A planted page copies JupyterLab's text output (a ``pre`` with ``white-space: pre-wrap`` in an
output of 955 px, the 13 px monospace) and its HTML tables: a line that wraps and a cell cut with
"…" must be named; the same page with a fitted line and a cell whose full text is a hover away
must pass. The real lessons are checked by ``test_learner_path.py``.
"""

from __future__ import annotations

import pytest
from lab_driver import chromium_browser
from lab_text import truncated_cells, wrapped_text

from edu_parallel.core.width import MAX_TEXT_COLUMNS

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

_PAGE = """<!doctype html><html><body><div id="panel">
<div class="jp-OutputArea-output" style="width: 955px">
  <pre style="white-space: pre-wrap; font: 13px 'DejaVu Sans Mono', monospace; margin: 0"
  >{text}</pre>
</div>
<table><tr><td>{cell}</td><td title="{title}">{hovered}</td></tr></table>
</div></body></html>"""


@pytest.fixture(scope="module")
def page():
    with chromium_browser("the text checks' planted pages") as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        yield page
        page.close()


def _check(page, text: str, cell: str) -> tuple[list[str], list[str]]:
    full = "a long citation that the table keeps whole, word for word"
    page.set_content(
        _PAGE.format(text=text, cell=cell, title=full, hovered=full[:20] + "…"), wait_until="load"
    )
    panel = page.query_selector("#panel")
    return wrapped_text(panel), truncated_cells(panel)


def test_a_line_that_fits_and_cells_a_hover_away_pass(page):
    line = "rank 0 sent 1.75 MiB " * (MAX_TEXT_COLUMNS // 21)
    assert len(line) <= MAX_TEXT_COLUMNS
    assert _check(page, f"header\n{line}\nlast", "whole") == ([], [])


@pytest.mark.parametrize("ellipsis", ["…", "..."])
def test_a_wrapped_line_and_a_cut_cell_are_named(page, ellipsis):
    line = "1.75 " * 30  # 150 columns: wraps mid-table in 955 px
    wrapped, truncated = _check(page, f"header\n{line}", f"the frameworks tab{ellipsis}")
    assert len(wrapped) == 1 and "150 characters" in wrapped[0], wrapped
    assert truncated == [f"the frameworks tab{ellipsis}"]


def test_the_widest_line_that_fits_does_not_wrap(page):
    """MAX_TEXT_COLUMNS (core/width.py) is what fits the area in Chromium: a line of exactly that
    many columns stays on one row, and one a tenth wider does not (a line with no space in it
    does not wrap: it overflows, which the lesson scan's width check names)."""
    row = "1.75 " * MAX_TEXT_COLUMNS
    assert _check(page, row[: MAX_TEXT_COLUMNS - 1] + "x", "whole")[0] == []
    assert len(_check(page, row[: MAX_TEXT_COLUMNS * 11 // 10 - 1] + "x", "whole")[0]) == 1
