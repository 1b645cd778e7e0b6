"""Feedback is a picture: the learner's run beside the reference's, the first divergence marked.

:class:`Feedback` wraps a :class:`~edu_parallel.exercises.grader.Grade` (what ``check`` returns). In
Jupyter it shows a panel: the verdict, one line per finding and case, the figures, and tiered hints
(a nudge, then the idea, then the key line) with the solution behind a button (``check`` counted a
try already). Its state (hints shown, solution shown) is plain data, and the panel only renders it,
so it is driven and tested without a browser (``f.next_hint()``, ``f.buttons["hint"].click()``).

:func:`default_picture` draws with the lessons' own renderers: the step grid of each run
(``viz.step_grid``, the divergent cell circled) and the bytes each rank sent (``viz.bytes_bars``,
the reference's volume as the line, the first rank over its share outlined).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.i18n import N_, _
from ..core.trace import Trace
from ..viz.bars import bytes_bars
from ..viz.controls import show_in
from ..viz.figure import new_figure
from ..viz.grid import step_grid
from .grader import Grade
from .spec import CHECKS, NO_CASE, check_label

_COLORS = {"ok": "#2e7d32", "FAIL": "#c62828", "note": "#8d6e00"}
TIER_NAMES = (N_("a nudge"), N_("the idea"), N_("the key line"))  # hint tiers 1, 2, 3


def has_steps(trace: Trace | None) -> bool:
    """True when the run marked steps (``ctx.step``) and kept buffer snapshots after them."""
    return trace is not None and any(s.step >= 0 for s in trace.snapshots)


def default_picture(grade: Grade) -> list[Any]:
    """The step grids (yours, then the reference's) and the bytes per rank, side by side."""
    figures: list[Any] = []
    mine, ref, mark = grade.trace, grade.reference_trace, grade.mark
    if mine is None:
        return figures
    if has_steps(mine):
        cell, label = None, ""
        if mark is not None and mark.step is not None and mark.rank is not None:
            cell = (mark.step, mark.rank, mark.chunk or 0)
            label = (
                _("first divergence")
                if mark.check == "result"
                else _("{check} check fails here").format(check=check_label(mark.check))
            )
        title = _("your run ({case})").format(case=grade.shown.label())
        figures.append(step_grid(mine, title=title, mark=cell, mark_label=label))
        if has_steps(ref):
            figures.append(step_grid(ref, title=_("the reference, same input")))
    figures.append(bytes_figure(grade))
    return figures


def bytes_figure(grade: Grade, arrived: bool = False) -> Any:
    """Bytes each rank sent: your run beside the reference's, the reference's volume as the line
    (``arrived``: the runs' events are the bytes that arrived on each rank, so say so)."""
    mine, ref, mark = grade.trace, grade.reference_trace, grade.mark
    n = mine.world_size
    fig = new_figure(figsize=(max(8.0, 1.1 * n + 6.0), 3.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    target = ref.sent_bytes() if ref is not None else None
    over = mark.rank if mark is not None and mark.check == "bytes" else None
    volume = _("the reference's volume")
    bytes_bars(mine, target, ax=left, formula_name=volume, mark=over)
    title = (
        _("your run: bytes that arrived per rank")
        if arrived
        else _("your run: bytes sent per rank")
    )
    left.set_title(title, fontsize=10)
    if ref is not None:
        bytes_bars(ref, target, ax=right, formula_name=volume)
        right.set_title(_("the reference"), fontsize=10)
        top = max(left.get_ylim()[1], right.get_ylim()[1])  # one scale for both runs
        left.set_ylim(0, top)
        right.set_ylim(0, top)
    else:
        right.set_axis_off()
    return fig


def save_stacked(figures: list[Any], out: str | Path, dpi: int = 80) -> int:
    """Write the matplotlib ``figures`` one above the other into one PNG (the command line's
    picture); return how many others (plotly, drawn in the browser) were left out."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.image import imsave

    drawn = [f for f in figures if isinstance(f, Figure)]
    images = []
    for fig in drawn:
        fig.set_dpi(dpi)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        images.append(np.asarray(canvas.buffer_rgba()))
    if images:
        width = max(im.shape[1] for im in images)
        padded = [
            np.pad(im, ((0, 8), (0, width - im.shape[1]), (0, 0)), constant_values=255)
            for im in images
        ]
        imsave(out, np.concatenate(padded, axis=0))
    return len(figures) - len(drawn)


def findings_table(grade: Grade) -> pd.DataFrame:
    """One row per case (in the order run), one column per check: ✓ passed, ✗ failed,
    "note" (advice only), "" not checked (the run stopped before). The headers and marks are
    data (the check names, "note"); ``findings_html`` shows them in the learner's language."""
    checks = [c for c in CHECKS if any(f.check == c for f in grade.findings)]
    rows: dict[str, dict[str, str]] = {}
    for f in grade.findings:
        row = rows.setdefault(f.case.label() if f.case else _(NO_CASE), {})
        mark = "note" if f.note else ("✓" if f.ok else "✗")
        if row.get(f.check) != "✗":  # a failure stays a failure
            row[f.check] = mark
    return pd.DataFrame(
        [{"case": case, **{c: row.get(c, "") for c in checks}} for case, row in rows.items()],
        columns=["case", *checks],
    )


class Feedback:
    """The grade of one try, shown as a panel; ``hints_shown`` and ``solution_shown`` are its
    state."""

    def __init__(self, grade: Grade, solution_text: str):
        self.grade = grade
        self.solution_text = solution_text
        self.hints_shown = 0
        self.solution_shown = False
        self.buttons: dict[str, Any] = {}
        self._hint_area: Any = None
        self._solution_area: Any = None

    @property
    def passed(self) -> bool:
        return self.grade.passed

    def __repr__(self) -> str:
        return self.grade.report()

    # ------------------------------------------------------------------ state
    def next_hint(self) -> str:
        """Reveal the next hint tier and return it (the last one again when all are shown)."""
        hints = self.grade.exercise.shown_hints()
        self.hints_shown = min(self.hints_shown + 1, len(hints))
        self._refresh()
        return hints[self.hints_shown - 1]

    def show_solution(self) -> str:
        self.solution_shown = True
        self._refresh()
        return self.solution_text

    # ------------------------------------------------------------------ rendering
    def verdict_html(self) -> str:
        g = self.grade
        color = _COLORS["ok"] if g.passed else _COLORS["FAIL"]
        return f"<b style='color:{color}'>{html.escape(g.summary())}</b>"

    def findings_html(self) -> str:
        """One row per case, one column per check (✓, ✗ or a note), then every failure
        and note spelled out."""
        table = findings_table(self.grade)
        checks = [c for c in table.columns if c != "case"]
        names = [_("case"), *map(check_label, checks)]
        head = "".join(f"<th>{html.escape(c)}</th>" for c in names)
        body = []
        for row in table.itertuples(index=False):
            cells = [f"<td style='white-space:nowrap'>{html.escape(row[0])}</td>"]
            for mark in row[1:]:
                color = {"✓": _COLORS["ok"], "✗": _COLORS["FAIL"]}.get(mark, "#666")
                shown = _("note") if mark == "note" else mark
                cells.append(f"<td style='color:{color};text-align:center'><b>{shown}</b></td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        said = [
            f"<li style='color:{_COLORS['note' if f.note else 'FAIL']}'>"
            f"{html.escape(f.case.label() if f.case else _(NO_CASE))}: "
            f"{html.escape(f.message)}</li>"
            for f in self.grade.findings
            if not f.ok
        ]
        listing = f"<ul>{''.join(said)}</ul>" if said else ""
        return f"<table><tr>{head}</tr>{''.join(body)}</table>{listing}"

    def printed_html(self) -> str:
        """What each rank printed in the case shown (its first characters), folded."""
        parts = [
            f"<b>rank {r}</b><pre style='white-space:pre-wrap;max-height:12em;overflow:auto'>"
            f"{html.escape(out.printed)}</pre>"
            for r, out in enumerate(self.grade.outputs)
            if out.printed
        ]
        if not parts:
            return ""
        summary = html.escape(_("what your ranks printed"))
        return f"<details><summary>{summary}</summary>{''.join(parts)}</details>"

    def hints_html(self) -> str:
        hints = self.grade.exercise.shown_hints()[: self.hints_shown]
        heads = [
            _("Hint {n} ({name}):").format(
                n=i + 1, name=_(TIER_NAMES[i]) if i < len(TIER_NAMES) else _("more")
            )
            for i in range(len(hints))
        ]
        return "".join(
            f"<p><b>{html.escape(head)}</b> {html.escape(h)}</p>"
            for head, h in zip(heads, hints, strict=True)
        )

    def figures(self) -> list[Any]:
        ex = self.grade.exercise
        return (ex.picture or default_picture)(self.grade)

    def _refresh(self) -> None:
        if self._hint_area is not None:
            self._hint_area.value = self.hints_html()
            left = len(self.grade.exercise.hints) - self.hints_shown
            self.buttons["hint"].disabled = left == 0
            self.buttons["hint"].description = (
                _("Hint ({n} left)").format(n=left) if left else _("No more hints")
            )
        if self._solution_area is not None and self.solution_shown:
            self._solution_area.value = (
                f"<pre style='white-space:pre-wrap'>{html.escape(self.solution_text)}</pre>"
            )

    def widget(self) -> Any:
        """The panel: verdict, findings, figures, hints, solution."""
        import ipywidgets as widgets

        left = len(self.grade.exercise.hints)
        hint = widgets.Button(description=_("Hint ({n} left)").format(n=left))
        solution = widgets.Button(description=_("Show the solution"), button_style="warning")
        hint.on_click(lambda _b: self.next_hint())
        solution.on_click(lambda _b: self.show_solution())
        self.buttons = {"hint": hint, "solution": solution}
        self._hint_area, self._solution_area = widgets.HTML(), widgets.HTML()
        pictures = widgets.Output()
        for fig in self.figures():
            show_in(pictures, fig, clear=False)
        self._refresh()
        return widgets.VBox(
            [
                widgets.HTML(self.verdict_html()),
                widgets.HTML(self.findings_html()),
                widgets.HTML(self.printed_html()),
                pictures,
                widgets.HBox([hint, solution]),
                self._hint_area,
                self._solution_area,
            ]
        )

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget())
