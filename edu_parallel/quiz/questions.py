"""Question kinds: pure Python, no ipywidgets (a quiz of them is in ``container.py``).

Three kinds of question, each with a ``prompt``, a teaching ``explanation`` and
``check(answer) -> Feedback``:

* :class:`MultipleChoice`: one correct choice, or several with ``multiple=True``. Answers are a
  0-based index (or a set of them), a letter (``"b"``, ``"a,c"``) or the exact choice text, all in
  the order shown: a :class:`~edu_parallel.quiz.container.Quiz` shows each learner the options
  permuted (``shuffle.py``), and :meth:`MultipleChoice.source` gives them back as the bank wrote.
* :class:`~edu_parallel.quiz.numeric.Numeric` (in ``numeric.py``): the answer is computed by
  package code from the question's ``params``, never typed. Answers are numbers or strings; byte
  quantities accept units (``"1.5 MiB"``, ``"1536"``).
* :class:`~edu_parallel.quiz.predict.PredictThenRun` (in ``predict.py``): the learner predicts,
  then the engine runs (lazily, once) and the prediction is graded against ``truth(result)``.

An answer that cannot be read raises a ValueError naming ``answer`` (nothing is recorded).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.errors import bad_value, check_int
from ..core.i18n import N_, _

LETTERS = "abcdefghijklmnopqrstuvwxyz"
# the unit words of Numeric.units (numeric.py) shown to the learner, translated where shown
# (parsing accepts both)
UNIT_WORDS = {
    "assignments": N_("assignments"),
    "buckets": N_("buckets"),
    "collectives": N_("collectives"),
    "elements": N_("elements"),
    "events": N_("events"),
    "gradients": N_("gradients"),
    "messages": N_("messages"),
    "microbatches": N_("microbatches"),
    "params": N_("params"),
    "steps": N_("steps"),
    "times": N_("times"),
    "tokens": N_("tokens"),
    "updates": N_("updates"),
    "values": N_("values"),
}
# full-width punctuation a Chinese keyboard types, read as its ASCII twin
SEPARATORS = str.maketrans({"，": ",", "；": ";", "、": ",", "）": ")", "　": " "})


@dataclass(frozen=True)
class Feedback:
    """The result of checking one answer.

    ``expected`` is the right answer as display text, ``message`` one line for the learner,
    ``reveal`` what a :class:`PredictThenRun` run showed (empty for other kinds).
    """

    correct: bool
    expected: str
    explanation: str
    message: str
    given: str = ""
    reveal: str = ""

    def __str__(self) -> str:
        parts = [self.message, self.reveal, self.explanation]
        return "\n".join(p for p in parts if p)


def check_text(name: str, value: Any) -> str:
    """Return ``value`` if it is a non-empty string, or raise a ValueError naming ``name``."""
    if not isinstance(value, str) or not value.strip():
        raise bad_value(name, value, "a non-empty text")
    return value


def unit_label(units: str) -> str:
    """``units`` as the learner reads it: ``"steps"`` -> ``"步"`` in Chinese; others unchanged."""
    return _(UNIT_WORDS[units]) if units in UNIT_WORDS else units


@dataclass
class MultipleChoice:
    """Pick the right choice (or, with ``multiple=True``, every right choice)."""

    kind: ClassVar[str] = "choice"
    prompt: str
    choices: list[str]
    correct: int | set[int] | frozenset[int]
    explanation: str
    multiple: bool = False
    params: dict[str, Any] = field(default_factory=dict)
    key: str = ""
    order: tuple[int, ...] = ()  # shown position i holds the bank's choice order[i]; () as written

    def __post_init__(self) -> None:
        check_text("prompt", self.prompt)
        check_text("explanation", self.explanation)
        self.choices = list(self.choices)
        self.order = tuple(self.order)
        if self.order and sorted(self.order) != list(range(len(self.choices))):
            raise bad_value("order", self.order, f"a permutation of 0..{len(self.choices) - 1}")
        if len(self.choices) < 2 or len(self.choices) > len(LETTERS):
            raise bad_value("choices", self.choices, f"a list of 2 to {len(LETTERS)} texts")
        for c in self.choices:
            check_text("choices", c)
        if len(set(self.choices)) != len(self.choices):
            raise bad_value("choices", self.choices, "distinct texts (no duplicate choices)")
        raw = {self.correct} if isinstance(self.correct, int) else set(self.correct)
        top = len(self.choices) - 1
        indices = frozenset(check_int("correct", i, 0, top) for i in raw)
        if not self.multiple and len(indices) != 1:
            raise bad_value("correct", self.correct, "exactly one choice index (multiple=False)")
        if not indices:
            raise bad_value("correct", self.correct, "at least one choice index")
        self.correct = indices if self.multiple else next(iter(indices))

    @property
    def correct_indices(self) -> frozenset[int]:
        """The correct choice indices as a set, whatever ``multiple`` is."""
        c = self.correct
        return frozenset({c}) if isinstance(c, int) else frozenset(c)

    def position(self, source_index: int) -> int:
        """Where the bank's choice ``source_index`` is shown."""
        return self.order.index(source_index) if self.order else source_index

    def source(self) -> MultipleChoice:
        """This question with its choices in the order the bank wrote them."""
        if not self.order:
            return self
        choices = [""] * len(self.choices)
        for shown, j in enumerate(self.order):
            choices[j] = self.choices[shown]
        correct = {self.order[i] for i in self.correct_indices}
        return dataclasses.replace(
            self, choices=choices, correct=correct if self.multiple else correct.pop(), order=()
        )

    def permuted(self, order: Iterable[int]) -> MultipleChoice:
        """The same question with the bank's choice ``order[i]`` shown at position ``i``."""
        src = self.source()
        order = tuple(order)
        if sorted(order) != list(range(len(src.choices))):
            raise bad_value("order", order, f"a permutation of 0..{len(src.choices) - 1}")
        correct = {order.index(j) for j in src.correct_indices}
        return dataclasses.replace(
            src,
            choices=[src.choices[j] for j in order],
            correct=correct if src.multiple else correct.pop(),
            order=order,
        )

    def label(self, i: int) -> str:
        """``"b) text"`` for choice ``i``."""
        return f"{LETTERS[i]}) {self.choices[i]}"

    @property
    def expected(self) -> str:
        return "; ".join(self.label(i) for i in sorted(self.correct_indices))

    def parse(self, answer: Any) -> frozenset[int]:
        """Index, set of indices, letter(s) such as ``"b"`` or ``"a, c"``, or a choice's text."""
        picked = self._indices(answer)
        if not self.multiple and len(picked) != 1:
            raise bad_value(
                "answer", answer, _("exactly one choice (this question has one answer)")
            )
        return picked

    def _indices(self, answer: Any) -> frozenset[int]:
        n = len(self.choices)
        valid = _("a choice index 0..{last}, a letter a..{letter} or a choice's text").format(
            last=n - 1, letter=LETTERS[n - 1]
        )
        if isinstance(answer, str):
            if answer in self.choices:
                return frozenset({self.choices.index(answer)})
            text = answer.translate(SEPARATORS).strip().lower().replace(")", "")
            tokens = re.split(r"[\s,;]+", text) if re.search(r"[\s,;]", text) else list(text)
            tokens = [t for t in tokens if t]
            if not tokens or any(len(t) != 1 or t not in LETTERS[:n] for t in tokens):
                raise bad_value("answer", answer, valid)
            return frozenset(LETTERS.index(t) for t in tokens)
        if isinstance(answer, int) and not isinstance(answer, bool):
            if not 0 <= answer < n:
                raise bad_value("answer", answer, valid)
            return frozenset({answer})
        if isinstance(answer, Iterable):
            picked = frozenset().union(*(self._indices(a) for a in answer))
            if picked:
                return picked
        raise bad_value("answer", answer, valid)

    def check(self, answer: Any) -> Feedback:
        picked = self.parse(answer)
        given = "; ".join(self.label(i) for i in sorted(picked))
        ok = picked == self.correct_indices
        if ok:
            message = _("Correct! {expected}").format(expected=self.expected)
        else:
            message = _("Not quite. You chose {given}; the answer is {expected}").format(
                given=given, expected=self.expected
            )
        return Feedback(ok, self.expected, self.explanation, message, given)
