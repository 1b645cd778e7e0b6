"""Quizzes for the lessons: question kinds, banks, a JupyterLab widget and a terminal mode.

>>> from edu_parallel.quiz import BANKS, run_in_terminal
>>> quiz = BANKS["03_ring_allreduce"](seed=1)
>>> quiz.answer(0, "672 KiB").correct  # doctest: +SKIP

* ``core.py``: :class:`MultipleChoice`, :class:`Numeric` (units, tolerance); ``predict.py``:
  :class:`PredictThenRun`; ``shuffle.py``: each learner's order of the options;
  ``container.py``: :class:`Quiz` (``subset``/``without`` split it between body and end);
  ``widget.py`` (ipywidgets, imported when a widget is built) and ``terminal.py``: the two ways
  to take one.
* ``banks*.py``: one bank per lesson; every answer is computed by package code. A question that
  runs something calls the runner it is given; without one it uses a formula that a test checks
  against the engine.

Imports ``core/``, ``plans/``, ``models/``, ``memory/`` and the pure modules of the parallelism
folders, never the engine.
"""

from __future__ import annotations

from .banks.async_training import async_quiz
from .banks.collectives import algorithms_quiz, collectives_quiz
from .banks.compression import compress_quiz
from .banks.ddp import ddp_quiz
from .banks.expert_parallel import moe_quiz
from .banks.landscape import landscape_quiz
from .banks.parallel_3d import three_d_quiz
from .banks.pipeline import pipeline_quiz
from .banks.strategy_map import map_quiz
from .banks.tensor_parallel import tp_quiz
from .banks.zero import zero_quiz
from .container import Quiz, question_text
from .predict import PredictThenRun, Question
from .questions import Feedback, MultipleChoice, Numeric
from .registry import (
    BANKS,
    Runner,
    get_quiz,
    register_bank,
    ring_quiz,
    simulation_runner,
    tour_quiz,
)
from .terminal import run_in_terminal
from .widget import QuizWidget, show_quiz

__all__ = [
    "BANKS",
    "Feedback",
    "MultipleChoice",
    "Numeric",
    "PredictThenRun",
    "Question",
    "Quiz",
    "QuizWidget",
    "Runner",
    "algorithms_quiz",
    "async_quiz",
    "collectives_quiz",
    "compress_quiz",
    "ddp_quiz",
    "get_quiz",
    "landscape_quiz",
    "map_quiz",
    "moe_quiz",
    "pipeline_quiz",
    "question_text",
    "register_bank",
    "ring_quiz",
    "run_in_terminal",
    "show_quiz",
    "simulation_runner",
    "tour_quiz",
    "three_d_quiz",
    "tp_quiz",
    "zero_quiz",
]
