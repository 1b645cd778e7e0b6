"""Exercise 10: write the 1F1B pipeline schedule as a plan.

``my_1f1b(stages, microbatches)`` returns each rank's actions in the order it runs them (stage s
on rank s), in torch.distributed.pipelining's names: ``"1F0"`` is stage 1's forward of microbatch
0, ``"1B0"`` its full backward (``I``/``W``, the split backward of Zero Bubble, are not needed
here). The target is 1F1B, PipeDream's schedule (Narayanan et al. 2019, SOSP)
flushed every batch (PipeDream-Flush: Megatron-LM, Narayanan et al. 2021, arXiv 2104.04473,
§2.2.1, Fig. 4; ``torch.distributed.pipelining.Schedule1F1B``): stage s runs min(P−1−s, M)
warm-up forwards, then one forward / one backward, then drains. (torch counts the first steady
forward into its warm-up, min(P−s, M): the same order.) Each action runs as soon as its inputs
have arrived, as in torch's runtime, so a plan has no idle slots (a ``Schedule`` is taken as is).

Graded on P = 2 and 4 ranks with M below, at and above P: every problem ``validate_schedule``
reports, named; only then (an invalid plan could deadlock) the plan executed on the ranks by the
package's pipeline executor, gradients against one process; the bubble against (P−1)/(M+P−1)
(``bubble_formula``); the peak stashed activations per stage, counted on the ranks, against
min(P−s, M) (GPipe's order holds M on every stage).
"""

from __future__ import annotations

from typing import Any, cast

import torch.distributed as dist

from ...core.i18n import N_, _
from ...engine.context import RankContext
from ...pipeline_parallel.builders import build_schedule
from ...pipeline_parallel.execute import pipeline_job
from ...pipeline_parallel.model import grads_match, reference_grads
from ...pipeline_parallel.schedule import KINDS, Action, Schedule, dependencies, validate_schedule
from ...pipeline_parallel.timing import Span, Timeline, bubble_formula, time_schedule
from ...viz.pipeline import pipeline_gantt
from ...viz.pipeline_memory import activation_memory_figure
from ..spec import Case, Exercise, Finding, RankOutcome

HIDDEN, MICROBATCH_SIZE, SEED = 8, 2, 0  # the executed model: 2P blocks of Linear(8, 8) + GeLU
SHOWN_PROBLEMS = 8  # problems named one finding each; "never runs" ones are listed in one more


def one_f_one_b(stages: int, microbatches: int) -> list[list[str]]:
    """The reference: 1F1B (PipeDream-Flush), each rank's actions in the order it runs them."""
    plan = []
    for s in range(stages):  # stage s runs on rank s
        # Warm-up: enough forwards to keep the stages after this one busy (the last stage has
        # none), and never more than there are microbatches.
        warmup = min(stages - 1 - s, microbatches)
        actions = [f"{s}F{m}" for m in range(warmup)]
        # Steady state: one forward, then the backward of the oldest microbatch, which frees its
        # stash: stage s never holds more than warmup + 1 = P - s microbatches. Once every
        # forward has run, the backwards left are the cool-down.
        for m in range(microbatches):
            if warmup + m < microbatches:
                actions.append(f"{s}F{warmup + m}")
            actions.append(f"{s}B{m}")
        plan.append(actions)
    return plan


# ----------------------------------------------------------------------------- plan -> Schedule
def _action(item: Any) -> Action | None:
    if item is None or (isinstance(item, str) and item.strip() in ("", ".")):
        return None  # an idle slot: placement decides those
    if isinstance(item, Action):
        return item
    try:
        return Action.from_text(str(item))
    except ValueError:
        msg = _("{item} is not an action: write '1F0' (stage 1, forward, microbatch 0) or '1B0'")
        raise ValueError(msg.format(item=repr(item))) from None


Wait = tuple[int, str, list[tuple[str, bool]]]  # (rank, its action, [(needed action, listed)])


def as_schedule(plan: Any, stages: int, microbatches: int) -> tuple[Schedule, list[Wait]]:
    """The learner's plan as a slot grid, and how its orders deadlock (empty when they do not):
    per stuck rank, the action it waits at and the actions it needs, each with whether any list
    holds it (:func:`wait_text` says it; built in the parent, in the learner's language).

    ``plan``: a ``Schedule`` (taken as is), or one order per rank (a list, or a dict rank ->
    list as in torch's ``pipeline_order``) of action strings or Actions. Each action is placed
    in the first slot where its rank is free and its dependencies ran in earlier slots; when no
    rank can go on, the actions left follow one per slot, so the validator names what they
    break. Raises TypeError or ValueError with a message for the learner."""
    if isinstance(plan, Schedule):
        got, want = (plan.num_ranks, plan.num_microbatches, plan.chunks), (stages, microbatches, 1)
        if got != want:
            msg = _("a Schedule of (ranks, microbatches, chunks) {got}, not {want}")
            raise ValueError(msg.format(got=got, want=want))
        return plan, []
    if isinstance(plan, dict):
        plan = [plan[r] for r in sorted(plan)]
    if not isinstance(plan, (list, tuple)):
        msg = _(
            "my_1f1b returned {type}: expected a list with one list per rank of action strings "
            "like '1F0', e.g. [['0F0', '0B0'], ['1F0', '1B0']] for P=2, M=1"
        )
        raise TypeError(msg.format(type=type(plan).__name__))
    rows = [_row(r, row) for r, row in enumerate(plan)]
    if sum(map(len, rows)) > 4 * stages * microbatches:
        msg = _("{n} actions; 2·P·M = {most} do")
        raise ValueError(msg.format(n=sum(map(len, rows)), most=2 * stages * microbatches))
    slots: list[list[Action | None]] = [[] for _x in rows]
    where: dict[Action, int] = {}  # the slot of each action placed
    nxt, t, waits = [0] * len(rows), 0, cast(list[Wait], [])
    while any(i < len(row) for i, row in zip(nxt, rows, strict=True)):
        todo = [(r, row[nxt[r]]) for r, row in enumerate(rows) if nxt[r] < len(row)]
        ready = [
            (r, a) for r, a in todo if all(where.get(d, t) < t for d in dependencies(a, stages))
        ]
        if not ready:  # nothing can ever run again: a deadlock
            everything = {a for row in rows for a in row}
            for r, a in todo if not waits else ():  # the first deadlock says it
                need = [d for d in dependencies(a, stages) if d not in where]
                waits.append((r, a.text(), [(d.text(), d in everything) for d in need]))
            ready = todo  # place the rest in order, one per slot, for the validator
        for r, a in ready:
            slots[r] += [None] * (t - len(slots[r])) + [a]
            where.setdefault(a, t)
            nxt[r] += 1
        t += 1
    return Schedule("yours", stages, microbatches, 1, tuple(map(tuple, slots))), waits


def wait_text(wait: Wait) -> str:
    """'rank 1 waits at 1B0 for 1F0 and 2B0 (in no list)'."""
    r, action, need = wait
    said = [_("{action} (in no list)").format(action=d) if not listed else d for d, listed in need]
    while len(said) > 1:
        said[:2] = [_("{first} and {second}").format(first=said[0], second=said[1])]
    return _("rank {r} waits at {action} for {needs}").format(
        r=r, action=action, needs=said[0] if said else ""
    )


def _row(r: int, row: Any) -> list[Action]:
    if not isinstance(row, (list, tuple, str)):
        msg = _("plan[{r}] is {type}: expected rank {r}'s list of actions")
        raise TypeError(msg.format(r=r, type=type(row).__name__))
    actions = map(_action, row.split() if isinstance(row, str) else row)
    return [a for a in actions if a is not None]


def timeline_of(sched: Schedule) -> Timeline:
    """The plan's slots as a timeline of unit-time actions (drawable even when it is invalid)."""
    p, n = sched.num_ranks, sched.num_stages
    spans = [
        Span(r, a, t, t + 1)
        for r, row in enumerate(sched.actions[:p])
        for t, a in enumerate(row)
        if a is not None and 0 <= a.stage < n and a.kind in KINDS
    ]
    return Timeline(spans, p, n, sched.split_backward, sched.name)


# ----------------------------------------------------------------------------- the rank side
def prepare(ctx: RankContext, case: Case) -> tuple[tuple[int, int], None]:
    return (case.world_size, case.option("microbatches")), None


def finish(ctx: RankContext, case: Case, args: tuple, result: object) -> dict[str, Any]:
    """The plan as a Schedule; when it is valid and the same on every rank, executed by the
    package's pipeline executor, this rank's gradients checked against one process."""
    stages, microbatches = args
    facts: dict[str, Any] = {"text": None, "error": None, "stuck": []}
    try:
        sched, facts["stuck"] = as_schedule(result, stages, microbatches)
        facts["text"] = sched.to_text()
    except (TypeError, ValueError) as err:
        facts["error"] = str(err)
    every: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(every, facts["text"] or facts["error"])
    facts["agree"] = all(x == every[0] for x in every)
    if facts["text"] is None or not facts["agree"] or validate_schedule(sched):
        return facts
    layers = 2 * stages  # two blocks per stage
    out = pipeline_job(ctx, facts["text"], layers, HIDDEN, MICROBATCH_SIZE, SEED)
    want = reference_grads(stages, layers, HIDDEN, microbatches, MICROBATCH_SIZE, SEED)
    got = out["grads"]
    want = {s: g for s, g in want.items() if s in got}
    diffs = [(g - w).abs().max() for s in want for g, w in zip(got[s], want[s], strict=True)]
    facts.update(peak_live=out["peak_live"], max_err=float(max(diffs, default=0.0)))
    facts["grads_ok"] = grads_match(got, want)
    return facts


# ----------------------------------------------------------------------------- the judge
def target_peaks(stages: int, microbatches: int) -> list[int]:
    """1F1B's stash bound per stage s: min(P − s, M) (Narayanan et al. 2021, §2.2.1)."""
    return [min(stages - s, microbatches) for s in range(stages)]


def _plan_findings(case: Case, facts: dict[str, Any], sched: Schedule) -> list[Finding]:
    """Every problem of an invalid plan, named (the deadlock first); [] for a valid one."""
    found = []
    if facts["stuck"]:
        msg = _("your orders deadlock: {waits} (the rest was placed in order)").format(
            waits="; ".join(map(wait_text, facts["stuck"]))
        )
        found.append(Finding("result", False, msg, case))
    problems = validate_schedule(sched)
    missing = [q for q in problems if q.message.endswith(" never runs")]
    named = [q for q in problems if q not in missing]
    for q in named[:SHOWN_PROBLEMS]:
        msg = (
            _("overall, rank {r}: {problem}")
            if q.step is None
            else _("slot {t}, rank {r}: {problem}")
        ).format(t=q.step, r=q.rank, problem=q.message)
        found.append(Finding("result", False, msg, case, q.rank, q.step))
    if len(named) > SHOWN_PROBLEMS:
        rest = "; ".join(q.message for q in named[SHOWN_PROBLEMS:])
        msg = _("{n} more: {rest}").format(n=len(named) - SHOWN_PROBLEMS, rest=rest)
        found.append(Finding("result", False, msg, case))
    if missing:
        names = " ".join(q.message.split()[0] for q in missing)
        msg = _("{n} of {total} actions never run: {names}").format(
            n=len(missing), total=2 * sched.num_stages * sched.num_microbatches, names=names
        )
        found.append(Finding("result", False, msg, case, missing[0].rank))
    if found:
        msg = _("not executed: an invalid plan could deadlock the ranks")
        found.append(Finding("result", False, msg, case, note=True))
    return found


def _bubble(case: Case, sched: Schedule) -> Finding:
    p, m = sched.num_ranks, sched.num_microbatches
    tl = time_schedule(sched, t_f=1.0, t_b=1.0, t_w=1.0 if sched.split_backward else 0.0)
    share, target = tl.bubble_fraction(), bubble_formula("1f1b", p, m)["share_of_total"]
    formula = f"(P\u22121)/(M+P\u22121) = {p - 1}/{m + p - 1} = {target:.3f}"
    if share <= target + 1e-9:
        return Finding(
            "steps", True, _("the bubble is 1F1B's {formula}").format(formula=formula), case
        )
    idle = tl.bubble_fraction_per_rank()
    msg = _("the bubble is {share} of rank-time (t_f = t_b); 1F1B's is {formula}").format(
        share=f"{share:.3f}", formula=formula
    )
    return Finding("steps", False, msg, case, rank=max(range(p), key=idle.__getitem__))


def _memory(case: Case, sched: Schedule, facts: list[dict[str, Any]]) -> Finding:
    peaks = [0] * sched.num_stages
    for f in facts:
        for s, n in f["peak_live"].items():
            peaks[s] = n
    want = target_peaks(sched.num_ranks, sched.num_microbatches)
    over = [s for s in range(sched.num_stages) if peaks[s] > want[s]]
    if not over:
        ok = _("peak stash per stage {peaks} = min(P\u2212s, M)").format(peaks=peaks)
        return Finding("memory", True, ok, case)
    s = over[0]
    slot = next(int(t) for t, n in timeline_of(sched).live_activations()[s] if n > want[s])
    msg = _(
        "stage {s} stashed {n} microbatches at once (counted on rank {s}, from slot {slot}); 1F1B "
        "holds at most min(P\u2212s, M) = {most} (all stages: {peaks}, 1F1B: {want})"
    ).format(s=s, n=peaks[s], slot=slot, most=want[s], peaks=peaks, want=want)
    return Finding("memory", False, msg, case, rank=s, step=slot)


def judge(case: Case, outputs: list[RankOutcome], trace: Any) -> list[Finding]:
    facts = [o.facts for o in outputs]
    if facts[0]["error"] is not None:
        return [Finding("result", False, facts[0]["error"], case)]
    if not facts[0]["agree"]:
        msg = _("the ranks' calls returned different plans: my_1f1b must not depend on randomness")
        return [Finding("result", False, msg, case)]
    sched = Schedule.from_text(facts[0]["text"])
    bad = _plan_findings(case, facts[0], sched)
    if bad:
        return bad
    found = [Finding("result", True, _("the plan is valid and ran on the ranks"), case)]
    worst = max(range(len(facts)), key=lambda r: facts[r]["max_err"])
    if all(f["grads_ok"] for f in facts):
        found.append(Finding("result", True, _("gradients equal one process's"), case))
    else:
        msg = _("rank {r}'s gradients differ from one process's by {err}").format(
            r=worst, err=f"{facts[worst]['max_err']:.2e}"
        )
        found.append(Finding("result", False, msg, case, worst))
    return found + [_bubble(case, sched), _memory(case, sched, facts)]


# ----------------------------------------------------------------------------- the picture
def picture(grade: Any) -> list[Any]:
    """Your plan's Gantt and stashed activations (unit-time slots) beside 1F1B's."""
    case = grade.shown
    facts = grade.outputs[0].facts if grade.outputs else None
    if case is None or not facts or facts.get("text") is None:
        return []
    p, m = case.world_size, case.option("microbatches")
    mine = timeline_of(Schedule.from_text(facts["text"]))
    ref = timeline_of(build_schedule("1f1b", p, m))
    first = grade.first_failure
    why = f": {first.message.split(';')[0][:90]}" if first and first.case == case else ""
    return [
        pipeline_gantt(mine, title=_("your plan, P={p}, M={m}").format(p=p, m=m) + why),
        pipeline_gantt(
            ref, title=_("1F1B, P={p}, M={m}: bubble (P\u22121)/(M+P\u22121)").format(p=p, m=m)
        ),
        activation_memory_figure(mine, title=_("your plan: stashed activations per stage")),
        activation_memory_figure(ref, title=_("1F1B: at most min(P\u2212s, M) on stage s")),
    ]


STARTER = """\
def my_1f1b(stages, microbatches):
    plan = []
    for s in range(stages):  # stage s runs on rank s
        warmup = 0  # how many forwards before this stage's first backward?
        actions = [f"{s}F{m}" for m in range(warmup)]
        ...  # steady state: one forward ("{s}F{m}"), then one backward ("{s}B{m}")
        ...  # cool-down: the backwards left
        plan.append(actions)
    return plan
"""

EXERCISE = Exercise(
    lesson="10_pipeline",
    title=N_("The 1F1B schedule as a plan"),
    function="my_1f1b",
    params=("stages", "microbatches"),
    task=N_(
        "Write `my_1f1b(stages, microbatches)`: a list with one list per rank (stage s runs on "
        "rank s) of the actions that rank runs, in order: `'1F0'` is stage 1's forward of "
        "microbatch 0, `'1B0'` its backward. Each action runs as soon as its inputs arrive, so "
        "write no idle slots. Target: 1F1B, whose bubble is (P\u22121)/(M+P\u22121) of the "
        "time, like GPipe's, while stage s stashes at most min(P\u2212s, M) microbatches."
    ),
    starter=STARTER,
    hints=(
        N_(
            "GPipe runs every forward, then every backward: stage s stashes all M microbatches. A "
            "backward frees its microbatch's stash, so run it as early as you can."
        ),
        N_(
            "Stage s runs min(P\u22121\u2212s, M) warm-up forwards (the last stage none), then for "
            "each microbatch k one forward (of the next microbatch, while any is left) and the "
            "backward of microbatch k; the backwards left at the end are the cool-down."
        ),
        N_(
            "`warmup = min(stages - 1 - s, microbatches)`; then `for k in range(microbatches): if "
            "warmup + k < microbatches: actions.append(f'{s}F{warmup + k}')` and "
            "`actions.append(f'{s}B{k}')`"
        ),
    ),
    reference=one_f_one_b,
    prepare=prepare,
    finish=finish,
    judge=judge,
    cases=tuple(
        Case(p, options=(("microbatches", m),))
        for p, ms in ((2, (1, 2, 4)), (4, (2, 4, 8)))
        for m in ms
    ),
    picture=picture,
)
