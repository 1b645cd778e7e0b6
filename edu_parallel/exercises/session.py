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
from ..engine.executor import Executor
from .feedback import Feedback
from .grader import grade
from .progress import load_progress, record_try, tried
from .registry import EXERCISES, get_exercise
from .spec import Exercise


def check(exercise: str | int | Exercise, fn: Any, cluster: Executor | None = None) -> Feedback:
    """Grade ``fn`` for ``exercise`` on ``cluster`` (or on clusters made for it), record the
    try, and return the feedback (``.passed``, ``.grade``; a panel in Jupyter)."""
    ex = get_exercise(exercise)
    result = grade(ex, fn, cluster)
    record_try(ex.id, result.passed)
    return Feedback(result, inspect.getsource(ex.reference))


def hint(exercise: str | int | Exercise, tier: int = 1) -> str:
    """Hint ``tier`` (1: a nudge, 2: the idea, 3: the key line)."""
    ex = get_exercise(exercise)
    tier = check_int("tier", tier, 1, len(ex.hints))
    return ex.hints[tier - 1]


def solution(exercise: str | int | Exercise, *, instructor: bool = False) -> str:
    """The reference solution's source, once the learner has tried (``instructor`` skips that)."""
    ex = get_exercise(exercise)
    if not instructor and not tried(ex.id):
        raise PermissionError(
            f"exercise {ex.id}: the solution opens after a try; run "
            f"check({ex.id!r}, {ex.function}, cluster) first"
        )
    return inspect.getsource(ex.reference)


def progress_table() -> pd.DataFrame:
    """One row per exercise: id, lesson, function, title, and this workspace's progress
    ("passed", "tried" or ""; the number of tries), for the course index and the command line."""
    progress = load_progress()
    rows = []
    for ex in EXERCISES.values():
        entry = progress.get(ex.id, {})
        status = "passed" if entry.get("passed") else ("tried" if entry.get("tries") else "")
        rows.append(
            {
                "id": ex.id,
                "lesson": ex.lesson,
                "function": f"{ex.function}({', '.join(ex.params)})",
                "title": ex.title,
                "status": status,
                "tries": int(entry.get("tries", 0)),
            }
        )
    return pd.DataFrame(rows)
