"""Check a plan symbolically: which inputs every chunk of every rank holds, step by step.

Item ``(q, k)`` is rank q's input chunk k; a (rank, chunk) holds a set of items, kept as a bitmask
with bit ``q * num_chunks + k``. A reduce adds the incoming set (it must not overlap: that would
count an input twice), a copy replaces the set. :func:`validate` lists every problem and checks the
final sets against what the plan's collective must produce; :func:`explain` prints the rank x step
grid with the problems marked.
"""

from __future__ import annotations

from ..core.errors import bad_value, one_of
from ..core.i18n import _
from ..core.phases import phase_label
from ..core.width import cut, ljust
from .plan import COLLECTIVES, OPS, REDUCTIONS, Plan, PlanError, Problem


def _bit(q: int, k: int, c: int) -> int:
    return 1 << (q * c + k)


def initial_items(plan: Plan) -> list[list[int]]:
    """Items each (rank, chunk) holds before step 0: its own input, where the collective has one."""
    n, c, root = plan.world_size, plan.num_chunks, plan.root
    if plan.collective not in COLLECTIVES:
        raise bad_value("collective", plan.collective, one_of(COLLECTIVES))
    if plan.collective in ("all_gather", "gather"):  # rank r contributes chunk r only
        return [[_bit(r, k, c) if k == r else 0 for k in range(c)] for r in range(n)]
    if plan.collective in ("broadcast", "scatter"):  # only the root has data
        return [[_bit(r, k, c) if r == root else 0 for k in range(c)] for r in range(n)]
    return [[_bit(r, k, c) for k in range(c)] for r in range(n)]


def goal(plan: Plan) -> list[list[int | None]]:
    """The item set each (rank, chunk) must end with; None where the collective does not care."""
    n, c, root = plan.world_size, plan.num_chunks, plan.root
    summed = [sum(_bit(q, k, c) for q in range(n)) for k in range(c)]
    want: dict[str, object] = {
        "all_reduce": lambda r, k: summed[k],
        "reduce": lambda r, k: summed[k] if r == root else None,
        "all_gather": lambda r, k: _bit(k, k, c),
        "gather": lambda r, k: _bit(k, k, c) if r == root else None,
        "broadcast": lambda r, k: _bit(root, k, c),
        "scatter": lambda r, k: _bit(root, k, c) if k == r else None,
        "all_to_all": lambda r, k: _bit(k, r, c),
        "reduce_scatter": lambda r, k: None,  # checked per chunk below: somewhere fully reduced
    }
    return [[want[plan.collective](r, k) for k in range(c)] for r in range(n)]  # type: ignore[operator]


def describe(mask: int, c: int, ranks_only: bool = True) -> str:
    """``{0,2}`` (ranks 0 and 2 summed) for reductions, whose items of one chunk share its index;
    ``{0:c1,2:c3}`` (rank 0's chunk 1, rank 2's chunk 3) when chunks move between places."""
    items = [divmod(i, c) for i in range(mask.bit_length()) if mask >> i & 1]
    if not items:
        return _("nothing")
    if ranks_only and len({k for _, k in items}) == 1:
        return "{" + ",".join(str(q) for q, _ in items) + "}"
    return "{" + ",".join(f"{q}:c{k}" for q, k in items) + "}"


def _step_problems(
    plan: Plan, i: int, held: list[list[int]]
) -> tuple[list[list[int]], list[Problem]]:
    n, c = plan.world_size, plan.num_chunks
    sums = plan.collective in REDUCTIONS
    new = [row[:] for row in held]
    written: dict[tuple[int, int], str] = {}
    out: list[Problem] = []
    for t in plan.steps[i].transfers:
        if not (0 <= t.src < n and 0 <= t.dst < n) or t.src == t.dst:
            out.append(
                Problem(
                    i,
                    t.src if 0 <= t.src < n else 0,
                    _("transfer {transfer} needs two different ranks in [0, {last}]").format(
                        transfer=t.text(), last=n - 1
                    ),
                )
            )
            continue
        if not (0 <= t.chunk < c and 0 <= t.to_chunk < c):
            message = _("transfer {transfer} names a chunk outside 0..{last}")
            out.append(Problem(i, t.src, message.format(transfer=t.text(), last=c - 1)))
            continue
        if t.op not in OPS:
            message = _("transfer {transfer} has op {op}, valid ops are {ops}")
            out.append(
                Problem(i, t.dst, message.format(transfer=t.text(), op=repr(t.op), ops=list(OPS)))
            )
            continue
        data, key = held[t.src][t.chunk], (t.dst, t.to_chunk)
        if not data:
            message = _("rank {rank} sends chunk {chunk} but holds nothing of it")
            out.append(Problem(i, t.src, message.format(rank=t.src, chunk=t.chunk)))
        if key in written and (t.op == "copy" or written[key] == "copy"):
            out.append(
                Problem(
                    i,
                    t.dst,
                    _(
                        "rank {rank} receives chunk {chunk} twice in one step with a copy: the"
                        " result depends on order"
                    ).format(rank=t.dst, chunk=t.to_chunk),
                )
            )
        written[key] = t.op
        if t.op == "reduce":
            if new[t.dst][t.to_chunk] & data:
                out.append(
                    Problem(
                        i,
                        t.dst,
                        _(
                            "rank {rank} adds {added} to chunk {chunk} that already holds"
                            " {held}: counted twice"
                        ).format(
                            rank=t.dst,
                            added=describe(data, c, sums),
                            chunk=t.to_chunk,
                            held=describe(new[t.dst][t.to_chunk], c, sums),
                        ),
                    )
                )
            new[t.dst][t.to_chunk] |= data
        else:
            new[t.dst][t.to_chunk] = data
    return new, out


def final_problems(plan: Plan, held: list[list[int]]) -> list[Problem]:
    """What the final holdings lack for the plan's collective."""
    n, c = plan.world_size, plan.num_chunks
    sums = plan.collective in REDUCTIONS
    out = []
    if plan.collective == "reduce_scatter":
        for k in range(c):
            full = sum(_bit(q, k, c) for q in range(n))
            if not any(held[r][k] == full for r in range(n)):
                message = _("no rank ends with chunk {chunk} fully reduced").format(chunk=k)
                out.append(Problem(None, k % n, message))
        return out
    for r, row in enumerate(goal(plan)):
        for k, want in enumerate(row):
            if want is not None and held[r][k] != want:
                out.append(
                    Problem(
                        None,
                        r,
                        _("ends with chunk {chunk} = {held}, needs {want}").format(
                            chunk=k,
                            held=describe(held[r][k], c, sums),
                            want=describe(want, c, sums),
                        ),
                    )
                )
    return out


def check_plan(plan: Plan) -> Plan:
    """Return ``plan`` if :func:`validate` finds nothing; else raise PlanError with the grid."""
    problems = validate(plan)
    if problems:
        raise PlanError(explain(plan, problems))
    return plan


def validate(plan: Plan) -> list[Problem]:
    """Every problem of the plan, checked symbolically. An empty list means the plan is right."""
    n, c = plan.world_size, plan.num_chunks
    if n < 1 or c < 1:
        message = _("world_size={n} and num_chunks={c} must both be >= 1").format(n=n, c=c)
        return [Problem(None, 0, message)]
    held, problems = initial_items(plan), []
    for i in range(len(plan.steps)):
        held, found = _step_problems(plan, i, held)
        problems += found
    return problems + final_problems(plan, held)


def holdings_after_each_step(plan: Plan) -> list[list[list[int]]]:
    """Before step 0 and after every step: ``[step+1][rank][chunk]`` bitmask of the *ranks* whose
    input the chunk holds (for pictures: popcount = how many ranks are summed in)."""
    c = plan.num_chunks
    held = initial_items(plan)
    states = []
    for i in range(len(plan.steps) + 1):
        states.append([[_ranks_of(m, c) for m in row] for row in held])
        if i < len(plan.steps):
            held, _found = _step_problems(plan, i, held)
    return states


def _ranks_of(mask: int, c: int) -> int:
    ranks = 0
    for i in range(mask.bit_length()):
        if mask >> i & 1:
            ranks |= 1 << (i // c)
    return ranks


def explain(
    plan: Plan, problems: list[Problem] | None = None, width: int = 12, max_problems: int = 8
) -> str:
    """The rank x step grid (what each rank sends/receives), with problems marked ``!!``.

    A cell lists ``>DcK`` (send chunk K to rank D; ``>DcK:J`` when it lands in D's chunk J) and
    ``<ScK+`` / ``<ScK=`` (receive from rank S into chunk K, adding or copying)."""
    problems = validate(plan) if problems is None else problems
    bad = {(p.step, p.rank) for p in problems}
    moves = any(t.to_chunk != t.chunk for s in plan.steps for t in s.transfers)
    width = max(width, 16) if moves else width
    head = [ljust(_("rank"), 6)] + [
        ljust(f"{i}:{cut(phase_label(s.phase), width - 4)}", width)
        for i, s in enumerate(plan.steps)
    ]
    rows = [" ".join(head)]
    for r in range(plan.world_size):
        cells = [f"r{r}".ljust(6)]
        for i, s in enumerate(plan.steps):
            outs = [
                f">{t.dst}c{t.chunk}" + (f":{t.to_chunk}" if t.to_chunk != t.chunk else "")
                for t in s.transfers
                if t.src == r
            ]
            ins = [f"<{t.src}c{t.to_chunk}{OPS.get(t.op, '?')}" for t in s.transfers if t.dst == r]
            cell = " ".join(outs + ins) or "."
            cell = ("!!" + cell) if (i, r) in bad else cell
            cells.append(cell[:width].ljust(width))
        rows.append(" ".join(cells))
    text = "\n".join(rows)
    if problems:
        shown = problems[:max_problems]
        text += "\n\n" + "\n".join(
            "!! "
            + (
                _("step {step}, rank {rank}: {message}")
                if p.step is not None
                else _("at the end, rank {rank}: {message}")
            ).format(step=p.step, rank=p.rank, message=p.message)
            for p in shown
        )
        if len(problems) > len(shown):
            text += "\n!! " + _("... and {n} more problems").format(n=len(problems) - len(shown))
    else:
        text += "\n\n" + _(
            "plan {name} is valid: it computes {collective} in {steps} steps"
        ).format(name=plan.name, collective=plan.collective, steps=len(plan.steps))
    return text
