"""Coding exercises: the learner writes the algorithm, the grader runs it on real ranks.

* ``spec.py``: an :class:`Exercise` as data (its cases, its judge, its reference solution);
* ``grader.py``: :func:`grade` ships the learner's function by value (cloudpickle) to a live
  cluster, runs every case with a timeout and returns a :class:`Grade`;
* ``diagnose.py``, ``divergence.py``: a raise, an exit, a hang or a wrong chunk said in the
  learner's terms (which line, which rank, which step);
* one file per exercise, named for the algorithm (``ring_allreduce.py``...), listed in
  ``registry.py``.

Names load on first use (torch is imported then).
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "Case": "spec",
    "Exercise": "spec",
    "Finding": "spec",
    "RankOutcome": "spec",
    "Grade": "grader",
    "grade": "grader",
    "check_signature": "grader",
    "run_exercise": "rank_job",
    "ship": "rank_job",
    "EXERCISES": "registry",
    "get_exercise": "registry",
    "check": "session",
    "hint": "session",
    "solution": "session",
    "progress_table": "session",
    "load_progress": "progress",
    "Feedback": "feedback",
    "default_picture": "feedback",
    "save_stacked": "feedback",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
