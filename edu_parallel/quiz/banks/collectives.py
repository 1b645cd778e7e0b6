"""Question banks of lessons 02 (collectives) and 04 (ring, tree and parameter server).

Same contract as :mod:`edu_parallel.quiz.registry`: ``bank(seed=None, runner=None) -> Quiz``; every
numeric answer is computed by package functions from the drawn ``params``. For lesson 02 a runner
is ``runner(collective, world_size, nbytes) -> Trace``; the default simulates the collective's plan,
and the lesson passes :func:`edu_parallel.comm.collective.collective_runner` to run real ranks.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ...core.errors import bad_value
from ...core.i18n import _
from ...core.metrics import bus_factor
from ...core.trace import Trace
from ...core.units import KIB, MIB, format_bytes
from ...models.choose import choose_allreduce
from ...models.cost import link_preset, predict
from ...models.simulation import simulate
from ...models.traffic import simulated_runner
from ...plans.algorithms import build_plan
from ...plans.collectives import COLLECTIVE_PLANS, volume_formula
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import register_bank
from .nccl import nccl_questions

CollectiveRunner = Callable[[str, int, int], Trace]


def simulated_collective(collective: str, world_size: int, nbytes: int) -> Trace:
    """The collective's plan run in-process on virtual ranks."""
    return simulate(COLLECTIVE_PLANS[collective](world_size), nbytes, pattern="random")[0]


def _ranks(n: int, lesson_n: int = 4) -> str:
    """The ranks of a run as the lesson writes them: its 4-rank ``cluster``, or a new one."""
    return "cluster" if n == lesson_n else f"Cluster({n})"


def _rng_runner(
    seed: int | None, runner: object, default: Callable
) -> tuple[random.Random | None, Callable]:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_value("seed", seed, "an int or None")
    if runner is not None and not callable(runner):
        raise bad_value("runner", runner, "a callable, or None for the simulation")
    return (random.Random(seed) if seed is not None else None), (runner or default)


def collectives_quiz(
    seed: int | None = None, runner: CollectiveRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 02: what each primitive leaves where, its volume, busbw, and a gather run."""
    rng, run = _rng_runner(seed, runner, simulated_collective)
    n = 4 if rng is None else rng.randint(3, 8)
    s = 1 * MIB if rng is None else rng.choice((256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB))
    algbw = 100.0 if rng is None else rng.choice((20.0, 50.0, 100.0, 200.0))
    n_run = 3 if rng is None else rng.randint(2, 3)  # the lesson runs every collective on 4 ranks
    s_run = n_run * 4 * (1024 if rng is None else rng.choice((256, 1024, 4096)))
    size = format_bytes(s)
    ag = volume_formula("all_gather", n, s)
    a2a = volume_formula("all_to_all", n, s)

    def reveal(trace: Trace) -> str:
        recv = trace.recv_bytes()
        return _("bytes received by ranks 0..{last}: {recv} (the root is rank 0)").format(
            last=trace.world_size - 1, recv=recv
        )

    questions = [
        MultipleChoice(
            _(
                "On {n} ranks, which collective leaves rank r holding chunk r of the sum, and"
                " nothing else?"
            ).format(n=n),
            [_("all-reduce"), _("reduce-scatter"), _("all-gather"), _("reduce")],
            1,
            _(
                "Reduce-scatter sums the ranks' buffers and scatters the result: rank r keeps the"
                " r-th 1/N of the sum. All-reduce leaves the whole sum everywhere, reduce leaves it"
                " on the root."
            ),
            key="which_reduce_scatter",
        ),
        MultipleChoice(
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
        ),
        Numeric(
            _(
                "All-gather of S = {size} (the output size, as nccl-tests counts it) on {n} ranks"
                " in a ring: how many bytes does each rank send?"
            ).format(size=size, n=n),
            ag["sent"][0],
            units="bytes",
            explanation=_(
                "Each rank holds S/N and must receive the other N-1 pieces; in the ring it forwards"
                " N-1 pieces of S/N, so (N-1)/N * S (nccl-tests doc/PERFORMANCE.md)."
            ),
            params={"N": n, "S": s},
            key="allgather_sent",
        ),
        Numeric(
            _(
                "All-to-all of S = {size} per rank on {n} ranks: how many bytes does each rank"
                " receive?"
            ).format(size=size, n=n),
            a2a["recv"][0],
            units="bytes",
            explanation=_(
                "Each rank keeps 1/N of its buffer (the part addressed to itself) and receives one"
                " piece of S/N from each of the N-1 others: (N-1)/N * S."
            ),
            params={"N": n, "S": s},
            key="alltoall_recv",
        ),
        Numeric(
            _(
                "nccl-tests measures algbw = {algbw} GB/s for an all-gather on {n} ranks. What"
                " busbw does it report?"
            ).format(algbw=f"{algbw:g}", n=n),
            algbw * bus_factor("all_gather", n),
            units="GB/s",
            explanation=_(
                "busbw = algbw * (N-1)/N for all-gather, reduce-scatter and all-to-all; 2(N-1)/N"
                " for all-reduce; 1 for broadcast and reduce (nccl-tests doc/PERFORMANCE.md)."
            ),
            params={"N": n, "algbw_gbps": algbw},
            key="allgather_busbw",
        ),
        MultipleChoice(
            _(
                "Gather of S bytes to a root on {n} ranks, each rank contributing S/{n}: which"
                " rank's link carries the most?"
            ).format(n=n),
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
        ),
        PredictThenRun(
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
            reveal=reveal,
            explanation=_(
                "The root keeps its own piece and receives S/N from each of the N-1 others; the"
                " trace counts every byte it received."
            ),
            truth=lambda trace: trace.recv_bytes()[0],
            params={"N": n_run, "S": s_run},
            key="predict_gather_root",
            config=f'run_collective({_ranks(n_run)}, "gather", {s_run})',
        ),
    ]
    return Quiz(_("Lesson 02: collectives"), questions, name="02_collectives", learner=learner)


register_bank("02_collectives", collectives_quiz)


# ------------------------------------------------------------------------------ 04_ring_tree_ps
def algorithms_quiz(
    seed: int | None = None,
    runner: Callable[[str, int, int], Trace] | None = None,
    learner: str | None = None,
) -> Quiz:
    """Lesson 04: bottlenecks (errata E5), latency terms, the model and NCCL-style choice (E9).

    ``runner(algo, world_size, nbytes) -> Trace`` runs an all-reduce algorithm; the default
    simulates it, the lesson passes :func:`edu_parallel.comm.compare.cluster_traffic_runner`."""
    rng, run = _rng_runner(seed, runner, simulated_runner())
    n = 8 if rng is None else rng.choice((8, 16, 32))
    d = 1 * MIB if rng is None else rng.choice((256 * KIB, 1 * MIB, 4 * MIB))
    big_n = 64 if rng is None else rng.choice((32, 64, 128))
    link = "ib-ndr-400" if rng is None else rng.choice(("ib-ndr-400", "nvlink4-h100", "pcie5-x16"))
    alpha_us = link_preset(link).alpha_s * 1e6
    n_run = 3 if rng is None else rng.choice((3, 5, 6))  # the lesson's table has 2, 4 and 8 ranks
    d_run = 12 * KIB
    tiny, huge = 1 * KIB, 1 << 30
    small_pick = choose_allreduce(tiny, big_n, link).algo
    large_pick = choose_allreduce(huge, big_n, link).algo
    options = ["ring", "tree", "double-tree"]

    def reveal(trace: Trace) -> str:
        sent, recv = trace.sent_bytes(), trace.recv_bytes()
        return "\n".join(
            [
                _("sent per rank: {sent}").format(sent=sent),
                _("received per rank: {recv}").format(recv=recv),
            ]
        )

    questions = [
        MultipleChoice(
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
        ),
        Numeric(
            _(
                "How many steps (latency terms) does the binary-tree all-reduce take on {n} ranks"
                " (reduce up, then broadcast down)?"
            ).format(n=n),
            len(build_plan("tree", n).steps),
            tolerance=0.0,
            units="steps",
            explanation=_(
                "Up the tree level by level, then down again: 2·floor(log2 N) steps, against the"
                " ring's 2(N-1). That is why trees win for small, latency-bound messages."
            ),
            params={"N": n},
            key="tree_steps",
        ),
        Numeric(
            _(
                "A single parameter server (co-located on rank 0) all-reduces D = {size} from {n}"
                " ranks: how many bytes does the server receive?"
            ).format(size=format_bytes(d), n=n),
            (n - 1) * d,
            units="bytes",
            explanation=_(
                "Every one of the other N-1 ranks pushes its whole buffer to the server: (N-1)·D,"
                " and it sends as much back. Sharding over k servers divides that by about k."
            ),
            params={"N": n, "D": d},
            key="ps_server_recv",
        ),
        Numeric(
            _(
                "Alpha-beta model, link {link} (α = {alpha} µs per message): what is the latency"
                " part 2(n-1)·α of a ring all-reduce on {n} ranks, in microseconds?"
            ).format(link=link, alpha=f"{alpha_us:g}", n=big_n),
            predict("ring", big_n, d, link).latency_s * 1e6,
            units="µs",
            explanation=_(
                "The ring takes 2(n-1) steps and every step pays α once (Thakur, Rabenseifner &"
                " Gropp 2005); the bandwidth part 2(n-1)/n·S/B does not depend on n much."
            ),
            params={"N": big_n, "alpha_us": alpha_us},
            key="ring_latency_us",
        ),
        MultipleChoice(
            _(
                "By the model, which algorithm should an all-reduce of 1 KiB on {n} ranks over"
                " {link} use?"
            ).format(n=big_n, link=link),
            options,
            options.index(small_pick),
            _(
                "Tiny messages are latency-bound: the α terms dominate, and a tree pays 2·log2 n of"
                " them against the ring's 2(n-1). NCCL's tuning model makes the same choice per"
                " size (errata E9)."
            ),
            params={"N": big_n, "S": tiny, "link": link},
            key="pick_small",
        ),
        MultipleChoice(
            _("And for 1 GiB on {n} ranks over {link}?").format(n=big_n, link=link),
            options,
            options.index(large_pick),
            _(
                "Large messages are bandwidth-bound: the ring moves 2(n-1)/n·S per rank and keeps"
                " every link busy, so it wins once the S/B terms dominate."
            ),
            params={"N": big_n, "S": huge, "link": link},
            key="pick_large",
        ),
        *nccl_questions(rng),
        PredictThenRun(
            _(
                "Predict how many bytes the busiest rank moves (max of sent and received) in a"
                " NAIVE all-reduce of {size} on {n} ranks, then run it."
            ).format(size=format_bytes(d_run), n=n_run),
            Numeric(
                _("Busiest rank's bytes"),
                (n_run - 1) * d_run,
                units="bytes",
                explanation=_("The root receives (N-1)·D and sends as much."),
            ),
            run=lambda: run("naive", n_run, d_run),
            reveal=reveal,
            explanation=_(
                "Everyone sends D to the root and gets D back; the root handles (N-1)·D each way."
            ),
            truth=lambda trace: max(max(trace.sent_bytes()), max(trace.recv_bytes())),
            params={"N": n_run, "D": d_run},
            key="predict_naive_busiest",
            config=f'run_allreduce({_ranks(n_run)}, {d_run}, algo="naive")',
        ),
    ]
    return Quiz(
        _("Lesson 04: ring, tree and parameter server"),
        questions,
        name="04_ring_tree_ps",
        learner=learner,
    )


register_bank("04_ring_tree_ps", algorithms_quiz)
