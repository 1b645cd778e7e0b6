"""One quiz bank per lesson, one function per question; every answer is computed by package code.

Each bank module holds a frozen ``...Draw`` dataclass whose ``draw(rng)`` draws every parameter
of the lesson's quiz in one go (the teaching defaults when ``rng`` is None), one module-level
function per question, ``q_<what it asks>(drawn, run) -> Question`` with a one-line docstring, and
a :class:`~edu_parallel.quiz.registry.QuestionSet` listing them in the order the quiz asks them.
The bank function (``ring_quiz``, ``ddp_quiz``...) builds its questions from that set and
registers with :func:`~edu_parallel.quiz.registry.register_bank`. A big bank spreads its questions
over two modules (``ddp.py`` and ``ddp_buckets.py``...); ``common.py`` holds what they share.

A question that runs something calls the runner it is given; without one it uses a formula that a
test checks against the engine.
"""

from __future__ import annotations

__all__: list[str] = []
