"""Where a learner's own files live: the workspace folder and its ``.edu-parallel/`` state.

The workspace is the folder named by the environment variable ``EDU_PARALLEL_WORKSPACE``, else
the current directory (a notebook's kernel runs in the lessons' folder, so every lesson of one
copy of the course shares it). Exercise progress and the quiz's learner id are kept there.
"""

from __future__ import annotations

import os
from pathlib import Path

WORKSPACE_VAR = "EDU_PARALLEL_WORKSPACE"
STATE_DIR = ".edu-parallel"


def workspace_dir() -> Path:
    """``$EDU_PARALLEL_WORKSPACE``, else the current directory."""
    return Path(os.environ.get(WORKSPACE_VAR) or os.getcwd())


def state_path(name: str) -> Path:
    """The file ``name`` in the workspace's ``.edu-parallel/`` folder (not created here)."""
    return workspace_dir() / STATE_DIR / name
