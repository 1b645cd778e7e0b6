"""Question bank of lesson 02 (collectives): what each primitive leaves where, its volume, busbw,
and a gather run.

Every numeric answer is computed by :func:`~edu_parallel.plans.collectives.volume_formula` and
nccl-tests' bus factor from the drawn ``params`` (nccl-tests doc/PERFORMANCE.md). A runner is
``runner(collective, world_size, nbytes) -> Trace``; the default simulates the collective's plan,
and the lesson passes :func:`edu_parallel.comm.collective.collective_runner` to run real ranks.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ...core.i18n import _
from ...core.metrics import bus_factor
from ...core.trace import Trace
from ...core.units import KIB, MIB, format_bytes
from ...models.simulation import simulate
from ...plans.collectives import COLLECTIVE_PLANS, volume_formula
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from .common import pick, ranks

NAME = "02_collectives"
CollectiveRunner = Callable[[str, int, int], Trace]


def simulated_collective(collective: str, world_size: int, nbytes: int) -> Trace:
    """The collective's plan run in-process on virtual ranks."""
    return simulate(COLLECTIVE_PLANS[collective](world_size), nbytes, pattern="random")[0]


@dataclass(frozen=True)
class CollectivesDraw:
    """The collectives quiz's parameters."""

    n: int
    """Ranks of the paper questions."""
    s: int
    """Bytes of the all-gather's output and of each rank's all-to-all buffer."""
    algbw: float
    """The algorithm bandwidth nccl-tests measured, GB/s (the busbw question)."""
    n_run: int
    """Ranks of the gather run (the lesson runs every collective on 4)."""
    s_run: int
    """Bytes of that gather: ``n_run`` equal float32 pieces."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> CollectivesDraw:
        n = 4 if rng is None else rng.randint(3, 8)
        s = pick(rng, 1 * MIB, 256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB)
        algbw = pick(rng, 100.0, 20.0, 50.0, 100.0, 200.0)
        n_run = 3 if rng is None else rng.randint(2, 3)
        return cls(n, s, algbw, n_run, n_run * 4 * pick(rng, 1024, 256, 1024, 4096))


def q_which_reduce_scatter(d: CollectivesDraw, run: CollectiveRunner) -> MultipleChoice:
    """Which collective leaves rank r with chunk r of the sum."""
    return MultipleChoice(
        _(
            "On {n} ranks, which collective leaves rank r holding chunk r of the sum, and"
            " nothing else?"
        ).format(n=d.n),
        [_("all-reduce"), _("reduce-scatter"), _("all-gather"), _("reduce")],
        1,
        _(
            "Reduce-scatter sums the ranks' buffers and scatters the result: rank r keeps the"
            " r-th 1/N of the sum. All-reduce leaves the whole sum everywhere, reduce leaves it"
            " on the root."
        ),
        key="which_reduce_scatter",
    )


def q_allreduce_parts(d: CollectivesDraw, run: CollectiveRunner) -> MultipleChoice:
    """Which two collectives make an all-reduce."""
    return MultipleChoice(
        _("Which two collectives, one after the other, make an all-reduce?"),
        [
            _("reduce-scatter then all-gather"),
            _("gather to one rank then scatter"),
            _("all-to-all then all-gather"),
            _("broadcast from rank 0 then reduce-scatter"),
        ],
        0,
        _(
            "The ring all-reduce is a reduce-scatter (each rank finishes 1/N of the sum)"
            " followed by an all-gather (everyone collects the finished parts); lesson 03"
            " counts its bytes."
        ),
        key="allreduce_parts",
    )


def q_allgather_sent(d: CollectivesDraw, run: CollectiveRunner) -> Numeric:
    """Bytes each rank sends in a ring all-gather."""
    return Numeric(
        _(
            "All-gather of S = {size} (the output size, as nccl-tests counts it) on {n} ranks"
            " in a ring: how many bytes does each rank send?"
        ).format(size=format_bytes(d.s), n=d.n),
        volume_formula("all_gather", d.n, d.s)["sent"][0],
        units="bytes",
        explanation=_(
            "Each rank holds S/N and must receive the other N-1 pieces; in the ring it forwards"
            " N-1 pieces of S/N, so (N-1)/N * S (nccl-tests doc/PERFORMANCE.md)."
        ),
        params={"N": d.n, "S": d.s},
        key="allgather_sent",
    )


def q_alltoall_recv(d: CollectivesDraw, run: CollectiveRunner) -> Numeric:
    """Bytes each rank receives in an all-to-all."""
    return Numeric(
        _(
            "All-to-all of S = {size} per rank on {n} ranks: how many bytes does each rank receive?"
        ).format(size=format_bytes(d.s), n=d.n),
        volume_formula("all_to_all", d.n, d.s)["recv"][0],
        units="bytes",
        explanation=_(
            "Each rank keeps 1/N of its buffer (the part addressed to itself) and receives one"
            " piece of S/N from each of the N-1 others: (N-1)/N * S."
        ),
        params={"N": d.n, "S": d.s},
        key="alltoall_recv",
    )


def q_allgather_busbw(d: CollectivesDraw, run: CollectiveRunner) -> Numeric:
    """The busbw nccl-tests reports for an all-gather's algbw."""
    return Numeric(
        _(
            "nccl-tests measures algbw = {algbw} GB/s for an all-gather on {n} ranks. What"
            " busbw does it report?"
        ).format(algbw=f"{d.algbw:g}", n=d.n),
        d.algbw * bus_factor("all_gather", d.n),
        units="GB/s",
        explanation=_(
            "busbw = algbw * (N-1)/N for all-gather, reduce-scatter and all-to-all; 2(N-1)/N"
            " for all-reduce; 1 for broadcast and reduce (nccl-tests doc/PERFORMANCE.md)."
        ),
        params={"N": d.n, "algbw_gbps": d.algbw},
        key="allgather_busbw",
    )


def q_gather_root(d: CollectivesDraw, run: CollectiveRunner) -> MultipleChoice:
    """Whose link carries the most in a gather."""
    return MultipleChoice(
        _(
            "Gather of S bytes to a root on {n} ranks, each rank contributing S/{n}: which"
            " rank's link carries the most?"
        ).format(n=d.n),
        [
            _("the root: every other rank's piece crosses its link"),
            _("every rank the same: each link carries one piece of S/N"),
            _("the rank after the root, which forwards the pieces along the ring"),
            _("the last rank, which sends its piece after all the others"),
        ],
        0,
        _(
            "Gather and scatter are direct: every piece crosses the root's link, so the root's"
            " load grows with N while the others send or receive one piece."
        ),
        key="gather_root",
    )


def _reveal_recv(trace: Trace) -> str:
    recv = trace.recv_bytes()
    return _("bytes received by ranks 0..{last}: {recv} (the root is rank 0)").format(
        last=trace.world_size - 1, recv=recv
    )


def q_predict_gather_root(d: CollectivesDraw, run: CollectiveRunner) -> PredictThenRun:
    """Predict, then run: the bytes the root receives in a gather."""
    n_run, s_run = d.n_run, d.s_run
    return PredictThenRun(
        _(
            "Predict how many bytes the root (rank 0) receives in a gather of {size} on {n}"
            " ranks, then run it."
        ).format(size=format_bytes(s_run), n=n_run),
        Numeric(
            _("Bytes the root receives"),
            volume_formula("gather", n_run, s_run)["recv"][0],
            units="bytes",
            explanation=_("(N-1)/N * S: one piece of S/N from every other rank."),
        ),
        run=lambda: run("gather", n_run, s_run),
        reveal=_reveal_recv,
        explanation=_(
            "The root keeps its own piece and receives S/N from each of the N-1 others; the"
            " trace counts every byte it received."
        ),
        truth=lambda trace: trace.recv_bytes()[0],
        params={"N": n_run, "S": s_run},
        key="predict_gather_root",
        config=f'run_collective({ranks(n_run)}, "gather", {s_run})',
    )


COLLECTIVES = QuestionSet(
    CollectivesDraw.draw,
    (
        q_which_reduce_scatter,
        q_allreduce_parts,
        q_allgather_sent,
        q_alltoall_recv,
        q_allgather_busbw,
        q_gather_root,
        q_predict_gather_root,
    ),
    simulated_collective,
    "runner(collective, world_size, nbytes) -> Trace",
)


def collectives_quiz(
    seed: int | None = None, runner: CollectiveRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 02: what each primitive leaves where, its volume, busbw, and a gather run."""
    questions = COLLECTIVES.build(seed, runner)
    return Quiz(_("Lesson 02: collectives"), questions, name=NAME, learner=learner)


register_bank(NAME, collectives_quiz, COLLECTIVES)
