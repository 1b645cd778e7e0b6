"""The failure lab's cases as data, and one case checked once: :class:`LabCase` (torch-free).

The command line (``edu-parallel run failure``) builds a :class:`LabCase` from ``--case`` and
``--culprit`` against the run's world size before any process starts; ``cases.py`` runs it, and
trusts it. Each case and the kind of failure the engine names for it (:data:`EXPECTED`): the
killed rank is ``dead``; a rank that skips a collective, or sleeps, is ``missing``; a rank stopped
by SIGSTOP is ``stopped``; another collective or another size is a ``mismatch`` (named on its
minority side, so it needs 3 ranks); two ranks that both receive first are a ``deadlock``; a
straggler, and a timeout too short for the work, are ``slow``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.diagnosis import Kind
from ..core.errors import Checked, Problems, bad_value, check_choice, check_int
from ..core.i18n import _

CASES: tuple[str, ...] = (
    "killed",
    "skips_collective",
    "sleeps",
    "stopped",
    "mismatched_collectives",
    "mismatched_sizes",
    "deadlock",
    "straggler",
    "timeout_too_short",
)
EXPECTED: dict[str, Kind] = {
    "killed": "dead",
    "skips_collective": "missing",
    "sleeps": "missing",
    "stopped": "stopped",
    "mismatched_collectives": "mismatch",
    "mismatched_sizes": "mismatch",
    "deadlock": "deadlock",
    "straggler": "slow",
    "timeout_too_short": "slow",
}
# ranks a case needs: a mismatch is named on its minority side, so it needs a majority
MIN_RANKS = {"mismatched_collectives": 3, "mismatched_sizes": 3}
NUMEL = 16  # elements of each step's all-reduce
STEPS = 4  # all-reduce steps of every job
AT_STEP = 2  # the step at which the culprit misbehaves (its third all-reduce: all_reduce #3)


def partner_of(culprit: int, world_size: int) -> int:
    """The rank the culprit of the deadlock waits for, and that waits for it: the next rank."""
    return (culprit + 1) % world_size


def check_case(case: str, culprit: int | None, world_size: int) -> tuple[str, int]:
    """``(case, culprit)`` checked for a job of ``world_size`` ranks (validated already), or the
    one-line error naming the option, its value and the valid range; culprit None: the last
    rank."""
    check_choice("case", case, CASES)
    low = MIN_RANKS.get(case, 2)
    n = world_size
    if n < low:
        raise bad_value(
            "world_size",
            world_size,
            _("at least {low} ranks for case {case!r}: a failure between ranks").format(
                low=low, case=case
            ),
        )
    if culprit is None:
        return case, n - 1
    return case, check_int("culprit", culprit, 0, n - 1)


@dataclass(frozen=True)
class LabCase(Checked):
    """One case of the lab, with its culprit, for a job of ``world_size`` ranks."""

    case: str
    """One of :data:`CASES`."""
    culprit: int | None
    """The rank at fault, 0 to ``world_size - 1``; None: the last rank."""
    world_size: int
    """The job's ranks (the run's validated degrees)."""

    def _check(self) -> list[str]:
        p = Problems()
        n = self._field(p, "world_size", check_int, 1)
        if n is not None:
            try:
                _case, culprit = check_case(self.case, self.culprit, n)
            except ValueError as exc:
                p.add(exc)
            else:
                object.__setattr__(self, "culprit", culprit)
        return p.lines

    @property
    def expected(self) -> Kind:
        """The kind of failure the engine should name."""
        return EXPECTED[self.case]
