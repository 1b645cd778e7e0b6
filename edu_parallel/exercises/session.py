"""What a lesson's exercise cell calls: :func:`check`, :func:`hint`, :func:`solution`.

``check("03", my_ring_allreduce, cluster)`` grades the learner's function on the lesson's cluster,
records the try in the workspace's progress, and returns a :class:`Feedback`, which Jupyter shows
as a panel (verdict, findings, the learner's run beside the reference's, hints, the solution).
"""

from __future__ import annotations

import inspect
from typing import Any

import pandas as pd

from ..core.errors import check_int
from ..core.i18n import N_, _
from ..engine.executor import Executor
from .feedback import Feedback
from .grader import grade
from .progress import load_progress, record_try, tried
from .registry import EXERCISES, get_exercise
from .spec import Exercise

COLUMNS = {  # progress_table's headers as the learner reads them
    "id": N_("id"),
    "lesson": N_("lesson"),
    "function": N_("function"),
    "title": N_("title"),
    "status": N_("status"),
    "tries": N_("tries"),
}
STATUS = {"passed": N_("passed"), "tried": N_("tried")}


def check(exercise: str | int | Exercise, fn: Any, cluster: Executor | None = None) -> Feedback:
    """Grade ``fn`` for ``exercise`` on ``cluster`` (or on clusters made for it), record the
    try, and return the feedback (``.passed``, ``.grade``; a panel in Jupyter)."""
    ex = get_exercise(exercise, fn)
    result = grade(ex, fn, cluster)
    record_try(ex, result.passed)
    return Feedback(result, inspect.getsource(ex.reference))


def hint(exercise: str | int | Exercise, tier: int = 1) -> str:
    """Hint ``tier`` (1: a nudge, 2: the idea, 3: the key line), in the learner's language."""
    ex = get_exercise(exercise)
    tier = check_int("tier", tier, 1, len(ex.hints))
    return ex.shown_hints()[tier - 1]


def solution(exercise: str | int | Exercise, *, instructor: bool = False) -> str:
    """The reference solution's source, once the learner has tried (``instructor`` skips that)."""
    ex = get_exercise(exercise)
    if not instructor and not tried(ex):
        msg = _("exercise {id}: the solution opens after a try; run {call} first")
        call = f"check({ex.id!r}, {ex.function}, cluster)"
        raise PermissionError(msg.format(id=ex.id, call=call))
    return inspect.getsource(ex.reference)


def progress_table(translate: bool = True) -> pd.DataFrame:
    """One row per exercise: id, lesson, function, title, and this workspace's progress
    ("passed", "tried" or ""; the number of tries), for the course index and the command line.

    ``translate``: headers, titles and statuses in the learner's language (for display); False
    keeps the English keys and values (data, JSON)."""
    progress = load_progress()
    rows = []
    for ex in EXERCISES.values():
        entry = progress.get(ex.function, {})
        status = "passed" if entry.get("passed") else ("tried" if entry.get("tries") else "")
        rows.append(
            {
                "id": ex.id,
                "lesson": ex.lesson,
                "function": f"{ex.function}({', '.join(ex.params)})",
                "title": ex.shown_title() if translate else ex.title,
                "status": _(STATUS[status]) if translate and status else status,
                "tries": int(entry.get("tries", 0)),
            }
        )
    table = pd.DataFrame(rows)
    if translate:
        table = table.rename(columns={k: _(v) for k, v in COLUMNS.items()})
    return table
