"""What a learner reads in a lesson's text outputs and tables, checked in the browser.

Two checks, each a function of a page (a lab's lesson panel, or a planted page in
``tests/test_lab_checks_text.py``):

- :func:`wrapped_text`: a printed line that the output area wraps. JupyterLab shows text outputs in
  a ``pre`` with ``white-space: pre-wrap``, so a line wider than the area continues on the next
  row, mid-number in a table. A ``pre`` is laid out twice, as shown and with wrapping off; a
  taller first layout means a line wrapped.
- :func:`truncated_cells`: a table cell cut short with "…" (or pandas' "...") whose full text is not
  one hover away (a ``title`` on the cell or inside it).
"""

from __future__ import annotations

from typing import Any

# every text output of the scope (stdout, stderr, error, text/plain): the rows it takes as shown,
# against the rows it takes with wrapping off; the widest line, named by its first characters
WRAPPED_JS = """scope => {
  const out = [];
  for (const pre of scope.querySelectorAll('.jp-OutputArea-output pre')) {
    if (!pre.offsetParent) continue;  // not laid out (a collapsed output)
    const shown = pre.getBoundingClientRect().height;
    const saved = pre.style.whiteSpace;
    pre.style.whiteSpace = 'pre';
    const unwrapped = pre.getBoundingClientRect().height;
    const scroll = pre.scrollWidth, room = pre.clientWidth;
    pre.style.whiteSpace = saved;
    if (shown > unwrapped + 1) {
      const lines = (pre.textContent || '').split('\\n');
      const widest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
      out.push(`${Math.round(scroll)} px of text in ${Math.round(room)} px: `
               + `${widest.length} characters: ${widest.slice(0, 60)}`);
    }
  }
  return out;
}"""

TRUNCATED_JS = """scope => {
  const out = [];
  for (const cell of scope.querySelectorAll('table td, table th')) {
    const text = (cell.innerText || '').trim();
    if (!/(…|\\.\\.\\.)$/.test(text)) continue;
    if (cell.title || cell.querySelector('[title]')) continue;  // the full text is a hover away
    out.push(text.slice(-60));
  }
  return out;
}"""


def wrapped_text(scope: Any) -> list[str]:
    """One line per text output in ``scope`` (an element handle) that wraps in its area."""
    return scope.evaluate(WRAPPED_JS)


def truncated_cells(scope: Any) -> list[str]:
    """One line per table cell in ``scope`` cut with an ellipsis and no hover text."""
    return scope.evaluate(TRUNCATED_JS)
