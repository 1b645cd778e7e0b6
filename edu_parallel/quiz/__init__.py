"""Quizzes for the lessons: question kinds, banks, a JupyterLab widget and a terminal mode.

>>> from edu_parallel.quiz import BANKS, run_in_terminal
>>> quiz = BANKS["03_ring_allreduce"](seed=1)
>>> quiz.answer(0, "672 KiB").correct  # doctest: +SKIP

* ``questions.py``: :class:`MultipleChoice` and :class:`Feedback`; ``numeric.py``:
  :class:`Numeric` (units, tolerance); ``predict.py``: :class:`PredictThenRun`; ``shuffle.py``:
  each learner's order of the options; ``container.py``: :class:`Quiz` (``subset``/``without``
  split it between body and end); ``widget.py`` (ipywidgets, imported when a widget is built) and
  ``terminal.py``: the two ways to take one.
* ``registry.py``: the machinery: :class:`BankArgs` (a bank's seed and runner, checked once),
  :class:`QuestionSet` (a bank's ``draw(rng)`` and its questions), :data:`BANKS`,
  :func:`register_bank`, :func:`get_quiz`, :func:`simulation_runner`.
* ``banks/``: one bank per lesson, one module-level function per question
  (``q_<what it asks>(drawn, run)``), listed in order in the bank's :class:`QuestionSet`; every
  answer is computed by package code. A question that runs something calls the runner it is given;
  without one it uses a formula that a test checks against the engine.

Imports ``core/``, ``plans/``, ``models/``, ``memory/`` and the pure modules of the parallelism
folders, never the engine.
"""

from __future__ import annotations

from .banks.algorithms import algorithms_quiz
from .banks.async_training import async_quiz
from .banks.collectives import collectives_quiz
from .banks.compression import compress_quiz
from .banks.ddp import ddp_quiz
from .banks.expert_parallel import moe_quiz
from .banks.landscape import landscape_quiz
from .banks.parallel_3d import three_d_quiz
from .banks.pipeline import pipeline_quiz
from .banks.ring import ring_quiz
from .banks.strategy_map import map_quiz
from .banks.tensor_parallel import tp_quiz
from .banks.tour import tour_quiz
from .banks.zero import zero_quiz
from .container import Quiz, question_text
from .numeric import Numeric
from .predict import PredictThenRun, Question
from .questions import Feedback, MultipleChoice
from .registry import (
    BANKS,
    QUESTION_SETS,
    BankArgs,
    QuestionSet,
    Runner,
    get_quiz,
    register_bank,
    simulation_runner,
)
from .terminal import run_in_terminal
from .widget import QuizWidget, show_quiz

__all__ = [
    "BANKS",
    "QUESTION_SETS",
    "BankArgs",
    "Feedback",
    "MultipleChoice",
    "Numeric",
    "PredictThenRun",
    "Question",
    "QuestionSet",
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
