"""Which exercises a learner tried and passed, kept per workspace.

The record is ``.edu-parallel/progress.json`` in the workspace: the folder named by
``EDU_PARALLEL_WORKSPACE``, else the current directory (a notebook's kernel runs in the lessons'
folder, so every lesson of one copy of the course shares it). A solution opens only after a try.

An exercise's entry is kept under the name of the function the learner writes
(``my_ring_allreduce``), which stays when lessons are renumbered. A record written before
December 2026 keyed its entries by the exercise's id of that time (``"05"``); :func:`load_progress`
reads those through :data:`~edu_parallel.core.lesson_renames.FORMER_EXERCISES`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..core.lesson_renames import FORMER_EXERCISES
from ..core.workspace import WORKSPACE_VAR, state_path
from .spec import Exercise

__all__ = ["WORKSPACE_VAR", "entry", "load_progress", "progress_path", "record_try", "tried"]


def progress_path() -> Path:
    return state_path("progress.json")


def _merged(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {"tries": int(a.get("tries", 0)) + int(b.get("tries", 0))}
    out["passed"] = bool(a.get("passed")) or bool(b.get("passed"))
    out["last"] = max(str(a.get("last", "")), str(b.get("last", "")))
    return out


def load_progress() -> dict[str, dict[str, Any]]:
    """``{function name: {"tries": n, "passed": bool, "last": iso time}}``; {} when unreadable.

    An entry under a former exercise id (``"05"``, before December 2026) is read as the
    exercise whose function had that id, and merged with any entry under its name."""
    try:
        data = json.loads(progress_path().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if not isinstance(value, dict):
            continue
        if key.isdigit():  # the record of a course before its lessons were renumbered
            if key not in FORMER_EXERCISES:
                continue
            key = FORMER_EXERCISES[key]
        out[key] = _merged(out[key], value) if key in out else value
    return out


def entry(exercise: Exercise) -> dict[str, Any]:
    """The exercise's entry in this workspace's record ({} when never tried)."""
    return load_progress().get(exercise.function, {})


def record_try(exercise: Exercise, passed: bool) -> dict[str, Any]:
    """Count one try of ``exercise``; a pass stays a pass. Returns its entry."""
    data = load_progress()
    got = data.get(exercise.function) or {"tries": 0, "passed": False}
    got["tries"] = int(got.get("tries", 0)) + 1
    got["passed"] = bool(got.get("passed")) or passed
    got["last"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    data[exercise.function] = got
    path = progress_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:  # a read-only folder: the grade still shows, the record is skipped
        pass
    return got


def tried(exercise: Exercise) -> bool:
    return int(entry(exercise).get("tries", 0)) > 0
