"""Question banks of the lessons, and the :data:`BANKS` registry.

A bank is a function ``bank(seed=None, runner=None, learner=None) -> Quiz``. With ``seed=None``
it uses fixed teaching defaults; with an int it draws its parameters (``N`` ranks, ``D``
bytes...) from ``random.Random(seed)``. ``learner`` only orders the options of the
multiple-choice questions (see ``shuffle.py``): None is this learner's own seed. Every numeric
answer is computed by package functions from those parameters, which each question keeps in
``params`` so a test can recompute them.

``runner(world_size, nbytes) -> Trace`` runs a ring all-reduce of ``nbytes`` bytes on
``world_size`` ranks; the default, :func:`simulation_runner`, simulates it in-process and a
lesson passes one that runs the real cluster. Later lessons add their banks with
:func:`register_bank`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ..core.errors import bad_value
from ..core.i18n import _
from ..core.metrics import bus_factor
from ..core.trace import Trace
from ..core.units import DTYPES, KIB, MIB, format_bytes
from ..models.simulation import simulate
from ..plans.naive import naive_sent_bytes_formula
from ..plans.ring import ring_allreduce_plan, ring_sent_bytes_formula
from .container import Quiz
from .predict import PredictThenRun
from .questions import MultipleChoice, Numeric

Runner = Callable[[int, int], Trace]
Bank = Callable[..., Quiz]

SIZES = (64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB)
BUSBW_REF = "nccl-tests doc/PERFORMANCE.md"


def simulation_runner(world_size: int, nbytes: int) -> Trace:
    """Run a ring all-reduce in-process (no worker processes) and return its trace."""
    return simulate(ring_allreduce_plan(world_size), nbytes)[0]


def check_bank_args(
    seed: Any, runner: Any, signature: str = "runner(world_size, nbytes) -> Trace"
) -> random.Random | None:
    """A bank's two arguments checked: ``seed`` an int or None (None: the teaching defaults),
    ``runner`` None or a callable of ``signature``. Returns the generator the bank draws from."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_value("seed", seed, "an int or None")
    if runner is not None and not callable(runner):
        raise bad_value("runner", runner, f"a callable {signature}, or None")
    return random.Random(seed) if seed is not None else None


def _check_args(seed: Any, runner: Any) -> tuple[random.Random | None, Runner]:
    return check_bank_args(seed, runner), (runner or simulation_runner)


def _run_size(rng: random.Random | None, n: int) -> int:
    """A run size that splits into ``n`` equal float32 chunks (16 KiB per rank by default)."""
    return n * DTYPES["float32"] * (4096 if rng is None else rng.choice((256, 1024, 4096)))


def _config(n: int, nbytes: int, lesson_n: int = 4) -> str:
    """The run as the lesson would write it: its 4-rank ``cluster``, or a ``Cluster`` of ``n``."""
    ranks = "cluster" if n == lesson_n else f"Cluster({n})"
    return f'run_allreduce({ranks}, {nbytes}, "float32")'


# ------------------------------------------------------------------------------ 00_tour
def tour_quiz(
    seed: int | None = None, runner: Runner | None = None, learner: str | None = None
) -> Quiz:
    """Four short questions on the tour: trace events, ranks, bytes, and one predict-then-run."""
    rng, run_ring = _check_args(seed, runner)
    n = 4 if rng is None else rng.randint(2, 4)
    d = 64 * KIB if rng is None else rng.choice((4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB))
    n_run = 3 if rng is None else rng.randint(2, 3)  # the lesson runs the ring on 4 ranks
    d_run = _run_size(rng, n_run)
    item = DTYPES["float32"]
    plan = ring_allreduce_plan(n_run)
    sends_rank0 = sum(1 for step in plan.steps for t in step.transfers if t.src == 0)

    def reveal(trace: Trace) -> str:
        sends = trace.select("send", rank=0)
        shown = "\n".join(e.line() for e in sends[:6])
        more = ""
        if len(sends) > 6:
            more = "\n" + _("... ({count} more)").format(count=len(sends) - 6)
        head = _("Rank 0 recorded {count} send events:").format(count=len(sends))
        return f"{head}\n{shown}{more}"

    return Quiz(
        _("Tour: what the engine records"),
        [
            MultipleChoice(
                _("What is one event in a trace?"),
                [
                    _(
                        "One action of one rank (a send, a recv, a compute) with its bytes and"
                        " times"
                    ),
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
            ),
            MultipleChoice(
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
            ),
            Numeric(
                _("Each rank's buffer is {size} of float32. How many numbers is that?").format(
                    size=format_bytes(d)
                ),
                d / item,
                tolerance=0.0,
                units="elements",
                explanation=_(
                    "A float32 takes {item} bytes, so D bytes hold D/{item} numbers; the engine"
                    " sizes buffers in bytes, as nccl-tests does."
                ).format(item=item),
                params={"D": d, "itemsize": item},
                key="elements",
            ),
            PredictThenRun(
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
                run=lambda: run_ring(n_run, d_run),
                reveal=reveal,
                explanation=_(
                    "In the ring every rank sends one chunk to its right neighbour at every step,"
                    " and there are N-1 steps per phase, so 2(N-1) sends in all."
                ),
                truth=lambda trace: len(trace.select("send", rank=0)),
                params={"N": n_run, "D": d_run},
                key="sends_rank0",
                config=_config(n_run, d_run),
            ),
        ],
        name="00_tour",
        learner=learner,
    )


# ------------------------------------------------------------------------------ 03_ring_allreduce
def ring_quiz(
    seed: int | None = None, runner: Runner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 03: bytes per phase and in all, errata E1, busbw, steps, naive vs ring, and a run."""
    rng, run_ring = _check_args(seed, runner)
    if rng is None:
        n, d, algbw, n_run = 4, 1 * MIB, 100.0, 5  # the lesson runs 2, 3 and 4 ranks
    else:
        n, d = rng.randint(3, 8), rng.choice(SIZES)
        algbw, n_run = rng.choice((12.5, 25.0, 50.0, 100.0, 200.0)), rng.randint(5, 6)
    d_run = _run_size(rng, n_run)
    nd = {"N": n, "D": d}
    ring = ring_sent_bytes_formula(n, d)
    naive = naive_sent_bytes_formula(n, d)
    factor = bus_factor("all_reduce", n)
    size = format_bytes(d)

    def reveal(trace: Trace) -> str:
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

    questions = [
        Numeric(
            _(
                "Ring all-reduce of D = {size} on N = {n} ranks: how many bytes does each rank"
                " SEND in the reduce-scatter phase?"
            ).format(size=size, n=n),
            ring["reduce-scatter"],
            units="bytes",
            explanation=_(
                "The buffer is cut into N chunks and each of the N-1 steps sends one chunk of D/N"
                " bytes, so (N-1)/N * D per phase (Patarasuk & Yuan 2009)."
            ),
            params=dict(nd),
            key="rs_sent",
        ),
        Numeric(
            _(
                "Same all-reduce (D = {size}, N = {n}): how many bytes does each rank send in all,"
                " both phases together?"
            ).format(size=size, n=n),
            ring["total"],
            units="bytes",
            explanation=_(
                "Reduce-scatter and all-gather each send (N-1)/N * D, so 2(N-1)/N * D in all: less"
                " than 2D however many ranks there are."
            ),
            params=dict(nd),
            key="total_sent",
        ),
        MultipleChoice(
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
        ),
        Numeric(
            _(
                "nccl-tests measures algbw = {algbw} GB/s for an all-reduce on N = {n} ranks."
                " What busbw does it report?"
            ).format(algbw=f"{algbw:g}", n=n),
            algbw * factor,
            units="GB/s",
            explanation=_(
                "busbw = algbw * 2(N-1)/N for all-reduce ({ref}): the rate each rank's link really"
                " sustains, comparable with the hardware's peak bandwidth."
            ).format(ref=BUSBW_REF),
            params={"N": n, "algbw_gbps": algbw},
            key="busbw",
        ),
        Numeric(
            _("How many steps does the ring all-reduce take on N = {n} ranks?").format(n=n),
            len(ring_allreduce_plan(n).steps),
            tolerance=0.0,
            units="steps",
            explanation=_(
                "N-1 steps of reduce-scatter then N-1 of all-gather: 2(N-1) steps, each paying one"
                " message latency, which is why rings are slow for tiny buffers."
            ),
            params={"N": n},
            key="steps",
        ),
        Numeric(
            _(
                "Naive all-reduce (everyone sends to root 0, root sends the sum back), D = {size},"
                " N = {n}: how many bytes does the root send?"
            ).format(size=size, n=n),
            naive[0],
            units="bytes",
            explanation=_(
                "The root sends the sum to each of the N-1 others, (N-1) * D bytes, and receives as"
                " much; every other rank sends and receives only D. The root's link is the"
                " bottleneck and its load grows with N."
            ),
            params=dict(nd),
            key="naive_root_sent",
        ),
        Numeric(
            _(
                "With N = {n}: how many times more bytes does the naive root send than each rank"
                " of the ring all-reduce sends?"
            ).format(n=n),
            naive[0] / ring["total"],
            units="times",
            explanation=_(
                "(N-1) * D over 2(N-1)/N * D is N/2: the naive root's load grows with N while every"
                " ring rank stays below 2D."
            ),
            params=dict(nd),
            key="naive_vs_ring",
        ),
        MultipleChoice(
            _("Which statements hold for the ring all-reduce on N = {n} ranks? Choose all.").format(
                n=n
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
            params={"N": n},
            key="ring_facts",
        ),
        PredictThenRun(
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
            run=lambda: run_ring(n_run, d_run),
            reveal=reveal,
            explanation=_(
                "Rank 0 forwards N-1 chunks of D/N bytes around the ring in the all-gather phase,"
                " exactly as many as in reduce-scatter: (N-1)/N * D."
            ),
            truth=lambda trace: trace.sent_bytes(per_phase=True)["all-gather"][0],
            params={"N": n_run, "D": d_run},
            key="predict_allgather_rank0",
            config=_config(n_run, d_run),
        ),
    ]
    return Quiz(
        _("Lesson 03: ring all-reduce"), questions, name="03_ring_allreduce", learner=learner
    )


# ------------------------------------------------------------------------------ registry
BANKS: dict[str, Bank] = {"00_tour": tour_quiz, "03_ring_allreduce": ring_quiz}


def register_bank(name: str, bank: Bank) -> Bank:
    """Add (or replace) a lesson's bank; ``bank(seed=None, runner=None, learner=None)`` must
    return a Quiz."""
    if not isinstance(name, str) or not name.strip():
        raise bad_value("name", name, "a non-empty lesson name such as '04_tree'")
    if not callable(bank):
        raise bad_value(
            "bank", bank, "a callable bank(seed=None, runner=None, learner=None) -> Quiz"
        )
    BANKS[name] = bank
    return bank


def get_quiz(
    name: str, seed: int | None = None, runner: Runner | None = None, learner: str | None = None
) -> Quiz:
    """Build the quiz of lesson ``name`` from :data:`BANKS`."""
    if name not in BANKS:
        raise bad_value("name", name, "one of " + ", ".join(repr(k) for k in BANKS))
    return BANKS[name](seed=seed, runner=runner, learner=learner)
