"""Question bank of lesson 00 (the tour): trace events, who holds the sum, bytes, one run.

``runner(world_size, nbytes) -> Trace`` runs a ring all-reduce; without one the in-process
simulation (:func:`~edu_parallel.quiz.registry.simulation_runner`) gives the same events, and the
tour (``edu-parallel tour``) passes one that runs the real cluster.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ...core.i18n import _
from ...core.trace import Trace
from ...core.units import DTYPES, KIB, format_bytes
from ...plans.ring import ring_allreduce_plan
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, Runner, register_bank, simulation_runner
from .common import allreduce_call, pick, run_size

NAME = "00_tour"
ITEM = DTYPES["float32"]


@dataclass(frozen=True)
class TourDraw:
    """The tour quiz's parameters."""

    n: int
    """Ranks of the 'who holds the sum' question."""
    d: int
    """Bytes of one rank's buffer in the 'how many numbers' question."""
    n_run: int
    """Ranks of the predict-then-run ring (the lesson itself runs 4)."""
    d_run: int
    """Bytes of that run: ``n_run`` equal float32 chunks."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> TourDraw:
        n = 4 if rng is None else rng.randint(2, 4)
        d = pick(rng, 64 * KIB, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB)
        n_run = 3 if rng is None else rng.randint(2, 3)
        return cls(n, d, n_run, run_size(rng, n_run))


def q_trace_event(d: TourDraw, run: Runner) -> MultipleChoice:
    """What one event of a trace records."""
    return MultipleChoice(
        _("What is one event in a trace?"),
        [
            _("One action of one rank (a send, a recv, a compute) with its bytes and times"),
            _("One whole collective call, with its bytes summed over all the ranks"),
            _("A snapshot of every rank's buffer, taken at the end of each step"),
            _("One line of Python that a worker process ran, with its start and end times"),
        ],
        0,
        _(
            "A trace is a list of per-rank events: each says what one rank did, to which"
            " peer, how many bytes and when. Buffer snapshots are kept separately for the"
            " animation."
        ),
        key="trace_event",
    )


def q_who_holds_sum(d: TourDraw, run: Runner) -> MultipleChoice:
    """Which ranks hold the sum after an all-reduce."""
    n = d.n
    return MultipleChoice(
        _("After an all-reduce on {n} ranks, which ranks hold the sum?").format(n=n),
        [
            _("Only rank 0"),
            _("Every rank, ranks 0 to {last}").format(last=n - 1),
            _("Each rank holds 1/{n} of the sum").format(n=n),
            _("Only rank {last}").format(last=n - 1),
        ],
        1,
        _(
            "All-reduce leaves the full sum on every rank. Only rank 0 would be a reduce,"
            " and 1/N of the sum per rank is a reduce-scatter, the first half of the ring."
        ),
        params={"N": n},
        key="who_holds_sum",
    )


def q_elements(d: TourDraw, run: Runner) -> Numeric:
    """How many float32 numbers a buffer of D bytes holds."""
    return Numeric(
        _("Each rank's buffer is {size} of float32. How many numbers is that?").format(
            size=format_bytes(d.d)
        ),
        d.d / ITEM,
        tolerance=0.0,
        units="elements",
        explanation=_(
            "A float32 takes {item} bytes, so D bytes hold D/{item} numbers; the engine"
            " sizes buffers in bytes, as nccl-tests does."
        ).format(item=ITEM),
        params={"D": d.d, "itemsize": ITEM},
        key="elements",
    )


def _reveal_sends(trace: Trace) -> str:
    sends = trace.select("send", rank=0)
    shown = "\n".join(e.line() for e in sends[:6])
    more = ""
    if len(sends) > 6:
        more = "\n" + _("... ({count} more)").format(count=len(sends) - 6)
    head = _("Rank 0 recorded {count} send events:").format(count=len(sends))
    return f"{head}\n{shown}{more}"


def q_sends_rank0(d: TourDraw, run: Runner) -> PredictThenRun:
    """Predict, then run: the send events rank 0 records in a ring all-reduce."""
    n_run, d_run = d.n_run, d.d_run
    plan = ring_allreduce_plan(n_run)
    sends_rank0 = sum(1 for step in plan.steps for t in step.transfers if t.src == 0)
    return PredictThenRun(
        _(
            "Predict how many send events rank 0 records in a ring all-reduce on {n}"
            " ranks, then run it."
        ).format(n=n_run),
        Numeric(
            _("Send events recorded by rank 0"),
            sends_rank0,
            tolerance=0.0,
            units="events",
            explanation=_("Rank 0 sends one chunk per step."),
        ),
        run=lambda: run(n_run, d_run),
        reveal=_reveal_sends,
        explanation=_(
            "In the ring every rank sends one chunk to its right neighbour at every step,"
            " and there are N-1 steps per phase, so 2(N-1) sends in all."
        ),
        truth=lambda trace: len(trace.select("send", rank=0)),
        params={"N": n_run, "D": d_run},
        key="sends_rank0",
        config=allreduce_call(n_run, d_run),
    )


TOUR = QuestionSet(
    TourDraw.draw,
    (q_trace_event, q_who_holds_sum, q_elements, q_sends_rank0),
    simulation_runner,
)


def tour_quiz(
    seed: int | None = None, runner: Runner | None = None, learner: str | None = None
) -> Quiz:
    """Four short questions on the tour: trace events, ranks, bytes, and one predict-then-run."""
    questions = TOUR.build(seed, runner)
    return Quiz(_("Tour: what the engine records"), questions, name=NAME, learner=learner)


register_bank(NAME, tour_quiz, TOUR)
