"""Where the learner's run first parted from the reference's: the first chunk that holds the wrong
ranks' inputs.

Both runs start from the same input, rank r holding 2^r in every element, so a chunk's value reads
as the set of ranks summed into it (``core.inputs.contributors``). The step blocks
(``ctx.step``) copied each rank's buffer after each step; walking the reference's steps in order,
the first (step, rank, chunk) whose set differs is the divergence the picture marks.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.i18n import _
from ..core.inputs import chunk_bounds, contributors
from ..core.trace import Trace


@dataclass(frozen=True)
class Divergence:
    """After ``step`` (of ``phase``), ``rank``'s chunk ``chunk`` held ``got`` where the reference
    held ``want`` (sets of ranks; None: not a sum of distinct inputs)."""

    step: int
    phase: str | None
    rank: int
    chunk: int
    got: frozenset[int] | None
    want: frozenset[int] | None

    def text(self) -> str:
        def say(s: frozenset[int] | None) -> str:
            if s is None:
                return _("a value that is no sum of distinct ranks' inputs")
            if not s:
                return _("nothing")
            return _("ranks {{{ranks}}}").format(ranks=", ".join(map(str, sorted(s))))

        if self.phase:
            msg = _(
                "after step {step} ({phase}), rank {rank}'s chunk {chunk} held {got}; the "
                "reference held {want}"
            )
        else:
            msg = _(
                "after step {step}, rank {rank}'s chunk {chunk} held {got}; the reference held "
                "{want}"
            )
        return msg.format(
            step=self.step,
            phase=self.phase,
            rank=self.rank,
            chunk=self.chunk,
            got=say(self.got),
            want=say(self.want),
        )


def chunk_sets(values: list[float], bounds: list[int]) -> list[frozenset[int] | None]:
    """Each chunk's set of contributing ranks (None when its elements disagree)."""
    sets: list[frozenset[int] | None] = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        part = values[lo:hi]
        if not part:
            sets.append(frozenset())
        elif any(v != part[0] for v in part) or part[0] != int(part[0]) or part[0] < 0:
            sets.append(None)
        else:
            sets.append(frozenset(contributors(part[0])))
    return sets


def first_divergence(learner: Trace, reference: Trace, num_chunks: int) -> Divergence | None:
    """The first (step, rank, chunk) where the learner's buffer differs from the reference's;
    None when the learner's trace has no step snapshots or never differs."""
    mine, ref = learner.snapshot_grid(), reference.snapshot_grid()
    if not any(step >= 0 for _, step in mine):
        return None
    phases = {s.step: s.phase for s in reference.snapshots}
    steps = sorted({step for _, step in ref if step >= 0})
    n = reference.world_size
    for step in steps:
        for rank in range(n):
            want_values = ref.get((rank, step))
            got_values = _latest(mine, rank, step)
            if want_values is None or got_values is None:
                continue
            bounds = chunk_bounds(len(want_values), num_chunks)
            got, want = chunk_sets(got_values, bounds), chunk_sets(want_values, bounds)
            for k, (g, w) in enumerate(zip(got, want, strict=True)):
                if g != w:
                    return Divergence(step, phases.get(step), rank, k, g, w)
    return None


def _latest(grid: dict[tuple[int, int], list[float]], rank: int, step: int) -> list[float] | None:
    """The rank's buffer after ``step``: its last snapshot at or before it."""
    known = [s for (r, s) in grid if r == rank and s <= step]
    return grid[(rank, max(known))] if known else None
