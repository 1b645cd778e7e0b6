"""Pipeline schedules as pure data: which rank runs which forward/backward, slot by slot.

A :class:`Schedule` gives each of ``P`` ranks a row of unit-time slots. A slot holds an
:class:`Action` (``"F"`` forward, ``"B"`` backward, ``"W"`` weight-gradient) of one virtual stage
on one microbatch, or ``None`` (an idle slot: the pipeline *bubble*). Builders fix each rank's
*order* of actions, then run every action one slot long as early as its order and dependencies
allow (``t_f = t_b = t_w``, no communication time):

* ``gpipe``: all forwards, then all backwards (GPipe, Huang et al. 2019, §2.3, Fig. 2c; backwards
  in microbatch order, as in Megatron's Fig. 3 and ``torch.distributed.pipelining``). Any M >= 1.
* ``1f1b``: PipeDream-Flush (Narayanan et al. 2021, arXiv 2104.04473, §2.2.1, Fig. 4 top):
  rank i runs ``min(P-1-i, M)`` warm-up forwards, then alternates one forward / one backward, then
  drains the remaining backwards. Any M >= 1 (Megatron clamps the warm-up to M; with M < P it
  degenerates to GPipe's order): it stashes at most ``min(P-i, M)`` microbatches on stage i.
* ``interleaved``: Megatron's interleaved 1F1B (§2.2.2, Fig. 4 bottom): v model chunks per rank,
  stage ``s = chunk*P + rank``; forwards go through chunks in groups of P microbatches; warm-up
  ``2(P-1-i) + (v-1)P`` (all forwards when M == P). M must be a multiple of P, as in Megatron.
  With ``chunks=1`` it is the ``1f1b`` order.
* ``zb-h1``: Zero Bubble ZB-H1 (Qi et al. 2023, arXiv 2401.10241, §2.1, Fig. 3 top): the 1F1B
  order with B split into B (input grad) and W (weight grad); rank i delays each W by i
  microbatches (so every rank holds at most P in flight, the first rank's 1F1B peak) and the
  delayed W's fill the cool-down bubble. Any M >= 1; its bubble formula needs M >= P.

Text form (round-trips through :meth:`Schedule.to_text` / :meth:`Schedule.from_text`)::

    schedule 1f1b ranks=2 microbatches=2 chunks=1
    r0: 0F0 0F1 . 0B0 . 0B1
    r1: . 1F0 1B0 1F1 1B1 .
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import bad_value, check_choice, check_int
from .plan import Problem

KINDS = ("F", "B", "W")
SCHEDULES = ("gpipe", "1f1b", "interleaved", "zb-h1")
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


def _place(name: str, orders: list[list[Action]], p: int, m: int, v: int) -> Schedule:
    """Unit-time slots: every action takes one slot, run as early as its order allows."""
    from .schedule_time import run_orders  # the event-driven runner; imports this module

    starts = run_orders(orders, p * v, {"F": 1, "B": 1, "W": 1})
    length = 1 + int(max(max(row, default=0) for row in starts))
    rows: list[list[Action | None]] = [[None] * length for _ in range(p)]
    for r, (order, row_starts) in enumerate(zip(orders, starts, strict=True)):
        for a, t in zip(order, row_starts, strict=True):
            rows[r][int(t)] = a
    return Schedule(name, p, m, v, tuple(tuple(row) for row in rows))


# ----------------------------------------------------------------------------- builders
def _gpipe(p: int, m: int) -> list[list[Action]]:
    return [[Action(r, kind, k) for kind in "FB" for k in range(m)] for r in range(p)]


def _one_f_one_b(p: int, m: int, defer_w: bool = False) -> list[list[Action]]:
    orders = []
    for r in range(p):
        warm, delay = min(p - 1 - r, m), r
        row = [Action(r, "F", k) for k in range(warm)]
        for k in range(m):
            if warm + k < m:
                row.append(Action(r, "F", warm + k))
            row.append(Action(r, "B", k))
            if defer_w and k >= delay:
                row.append(Action(r, "W", k - delay))
        if defer_w:
            row += [Action(r, "W", k) for k in range(max(0, m - delay), m)]
        orders.append(row)
    return orders


def _interleaved(p: int, m: int, v: int) -> list[list[Action]]:
    total = m * v
    orders = []
    for r in range(p):

        def at(k: int, kind: str, r: int = r) -> Action:  # k-th forward or backward of rank r
            chunk = (k // p) % v
            chunk = v - 1 - chunk if kind == "B" else chunk
            return Action(chunk * p + r, kind, (k // (p * v)) * p + k % p)

        warm = total if m == p else min((p - r - 1) * 2 + (v - 1) * p, total)
        row = [at(k, "F") for k in range(warm)]
        for k in range(total - warm):
            row += [at(warm + k, "F"), at(k, "B")]
        row += [at(k, "B") for k in range(total - warm, total)]
        orders.append(row)
    return orders


def build_schedule(name: str, num_ranks: int, num_microbatches: int, chunks: int = 1) -> Schedule:
    """Build a named schedule for ``P = num_ranks``, ``M = num_microbatches``, ``v = chunks``."""
    check_choice("name", name, SCHEDULES)
    p = check_int("num_ranks", num_ranks, 1)
    m = check_int("num_microbatches", num_microbatches, 1)
    v = check_int("chunks", chunks, 1)
    if name != "interleaved" and v != 1:
        raise bad_value(
            "chunks", v, f"1 for schedule {name!r} (only 'interleaved' has model chunks)"
        )
    if name == "gpipe":
        return _place(name, _gpipe(p, m), p, m, 1)
    if name in ("1f1b", "zb-h1"):
        return _place(name, _one_f_one_b(p, m, defer_w=name == "zb-h1"), p, m, 1)
    if m % p:
        raise bad_value(
            "num_microbatches", m, f"a multiple of num_ranks={p} for 'interleaved' (v={v} chunks)"
        )
    orders = _one_f_one_b(p, m) if v == 1 else _interleaved(p, m, v)
    return _place(name, orders, p, m, v)


# ----------------------------------------------------------------------------- checking
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
                msg = f"{a.text()} is on rank {r}, but stage {a.stage} runs on rank {s.rank_of(a.stage)}"
            elif a in where:
                msg = f"{a.text()} runs twice (first at slot {where[a]})"
            else:
                where[a] = t
                continue
            out.append(Problem(t, r, msg))
    for a, t in where.items():
        for d in dependencies(a, n):
            if d in where and where[d] >= t:
                msg = f"{a.text()} at slot {t} needs {d.text()} (rank {s.rank_of(d.stage)}) in an earlier slot; it is at slot {where[d]}"
                out.append(Problem(t, s.rank_of(a.stage), msg))
    kinds = "FBW" if s.split_backward else "FB"
    out += [
        Problem(None, s.rank_of(st), f"{st}{kind}{k} never runs")
        for st in range(n)
        for k in range(m)
        for kind in kinds
        if Action(st, kind, k) not in where
    ]
    return sorted(out, key=lambda q: (q.step is None, q.step or 0, q.rank))  # fmt: skip


def explain_schedule(
    s: Schedule, problems: list[Problem] | None = None, width: int = 5, max_problems: int = 8
) -> str:
    """The rank x slot grid (``.`` = idle), problem cells marked ``!!``, messages below."""
    problems = validate_schedule(s) if problems is None else problems
    bad = {(q.step, q.rank) for q in problems}
    grid = [[("!!" if (t, r) in bad else "") + (a.text() if a is not None else ".")
             for t, a in enumerate(row)] for r, row in enumerate(s.actions)]  # fmt: skip
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
        text += f"\n\nschedule {s.name} is valid: {s.num_slots} slots, {idle} of {s.num_ranks * s.num_slots} idle"
    return text  # fmt: skip
