"""Plans: an algorithm as pure data.

A :class:`Plan` splits every rank's buffer into ``num_chunks`` chunks and lists :class:`Step` s.
A step is a set of :class:`Transfer` s that run concurrently: ``src`` sends its chunk ``chunk``
to ``dst``, which adds it (``"reduce"``) or overwrites with it (``"copy"``). Every transfer of a
step reads the state at the start of the step.

Workers interpret a plan (:func:`edu_parallel.execute.run_plan`); :mod:`edu_parallel.simulate`
runs the same plan in-process on virtual ranks; :func:`validate` checks it symbolically, tracking
which ranks' inputs each chunk holds, and :func:`explain` prints the rank x step grid with the
first error marked.

Text form, one step per line, round-tripping through :meth:`Plan.to_text`/:meth:`Plan.from_text`::

    plan ring_allreduce all_reduce n=3 chunks=3
    reduce-scatter | 0>1:c0+ 1>2:c1+ 2>0:c2+
    ...

``+`` is reduce, ``=`` is copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import bad_value

OPS = {"reduce": "+", "copy": "="}
_OP_FROM_SYMBOL = {v: k for k, v in OPS.items()}
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")


@dataclass(frozen=True, slots=True)
class Transfer:
    """``src`` sends its chunk ``chunk`` to ``dst``, which applies ``op`` ("reduce" or "copy")."""

    src: int
    dst: int
    chunk: int
    op: str = "reduce"

    def text(self) -> str:
        return f"{self.src}>{self.dst}:c{self.chunk}{OPS.get(self.op, '?')}"


@dataclass(frozen=True, slots=True)
class Step:
    """Transfers that run at the same time, inside one named phase."""

    phase: str
    transfers: tuple[Transfer, ...]


@dataclass(frozen=True)
class Plan:
    """An algorithm for one collective, as data. ``root`` is used by rooted collectives."""

    name: str
    collective: str
    world_size: int
    num_chunks: int
    steps: tuple[Step, ...]
    root: int = 0

    # ------------------------------------------------------------- derived facts
    def phases(self) -> list[str]:
        seen: dict[str, None] = {}
        for s in self.steps:
            seen.setdefault(s.phase, None)
        return list(seen)

    def steps_per_phase(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            out[s.phase] = out.get(s.phase, 0) + 1
        return out

    def sent_chunks(self) -> list[int]:
        """How many chunks each rank sends over the whole plan."""
        counts = [0] * self.world_size
        for s in self.steps:
            for t in s.transfers:
                counts[t.src] += 1
        return counts

    def sent_bytes(self, chunk_bytes: list[int]) -> dict[str, list[int]]:
        """Planned bytes per phase per rank, given each chunk's size in bytes."""
        out: dict[str, list[int]] = {}
        for s in self.steps:
            row = out.setdefault(s.phase, [0] * self.world_size)
            for t in s.transfers:
                row[t.src] += chunk_bytes[t.chunk]
        return out

    # ------------------------------------------------------------- text form
    def to_text(self) -> str:
        head = f"plan {self.name} {self.collective} n={self.world_size} chunks={self.num_chunks}"
        if self.collective in ("broadcast", "reduce"):
            head += f" root={self.root}"
        lines = [head]
        for s in self.steps:
            lines.append(f"{s.phase} | " + " ".join(t.text() for t in s.transfers))
        return "\n".join(lines)

    @classmethod
    def from_text(cls, text: str) -> Plan:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        head = re.fullmatch(
            r"plan (\S+) (\S+) n=(\d+) chunks=(\d+)(?: root=(\d+))?", lines[0] if lines else ""
        )
        if not head:
            raise bad_value(
                "text",
                lines[0] if lines else "",
                "a first line 'plan NAME COLLECTIVE n=N chunks=C'",
            )
        steps = []
        for number, line in enumerate(lines[1:], start=2):
            phase, sep, body = line.partition("|")
            if not sep:
                raise bad_value(f"text line {number}", line, "'PHASE | SRC>DST:cCHUNK+ ...'")
            transfers = []
            for token in body.split():
                m = re.fullmatch(r"(\d+)>(\d+):c(\d+)([+=])", token)
                if not m:
                    raise bad_value(
                        f"text line {number} token", token, "'SRC>DST:cCHUNK+' or '...='"
                    )
                transfers.append(Transfer(int(m[1]), int(m[2]), int(m[3]), _OP_FROM_SYMBOL[m[4]]))
            steps.append(Step(phase.strip(), tuple(transfers)))
        return cls(
            name=head[1], collective=head[2], world_size=int(head[3]),
            num_chunks=int(head[4]), steps=tuple(steps), root=int(head[5] or 0),
        )  # fmt: skip

    def check(self) -> Plan:
        """Return self if :func:`validate` finds nothing; else raise PlanError with the grid."""
        problems = validate(self)
        if problems:
            raise PlanError(explain(self, problems))
        return self


class PlanError(ValueError):
    """A plan that does not compute its collective; the message holds the marked grid."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a plan: at ``step`` (None: after the last step) on ``rank``."""

    step: int | None
    rank: int
    message: str


# ----------------------------------------------------------------- symbolic semantics
def initial_holdings(plan: Plan) -> list[list[int]]:
    """Bitmask of the ranks whose input each (rank, chunk) holds before step 0 (0 = nothing)."""
    n, c = plan.world_size, plan.num_chunks
    if plan.collective in ("all_reduce", "reduce_scatter", "reduce"):
        return [[1 << r] * c for r in range(n)]
    if plan.collective == "all_gather":  # rank r starts with chunk r only
        return [[(1 << r) if k == r else 0 for k in range(c)] for r in range(n)]
    if plan.collective == "broadcast":
        return [[(1 << plan.root) if r == plan.root else 0] * c for r in range(n)]
    raise bad_value("collective", plan.collective, "one of " + ", ".join(COLLECTIVES))


def final_problems(plan: Plan, held: list[list[int]]) -> list[Problem]:
    """What the final holdings lack for the plan's collective."""
    n, c = plan.world_size, plan.num_chunks
    full = (1 << n) - 1
    out = []
    if plan.collective in ("all_reduce", "all_gather", "broadcast"):
        want = {"all_reduce": lambda k: full, "broadcast": lambda k: 1 << plan.root,
                "all_gather": lambda k: 1 << k}[plan.collective]  # fmt: skip
        for r in range(n):
            for k in range(c):
                if held[r][k] != want(k):
                    out.append(
                        Problem(
                            None,
                            r,
                            f"ends with chunk {k} = {_ranks(held[r][k])}, needs {_ranks(want(k))}",
                        )
                    )
    elif plan.collective == "reduce":
        for k in range(c):
            if held[plan.root][k] != full:
                out.append(
                    Problem(
                        None,
                        plan.root,
                        f"root ends with chunk {k} = {_ranks(held[plan.root][k])}, needs {_ranks(full)}",
                    )
                )
    elif plan.collective == "reduce_scatter":
        owners = {k: [r for r in range(n) if held[r][k] == full] for k in range(c)}
        for k, rs in owners.items():
            if not rs:
                out.append(Problem(None, k % n, f"no rank ends with chunk {k} fully reduced"))
    return out


def _ranks(mask: int) -> str:
    members = [str(i) for i in range(mask.bit_length()) if mask >> i & 1]
    return "{" + ",".join(members) + "}" if members else "nothing"


def validate(plan: Plan) -> list[Problem]:
    """Every problem of the plan, checked symbolically. An empty list means the plan is right."""
    n, c = plan.world_size, plan.num_chunks
    if n < 1 or c < 1:
        return [Problem(None, 0, f"world_size={n} and num_chunks={c} must both be >= 1")]
    held = initial_holdings(plan)
    problems: list[Problem] = []
    for i, step in enumerate(plan.steps):
        new = [row[:] for row in held]
        written: dict[tuple[int, int], str] = {}
        for t in step.transfers:
            if not (0 <= t.src < n and 0 <= t.dst < n) or t.src == t.dst:
                problems.append(
                    Problem(
                        i,
                        t.src if 0 <= t.src < n else 0,
                        f"transfer {t.text()} needs two different ranks in [0, {n - 1}]",
                    )
                )
                continue
            if not 0 <= t.chunk < c:
                problems.append(
                    Problem(
                        i,
                        t.src,
                        f"transfer {t.text()} names chunk {t.chunk}, valid chunks are 0..{c - 1}",
                    )
                )
                continue
            if t.op not in OPS:
                problems.append(
                    Problem(
                        i, t.dst, f"transfer {t.text()} has op {t.op!r}, valid ops are {list(OPS)}"
                    )
                )
                continue
            data = held[t.src][t.chunk]
            if not data:
                problems.append(
                    Problem(i, t.src, f"rank {t.src} sends chunk {t.chunk} but holds nothing of it")
                )
            key = (t.dst, t.chunk)
            if key in written and (t.op == "copy" or written[key] == "copy"):
                problems.append(
                    Problem(
                        i,
                        t.dst,
                        f"rank {t.dst} receives chunk {t.chunk} twice in one step with a copy: the result depends on order",
                    )
                )
            written[key] = t.op
            if t.op == "reduce":
                if new[t.dst][t.chunk] & data:
                    problems.append(
                        Problem(
                            i,
                            t.dst,
                            f"rank {t.dst} adds {_ranks(data)} to chunk {t.chunk} that already holds {_ranks(new[t.dst][t.chunk])}: counted twice",
                        )
                    )
                new[t.dst][t.chunk] |= data
            else:
                new[t.dst][t.chunk] = data
        held = new
    return problems + final_problems(plan, held)


def holdings_after_each_step(plan: Plan) -> list[list[list[int]]]:
    """Symbolic state before step 0 and after every step: ``[step+1][rank][chunk]`` bitmasks."""
    held = initial_holdings(plan)
    states = [held]
    for step in plan.steps:
        new = [row[:] for row in held]
        for t in step.transfers:
            data = held[t.src][t.chunk]
            new[t.dst][t.chunk] = (new[t.dst][t.chunk] | data) if t.op == "reduce" else data
        held = new
        states.append(held)
    return states


def explain(
    plan: Plan, problems: list[Problem] | None = None, width: int = 12, max_problems: int = 8
) -> str:
    """The rank x step grid (what each rank sends/receives), with problems marked ``!!``."""
    problems = validate(plan) if problems is None else problems
    bad = {(p.step, p.rank) for p in problems}
    head = ["rank".ljust(6)] + [
        f"{i}:{s.phase[: width - 4]}".ljust(width) for i, s in enumerate(plan.steps)
    ]
    rows = [" ".join(head)]
    for r in range(plan.world_size):
        cells = [f"r{r}".ljust(6)]
        for i, s in enumerate(plan.steps):
            outs = [f">{t.dst}c{t.chunk}" for t in s.transfers if t.src == r]
            ins = [f"<{t.src}c{t.chunk}{OPS.get(t.op, '?')}" for t in s.transfers if t.dst == r]
            cell = " ".join(outs + ins) or "."
            cell = ("!!" + cell) if (i, r) in bad else cell
            cells.append(cell[:width].ljust(width))
        rows.append(" ".join(cells))
    text = "\n".join(rows)
    if problems:
        shown = problems[:max_problems]
        text += "\n\n" + "\n".join(
            f"!! {'step ' + str(p.step) if p.step is not None else 'at the end'}, rank {p.rank}: {p.message}"
            for p in shown
        )
        if len(problems) > len(shown):
            text += f"\n!! ... and {len(problems) - len(shown)} more problems"
    else:
        text += f"\n\nplan {plan.name} is valid: it computes {plan.collective} in {len(plan.steps)} steps"
    return text
