"""Question bank of lesson 08 (expert parallelism): numbers from the MoE formulas.

``runner(world_size, experts, top_k, capacity_factor, skew, tokens) -> report`` runs one MoE layer;
the report has ``dropped_tokens`` and ``traffic_matrix_bytes``. The lesson passes one that runs real
ranks (:func:`edu_parallel.expert_parallel.report.moe_runner`); without one the hot-expert case is
computed by :func:`formula_runner`, which ``tests/test_moe.py`` checks against routed tokens.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ...core.errors import bad_value
from ...core.i18n import _
from ...expert_parallel.formulas import (
    DEFAULTS,
    ITEMSIZE,
    all_to_one_dropped,
    balanced_dispatch_bytes,
    expert_capacity,
    padded_dispatch_bytes,
)
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import register_bank

MoERunner = Callable[[int, int, int, float, float, int], Any]
HOT_SKEW = 20.0  # router bias toward expert 0: every token's first choice becomes expert 0


def formula_runner(
    world_size: int, experts: int, top_k: int, capacity_factor: float, skew: float, tokens: int
) -> Any:
    """The hot-expert run by formula, shaped like a run's report: top-1 with a skew that sends every
    token to expert 0 (on rank 0), so each rank keeps ``capacity`` rows for rank 0 and drops the
    rest (rows of the lesson's hidden size, fp32)."""
    if top_k != 1 or skew < HOT_SKEW:
        raise bad_value(
            "skew",
            skew,
            _(">= {skew} with top_k=1, the hot-expert case").format(skew=f"{HOT_SKEW:g}"),
        )
    cap = expert_capacity(tokens, experts, 1, capacity_factor)
    row = min(cap, tokens) * DEFAULTS["hidden"] * ITEMSIZE
    matrix = [[row if d == 0 else 0 for d in range(world_size)] for _ in range(world_size)]
    dropped = all_to_one_dropped(world_size, tokens, cap)
    return SimpleNamespace(dropped_tokens=dropped, traffic_matrix_bytes=matrix)


def moe_quiz(
    seed: int | None = None, runner: MoERunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 08: capacity, all-to-all volume, the hot expert, drops (U12, U1, U7)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_value("seed", seed, _("an int or None"))
    if runner is not None and not callable(runner):
        raise bad_value(
            "runner",
            runner,
            _("a callable {signature}, or None").format(
                signature="runner(world_size, experts, top_k, capacity_factor, skew, tokens)"
            ),
        )
    run = runner or formula_runner
    rng = random.Random(seed) if seed is not None else None

    def pick(default: Any, *options: Any) -> Any:
        return default if rng is None else rng.choice(options)

    t, e, k, c = (
        pick(1024, 512, 1024, 4096),
        pick(64, 8, 16, 64),
        pick(2, 1, 2),
        pick(1.25, 1.0, 1.25, 2.0),
    )
    n, h = pick(8, 4, 8, 16), pick(4096, 1024, 4096, 8192)
    n_run, e_run, t_run, c_run = (
        pick(4, 2, 4),
        pick(8, 4, 8),
        pick(16, 8, 16),
        pick(1.25, 1.0, 1.25, 2.0),
    )
    cap_run = expert_capacity(t_run, e_run, 1, c_run)
    e_pad = max(e, n)  # powers of two: E/N experts per rank, a whole number
    cap_pad = expert_capacity(t, e_pad, k, c)

    def reveal(report: Any) -> str:
        return _(
            "dropped assignments counted by the run: {dropped}; dispatch matrix (bytes): {matrix}"
        ).format(dropped=report.dropped_tokens, matrix=report.traffic_matrix_bytes)

    questions = [
        Numeric(
            _(
                "A GShard/Switch MoE layer routes each rank's T = {t} tokens top-{k} over E = {e}"
                " experts with capacity factor C = {c}. How many assignments does one expert accept"
                " from one rank?"
            ).format(t=t, k=k, e=e, c=f"{c:g}"),
            expert_capacity(t, e, k, c),
            tolerance=0,
            units="assignments",
            explanation=_(
                "capacity = ceil(C·T·k/E): the even share T·k/E with headroom C (GShard §2.2,"
                " Switch §2.2). Assignments beyond it are dropped before they travel; the token"
                " keeps its other experts."
            ),
            params={"T": t, "E": e, "k": k, "C": c},
            key="moe_capacity",
        ),
        Numeric(
            _(
                "N = {n} ranks, T = {t} tokens per rank, top-{k}, h = {h}, fp32 rows. If the router"
                " spreads every rank's assignments evenly over the ranks and drops nothing, how"
                " many bytes does one rank send over the wire in the dispatch all-to-all?"
            ).format(n=n, t=t, k=k, h=h),
            balanced_dispatch_bytes(t, k, h, n, ITEMSIZE),
            units="bytes",
            explanation=_(
                "Each rank has T·k rows of h·4 bytes to send; 1/N of them go to its own experts (a"
                " local copy), so (N-1)/N·T·k·h·4 cross the wire. The combine sends the same back;"
                " backward repeats both."
            ),
            params={"N": n, "T": t, "k": k, "h": h},
            key="moe_balanced_sent",
        ),
        Numeric(
            _(
                "GShard-style padded dispatch: N = {n} ranks, E = {e_pad} experts, T = {t} tokens"
                " per rank, top-{k}, C = {c}, h = {h}, fp32. Every rank sends its whole (E,"
                " capacity, h) buffer, empty slots as zeros, with equal splits. How many bytes does"
                " one rank send over the wire per exchange?"
            ).format(n=n, e_pad=e_pad, t=t, k=k, c=f"{c:g}", h=h),
            padded_dispatch_bytes(e_pad, cap_pad, h, n, ITEMSIZE),
            units="bytes",
            explanation=_(
                "capacity = ceil(C·T·k/E) = {cap_pad} slots per expert; the buffer holds E·capacity"
                " rows of h·4 bytes whatever the routing, and the E/N experts' slots of its own"
                " rank stay local: (N-1)/N·E·capacity·h·4. Variable splits send only the kept rows:"
                " never more, equal when every slot is full (GShard §2.2, Switch §2.2)."
            ).format(cap_pad=cap_pad),
            params={"N": n, "E": e_pad, "T": t, "k": k, "C": c, "h": h},
            key="moe_padded_sent",
        ),
        MultipleChoice(
            _(
                "The outline says expert parallelism 'communicates a lot'. What does the all-to-all"
                " volume of one MoE layer grow with?"
            ),
            [
                _("The activations: tokens × k × hidden size, whatever the number of experts"),
                _("The expert parameters, like the data-parallel all-reduce of the gradients"),
                _("The number of experts E: each expert adds one message of the whole batch"),
                _("Nothing much: tokens stay on their rank and only the router weights move"),
            ],
            0,
            _(
                "Tokens travel, weights do not: each exchange moves at most T·k rows of h values"
                " per rank (fewer with drops). Adding experts adds parameters, not traffic; the"
                " lesson measures the same bytes for E = 4 and 16."
            ),
            key="a2a_scales_with",
        ),
        MultipleChoice(
            _(
                "A skewed router sends most tokens to expert 0 (on rank 0), and the capacity factor"
                " is large enough that nothing is dropped. What happens to the dispatch traffic"
                " matrix (row = from, column = to)?"
            ),
            [
                _("Column 0 gets hot: every rank sends most of its rows to rank 0"),
                _("Row 0 gets hot: rank 0 sends most of the dispatch traffic to the others"),
                _("Nothing changes: an all-to-all moves the same bytes between every pair"),
                _("The diagonal gets hot: the tokens stay on the rank that holds them"),
            ],
            0,
            _(
                "Rows are senders, columns receivers: all ranks send to the hot expert's rank,"
                " whose link and compute become the bottleneck. With a small capacity factor the"
                " column is capped instead and tokens are dropped."
            ),
            key="hot_column",
        ),
        MultipleChoice(
            _(
                "Why does the layer run a small all_to_all_single of counts before the token"
                " all-to-all?"
            ),
            [
                _("Each receiver must know how many rows arrive from each rank to size its buffer"),
                _("To synchronise the ranks' clocks, so that the trace's timings line up"),
                _("To send each rank's router weights to the ranks that hold its experts"),
                _("It is not needed: all_to_all_single infers the sizes from the tensors it gets"),
            ],
            0,
            _(
                "all_to_all_single with variable splits needs input and output split sizes on every"
                " rank; the sender knows its own, the receiver learns them from the counts exchange"
                " (E integers per rank). Static-shape implementations (GShard on TPU) skip it by"
                " padding every expert buffer to the capacity."
            ),
            key="counts_first",
        ),
        Numeric(
            _(
                "Top-1 routing on N = {n_run} ranks, T = {t_run} tokens per rank, E = {e_run}"
                " experts, C = {c_run}. The router sends EVERY token to expert 0. How many"
                " token-expert assignments are dropped in total?"
            ).format(n_run=n_run, t_run=t_run, e_run=e_run, c_run=f"{c_run:g}"),
            all_to_one_dropped(n_run, t_run, cap_run),
            tolerance=0,
            units="assignments",
            explanation=_(
                "Capacity per expert per source rank is ceil(C·T/E); each rank keeps that many for"
                " expert 0 and drops the rest: N·(T − capacity)."
            ),
            params={"N": n_run, "T": t_run, "E": e_run, "C": c_run},
            key="all_to_one_dropped",
        ),
        PredictThenRun(
            _(
                "Predict, then run: the lesson's layer with top-1, N = {n_run} ranks, E = {e_run},"
                " T = {t_run} tokens per rank, C = {c_run} and a router skew of {skew} toward"
                " expert 0. How many assignments are dropped?"
            ).format(
                n_run=n_run, e_run=e_run, t_run=t_run, c_run=f"{c_run:g}", skew=f"{HOT_SKEW:g}"
            ),
            Numeric(
                _("Dropped assignments"),
                all_to_one_dropped(n_run, t_run, cap_run),
                tolerance=0,
                units="assignments",
                explanation=_(
                    "With that skew every token's first choice is expert 0: N·(T − ceil(C·T/E))."
                ),
            ),
            run=lambda: run(n_run, e_run, 1, c_run, HOT_SKEW, t_run),
            reveal=reveal,
            explanation=_(
                "The run routes real tokens; with that skew every token picks expert 0, whose"
                " rank's column of the traffic matrix is capped at capacity rows from each sender:"
                " the rest is dropped."
            ),
            truth=lambda report: report.dropped_tokens,
            params={"N": n_run, "T": t_run, "E": e_run, "C": c_run},
            key="predict_hot_dropped",
            config=(
                f"run_moe({'cluster' if n_run == 4 else f'Cluster({n_run})'}, experts={e_run},"
                f" top_k=1, capacity_factor={c_run:g}, skew={HOT_SKEW:g}, tokens={t_run})"
            ),
        ),
    ]
    return Quiz(
        _("Lesson 08: expert parallelism (MoE)"),
        questions,
        name="08_expert_parallel",
        learner=learner,
    )


register_bank("08_expert_parallel", moe_quiz)
