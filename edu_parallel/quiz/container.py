"""The :class:`Quiz` container: questions, score bookkeeping and the plain-text form.

A quiz shows every multiple-choice question's options in this learner's order (``shuffle.py``):
``name`` (the bank's name) and ``learner`` seed the permutation, ``shuffle=False`` keeps the
bank's order. :meth:`Quiz.subset` and :meth:`Quiz.without` split one quiz into a question asked
in the lesson's body and the final quiz, sharing the questions (and a predict-then-run's run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import bad_value, check_int, one_of
from ..core.i18n import _
from ..core.width import width
from .predict import QUESTION_TYPES, PredictThenRun, Question
from .questions import Feedback, MultipleChoice, check_text, unit_label
from .shuffle import check_learner, learner_seed, permutation


@dataclass
class Quiz:
    """Questions plus score bookkeeping: the latest answer to each question counts."""

    title: str
    questions: list[Question]
    name: str = ""
    learner: str | None = None
    shuffle: bool = True
    results: list[Feedback | None] = field(init=False, repr=False)
    attempts: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_text("title", self.title)
        self.questions = list(self.questions)
        if not self.questions:
            raise bad_value("questions", self.questions, "a non-empty list of questions")
        for q in self.questions:
            if not isinstance(q, QUESTION_TYPES):
                raise bad_value("questions", q, "MultipleChoice, Numeric or PredictThenRun items")
        keys = [q.key for q in self.questions if q.key]
        if len(set(keys)) != len(keys):
            raise bad_value("questions", keys, "questions with distinct keys")
        if not isinstance(self.name, str):
            raise bad_value("name", self.name, "the bank's name, such as '03_ring_allreduce'")
        check_learner(self.learner)
        if self.shuffle:
            self.learner = self.learner or learner_seed()
            bank = self.name or self.title
            self.questions = [shuffled(q, self.learner, bank) for q in self.questions]
        self.reset()

    def subset(self, keys: Iterable[str], title: str | None = None) -> Quiz:
        """A quiz of the questions named by ``keys`` (in that order), as shown here."""
        keys = [keys] if isinstance(keys, str) else list(keys)
        if not keys:
            raise bad_value("keys", keys, "at least one question key")
        return Quiz(
            title or self.title,
            [self.by_key(k) for k in keys],
            name=self.name,
            learner=self.learner,
            shuffle=False,
        )

    def without(self, keys: Iterable[str]) -> Quiz:
        """This quiz less the questions named by ``keys`` (asked elsewhere in the lesson)."""
        keys = [keys] if isinstance(keys, str) else list(keys)
        drop = {self.by_key(k).key for k in keys}
        kept = [q.key for q in self.questions if q.key not in drop]
        return self.subset(kept)

    def reset(self) -> None:
        """Forget every answer."""
        self.results = [None] * len(self.questions)
        self.attempts = [0] * len(self.questions)

    def __len__(self) -> int:
        return len(self.questions)

    def __iter__(self) -> Iterator[Question]:
        return iter(self.questions)

    def __getitem__(self, index: int) -> Question:
        return self.questions[index]

    def by_key(self, key: str) -> Question:
        """The question whose ``key`` is ``key``."""
        for q in self.questions:
            if q.key == key:
                return q
        raise bad_value("key", key, one_of(repr(q.key) for q in self.questions))

    def answer(self, index: int, value: Any) -> Feedback:
        """Check ``value`` against question ``index`` and record the feedback."""
        i = check_int("index", index, 0, len(self.questions) - 1)
        fb = self.questions[i].check(value)
        self.results[i] = fb
        self.attempts[i] += 1
        return fb

    @property
    def score(self) -> int:
        return sum(1 for fb in self.results if fb is not None and fb.correct)

    @property
    def total(self) -> int:
        return len(self.questions)

    @property
    def answered(self) -> int:
        return sum(1 for fb in self.results if fb is not None)

    def score_line(self) -> str:
        return _("Score: {score} / {total}").format(score=self.score, total=self.total)

    def summary(self) -> str:
        """``"Ring all-reduce: Score: 5 / 7 (7 answered)"``."""
        return _("{title}: {score_line} ({answered} answered)").format(
            title=self.title, score_line=self.score_line(), answered=self.answered
        )

    def to_text(self, answers: bool = False) -> str:
        """The quiz as plain text; with ``answers=True`` each answer and its explanation."""
        lines = [self.title, underline(self.title), ""]
        for n, q in enumerate(self.questions, 1):
            lines.extend(question_text(q, n, answers))
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"


def underline(title: str, mark: str = "=") -> str:
    """``mark`` as wide as ``title`` in a terminal: a CJK character takes two columns."""
    return mark * width(title)


def shuffled(q: Question, learner: str, bank: str) -> Question:
    """``q`` with its options in ``learner``'s order (a question already permuted is kept)."""
    inner = q.predict if isinstance(q, PredictThenRun) else q
    if not isinstance(inner, MultipleChoice) or inner.order:
        return q
    order = permutation(len(inner.choices), learner, bank, q.key or q.prompt)
    if isinstance(q, PredictThenRun):
        return dataclasses.replace(q, predict=inner.permuted(order))
    return inner.permuted(order)


def question_text(q: Question, number: int, answers: bool = False, typed: bool = True) -> list[str]:
    """Lines for one question: prompt, choices or units hint, and optionally the answer.

    ``typed=False`` words the hints for the widget, where choices are ticked, not typed.
    """
    lines = [f"{number}. {q.prompt}"]
    inner = q.predict if isinstance(q, PredictThenRun) else q
    if isinstance(inner, MultipleChoice):
        lines.extend(f"   {inner.label(i)}" for i in range(len(inner.choices)))
        if inner.multiple and typed:
            lines.append("   " + _("(tick all that apply: type every right letter, e.g. 'a, c')"))
        elif inner.multiple:
            lines.append("   " + _("(tick all that apply)"))
    elif inner.is_bytes:
        lines.append("   " + _("(answer in bytes; units allowed, e.g. '1536' or '1.5 KiB')"))
    elif inner.units:
        lines.append("   " + _("(answer in {units})").format(units=unit_label(inner.units)))
    if isinstance(q, PredictThenRun):
        lines.append("   " + _("(predict first; then the engine runs and shows what happened)"))
    if answers:
        lines.append("   " + _("Answer: {expected}").format(expected=q.expected))
        lines.append("   " + _("Why: {explanation}").format(explanation=q.explanation))
    return lines
