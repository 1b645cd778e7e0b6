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
from ..core.i18n import N_, _
from ..core.units import BYTE_SUFFIXES, format_bytes

LETTERS = "abcdefghijklmnopqrstuvwxyz"
BYTE_UNITS = ("bytes", "B")  # Numeric.units that switch on byte-size parsing
_ALIASES = {"times": ("x", "×")}  # other suffixes accepted for some units
# unit words of Numeric.units shown to the learner (translated where shown; parsing accepts both)
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
_BYTE_WORDS = {"字节": "b"}  # the Chinese for bytes, accepted after a number of bytes
_SEPARATORS = str.maketrans({"，": ",", "；": ";", "、": ",", "）": ")", "　": " "})  # full-width
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


def unit_label(units: str) -> str:
    """``units`` as the learner reads it: ``"steps"`` -> ``"步"`` in Chinese; others unchanged."""
    return _(UNIT_WORDS[units]) if units in UNIT_WORDS else units


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
            text = answer.translate(_SEPARATORS).strip().lower().replace(")", "")
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
            words = _("{n} byte") if value == 1 else _("{n} bytes")
            plain = words.format(n=_plain_number(value))
            return f"{format_bytes(value)} ({plain})" if abs(value) >= 1024 else plain
        return f"{_plain_number(value)} {unit_label(self.units)}".strip()

    @property
    def expected(self) -> str:
        return self.format(self.answer)

    def parse(self, answer: Any) -> float:
        """A number, or a string: ``"1536"``, ``"1,536"``, ``"1.5 KiB"`` (bytes), ``"75 GB/s"``."""
        if self.is_bytes:
            valid = _("a number such as '1536' or '1.5 KiB'")
        else:
            valid = _("a number such as '42'")
        if isinstance(answer, bool):
            raise bad_value("answer", answer, valid)
        if isinstance(answer, (int, float)):
            value = float(answer)
        elif isinstance(answer, str):
            text = answer.translate(_SEPARATORS).replace(",", "").replace("_", "")
            match = _NUMBER.fullmatch(text)
            if not match:
                raise bad_value("answer", answer, valid)
            value, suffix = float(match.group(1)), match.group(2)
            if self.is_bytes:
                suffix = _BYTE_WORDS.get(suffix, suffix)
                if suffix.lower() not in BYTE_SUFFIXES:
                    raise bad_value(
                        "answer",
                        answer,
                        _(
                            "a number such as '1536' or '1.5 KiB'"
                            " (units: B, KiB, MiB, GiB, KB, MB, GB)"
                        ),
                    )
                value *= BYTE_SUFFIXES[suffix.lower()]
            elif suffix and suffix.lower() not in (
                self.units.lower(),
                *_ALIASES.get(self.units, ()),
                unit_label(self.units).replace(" ", "").lower(),
                unit_label(self.units).lower(),
            ):
                raise bad_value(
                    "answer",
                    answer,
                    _("a number, optionally followed by {units}").format(units=repr(self.units)),
                )
        else:
            try:
                value = float(answer)
            except (TypeError, ValueError):
                raise bad_value("answer", answer, valid) from None
        if not math.isfinite(value):
            raise bad_value("answer", answer, _("a finite number"))
        return value

    @property
    def allowed(self) -> str:
        """The tolerance in words: ``"tolerance 1%"``, ``"exact answer"``..."""
        rel = f"{self.tolerance * 100:g}%" if self.tolerance else ""
        absolute = f"+/-{_plain_number(self.abs_tolerance)}" if self.abs_tolerance else ""
        if rel and absolute:
            return _("tolerance {rel} or {abs}").format(rel=rel, abs=absolute)
        if rel or absolute:
            return _("tolerance {tol}").format(tol=rel or absolute)
        return _("exact answer expected")

    def grade(self, value: float, expected: float) -> Feedback:
        """Compare ``value`` with ``expected`` (both already numbers)."""
        err = abs(value - expected)
        ok = err <= self.tolerance * abs(expected) or err <= self.abs_tolerance
        shown = self.format(expected)
        if expected != 0:
            off = _("relative error {error}").format(
                error=f"{(value - expected) / abs(expected):+.2%}"
            )
        else:
            off = _("off by {diff}").format(diff=_plain_number(value - expected))
        given = self.format(value)
        if value == expected:
            message = _("Correct! {expected}.").format(expected=shown)
        elif ok:
            message = _("Correct! Expected {expected}; you answered {given} ({off}).").format(
                expected=shown, given=given, off=off
            )
        else:
            message = _(
                "Not quite. Expected {expected}; you answered {given} ({off}, {allowed})."
            ).format(expected=shown, given=given, off=off, allowed=self.allowed)
        return Feedback(ok, shown, self.explanation, message, given)

    def check(self, answer: Any) -> Feedback:
        return self.grade(self.parse(answer), self.answer)
