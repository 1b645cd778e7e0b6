"""Question kinds: pure Python, no ipywidgets (a quiz of them is in ``container.py``).

Three kinds of question, each with a ``prompt``, a teaching ``explanation`` and
``check(answer) -> Feedback``:

* :class:`MultipleChoice`: one correct choice, or several with ``multiple=True``. Answers are a
  0-based index (or a set of them), a letter (``"b"``, ``"a,c"``) or the exact choice text, all in
  the order shown: a :class:`~edu_parallel.quiz.container.Quiz` shows each learner the options
  permuted (``shuffle.py``), and :meth:`MultipleChoice.source` gives them back as the bank wrote.
* :class:`Numeric`: the answer is computed by package code from the question's ``params``, never
  typed. Answers are numbers or strings; byte quantities accept units (``"1.5 MiB"``, ``"1536"``).
* :class:`~edu_parallel.quiz.predict.PredictThenRun` (in ``predict.py``): the learner predicts,
  then the engine runs (lazily, once) and the prediction is graded against ``truth(result)``.

An answer that cannot be read raises a ValueError naming ``answer`` (nothing is recorded).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.errors import bad_value, check_int, check_non_negative
from ..core.units import BYTE_SUFFIXES, format_bytes

LETTERS = "abcdefghijklmnopqrstuvwxyz"
BYTE_UNITS = ("bytes", "B")  # Numeric.units that switch on byte-size parsing
_ALIASES = {"times": ("x", "×")}  # other suffixes accepted for some units
_NUMBER = re.compile(r"\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*")


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


def _plain_number(x: float) -> str:
    """``786432.0`` -> ``'786,432'``; ``112.5`` -> ``'112.5'``."""
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.1f}" if abs(x) >= 1000 else f"{x:.4g}"


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
            raise bad_value("answer", answer, "exactly one choice (this question has one answer)")
        return picked

    def _indices(self, answer: Any) -> frozenset[int]:
        n = len(self.choices)
        valid = f"a choice index 0..{n - 1}, a letter a..{LETTERS[n - 1]} or a choice's text"
        if isinstance(answer, str):
            if answer in self.choices:
                return frozenset({self.choices.index(answer)})
            text = answer.strip().lower().replace(")", "")
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
            message = f"Correct! {self.expected}"
        else:
            message = f"Not quite. You chose {given}; the answer is {self.expected}"
        return Feedback(ok, self.expected, self.explanation, message, given)


@dataclass
class Numeric:
    """A number computed by package code; accepted within ``tolerance`` (relative) or
    ``abs_tolerance``. With ``units="bytes"`` answers may carry units (``"768 KiB"``)."""

    kind: ClassVar[str] = "numeric"
    prompt: str
    answer: float
    tolerance: float = 0.01
    abs_tolerance: float = 0.0
    units: str = ""
    explanation: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    key: str = ""

    def __post_init__(self) -> None:
        check_text("prompt", self.prompt)
        check_text("explanation", self.explanation)
        if isinstance(self.answer, bool) or not isinstance(self.answer, (int, float)):
            try:
                self.answer = float(self.answer)  # numpy scalars
            except (TypeError, ValueError):
                raise bad_value("answer", self.answer, "a finite number") from None
        if not math.isfinite(self.answer):
            raise bad_value("answer", self.answer, "a finite number")
        self.tolerance = check_non_negative("tolerance", self.tolerance)
        self.abs_tolerance = check_non_negative("abs_tolerance", self.abs_tolerance)
        if not isinstance(self.units, str):
            raise bad_value("units", self.units, "a text such as 'bytes', 'GB/s' or ''")

    @property
    def is_bytes(self) -> bool:
        return self.units in BYTE_UNITS

    def format(self, value: float) -> str:
        """``786432`` -> ``'768 KiB (786,432 bytes)'``; ``112.5`` -> ``'112.5 GB/s'``."""
        if self.is_bytes:
            plain = f"{_plain_number(value)} byte{'' if value == 1 else 's'}"
            return f"{format_bytes(value)} ({plain})" if abs(value) >= 1024 else plain
        return f"{_plain_number(value)} {self.units}".strip()

    @property
    def expected(self) -> str:
        return self.format(self.answer)

    def parse(self, answer: Any) -> float:
        """A number, or a string: ``"1536"``, ``"1,536"``, ``"1.5 KiB"`` (bytes), ``"75 GB/s"``."""
        example = "'1536' or '1.5 KiB'" if self.is_bytes else "'42'"
        valid = f"a number such as {example}"
        if isinstance(answer, bool):
            raise bad_value("answer", answer, valid)
        if isinstance(answer, (int, float)):
            value = float(answer)
        elif isinstance(answer, str):
            match = _NUMBER.fullmatch(answer.replace(",", "").replace("_", ""))
            if not match:
                raise bad_value("answer", answer, valid)
            value, suffix = float(match.group(1)), match.group(2)
            if self.is_bytes:
                if suffix.lower() not in BYTE_SUFFIXES:
                    raise bad_value(
                        "answer", answer, valid + " (units: B, KiB, MiB, GiB, KB, MB, GB)"
                    )
                value *= BYTE_SUFFIXES[suffix.lower()]
            elif suffix and suffix.lower() not in (
                self.units.lower(),
                *_ALIASES.get(self.units, ()),
            ):
                raise bad_value(
                    "answer", answer, f"a number, optionally followed by {self.units!r}"
                )
        else:
            try:
                value = float(answer)
            except (TypeError, ValueError):
                raise bad_value("answer", answer, valid) from None
        if not math.isfinite(value):
            raise bad_value("answer", answer, "a finite number")
        return value

    @property
    def allowed(self) -> str:
        """The tolerance in words: ``"tolerance 1%"``, ``"exact answer"``..."""
        parts = [f"{self.tolerance * 100:g}%"] if self.tolerance else []
        if self.abs_tolerance:
            parts.append(f"+/-{_plain_number(self.abs_tolerance)}")
        return "tolerance " + " or ".join(parts) if parts else "exact answer expected"

    def grade(self, value: float, expected: float) -> Feedback:
        """Compare ``value`` with ``expected`` (both already numbers)."""
        err = abs(value - expected)
        ok = err <= self.tolerance * abs(expected) or err <= self.abs_tolerance
        shown = self.format(expected)
        if expected != 0:
            off = f"relative error {(value - expected) / abs(expected):+.2%}"
        else:
            off = f"off by {_plain_number(value - expected)}"
        given = self.format(value)
        if value == expected:
            message = f"Correct! {shown}."
        elif ok:
            message = f"Correct! Expected {shown}; you answered {given} ({off})."
        else:
            message = f"Not quite. Expected {shown}; you answered {given} ({off}, {self.allowed})."
        return Feedback(ok, shown, self.explanation, message, given)

    def check(self, answer: Any) -> Feedback:
        return self.grade(self.parse(answer), self.answer)
