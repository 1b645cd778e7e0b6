"""The quiz in a terminal, for the terminal tour.

Interactive (stdin is a terminal): each question is asked, the answer graded and explained; a
typo is asked again, an empty line skips the question, end of input stops the quiz. Otherwise
each question is printed with its answer and explanation (and predict-then-run questions run).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..core.errors import bad_value
from ..core.i18n import _
from .container import Quiz, question_text, underline
from .predict import PredictThenRun

MAX_RETRIES = 3


def run_in_terminal(
    quiz: Quiz,
    input_fn: Callable[[str], str] = input,
    print_fn: Callable[..., None] = print,
    interactive: bool | None = None,
    run_engine: bool = True,
) -> int:
    """Ask (or, non-interactively, print) every question of ``quiz``; return the score.

    ``interactive`` defaults to ``sys.stdin.isatty()``. ``run_engine=False`` keeps the printed
    mode from running predict-then-run questions.
    """
    if not isinstance(quiz, Quiz):
        raise bad_value("quiz", quiz, "a Quiz (see edu_parallel.quiz.BANKS)")
    if interactive is None:
        interactive = sys.stdin.isatty()
    print_fn(quiz.title)
    print_fn(underline(quiz.title))
    if not interactive:
        for n, q in enumerate(quiz.questions, 1):
            print_fn("")
            print_fn("\n".join(question_text(q, n, answers=True)))
            if isinstance(q, PredictThenRun) and run_engine:
                print_fn("   " + _("The run shows:"))
                print_fn(_indent(q.reveal(q.result())))
        return quiz.score
    for i, q in enumerate(quiz.questions):
        print_fn("")
        print_fn("\n".join(question_text(q, i + 1)))
        try:
            done = _ask(quiz, i, input_fn, print_fn)
        except EOFError:
            print_fn("\n" + _("(end of input: stopping)"))
            break
        if not done:
            print_fn("   " + _("(skipped) Answer: {expected}").format(expected=q.expected))
            print_fn("   " + _("Why: {explanation}").format(explanation=q.explanation))
    print_fn("")
    print_fn(quiz.summary())
    return quiz.score


def _ask(
    quiz: Quiz, index: int, input_fn: Callable[[str], str], print_fn: Callable[..., None]
) -> bool:
    """Ask question ``index`` until an answer can be read; False when the learner skips it."""
    for _attempt in range(MAX_RETRIES):
        text = input_fn("   " + _("your answer (empty to skip):") + " ").strip()
        if not text:
            return False
        if isinstance(quiz[index], PredictThenRun):
            try:
                quiz[index].parse(text)
            except ValueError as exc:
                print_fn(f"   {exc}")
                continue
            print_fn("   " + _("running the engine..."))
        try:
            fb = quiz.answer(index, text)
        except ValueError as exc:
            print_fn(f"   {exc}")
            continue
        print_fn(f"   {fb.message}")
        if fb.reveal:
            print_fn(_indent(fb.reveal))
        print_fn("   " + _("Why: {explanation}").format(explanation=fb.explanation))
        return True
    return False


def _indent(text: str, pad: str = "   ") -> str:
    return "\n".join(pad + line for line in text.splitlines())
