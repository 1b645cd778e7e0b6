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

from ..core.lazy import lazy_exports

# loaded on first use (core/lazy.py): a lesson's quiz imports its own bank, not all fourteen
_LAZY = {
    "algorithms_quiz": "banks.algorithms",
    "nccl_quiz": "banks.nccl",
    "async_quiz": "banks.async_training",
    "collectives_quiz": "banks.collectives",
    "compress_quiz": "banks.compression",
    "ddp_quiz": "banks.ddp",
    "debugging_quiz": "banks.debugging",
    "moe_quiz": "banks.expert_parallel",
    "landscape_quiz": "banks.landscape",
    "three_d_quiz": "banks.parallel_3d",
    "pipeline_quiz": "banks.pipeline",
    "ring_quiz": "banks.ring",
    "roofline_quiz": "banks.roofline",
    "map_quiz": "banks.strategy_map",
    "tp_quiz": "banks.tensor_parallel",
    "tour_quiz": "banks.tour",
    "zero_quiz": "banks.zero",
    "Quiz": "container",
    "question_text": "container",
    "Numeric": "numeric",
    "PredictThenRun": "predict",
    "Question": "predict",
    "Feedback": "questions",
    "MultipleChoice": "questions",
    "BANKS": "all_banks",
    "BankArgs": "registry",
    "QUESTION_SETS": "all_banks",
    "QuestionSet": "registry",
    "Runner": "registry",
    "get_quiz": "all_banks",
    "register_bank": "registry",
    "simulation_runner": "registry",
    "run_in_terminal": "terminal",
    "QuizWidget": "widget",
    "show_quiz": "widget",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
