"""Question banks of lessons 02 (collectives) and 04 (ring, tree and parameter server).

Same contract as :mod:`edu_parallel.quiz.banks`: ``bank(seed=None, runner=None) -> Quiz``; every
numeric answer is computed by package functions from the drawn ``params``. For lesson 02 a runner
is ``runner(collective, world_size, nbytes) -> Trace``; the default simulates the collective's plan,
and the lesson passes :func:`edu_parallel.collective_run.collective_runner` to run real ranks.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ..collectives import COLLECTIVE_PLANS, volume_formula
from ..errors import bad_value
from ..metrics import bus_factor
from ..simulate import simulate
from ..trace import Trace
from ..units import format_bytes
from .banks import register_bank
from .container import Quiz
from .core import MultipleChoice, Numeric, PredictThenRun

CollectiveRunner = Callable[[str, int, int], Trace]
KIB, MIB = 1024, 1024**2


def simulated_collective(collective: str, world_size: int, nbytes: int) -> Trace:
    """The collective's plan run in-process on virtual ranks."""
    return simulate(COLLECTIVE_PLANS[collective](world_size), nbytes, pattern="random")[0]


def _rng_runner(
    seed: int | None, runner: object, default: Callable
) -> tuple[random.Random | None, Callable]:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_value("seed", seed, "an int or None")
    if runner is not None and not callable(runner):
        raise bad_value("runner", runner, "a callable, or None for the simulation")
    return (random.Random(seed) if seed is not None else None), (runner or default)


def collectives_quiz(seed: int | None = None, runner: CollectiveRunner | None = None) -> Quiz:
    """Lesson 02: what each primitive leaves where, its volume, busbw, and a gather run."""
    rng, run = _rng_runner(seed, runner, simulated_collective)
    n = 4 if rng is None else rng.randint(3, 8)
    s = 1 * MIB if rng is None else rng.choice((256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB))
    algbw = 100.0 if rng is None else rng.choice((20.0, 50.0, 100.0, 200.0))
    n_run = 4 if rng is None else rng.randint(2, 4)
    s_run = n_run * 4 * (1024 if rng is None else rng.choice((256, 1024, 4096)))
    size = format_bytes(s)
    ag = volume_formula("all_gather", n, s)
    a2a = volume_formula("all_to_all", n, s)

    def reveal(trace: Trace) -> str:
        recv = trace.recv_bytes()
        return f"bytes received by ranks 0..{trace.world_size - 1}: {recv} (the root is rank 0)"

    questions = [
        MultipleChoice(
            f"On {n} ranks, which collective leaves rank r holding chunk r of the sum, and nothing else?",
            ["all-reduce", "reduce-scatter", "all-gather", "reduce"],
            1,
            "Reduce-scatter sums the ranks' buffers and scatters the result: rank r keeps the r-th "
            "1/N of the sum. All-reduce leaves the whole sum everywhere, reduce leaves it on the root.",
            key="which_reduce_scatter",
        ),
        MultipleChoice(
            "Which two collectives, one after the other, make an all-reduce?",
            [
                "reduce-scatter then all-gather",
                "gather then scatter",
                "all-to-all then all-gather",
                "broadcast then reduce",
            ],  # fmt: skip
            0,
            "The ring all-reduce is a reduce-scatter (each rank finishes 1/N of the sum) followed by "
            "an all-gather (everyone collects the finished parts); lesson 03 counts its bytes.",
            key="allreduce_parts",
        ),
        Numeric(
            f"All-gather of S = {size} (the output size, as nccl-tests counts it) on {n} ranks in a "
            "ring: how many bytes does each rank send?",
            ag["sent"][0],
            units="bytes",
            explanation="Each rank holds S/N and must receive the other N-1 pieces; in the ring it "
            "forwards N-1 pieces of S/N, so (N-1)/N * S (nccl-tests doc/PERFORMANCE.md).",
            params={"N": n, "S": s},
            key="allgather_sent",
        ),
        Numeric(
            f"All-to-all of S = {size} per rank on {n} ranks: how many bytes does each rank receive?",
            a2a["recv"][0],
            units="bytes",
            explanation="Each rank keeps 1/N of its buffer (the part addressed to itself) and receives "
            "one piece of S/N from each of the N-1 others: (N-1)/N * S.",
            params={"N": n, "S": s},
            key="alltoall_recv",
        ),
        Numeric(
            f"nccl-tests measures algbw = {algbw:g} GB/s for an all-gather on {n} ranks. What busbw "
            "does it report?",
            algbw * bus_factor("all_gather", n),
            units="GB/s",
            explanation="busbw = algbw * (N-1)/N for all-gather, reduce-scatter and all-to-all; "
            "2(N-1)/N for all-reduce; 1 for broadcast and reduce (nccl-tests doc/PERFORMANCE.md).",
            params={"N": n, "algbw_gbps": algbw},
            key="allgather_busbw",
        ),
        MultipleChoice(
            f"Gather of S bytes to a root on {n} ranks, each rank contributing S/{n}: which rank's "
            "link carries the most?",
            [
                "the root: it receives (N-1)/N * S while each other rank sends only S/N",
                "every rank the same",
                "the rank after the root",
                "the last rank",
            ],  # fmt: skip
            0,
            "Gather and scatter are direct: every piece crosses the root's link, so the root's load "
            "grows with N while the others send or receive one piece.",
            key="gather_root",
        ),
        PredictThenRun(
            f"Predict how many bytes the root (rank 0) receives in a gather of {format_bytes(s_run)} "
            f"on {n_run} ranks, then run it.",
            Numeric(
                "Bytes the root receives",
                volume_formula("gather", n_run, s_run)["recv"][0],
                units="bytes",
                explanation="(N-1)/N * S: one piece of S/N from every other rank.",
            ),
            run=lambda: run("gather", n_run, s_run),
            reveal=reveal,
            explanation="The root keeps its own piece and receives S/N from each of the N-1 others; "
            "the trace counts every byte it received.",
            truth=lambda trace: trace.recv_bytes()[0],
            params={"N": n_run, "S": s_run},
            key="predict_gather_root",
        ),
    ]
    return Quiz("Lesson 02: collectives", questions)


register_bank("02_collectives", collectives_quiz)
