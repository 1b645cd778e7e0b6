"""Which exercises a learner tried and passed, kept per workspace.

The record is ``.edu-parallel/progress.json`` in the workspace: the folder named by
``EDU_PARALLEL_WORKSPACE``, else the current directory (a notebook's kernel runs in the lessons'
folder, so every lesson of one copy of the course shares it). A solution opens only after a try.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..core.workspace import WORKSPACE_VAR, state_path

__all__ = ["WORKSPACE_VAR", "load_progress", "progress_path", "record_try", "tried"]


def progress_path() -> Path:
    return state_path("progress.json")


def load_progress() -> dict[str, dict[str, Any]]:
    """``{exercise id: {"tries": n, "passed": bool, "last": iso time}}``; {} when unreadable."""
    try:
        data = json.loads(progress_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record_try(exercise_id: str, passed: bool) -> dict[str, Any]:
    """Count one try of ``exercise_id``; a pass stays a pass. Returns its entry."""
    data = load_progress()
    entry = data.get(exercise_id) or {"tries": 0, "passed": False}
    entry["tries"] = int(entry.get("tries", 0)) + 1
    entry["passed"] = bool(entry.get("passed")) or passed
    entry["last"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    data[exercise_id] = entry
    path = progress_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:  # a read-only folder: the grade still shows, the record is skipped
        pass
    return entry


def tried(exercise_id: str) -> bool:
    return int(load_progress().get(exercise_id, {}).get("tries", 0)) > 0
