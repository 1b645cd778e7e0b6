"""The numeric question: a number computed by package code, read back with its units.

:class:`Numeric` accepts numbers or strings; a byte quantity accepts units (``"1.5 MiB"``,
``"1536"``, ``"1.5 KiB"``, and the Chinese 字节), other units their word or its translation. The
other kinds are in ``questions.py`` (multiple choice, the feedback) and ``predict.py``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.errors import bad_value, check_non_negative
from ..core.i18n import _
from ..core.units import BYTE_SUFFIXES, format_bytes
from .questions import SEPARATORS, Feedback, check_text, unit_label

BYTE_UNITS = ("bytes", "B")  # Numeric.units that switch on byte-size parsing
_ALIASES = {"times": ("x", "×")}  # other suffixes accepted for some units
_BYTE_WORDS = {"字节": "b"}  # the Chinese for bytes, accepted after a number of bytes
_NUMBER = re.compile(r"\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*")


def plain_number(x: float) -> str:
    """``786432.0`` -> ``'786,432'``; ``112.5`` -> ``'112.5'``."""
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.1f}" if abs(x) >= 1000 else f"{x:.4g}"


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
            plain = words.format(n=plain_number(value))
            return f"{format_bytes(value)} ({plain})" if abs(value) >= 1024 else plain
        return f"{plain_number(value)} {unit_label(self.units)}".strip()

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
            text = answer.translate(SEPARATORS).replace(",", "").replace("_", "")
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
        absolute = f"+/-{plain_number(self.abs_tolerance)}" if self.abs_tolerance else ""
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
            off = _("off by {diff}").format(diff=plain_number(value - expected))
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
