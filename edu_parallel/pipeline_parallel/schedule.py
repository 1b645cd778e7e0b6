"""Pipeline schedules as pure data: which rank runs which forward/backward, slot by slot.

A :class:`Schedule` gives each of ``P`` ranks a row of unit-time slots. A slot holds an
:class:`Action` of one virtual stage on one microbatch, or ``None`` (an idle slot: the pipeline
*bubble*). The kinds are ``torch.distributed.pipelining``'s (torch 2.13, ``schedules.py``,
``_ComputationType``): ``"F"`` forward, ``"B"`` full backward (input and weight gradients),
``"I"`` input-gradient pass only (backward of the activations) and ``"W"`` weight-gradient pass
(Zero Bubble, Qi et al. 2023, arXiv 2401.10241, calls I "B"; torch and this package do not). Each
(stage, microbatch) has one F and either one B, or one I followed by one W. The schedules
themselves (GPipe, 1F1B, interleaved 1F1B, ZB-H1) are built in
:mod:`edu_parallel.pipeline_parallel.builders`; :func:`validate_schedule` reports every problem of
a schedule and :func:`explain_schedule` prints its grid with them marked;
:mod:`edu_parallel.pipeline_parallel.torch_order` converts to and from torch's pipeline order.

Text form (round-trips through :meth:`Schedule.to_text` / :meth:`Schedule.from_text`)::

    schedule 1f1b ranks=2 microbatches=2 chunks=1
    r0: 0F0 0F1 . 0B0 . 0B1
    r1: . 1F0 1B0 1F1 1B1 .

Older texts of this package wrote ZB-H1's input-gradient pass as ``B`` next to a ``W``;
:meth:`Schedule.from_text` rejects them with an error that names the fix (write ``I``), since
under torch's names ``B`` then ``W`` would compute the weight gradient twice.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass, replace

from ..core.errors import bad_value
from ..plans.plan import Problem

KINDS = ("F", "B", "I", "W")
BACKWARD_KINDS = ("B", "I")  # the passes that send a gradient to the previous stage
_ACTION_RE = re.compile(r"(\d+)([FBIW])(\d+)")


@dataclass(frozen=True, slots=True, order=True)
class Action:
    """One unit of pipeline work.

    ``stage`` is the virtual stage in ``[0, P*v)``; stage ``s`` runs on rank ``s % P``
    (round-robin model chunks, as in Megatron's interleaving). ``kind`` is ``"F"`` (forward),
    ``"B"`` (full backward), ``"I"`` (input gradient only) or ``"W"`` (weight gradient, after
    its ``I``): torch.distributed.pipelining's names. ``microbatch`` is in ``[0, M)``.
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
        """True when some backward is split into I (input grad) and W (weight grad)."""
        return any(a is not None and a.kind in "IW" for row in self.actions for a in row)

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
        present = {a for row in rows for a in row if a is not None}
        old = [a for a in present if a.kind == "B" and replace(a, kind="W") in present]
        if old:
            a = min(old)
            raise bad_value(
                "text",
                f"{a.text()} with {a.stage}W{a.microbatch}",
                f"torch's names: B is the full backward; write the input-gradient pass before a W"
                f" as I ({a.stage}I{a.microbatch})",
            )
        return cls(head[1], int(head[2]), int(head[3]), int(head[4]), tuple(rows))


# ----------------------------------------------------------------------------- dependencies
def dependencies(
    a: Action, num_stages: int, present: Container[Action] | None = None
) -> list[Action]:
    """What ``a`` waits for: F(s,m) needs F(s-1,m); B(s,m) or I(s,m) needs F(s,m) and the pass
    of stage s+1 that sent its input gradient, I(s+1,m) when ``present`` holds it, else B(s+1,m)
    (without ``present``: the same kind as ``a``); the last stage's needs only its F (the loss).
    W(s,m) needs I(s,m). These are the checks of torch 2.13's ``_validate_schedule``."""
    s, m = a.stage, a.microbatch
    if a.kind == "F":
        return [Action(s - 1, "F", m)] if s > 0 else []
    if a.kind in BACKWARD_KINDS:
        deps = [Action(s, "F", m)]
        if s == num_stages - 1:
            return deps
        after = Action(s + 1, "I", m)
        if present is None:
            after = Action(s + 1, a.kind, m)
        elif after not in present:
            after = Action(s + 1, "B", m)
        return deps + [after]
    return [Action(s, "I", m)]


def completeness(
    present: Container[Action], num_stages: int, num_microbatches: int
) -> list[tuple[int, str]]:
    """``[(stage, message), ...]``: each (stage, microbatch) needs one F and either one B or one
    I and one W (torch's ``_validate_schedule`` counts B + (I + W)/2 = M per stage)."""
    split = any(
        Action(st, k, mb) in present
        for st in range(num_stages)
        for mb in range(num_microbatches)
        for k in "IW"
    )
    out = []
    for st in range(num_stages):
        for k in range(num_microbatches):
            has = {kind for kind in KINDS if Action(st, kind, k) in present}
            if "F" not in has:
                out.append((st, f"{st}F{k} never runs"))
            if "B" in has and "W" in has:
                msg = (
                    f"{st}W{k} follows the full backward {st}B{k}, which computed the weight"
                    f" gradient already: write the input-gradient pass as {st}I{k} (torch's names)"
                )
                out.append((st, msg))
            elif "B" in has and "I" in has:
                msg = f"{st}B{k} and {st}I{k} both run: a backward is one B, or one I then one W"
                out.append((st, msg))
            elif "B" not in has:
                wanted = "IW" if split else "B"
                out += [(st, f"{st}{kind}{k} never runs") for kind in wanted if kind not in has]
    return out


def validate_schedule(s: Schedule) -> list[Problem]:
    """Every problem of a schedule (``Problem.step`` is the slot; None: about the whole run).

    Checks: each (stage, microbatch) has exactly one F and either one B or one I and one W
    (:func:`completeness`); each action is in range and on ``rank_of(stage)``; each dependency
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
                msg = f"{a.text()}: kind F/B/I/W, stage in [0, {n - 1}], microbatch in [0, {m - 1}]"
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
        for d in dependencies(a, n, where):
            if d in where and where[d] >= t:
                msg = (
                    f"{a.text()} at slot {t} needs {d.text()} (rank {s.rank_of(d.stage)}) in an"
                    f" earlier slot; it is at slot {where[d]}"
                )
                out.append(Problem(t, s.rank_of(a.stage), msg))
    out += [Problem(None, s.rank_of(st), msg) for st, msg in completeness(where, n, m)]
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
