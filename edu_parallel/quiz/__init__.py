"""Quizzes for the lessons: question kinds, banks, a JupyterLab widget and a terminal mode.

>>> from edu_parallel.quiz import BANKS, run_in_terminal
>>> quiz = BANKS["03_ring_allreduce"](seed=1)
>>> quiz.answer(0, "672 KiB").correct  # doctest: +SKIP

``show_quiz`` (the widget) imports ipywidgets only when called.
"""

from __future__ import annotations

from typing import Any

from .banks import BANKS, Runner, get_quiz, register_bank, ring_quiz, simulation_runner, tour_quiz
from .banks_comm import algorithms_quiz, collectives_quiz
from .banks_map import map_quiz as map_quiz  # lesson 01 (issue 6)
from .banks_moe import moe_quiz as moe_quiz  # lesson 08 (issue 6)
from .banks_pipeline import pipeline_quiz
from .banks_tp import tp_quiz as tp_quiz  # lesson 07 (issue 6)
from .banks_zero import zero_quiz
from .container import Quiz, question_text
from .core import Feedback, MultipleChoice, Numeric, PredictThenRun, Question
from .terminal import run_in_terminal

__all__ = [
    "BANKS",
    "Feedback",
    "MultipleChoice",
    "Numeric",
    "PredictThenRun",
    "Question",
    "Quiz",
    "QuizWidget",
    "question_text",
    "Runner",
    "algorithms_quiz",
    "collectives_quiz",
    "pipeline_quiz",
    "get_quiz",
    "register_bank",
    "ring_quiz",
    "run_in_terminal",
    "show_quiz",
    "simulation_runner",
    "tour_quiz",
    "zero_quiz",
]


def show_quiz(quiz: Quiz) -> Any:
    """The JupyterLab widget for ``quiz`` (see :class:`edu_parallel.quiz.widget.QuizWidget`)."""
    from .widget import show_quiz as _show

    return _show(quiz)


def __getattr__(name: str) -> Any:
    if name == "QuizWidget":
        from .widget import QuizWidget

        return QuizWidget
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
