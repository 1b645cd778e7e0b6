"""Question bank of lesson 03 (the ring all-reduce): bytes per phase and in all, errata E1,
busbw, steps, naive against ring, and a run.

Every answer comes from the plans' byte formulas (:mod:`edu_parallel.plans.ring`,
:mod:`edu_parallel.plans.naive`) and nccl-tests' bus factor (:func:`~edu_parallel.core.metrics.
bus_factor`). ``runner(world_size, nbytes) -> Trace`` runs a ring all-reduce; the default simulates
it in-process (:func:`~edu_parallel.quiz.registry.simulation_runner`), the lesson passes one that
runs the real cluster. References: Patarasuk & Yuan 2009; nccl-tests doc/PERFORMANCE.md.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ...core.i18n import _
from ...core.metrics import bus_factor
from ...core.trace import Trace
from ...core.units import KIB, MIB, format_bytes
from ...plans.naive import naive_sent_bytes_formula
from ...plans.ring import ring_allreduce_plan, ring_sent_bytes_formula
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, Runner, register_bank, simulation_runner
from .common import allreduce_call, run_size

NAME = "03_ring_allreduce"
SIZES = (64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB)
BUSBW_REF = "nccl-tests doc/PERFORMANCE.md"


@dataclass(frozen=True)
class RingDraw:
    """The ring quiz's parameters."""

    n: int
    """Ranks of the paper questions."""
    d: int
    """Bytes each rank all-reduces in the paper questions."""
    algbw: float
    """The algorithm bandwidth nccl-tests measured, GB/s (the busbw question)."""
    n_run: int
    """Ranks of the predict-then-run ring (the lesson itself runs 2, 3 and 4)."""
    d_run: int
    """Bytes of that run: ``n_run`` equal float32 chunks."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> RingDraw:
        if rng is None:
            n, d, algbw, n_run = 4, 1 * MIB, 100.0, 5
        else:
            n, d = rng.randint(3, 8), rng.choice(SIZES)
            algbw, n_run = rng.choice((12.5, 25.0, 50.0, 100.0, 200.0)), rng.randint(5, 6)
        return cls(n, d, algbw, n_run, run_size(rng, n_run))

    @property
    def nd(self) -> dict[str, int]:
        return {"N": self.n, "D": self.d}

    @property
    def size(self) -> str:
        return format_bytes(self.d)


def q_rs_sent(d: RingDraw, run: Runner) -> Numeric:
    """Bytes each rank sends in the reduce-scatter phase."""
    return Numeric(
        _(
            "Ring all-reduce of D = {size} on N = {n} ranks: how many bytes does each rank"
            " SEND in the reduce-scatter phase?"
        ).format(size=d.size, n=d.n),
        ring_sent_bytes_formula(d.n, d.d)["reduce-scatter"],
        units="bytes",
        explanation=_(
            "The buffer is cut into N chunks and each of the N-1 steps sends one chunk of D/N"
            " bytes, so (N-1)/N * D per phase (Patarasuk & Yuan 2009)."
        ),
        params=d.nd,
        key="rs_sent",
    )


def q_total_sent(d: RingDraw, run: Runner) -> Numeric:
    """Bytes each rank sends in both phases together."""
    return Numeric(
        _(
            "Same all-reduce (D = {size}, N = {n}): how many bytes does each rank send in all,"
            " both phases together?"
        ).format(size=d.size, n=d.n),
        ring_sent_bytes_formula(d.n, d.d)["total"],
        units="bytes",
        explanation=_(
            "Reduce-scatter and all-gather each send (N-1)/N * D, so 2(N-1)/N * D in all: less"
            " than 2D however many ranks there are."
        ),
        params=d.nd,
        key="total_sent",
    )


def q_errata_e1(d: RingDraw, run: Runner) -> MultipleChoice:
    """Errata E1: what the outline's '2(N-1)/N * D per phase' gets wrong."""
    return MultipleChoice(
        _("The course outline says 'each phase moves 2(N-1)/N * D per node'. What is right?"),
        [
            _(
                "Per phase a rank SENDS (N-1)/N * D and receives as much; 2(N-1)/N * D is"
                " both phases' sends"
            ),
            _(
                "Every rank sends 2(N-1)/N * D in each phase, so 4(N-1)/N * D over the whole"
                " all-reduce"
            ),
            _("Every rank sends D/N per phase: one chunk, forwarded once, whatever N is"),
            _(
                "Every rank sends (N-1) * D in each phase, as the naive root does to the other"
                " ranks"
            ),
        ],
        0,
        _(
            "Errata E1: the outline double-counts, adding what a rank sends to what it"
            " receives. Each phase each rank sends (N-1)/N * D and receives as much;"
            " 2(N-1)/N * D is the send total of the whole all-reduce (the trace's sent bytes"
            " per phase show it)."
        ),
        key="errata_e1",
    )


def q_busbw(d: RingDraw, run: Runner) -> Numeric:
    """The busbw nccl-tests reports for an all-reduce's algbw."""
    return Numeric(
        _(
            "nccl-tests measures algbw = {algbw} GB/s for an all-reduce on N = {n} ranks."
            " What busbw does it report?"
        ).format(algbw=f"{d.algbw:g}", n=d.n),
        d.algbw * bus_factor("all_reduce", d.n),
        units="GB/s",
        explanation=_(
            "busbw = algbw * 2(N-1)/N for all-reduce ({ref}): the rate each rank's link really"
            " sustains, comparable with the hardware's peak bandwidth."
        ).format(ref=BUSBW_REF),
        params={"N": d.n, "algbw_gbps": d.algbw},
        key="busbw",
    )


def q_steps(d: RingDraw, run: Runner) -> Numeric:
    """How many steps the ring all-reduce takes."""
    return Numeric(
        _("How many steps does the ring all-reduce take on N = {n} ranks?").format(n=d.n),
        len(ring_allreduce_plan(d.n).steps),
        tolerance=0.0,
        units="steps",
        explanation=_(
            "N-1 steps of reduce-scatter then N-1 of all-gather: 2(N-1) steps, each paying one"
            " message latency, which is why rings are slow for tiny buffers."
        ),
        params={"N": d.n},
        key="steps",
    )


def q_naive_root_sent(d: RingDraw, run: Runner) -> Numeric:
    """Bytes the root of the naive all-reduce sends."""
    return Numeric(
        _(
            "Naive all-reduce (everyone sends to root 0, root sends the sum back), D = {size},"
            " N = {n}: how many bytes does the root send?"
        ).format(size=d.size, n=d.n),
        naive_sent_bytes_formula(d.n, d.d)[0],
        units="bytes",
        explanation=_(
            "The root sends the sum to each of the N-1 others, (N-1) * D bytes, and receives as"
            " much; every other rank sends and receives only D. The root's link is the"
            " bottleneck and its load grows with N."
        ),
        params=d.nd,
        key="naive_root_sent",
    )


def q_naive_vs_ring(d: RingDraw, run: Runner) -> Numeric:
    """How many times more the naive root sends than a ring rank."""
    return Numeric(
        _(
            "With N = {n}: how many times more bytes does the naive root send than each rank"
            " of the ring all-reduce sends?"
        ).format(n=d.n),
        naive_sent_bytes_formula(d.n, d.d)[0] / ring_sent_bytes_formula(d.n, d.d)["total"],
        units="times",
        explanation=_(
            "(N-1) * D over 2(N-1)/N * D is N/2: the naive root's load grows with N while every"
            " ring rank stays below 2D."
        ),
        params=d.nd,
        key="naive_vs_ring",
    )


def q_ring_facts(d: RingDraw, run: Runner) -> MultipleChoice:
    """Which statements hold for the ring (choose all)."""
    return MultipleChoice(
        _("Which statements hold for the ring all-reduce on N = {n} ranks? Choose all.").format(
            n=d.n
        ),
        [
            _("Every rank sends the same number of bytes"),
            _("Each rank only sends to its right neighbour and receives from its left one"),
            _("The bytes each rank sends grow in proportion to N, the number of ranks"),
            _("It takes 2(N-1) steps"),
        ],
        {0, 1, 3},
        _(
            "The ring is symmetric: every rank sends one chunk per step to the next rank,"
            " 2(N-1) steps in all, and its bytes stay below 2D whatever N is."
        ),
        multiple=True,
        params={"N": d.n},
        key="ring_facts",
    )


def _reveal_phases(trace: Trace) -> str:
    per_phase = trace.sent_bytes(per_phase=True)
    lines = [
        _("bytes sent by ranks 0..{last} in {phase}: {row}").format(
            last=trace.world_size - 1, phase=phase, row=row
        )
        for phase, row in per_phase.items()
    ]
    steps = trace.steps_per_phase()
    counts = ", ".join(f"{p}={k}" for p, k in steps.items())
    lines.append(_("steps per phase: {counts}").format(counts=counts))
    return "\n".join(lines)


def q_predict_allgather_rank0(d: RingDraw, run: Runner) -> PredictThenRun:
    """Predict, then run: the bytes rank 0 sends in the all-gather phase."""
    n_run, d_run = d.n_run, d.d_run
    return PredictThenRun(
        _(
            "Predict how many bytes rank 0 sends in the all-gather phase of a ring all-reduce"
            " of {size} on {n} ranks, then run it."
        ).format(size=format_bytes(d_run), n=n_run),
        Numeric(
            _("Bytes rank 0 sends in the all-gather phase"),
            ring_sent_bytes_formula(n_run, d_run)["all-gather"],
            units="bytes",
            explanation=_("(N-1)/N * D per phase."),
        ),
        run=lambda: run(n_run, d_run),
        reveal=_reveal_phases,
        explanation=_(
            "Rank 0 forwards N-1 chunks of D/N bytes around the ring in the all-gather phase,"
            " exactly as many as in reduce-scatter: (N-1)/N * D."
        ),
        truth=lambda trace: trace.sent_bytes(per_phase=True)["all-gather"][0],
        params={"N": n_run, "D": d_run},
        key="predict_allgather_rank0",
        config=allreduce_call(n_run, d_run),
    )


RING = QuestionSet(
    RingDraw.draw,
    (
        q_rs_sent,
        q_total_sent,
        q_errata_e1,
        q_busbw,
        q_steps,
        q_naive_root_sent,
        q_naive_vs_ring,
        q_ring_facts,
        q_predict_allgather_rank0,
    ),
    simulation_runner,
)


def ring_quiz(
    seed: int | None = None, runner: Runner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 03: bytes per phase and in all, errata E1, busbw, steps, naive vs ring, and a run."""
    questions = RING.build(seed, runner)
    return Quiz(_("Lesson 03: ring all-reduce"), questions, name=NAME, learner=learner)


register_bank(NAME, ring_quiz, RING)
