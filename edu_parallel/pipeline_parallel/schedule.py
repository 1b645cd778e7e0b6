"""Pipeline schedules as pure data: which rank runs which forward/backward, slot by slot.

A :class:`Schedule` gives each of ``P`` ranks a row of unit-time slots. A slot holds an
:class:`Action` (``"F"`` forward, ``"B"`` backward, ``"W"`` weight-gradient) of one virtual stage
on one microbatch, or ``None`` (an idle slot: the pipeline *bubble*). The schedules themselves
(GPipe, 1F1B, interleaved 1F1B, ZB-H1) are built in :mod:`edu_parallel.pipeline_parallel.builders`;
:func:`validate_schedule` reports every problem of a schedule and :func:`explain_schedule` prints
its grid with them marked.

Text form (round-trips through :meth:`Schedule.to_text` / :meth:`Schedule.from_text`)::

    schedule 1f1b ranks=2 microbatches=2 chunks=1
    r0: 0F0 0F1 . 0B0 . 0B1
    r1: . 1F0 1B0 1F1 1B1 .
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import bad_value
from ..plans.plan import Problem

KINDS = ("F", "B", "W")
_ACTION_RE = re.compile(r"(\d+)([FBW])(\d+)")


@dataclass(frozen=True, slots=True, order=True)
class Action:
    """One unit of pipeline work.

    ``stage`` is the virtual stage in ``[0, P*v)``; stage ``s`` runs on rank ``s % P``
    (round-robin model chunks, as in Megatron's interleaving). ``kind`` is ``"F"`` (forward),
    ``"B"`` (backward: input-gradient only when the schedule has ``W`` actions, else the full
    backward) or ``"W"`` (weight-gradient, Zero Bubble). ``microbatch`` is in ``[0, M)``.
    """

    stage: int
    kind: str
    microbatch: int

    def text(self) -> str:
        """``"1F0"``: stage 1, forward, microbatch 0 (``torch.distributed.pipelining`` style)."""
        return f"{self.stage}{self.kind}{self.microbatch}"

    @classmethod
    def from_text(cls, s: str) -> Action:
        m = _ACTION_RE.fullmatch(s.strip())
        if not m:
            raise bad_value(
                "action", s, "'STAGE KIND MICROBATCH' written like '1F0', KIND in F, B, W"
            )
        return cls(int(m[1]), m[2], int(m[3]))

    def __str__(self) -> str:
        return self.text()


@dataclass(frozen=True)
class Schedule:
    """A pipeline schedule: per rank, its unit-time slots in order (``None`` = idle slot)."""

    name: str
    num_ranks: int
    num_microbatches: int
    chunks: int
    actions: tuple[tuple[Action | None, ...], ...]

    @property
    def num_stages(self) -> int:
        """Virtual stages ``P * v``."""
        return self.num_ranks * self.chunks

    def rank_of(self, stage: int) -> int:
        """The rank that runs ``stage`` (round robin: ``stage % P``)."""
        return stage % self.num_ranks

    @property
    def split_backward(self) -> bool:
        """True when the backward is split into B (input grad) and W (weight grad)."""
        return any(a is not None and a.kind == "W" for row in self.actions for a in row)

    @property
    def num_slots(self) -> int:
        return max((len(row) for row in self.actions), default=0)

    def orders(self) -> list[list[Action]]:
        """Each rank's actions in slot order, idle slots dropped."""
        return [[a for a in row if a is not None] for row in self.actions]

    def to_text(self) -> str:
        """Header line, then ``r0: 0F0 0F1 . 0B0 ...`` per rank (``.`` = idle slot)."""
        head = (
            f"schedule {self.name} ranks={self.num_ranks} "
            f"microbatches={self.num_microbatches} chunks={self.chunks}"
        )
        rows = [
            f"r{r}: " + " ".join(a.text() if a is not None else "." for a in row)
            for r, row in enumerate(self.actions)
        ]
        return "\n".join([head, *rows])

    @classmethod
    def from_text(cls, text: str) -> Schedule:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        head = re.fullmatch(
            r"schedule (\S+) ranks=(\d+) microbatches=(\d+) chunks=(\d+)", lines[0] if lines else ""
        )
        if not head:
            raise bad_value(
                "text",
                lines[0] if lines else "",
                "a first line 'schedule NAME ranks=P microbatches=M chunks=V'",
            )
        rows: list[tuple[Action | None, ...]] = []
        for number, line in enumerate(lines[1:], start=2):
            label, sep, body = line.partition(":")
            if not sep or label.strip() != f"r{len(rows)}":
                raise bad_value(f"text line {number}", line, f"'r{len(rows)}: 0F0 . 0B0 ...'")
            rows.append(tuple(None if t == "." else Action.from_text(t) for t in body.split()))
        return cls(head[1], int(head[2]), int(head[3]), int(head[4]), tuple(rows))


# ----------------------------------------------------------------------------- dependencies
def dependencies(a: Action, num_stages: int) -> list[Action]:
    """What ``a`` waits for: F(s,m) needs F(s-1,m); B(s,m) needs F(s,m) and B(s+1,m) (the last
    stage's B needs only its F: the loss); W(s,m) needs B(s,m)."""
    s, m = a.stage, a.microbatch
    if a.kind == "F":
        return [Action(s - 1, "F", m)] if s > 0 else []
    if a.kind == "B":
        deps = [Action(s, "F", m)]
        return deps + [Action(s + 1, "B", m)] if s < num_stages - 1 else deps
    return [Action(s, "B", m)]


def validate_schedule(s: Schedule) -> list[Problem]:
    """Every problem of a schedule (``Problem.step`` is the slot; None: about the whole run).

    Checks: each (stage, microbatch) has exactly one F and one B, and one W iff the schedule
    splits the backward; each action is in range and on ``rank_of(stage)``; each dependency
    (:func:`dependencies`) sits in a strictly earlier slot. An empty list means it is valid."""
    p, m, v, n = s.num_ranks, s.num_microbatches, s.chunks, s.num_stages
    if p < 1 or m < 1 or v < 1 or len(s.actions) != p:
        msg = f"ranks={p}, microbatches={m}, chunks={v} must be >= 1, with one row per rank"
        return [Problem(None, 0, msg + f" (rows: {len(s.actions)})")]
    where: dict[Action, int] = {}
    out: list[Problem] = []
    for r, row in enumerate(s.actions):
        for t, a in enumerate(row):
            if a is None:
                continue
            if a.kind not in KINDS or not (0 <= a.stage < n and 0 <= a.microbatch < m):
                msg = f"{a.text()}: kind F/B/W, stage in [0, {n - 1}], microbatch in [0, {m - 1}]"
            elif s.rank_of(a.stage) != r:
                msg = (
                    f"{a.text()} is on rank {r}, but stage {a.stage} runs on rank"
                    f" {s.rank_of(a.stage)}"
                )
            elif a in where:
                msg = f"{a.text()} runs twice (first at slot {where[a]})"
            else:
                where[a] = t
                continue
            out.append(Problem(t, r, msg))
    for a, t in where.items():
        for d in dependencies(a, n):
            if d in where and where[d] >= t:
                msg = (
                    f"{a.text()} at slot {t} needs {d.text()} (rank {s.rank_of(d.stage)}) in an"
                    f" earlier slot; it is at slot {where[d]}"
                )
                out.append(Problem(t, s.rank_of(a.stage), msg))
    kinds = "FBW" if s.split_backward else "FB"
    out += [
        Problem(None, s.rank_of(st), f"{st}{kind}{k} never runs")
        for st in range(n)
        for k in range(m)
        for kind in kinds
        if Action(st, kind, k) not in where
    ]
    return sorted(out, key=lambda q: (q.step is None, q.step or 0, q.rank))


def explain_schedule(
    s: Schedule, problems: list[Problem] | None = None, width: int = 5, max_problems: int = 8
) -> str:
    """The rank x slot grid (``.`` = idle), problem cells marked ``!!``, messages below."""
    problems = validate_schedule(s) if problems is None else problems
    bad = {(q.step, q.rank) for q in problems}
    grid = [
        [
            ("!!" if (t, r) in bad else "") + (a.text() if a is not None else ".")
            for t, a in enumerate(row)
        ]
        for r, row in enumerate(s.actions)
    ]
    width = max([width - 2, len(str(s.num_slots))] + [len(c) for row in grid for c in row])
    rows = ["slot  " + " ".join(str(t).ljust(width) for t in range(s.num_slots))]
    rows += [f"r{r}".ljust(6) + " ".join(c.ljust(width) for c in row) for r, row in enumerate(grid)]
    text = "\n".join(line.rstrip() for line in rows)
    if problems:
        shown = problems[:max_problems]
        where = ["overall" if q.step is None else f"slot {q.step}" for q in shown]
        text += "\n\n" + "\n".join(
            f"!! {w}, rank {q.rank}: {q.message}" for w, q in zip(where, shown, strict=True)
        )
        if len(problems) > len(shown):
            text += f"\n!! ... and {len(problems) - len(shown)} more problems"
    else:
        idle = sum(a is None for row in s.actions for a in row)
        text += (
            f"\n\nschedule {s.name} is valid: {s.num_slots} slots, {idle} of"
            f" {s.num_ranks * s.num_slots} idle"
        )
    return text
