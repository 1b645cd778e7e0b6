"""Errors a learner can act on.

Every bad argument raises :class:`ValueError` naming the parameter, the value given and the valid
range, in one line. Failures on the worker side raise :class:`WorkerError` (a rank raised or died)
or :class:`JobTimeoutError` (ranks that did not finish), both naming the rank and its last step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from .diagnosis import Diagnosis
from .i18n import _


class EngineError(RuntimeError):
    """Base class for failures of a job on the cluster."""


class WorkerError(EngineError):
    """A rank raised an exception or died while running a job.

    ``rank`` names the failing rank, ``where`` its last recorded step, and ``remote_traceback``
    the traceback text printed in the worker (``None`` when the process died without one).
    """

    def __init__(
        self,
        message: str,
        rank: int,
        where: str = "",
        remote_traceback: str | None = None,
        diagnosis: Diagnosis | None = None,
    ):
        super().__init__(message)
        self.rank = rank
        self.where = where
        self.remote_traceback = remote_traceback
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        text = super().__str__()
        if self.remote_traceback:
            header = _("--- traceback on rank {rank} ---").format(rank=self.rank)
            text += f"\n\n{header}\n{self.remote_traceback}"
        return text


class JobTimeoutError(EngineError, TimeoutError):
    """A job did not finish in time; ``ranks`` are the ranks that were still running, ``where``
    their last published step, ``lines`` the Python line (``file:line in function``) of each
    that was not waiting in a send, receive or collective, and ``diagnosis`` which rank is at
    fault, and why (:class:`~edu_parallel.core.diagnosis.Diagnosis`)."""

    def __init__(
        self,
        message: str,
        ranks: list[int],
        where: dict[int, str],
        lines: dict[int, str] | None = None,
        diagnosis: Diagnosis | None = None,
    ):
        super().__init__(message)
        self.ranks = ranks
        self.where = where
        self.lines = dict(lines or {})
        self.diagnosis = diagnosis


class CollectiveMismatchError(WorkerError):
    """Ranks of a group called the same collective number with different operations, dtypes or
    element counts; caught before gloo ran it. ``diagnosis.sides`` holds each side's ranks."""


class ClusterClosedError(EngineError):
    """The cluster was closed (by the user, or after a failure that could not be recovered)."""


class Problems:
    """Every problem found in a set of arguments, said together: the one problem collector.

    Each ``check_*`` call goes through :meth:`check`, which returns the checked value or, when it
    raises, records its one-line message and returns ``None``; :meth:`raise_any` then raises one
    ValueError that joins them all (torchtitan's ``ParallelDims`` style: the error names every
    bad value, not only the first). :class:`Checked` dataclasses and ``ParallelDims`` use it.

        >>> p = Problems()
        >>> p.check(check_int, "steps", 0, 1, 10) is None
        True
        >>> p.lines
        ['steps=0 is not valid: expected an integer in [1, 10]']
    """

    def __init__(self) -> None:
        self.lines: list[str] = []

    def check(self, fn: Callable[..., Any], name: str, value: Any, *args: Any) -> Any:
        """``fn(name, value, *args)``, or None with its message recorded when it raises."""
        try:
            return fn(name, value, *args)
        except ValueError as exc:
            self.lines.append(str(exc))
            return None

    def add(self, problem: str | ValueError) -> None:
        """Record one problem (a message, or the ValueError a ``bad_value`` made)."""
        self.lines.append(str(problem))

    def extend(self, problems: Iterable[str]) -> None:
        self.lines.extend(problems)

    def amend(self, hint: str) -> None:
        """Add ``hint`` to the last problem recorded (what the value means here)."""
        if self.lines:
            self.lines[-1] += hint

    def __bool__(self) -> bool:
        return bool(self.lines)

    def __len__(self) -> int:
        return len(self.lines)

    def raise_any(self) -> None:
        """Raise one ValueError that names every problem, if there is any."""
        if self.lines:
            raise ValueError("; ".join(self.lines))


class Checked:
    """A frozen dataclass whose constructor checks every field at once: ``_check()`` returns one
    line per problem (collected with :class:`Problems`), and the constructor raises one ValueError
    that joins them. Once built, a config is trusted by everything it is passed to: nothing below
    checks it again. :meth:`_field` checks one field and stores its normalised value."""

    def __post_init__(self) -> None:
        problems = Problems()
        problems.extend(self._check())
        problems.raise_any()

    def _check(self) -> list[str]:
        return []

    def _field(self, problems: Problems, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Check field ``name`` with ``fn(name, value, *args)``; store the checked value (a frozen
        dataclass's field, set once here) and return it, or None with the problem recorded."""
        value = problems.check(fn, name, getattr(self, name), *args)
        if value is not None:
            object.__setattr__(self, name, value)
        return value


# How the entry point in force spells each parameter (``{"bucket_cap_mb": "--bucket-mb"}`` under
# the command line): a config is checked with its field names and the error says the learner's.
_SPELLING: ContextVar[Mapping[str, str] | None] = ContextVar("spelling", default=None)


@contextlib.contextmanager
def spelled_as(names: Mapping[str, str]) -> Iterator[None]:
    """Within the block, every error that :func:`bad_value` makes names a parameter as the entry
    point spells it: the command line checks a config built from its options and the message says
    ``--bucket-mb``, not the field ``bucket_cap_mb``. Nothing is checked twice or patched after."""
    token = _SPELLING.set({**(_SPELLING.get() or {}), **names})
    try:
        yield
    finally:
        _SPELLING.reset(token)


def spelling(name: str) -> str:
    """``name`` as the entry point in force spells it (itself outside :func:`spelled_as`)."""
    return (_SPELLING.get() or {}).get(name, name)


def bad_value(name: str, value: Any, valid: str) -> ValueError:
    """The one-line error for a bad argument: parameter, value given, valid range."""
    return ValueError(
        _("{name}={value!r} is not valid: expected {valid}").format(
            name=spelling(name), value=value, valid=valid
        )
    )


def bad_combination(expression: str, valid: str) -> ValueError:
    """The one-line error for values that are each valid but not together: ``expression`` shows
    them as written (``tp * pp = 2 * 3 = 6``, symbols and numbers, never translated), ``valid``
    what they must be (``a divisor of world_size=4``, through the catalog)."""
    return ValueError(
        _("{expression} is not valid: expected {valid}").format(expression=expression, valid=valid)
    )


def needs(name: str, value: Any, other: str, why: str) -> ValueError:
    """The one-line error for an argument that means nothing unless ``other`` is given:
    ``--flops=1e+15 is not valid: expected no value without --link: ...``. A value that would be
    silently ignored is refused, so that no run seems to answer a question it did not ask."""
    return bad_value(
        name, value, _("no value without {other}: {why}").format(other=spelling(other), why=why)
    )


def conflicts(name: str, value: Any, other: str, other_value: Any, why: str) -> ValueError:
    """The one-line error for an argument that means nothing with ``other=other_value``:
    ``--ratio=0.1 is not valid: expected no value with --method='powersgd': ...``."""
    return bad_value(
        name,
        value,
        _("no value with {other}={other_value!r}: {why}").format(
            other=spelling(other), other_value=other_value, why=why
        ),
    )


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """Return ``value`` as an int in ``[low, high]`` or raise a ValueError that says so.

    The message is built only for a bad value: a planner checks tens of thousands of good ones.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value >= low and (high is None or value <= high):
            return value
    return _checked_int(name, value, low, high)


def _checked_int(name: str, value: Any, low: int, high: int | None) -> int:
    """:func:`check_int` past its fast path: a value of another type, or out of range."""
    valid = (
        _("an integer in [{low}, {high}]").format(low=low, high=high)
        if high is not None
        else _("an integer >= {low}").format(low=low)
    )
    if isinstance(value, bool):  # True is an int to Python, not a count to a learner
        raise bad_value(name, value, valid)
    if not isinstance(value, int):
        try:
            as_int = int(value)
        except (TypeError, ValueError, OverflowError):  # OverflowError: inf
            raise bad_value(name, value, valid) from None
        if as_int != value:
            raise bad_value(name, value, valid)
        value = as_int
    if value < low or (high is not None and value > high):
        raise bad_value(name, value, valid)
    return value


MAX_SEED = 2**31 - 1  # every seed: derived seeds stay below 2^64 (torch.Generator's range)


def check_seed(name: str, value: Any) -> int:
    """``value`` as a seed in [0, :data:`MAX_SEED`], the one range of every seed."""
    return check_int(name, value, 0, MAX_SEED)


def check_positive(name: str, value: Any) -> float:
    """Return ``value`` as a float > 0 or raise a ValueError that says so."""
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise bad_value(name, value, _("a number > 0")) from None
    if not as_float > 0 or as_float != as_float or as_float == float("inf"):
        raise bad_value(name, value, _("a finite number > 0"))
    return as_float


MAX_TIMEOUT_S = 86400.0  # one day: longer waits are a mistake, and larger ones overflow poll()
MIN_TIMEOUT_S = 0.1  # shorter, and every job times out before its ranks can answer


def check_timeout(name: str, value: Any) -> float:
    """Return ``value`` as seconds in [:data:`MIN_TIMEOUT_S`, :data:`MAX_TIMEOUT_S`] or raise a
    ValueError."""
    valid = _("a number of seconds in [{low}, {high}]").format(
        low=f"{MIN_TIMEOUT_S:g}", high=f"{MAX_TIMEOUT_S:g}"
    )
    if isinstance(value, bool):
        raise bad_value(name, value, valid)
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise bad_value(name, value, valid) from None
    if not MIN_TIMEOUT_S <= as_float <= MAX_TIMEOUT_S:
        raise bad_value(name, value, valid)
    return as_float


def check_non_negative(name: str, value: Any, valid: str = "") -> float:
    """Return ``value`` as a finite float >= 0 or raise a ValueError that says so."""
    valid = valid or _("a finite number >= 0")
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise bad_value(name, value, valid) from None
    if isinstance(value, bool) or not 0.0 <= as_float < float("inf"):
        raise bad_value(name, value, valid)
    return as_float


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is True or False (not 1, not "yes"), else the one-line error."""
    if not isinstance(value, bool):
        raise bad_value(name, value, _("True or False"))
    return value


def one_of(options: Iterable[Any]) -> str:
    """What a choice must be, in the learner's language: ``one of a, b, c`` (each option as
    ``str`` gives it: pass ``map(repr, ...)`` for quoted ones). The one home of the phrase."""
    return _("one of {options}").format(options=", ".join(map(str, options)))


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices`` or raise a ValueError listing them."""
    options = list(choices)
    if value not in options:
        raise bad_value(name, value, one_of(map(repr, options)))
    return value
