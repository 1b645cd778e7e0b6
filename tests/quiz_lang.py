"""What the quiz-bank language tests compare: a bank's learner texts, and what its code compares.

``tests/test_quiz_i18n_q2.py`` and ``q3.py`` build each bank in English and in Chinese and check
that every text changed while every answer stayed the same.
"""

from __future__ import annotations

import re
from typing import Any

from edu_parallel.quiz import MultipleChoice, Numeric, PredictThenRun, Quiz


def texts(quiz: Quiz, skip_line: re.Pattern | None = None) -> list[tuple[str, str]]:
    """``(where, text)`` for every learner text of ``quiz``, runs revealed. With ``skip_line``,
    a reveal is compared line by line, without the lines it matches (text of another layer)."""
    out = [("title", quiz.title)]
    for q in quiz:
        out += [(f"{q.key}.prompt", q.prompt), (f"{q.key}.explanation", q.explanation)]
        inner = q
        if isinstance(q, PredictThenRun):
            inner = q.predict
            out += [(f"{q.key}.predict.prompt", inner.prompt)]
            out += [(f"{q.key}.predict.explanation", inner.explanation)]
            reveal = q.reveal(q.result())
            if skip_line is None:
                out += [(f"{q.key}.reveal", reveal)]
            else:
                lines = reveal.splitlines()
                out += [
                    (f"{q.key}.reveal{i}", t) for i, t in enumerate(lines) if not skip_line.match(t)
                ]
        if isinstance(inner, MultipleChoice):
            out += [(f"{q.key}.choice{i}", c) for i, c in enumerate(inner.choices)]
    return out


def answers(quiz: Quiz) -> list[Any]:
    """What code compares, per question: key, params, config and the right answer."""
    out = []
    for q in quiz:
        inner = q.predict if isinstance(q, PredictThenRun) else q
        row = [q.key, q.params, getattr(q, "config", None), type(inner).__name__]
        if isinstance(inner, Numeric):
            row += [inner.answer, inner.units, inner.tolerance, inner.abs_tolerance]
        else:
            row += [inner.correct_indices, inner.order, len(inner.choices), inner.multiple]
        if isinstance(q, PredictThenRun) and q.truth is not None:
            row.append(q.truth(q.result()))
        out.append(row)
    return out
