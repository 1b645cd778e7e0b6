"""Question bank of lesson 16 (debugging a distributed job): which rank is at fault, and why.

Each question shows the evidence the flight records hold for one of the failure lab's cases, with
the fault at a drawn rank: per rank, the operation it waits in and for how long, its heartbeat's
age, its share of a core, the line it is at. The verdict is left out; the learner names it. The
answer is always read from a :class:`~edu_parallel.core.diagnosis.Diagnosis`, never written in
the bank: the four predict-then-run questions run the case on the ranks (``runner(case,
culprit) -> Diagnosis``; the lesson passes ``lambda case, culprit: provoke(cluster, case,
culprit).diagnosis``) and grade the prediction by the engine's finding of that fresh run; the
evidence they show beforehand is the same case's, simulated
(:func:`~edu_parallel.quiz.banks.debugging_sim.simulated_diagnosis`). Without a runner the
simulation is run too, so the bank works without processes. The last two questions (the fix, and
torch's own tool) are graded from the simulated finding. References: PyTorch's flight recorder
(``torch.distributed.flight_recorder``); ``monitored_barrier`` and ``TORCH_DISTRIBUTED_DEBUG``
(https://pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

from ...core.diagnosis import KINDS, Diagnosis
from ...core.i18n import N_, _
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from ..shuffle import check_learner, learner_seed
from .common import pick
from .debugging_sim import CASES, evidence, finding, simulated_diagnosis, simulated_runner

NAME = "16_debugging"
DebugRunner = Callable[[str, int], Diagnosis]
SIGNATURE = "runner(case, culprit) -> Diagnosis"
WORLD = 4  # the lesson's cluster
CULPRIT_CASES = tuple(c for c in CASES if c != "deadlock")  # one rank at fault
SPEED_CASES = ("straggler", "timeout_too_short", "sleeps", "skips_collective", "stopped")
FIX_KINDS = ("deadlock", "slow", "mismatch", "missing")
FIX_CASES = ("deadlock", "timeout_too_short", "mismatched_sizes", "skips_collective")
TOOL_CASES = ("skips_collective", "sleeps", "mismatched_collectives", "mismatched_sizes")
KIND_WORDS = {
    "dead": N_("dead: a rank's process ended"),
    "stopped": N_("stopped: a rank's process is frozen, its heartbeat silent"),
    "mismatch": N_("mismatch: ranks called different collectives, or other sizes"),
    "deadlock": N_("deadlock: ranks wait for each other in a cycle"),
    "missing": N_("missing: a rank never entered the operation (idle, or it returned)"),
    "slow": N_("slow: the rank the others wait for is still working"),
}
FIXES = {
    "deadlock": N_("let even ranks send first (or post both with batch_isend_irecv)"),
    "slow": N_("raise the timeout, or balance the work across the ranks"),
    "mismatch": N_("make every rank call the same collective with the same size"),
    "missing": N_("make every rank call the collective, outside any rank-dependent branch"),
}
TOOLS = (
    N_("dist.monitored_barrier(): it names the ranks that never reached it"),
    N_("TORCH_DISTRIBUTED_DEBUG=DETAIL: it compares each collective's op and sizes across ranks"),
    N_("NCCL_DEBUG=INFO: it logs the rings and channels NCCL builds"),
    N_("TORCH_NCCL_TRACE_BUFFER_SIZE: the NCCL flight recorder's buffer"),
)
TOOL_OF = {"missing": 0, "mismatch": 1}


@dataclass(frozen=True)
class DebuggingDraw:
    """Lesson 16's parameters, drawn in one go: each question's case and culprit rank."""

    culprit_case: str
    culprit: int
    kind_case: str
    kind_culprit: int
    speed_case: str
    speed_culprit: int
    cycle_culprit: int
    fix_case: str
    fix_culprit: int
    tool_case: str
    tool_culprit: int

    @classmethod
    def draw(cls, rng: random.Random | None) -> DebuggingDraw:
        ranks = range(WORLD)
        return cls(
            pick(rng, "sleeps", *CULPRIT_CASES),
            pick(rng, 2, *ranks),
            pick(rng, "stopped", *CASES),
            pick(rng, 1, *ranks),
            pick(rng, "timeout_too_short", *SPEED_CASES),
            pick(rng, 3, *ranks),
            pick(rng, 1, *ranks),
            pick(rng, "mismatched_sizes", *FIX_CASES),
            pick(rng, 0, *ranks),
            pick(rng, "skips_collective", *TOOL_CASES),
            pick(rng, 3, *ranks),
        )


def _reveal(d: Diagnosis) -> str:
    """What the run found: every rank's evidence, then the engine's finding."""
    lines = [_("The flight records of the run:"), *evidence(d, verdict=True)]
    return "\n".join([*lines, _("The engine: {finding}").format(finding=finding(d))])


def _shown(d: Diagnosis) -> str:
    return _("; ").join(evidence(d))


@dataclass(frozen=True)
class Ask:
    """What a predict-then-run question asks, and how a finding answers it."""

    question: str
    choices: list[str]
    short: str
    """The prediction's own prompt, as the widget names it."""
    rule: str
    """How to tell: the explanation."""
    truth: Callable[[Diagnosis], int]
    """The right choice, read from a finding."""


def _prompt(d: Diagnosis, ask: str) -> str:
    return _(
        "A job on {n} ranks, timeout {timeout} s. The flight records of such a job read (modelled"
        " by the diagnosis's rule): {evidence}. {ask} Predict, then the same job runs on the ranks"
        " and the engine reads their records."
    ).format(n=WORLD, timeout=f"{d.timeout_s:g}", evidence=_shown(d), ask=ask)


def _predict(key: str, case: str, culprit: int, ask: Ask, run: DebugRunner) -> PredictThenRun:
    """Predict, then run ``case`` with its fault at ``culprit``. The evidence shown is the case
    simulated, whose finding gives the expected choice; the run's finding grades."""
    shown = simulated_diagnosis(case, culprit, WORLD)
    return PredictThenRun(
        _prompt(shown, ask.question),
        MultipleChoice(ask.short, ask.choices, ask.truth(shown), ask.rule),
        run=lambda: run(case, culprit),
        reveal=_reveal,
        explanation=ask.rule,
        truth=ask.truth,
        params={"case": case, "culprit": culprit, "world_size": WORLD},
        key=key,
        config=f'provoke(cluster, "{case}", {culprit})',
    )


def _culprit_index(d: Diagnosis) -> int:
    return min(d.culprits) if d.culprits and d.kind != "deadlock" else WORLD


def q_predict_culprit(dr: DebuggingDraw, run: DebugRunner) -> PredictThenRun:
    """Predict, then run: which rank the engine names at fault."""
    choices = [_("rank {rank} is at fault").format(rank=r) for r in range(WORLD)]
    choices.append(_("no one rank: every rank waits for another, the order is at fault"))
    rule = _(
        "The culprit is where the waiting ends: the rank the others wait for, which waits for"
        " nobody itself. A rank waiting in the operation is its victim; look at the one in no"
        " operation, silent, gone, late, or in another operation than the others."
    )
    question = _("Which rank will the engine name at fault?")
    ask = Ask(question, choices, _("The rank at fault"), rule, _culprit_index)
    return _predict("predict_culprit", dr.culprit_case, dr.culprit, ask, run)


def q_predict_kind(dr: DebuggingDraw, run: DebugRunner) -> PredictThenRun:
    """Predict, then run: the kind of failure the engine reports."""
    rule = _(
        "The engine checks in this order: ranks that entered one collective number with"
        " different operations or sizes (mismatch); a process that ended (dead); one with no"
        " heartbeat (stopped); waits in a cycle (deadlock); then the rank waited for: still"
        " working (slow), or idle or returned (missing)."
    )
    ask = Ask(
        _("Which kind of failure will the engine report?"),
        [_(KIND_WORDS[k]) for k in KINDS],
        _("The kind of failure"),
        rule,
        lambda d: KINDS.index(d.kind),
    )
    return _predict("predict_kind", dr.kind_case, dr.kind_culprit, ask, run)


def q_predict_stuck_or_slow(dr: DebuggingDraw, run: DebugRunner) -> PredictThenRun:
    """Predict, then run: is the job stuck, or only slow?"""
    rule = _(
        "A straggler uses its core and its heartbeat is fresh, and it enters the collectives"
        " late, again and again; a stuck rank is idle, silent, gone or has returned, and the"
        " others wait in one operation for ever. No timeout is long enough for a stuck job."
    )
    choices = [
        _("slow: the rank the others wait for is working; more time, or less work, ends it"),
        _("stuck: the rank the others wait for does no work (idle, frozen, gone, returned)"),
    ]
    question = _("Is this job stuck, or only slow?")
    ask = Ask(question, choices, _("Stuck or slow"), rule, lambda d: int(d.kind != "slow"))
    return _predict("predict_stuck_or_slow", dr.speed_case, dr.speed_culprit, ask, run)


PAIRS = tuple(combinations(range(WORLD), 2))


def _cycle_index(d: Diagnosis) -> int:
    """The choice of the ranks in ``d``'s cycles: a pair, every rank, or none."""
    ranks = tuple(sorted({r for cycle in d.cycles for r in cycle}))
    if not ranks:
        return len(PAIRS) + 1
    if len(ranks) == WORLD:
        return len(PAIRS)
    if ranks not in PAIRS:
        raise ValueError(_("the run's cycle {ranks} is none of the choices").format(ranks=ranks))
    return PAIRS.index(ranks)


def q_predict_cycle(dr: DebuggingDraw, run: DebugRunner) -> PredictThenRun:
    """Predict, then run: which ranks form the deadlock's cycle."""
    choices = [_("ranks {a} and {b}").format(a=a, b=b) for a, b in PAIRS]
    choices += [_("all {n} ranks, in one ring").format(n=WORLD), _("none: nobody waits in a cycle")]
    rule = _(
        "Two ranks each wait in recv for the other, whose send comes after its own recv: a"
        " cycle of the wait-for graph, which no timeout breaks. The others wait in the"
        " all-reduce for the two. Fix: let even ranks send first, or post both with"
        " batch_isend_irecv."
    )
    question = _("Which ranks form the deadlock's cycle?")
    ask = Ask(question, choices, _("The ranks of the cycle"), rule, _cycle_index)
    return _predict("predict_cycle", "deadlock", dr.cycle_culprit, ask, run)


def _from_evidence(
    key: str, d: Diagnosis, ask: str, choices: list[str], correct: int, rule: str
) -> MultipleChoice:
    """A question graded from the simulated finding ``d``, its evidence in the prompt."""
    prompt = _(
        "A job on {n} ranks, timeout {timeout} s. Its flight records read (modelled): {evidence}."
        " {ask}"
    )
    return MultipleChoice(
        prompt.format(n=WORLD, timeout=f"{d.timeout_s:g}", evidence=_shown(d), ask=ask),
        choices,
        correct,
        _("{rule} The engine: {finding}").format(rule=rule, finding=finding(d)),
        params={"kind": d.kind, "culprits": list(d.culprits)},
        key=key,
    )


def q_fix(dr: DebuggingDraw, run: DebugRunner) -> MultipleChoice:
    """The one-line fix for the failure the evidence shows."""
    d = simulated_diagnosis(dr.fix_case, dr.fix_culprit, WORLD)
    return _from_evidence(
        "fix",
        d,
        _("Which change makes the job finish?"),
        [_(FIXES[k]) for k in FIX_KINDS],
        FIX_KINDS.index(d.kind),
        _("Read the kind first: each kind has its own fix, and a longer timeout fixes only slow."),
    )


def q_torch_tool(dr: DebuggingDraw, run: DebugRunner) -> MultipleChoice:
    """The tool of torch's own that names this fault on gloo."""
    d = simulated_diagnosis(dr.tool_case, dr.tool_culprit, WORLD)
    return _from_evidence(
        "torch_tool",
        d,
        _("Without these records, which of torch's own tools would have named it, on gloo?"),
        [_(t) for t in TOOLS],
        TOOL_OF[d.kind],
        _(
            "On gloo, monitored_barrier names a rank that never arrives, and DETAIL checks every"
            " collective's fingerprint before it runs; the NCCL variables need NCCL, on GPUs."
        ),
    )


DEBUGGING = QuestionSet(
    DebuggingDraw.draw,
    (
        q_predict_culprit,
        q_predict_kind,
        q_predict_stuck_or_slow,
        q_predict_cycle,
        q_fix,
        q_torch_tool,
    ),
    simulated_runner,
    SIGNATURE,
    share_runs=True,
    per_learner=True,
)


def debugging_quiz(
    seed: int | None = None, runner: DebugRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 16: which rank is at fault, and why (the culprit, the kind, stuck or slow, the
    deadlock's cycle, the fix and torch's own tool). ``seed`` None: the cases and culprits are
    drawn for the learner (``QuestionSet.per_learner``), so no two learners share an answer key."""
    learner = check_learner(learner) or learner_seed()
    questions = DEBUGGING.build(DEBUGGING.seed_for(seed, NAME, learner), runner)
    return Quiz(_("Lesson 16: debugging a distributed job"), questions, name=NAME, learner=learner)


register_bank(NAME, debugging_quiz, DEBUGGING)
