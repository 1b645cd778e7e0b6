"""Question bank of lesson 04 (ring, tree and parameter server): bottlenecks (errata E5), latency
terms, the alpha-beta model's choice of algorithm and a naive run (NCCL's own tuner is lesson 05's,
``nccl.py``).

Answers come from the plans (:func:`~edu_parallel.plans.algorithms.build_plan`), the alpha-beta
model (:func:`~edu_parallel.models.cost.predict`, :func:`~edu_parallel.models.choose.
choose_allreduce`; Thakur, Rabenseifner & Gropp 2005).
``runner(algo, world_size, nbytes) -> Trace`` runs an all-reduce algorithm; the default simulates
it, the lesson passes :func:`edu_parallel.comm.compare.cluster_traffic_runner`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ...core.i18n import _
from ...core.trace import Trace
from ...core.units import KIB, MIB, format_bytes
from ...models.choose import choose_allreduce
from ...models.cost import link_preset, predict
from ...models.traffic import simulated_runner
from ...plans.algorithms import build_plan
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from .common import pick, ranks

NAME = "04_ring_tree_ps"
AlgoRunner = Callable[[str, int, int], Trace]
OPTIONS = ["ring", "tree", "double-tree"]
TINY, HUGE = 1 * KIB, 1 << 30  # the two sizes of the model's pick, bytes
D_RUN = 12 * KIB  # bytes of the naive run


@dataclass(frozen=True)
class AlgorithmsDraw:
    """Lesson 04's parameters."""

    n: int
    """Ranks of the tree and parameter-server questions."""
    d: int
    """Bytes each rank all-reduces through the parameter server."""
    big_n: int
    """Ranks of the alpha-beta model's questions."""
    link: str
    """The link preset of the model's questions."""
    n_run: int
    """Ranks of the naive run (the lesson's table has 2, 4 and 8)."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> AlgorithmsDraw:
        n = pick(rng, 8, 8, 16, 32)
        d = pick(rng, 1 * MIB, 256 * KIB, 1 * MIB, 4 * MIB)
        big_n = pick(rng, 64, 32, 64, 128)
        link = pick(rng, "ib-ndr-400", "ib-ndr-400", "nvlink4-h100", "pcie5-x16")
        n_run = pick(rng, 3, 3, 5, 6)
        return cls(n=n, d=d, big_n=big_n, link=link, n_run=n_run)


def q_errata_e5(d: AlgorithmsDraw, run: AlgoRunner) -> MultipleChoice:
    """Errata E5: is a tree all-reduce limited by its root?"""
    return MultipleChoice(
        _(
            "The outline says a tree all-reduce is limited because its root carries most of"
            " the traffic. What do the counted bytes show?"
        ),
        [
            _(
                "True only of a flat tree or a single parameter server; NCCL's double binary"
                " tree keeps every rank near 2D"
            ),
            _(
                "True of every tree, NCCL's included: the root of a reduce-then-broadcast tree"
                " moves (N-1)·D"
            ),
            _(
                "False for every tree: trees move fewer bytes per rank than the ring, which is"
                " why NCCL uses them for big messages"
            ),
            _(
                "Trees and rings move exactly the same bytes per rank; only their number of"
                " steps differs"
            ),
        ],
        0,
        _(
            "Errata E5: the bottleneck belongs to a single reduce-to-root tree. NCCL builds two"
            " complementary binary trees, each carrying half the data, so no rank moves much"
            " more than 2D; the tree's real advantage is latency, O(log N) steps against the"
            " ring's O(N)."
        ),
        key="errata_e5",
    )


def q_tree_steps(d: AlgorithmsDraw, run: AlgoRunner) -> Numeric:
    """How many steps the binary-tree all-reduce takes."""
    return Numeric(
        _(
            "How many steps (latency terms) does the binary-tree all-reduce take on {n} ranks"
            " (reduce up, then broadcast down)?"
        ).format(n=d.n),
        len(build_plan("tree", d.n).steps),
        tolerance=0.0,
        units="steps",
        explanation=_(
            "Up the tree level by level, then down again: 2·floor(log2 N) steps, against the"
            " ring's 2(N-1). That is why trees win for small, latency-bound messages."
        ),
        params={"N": d.n},
        key="tree_steps",
    )


def q_ps_server_recv(d: AlgorithmsDraw, run: AlgoRunner) -> Numeric:
    """Bytes a single parameter server receives."""
    return Numeric(
        _(
            "A single parameter server (co-located on rank 0) all-reduces D = {size} from {n}"
            " ranks: how many bytes does the server receive?"
        ).format(size=format_bytes(d.d), n=d.n),
        (d.n - 1) * d.d,
        units="bytes",
        explanation=_(
            "Every one of the other N-1 ranks pushes its whole buffer to the server: (N-1)·D,"
            " and it sends as much back. Sharding over k servers divides that by about k."
        ),
        params={"N": d.n, "D": d.d},
        key="ps_server_recv",
    )


def q_ring_latency_us(d: AlgorithmsDraw, run: AlgoRunner) -> Numeric:
    """The latency part of a ring all-reduce in the alpha-beta model."""
    alpha_us = link_preset(d.link).alpha_s * 1e6
    return Numeric(
        _(
            "Alpha-beta model, link {link} (α = {alpha} µs per message): what is the latency"
            " part 2(n-1)·α of a ring all-reduce on {n} ranks, in microseconds?"
        ).format(link=d.link, alpha=f"{alpha_us:g}", n=d.big_n),
        predict("ring", d.big_n, d.d, d.link).latency_s * 1e6,
        units="µs",
        explanation=_(
            "The ring takes 2(n-1) steps and every step pays α once (Thakur, Rabenseifner &"
            " Gropp 2005); the bandwidth part 2(n-1)/n·S/B does not depend on n much."
        ),
        params={"N": d.big_n, "alpha_us": alpha_us},
        key="ring_latency_us",
    )


def q_pick_small(d: AlgorithmsDraw, run: AlgoRunner) -> MultipleChoice:
    """The algorithm the model picks for a 1 KiB all-reduce."""
    return MultipleChoice(
        _(
            "By the model, which algorithm should an all-reduce of 1 KiB on {n} ranks over"
            " {link} use?"
        ).format(n=d.big_n, link=d.link),
        OPTIONS,
        OPTIONS.index(choose_allreduce(TINY, d.big_n, d.link).algo),
        _(
            "Tiny messages are latency-bound: the α terms dominate, and a tree pays 2·log2 n of"
            " them against the ring's 2(n-1). NCCL's tuning model makes the same choice per"
            " size (errata E9)."
        ),
        params={"N": d.big_n, "S": TINY, "link": d.link},
        key="pick_small",
    )


def q_pick_large(d: AlgorithmsDraw, run: AlgoRunner) -> MultipleChoice:
    """The algorithm the model picks for a 1 GiB all-reduce."""
    return MultipleChoice(
        _("And for 1 GiB on {n} ranks over {link}?").format(n=d.big_n, link=d.link),
        OPTIONS,
        OPTIONS.index(choose_allreduce(HUGE, d.big_n, d.link).algo),
        _(
            "Large messages are bandwidth-bound: the ring moves 2(n-1)/n·S per rank and keeps"
            " every link busy, so it wins once the S/B terms dominate."
        ),
        params={"N": d.big_n, "S": HUGE, "link": d.link},
        key="pick_large",
    )


def _reveal_traffic(trace: Trace) -> str:
    sent, recv = trace.sent_bytes(), trace.recv_bytes()
    return "\n".join(
        [
            _("sent per rank: {sent}").format(sent=sent),
            _("received per rank: {recv}").format(recv=recv),
        ]
    )


def q_predict_naive_busiest(d: AlgorithmsDraw, run: AlgoRunner) -> PredictThenRun:
    """Predict, then run: the busiest rank's bytes in a naive all-reduce."""
    n_run = d.n_run
    return PredictThenRun(
        _(
            "Predict how many bytes the busiest rank moves (max of sent and received) in a"
            " NAIVE all-reduce of {size} on {n} ranks, then run it."
        ).format(size=format_bytes(D_RUN), n=n_run),
        Numeric(
            _("Busiest rank's bytes"),
            (n_run - 1) * D_RUN,
            units="bytes",
            explanation=_("The root receives (N-1)·D and sends as much."),
        ),
        run=lambda: run("naive", n_run, D_RUN),
        reveal=_reveal_traffic,
        explanation=_(
            "Everyone sends D to the root and gets D back; the root handles (N-1)·D each way."
        ),
        truth=lambda trace: max(max(trace.sent_bytes()), max(trace.recv_bytes())),
        params={"N": n_run, "D": D_RUN},
        key="predict_naive_busiest",
        config=f'run_allreduce({ranks(n_run)}, {D_RUN}, algo="naive")',
    )


ALGORITHMS = QuestionSet(
    AlgorithmsDraw.draw,
    (
        q_errata_e5,
        q_tree_steps,
        q_ps_server_recv,
        q_ring_latency_us,
        q_pick_small,
        q_pick_large,
        q_predict_naive_busiest,
    ),
    simulated_runner(),
    "runner(algo, world_size, nbytes) -> Trace",
)


def algorithms_quiz(
    seed: int | None = None, runner: AlgoRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 04: bottlenecks (errata E5), latency terms, the alpha-beta model's choice.

    ``runner(algo, world_size, nbytes) -> Trace`` runs an all-reduce algorithm; the default
    simulates it, the lesson passes :func:`edu_parallel.comm.compare.cluster_traffic_runner`."""
    questions = ALGORITHMS.build(seed, runner)
    return Quiz(
        _("Lesson 04: ring, tree and parameter server"), questions, name=NAME, learner=learner
    )


register_bank(NAME, algorithms_quiz, ALGORITHMS)
