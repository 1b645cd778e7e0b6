"""Lesson 13's runs as data (torch-free): its cluster's ranks, the sweep and the ablation.

:func:`~edu_parallel.compression.sweep.sweep_compress` trains these configurations; the quiz
bank reads the same ones, so a number a question quotes is the one the lesson's figure draws.
"""

from __future__ import annotations

from typing import Any

LESSON_RANKS = 2  # the lesson's cluster: Cluster(2)

# the sweep of the lesson and the benchmark: every method, error feedback where it is the rule
SWEEP: tuple[dict[str, Any], ...] = (
    {"method": "none"},
    {"method": "fp16"},
    {"method": "bf16"},
    {"method": "topk", "error_feedback": True},
    {"method": "randk", "error_feedback": True},
    {"method": "sign", "error_feedback": True},
    {"method": "powersgd", "rank": 1, "error_feedback": True},
)
# the lesson's ablation: the two methods of SWEEP that stall without error feedback
NO_FEEDBACK: tuple[dict[str, Any], ...] = (
    {"method": "topk"},
    {"method": "powersgd", "rank": 1},
)


def sweep_run(method: str) -> dict[str, Any]:
    """The options :data:`SWEEP` trains ``method`` with."""
    (run,) = [run for run in SWEEP if run["method"] == method]
    return dict(run)
