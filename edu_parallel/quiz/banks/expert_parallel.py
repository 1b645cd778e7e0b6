"""Question bank of lesson 09 (expert parallelism): numbers from the MoE formulas.

``runner(world_size, experts, top_k, capacity_factor, skew, tokens) -> report`` runs one MoE layer;
the report has ``dropped_tokens`` and ``traffic_matrix_bytes``. The lesson passes one that runs real
ranks (:func:`edu_parallel.expert_parallel.report.moe_runner`); without one the hot-expert case is
computed by :func:`formula_runner`, which ``tests/test_moe.py`` checks against routed tokens. The
questions on why are in ``expert_parallel_why.py``. References: GShard §2.2, Switch §2.2.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
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
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..registry import QuestionSet, register_bank
from .common import pick, ranks
from .expert_parallel_why import q_a2a_scales_with, q_counts_first, q_hot_column

NAME = "09_expert_parallel"
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


@dataclass(frozen=True)
class MoeDraw:
    """Lesson 09's parameters, drawn in one go."""

    t: int
    """Tokens per rank of the paper questions."""
    e: int
    """Experts of the capacity question."""
    k: int
    """Experts each token is routed to (top-k)."""
    c: float
    """Capacity factor of the paper questions."""
    n: int
    """Ranks of the dispatch-bytes questions."""
    h: int
    """Hidden size of a token row."""
    n_run: int
    """Ranks of the hot-expert questions (and the run)."""
    e_run: int
    """Experts of the hot-expert questions."""
    t_run: int
    """Tokens per rank of the hot-expert questions."""
    c_run: float
    """Capacity factor of the hot-expert questions."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> MoeDraw:
        t, e = pick(rng, 1024, 512, 1024, 4096), pick(rng, 64, 8, 16, 64)
        k, c = pick(rng, 2, 1, 2), pick(rng, 1.25, 1.0, 1.25, 2.0)
        n, h = pick(rng, 8, 4, 8, 16), pick(rng, 4096, 1024, 4096, 8192)
        n_run, e_run = pick(rng, 4, 2, 4), pick(rng, 8, 4, 8)
        t_run, c_run = pick(rng, 16, 8, 16), pick(rng, 1.25, 1.0, 1.25, 2.0)
        return cls(t, e, k, c, n, h, n_run, e_run, t_run, c_run)

    @property
    def e_pad(self) -> int:
        """Experts of the padded dispatch: powers of two, E/N experts per rank a whole number."""
        return max(self.e, self.n)

    @property
    def dropped(self) -> int:
        """Assignments dropped when every token picks expert 0."""
        cap = expert_capacity(self.t_run, self.e_run, 1, self.c_run)
        return all_to_one_dropped(self.n_run, self.t_run, cap)


def q_moe_capacity(d: MoeDraw, run: MoERunner) -> Numeric:
    """How many assignments one expert accepts from one rank."""
    return Numeric(
        _(
            "A GShard/Switch MoE layer routes each rank's T = {t} tokens top-{k} over E = {e}"
            " experts with capacity factor C = {c}. How many assignments does one expert accept"
            " from one rank?"
        ).format(t=d.t, k=d.k, e=d.e, c=f"{d.c:g}"),
        expert_capacity(d.t, d.e, d.k, d.c),
        tolerance=0,
        units="assignments",
        explanation=_(
            "capacity = ceil(C·T·k/E): the even share T·k/E with headroom C (GShard §2.2,"
            " Switch §2.2). Assignments beyond it are dropped before they travel; the token"
            " keeps its other experts."
        ),
        params={"T": d.t, "E": d.e, "k": d.k, "C": d.c},
        key="moe_capacity",
    )


def q_moe_balanced_sent(d: MoeDraw, run: MoERunner) -> Numeric:
    """Bytes one rank sends in a balanced dispatch all-to-all."""
    return Numeric(
        _(
            "N = {n} ranks, T = {t} tokens per rank, top-{k}, h = {h}, fp32 rows. If the router"
            " spreads every rank's assignments evenly over the ranks and drops nothing, how"
            " many bytes does one rank send over the wire in the dispatch all-to-all?"
        ).format(n=d.n, t=d.t, k=d.k, h=d.h),
        balanced_dispatch_bytes(d.t, d.k, d.h, d.n, ITEMSIZE),
        units="bytes",
        explanation=_(
            "Each rank has T·k rows of h·4 bytes to send; 1/N of them go to its own experts (a"
            " local copy), so (N-1)/N·T·k·h·4 cross the wire. The combine sends the same back;"
            " backward repeats both."
        ),
        params={"N": d.n, "T": d.t, "k": d.k, "h": d.h},
        key="moe_balanced_sent",
    )


def q_moe_padded_sent(d: MoeDraw, run: MoERunner) -> Numeric:
    """Bytes one rank sends in GShard's padded dispatch."""
    e_pad = d.e_pad
    cap_pad = expert_capacity(d.t, e_pad, d.k, d.c)
    return Numeric(
        _(
            "GShard-style padded dispatch: N = {n} ranks, E = {e_pad} experts, T = {t} tokens"
            " per rank, top-{k}, C = {c}, h = {h}, fp32. Every rank sends its whole (E,"
            " capacity, h) buffer, empty slots as zeros, with equal splits. How many bytes does"
            " one rank send over the wire per exchange?"
        ).format(n=d.n, e_pad=e_pad, t=d.t, k=d.k, c=f"{d.c:g}", h=d.h),
        padded_dispatch_bytes(e_pad, cap_pad, d.h, d.n, ITEMSIZE),
        units="bytes",
        explanation=_(
            "capacity = ceil(C·T·k/E) = {cap_pad} slots per expert; the buffer holds E·capacity"
            " rows of h·4 bytes whatever the routing, and the E/N experts' slots of its own"
            " rank stay local: (N-1)/N·E·capacity·h·4. Variable splits send only the kept rows:"
            " never more, equal when every slot is full (GShard §2.2, Switch §2.2)."
        ).format(cap_pad=cap_pad),
        params={"N": d.n, "E": e_pad, "T": d.t, "k": d.k, "C": d.c, "h": d.h},
        key="moe_padded_sent",
    )


def q_all_to_one_dropped(d: MoeDraw, run: MoERunner) -> Numeric:
    """Assignments dropped when the router sends every token to expert 0."""
    return Numeric(
        _(
            "Top-1 routing on N = {n_run} ranks, T = {t_run} tokens per rank, E = {e_run}"
            " experts, C = {c_run}. The router sends EVERY token to expert 0. How many"
            " token-expert assignments are dropped in total?"
        ).format(n_run=d.n_run, t_run=d.t_run, e_run=d.e_run, c_run=f"{d.c_run:g}"),
        d.dropped,
        tolerance=0,
        units="assignments",
        explanation=_(
            "Capacity per expert per source rank is ceil(C·T/E); each rank keeps that many for"
            " expert 0 and drops the rest: N·(T − capacity)."
        ),
        params={"N": d.n_run, "T": d.t_run, "E": d.e_run, "C": d.c_run},
        key="all_to_one_dropped",
    )


def _reveal(report: Any) -> str:
    return _(
        "dropped assignments counted by the run: {dropped}; dispatch matrix (bytes): {matrix}"
    ).format(dropped=report.dropped_tokens, matrix=report.traffic_matrix_bytes)


def q_predict_hot_dropped(d: MoeDraw, run: MoERunner) -> PredictThenRun:
    """Predict, then run: the assignments the lesson's layer drops with a hot expert."""
    n_run, e_run, t_run, c_run = d.n_run, d.e_run, d.t_run, d.c_run
    return PredictThenRun(
        _(
            "Predict, then run: the lesson's layer with top-1, N = {n_run} ranks, E = {e_run},"
            " T = {t_run} tokens per rank, C = {c_run} and a router skew of {skew} toward"
            " expert 0. How many assignments are dropped?"
        ).format(n_run=n_run, e_run=e_run, t_run=t_run, c_run=f"{c_run:g}", skew=f"{HOT_SKEW:g}"),
        Numeric(
            _("Dropped assignments"),
            d.dropped,
            tolerance=0,
            units="assignments",
            explanation=_(
                "With that skew every token's first choice is expert 0: N·(T − ceil(C·T/E))."
            ),
        ),
        run=lambda: run(n_run, e_run, 1, c_run, HOT_SKEW, t_run),
        reveal=_reveal,
        explanation=_(
            "The run routes real tokens; with that skew every token picks expert 0, whose"
            " rank's column of the traffic matrix is capped at capacity rows from each sender:"
            " the rest is dropped."
        ),
        truth=lambda report: report.dropped_tokens,
        params={"N": n_run, "T": t_run, "E": e_run, "C": c_run},
        key="predict_hot_dropped",
        config=(
            f"run_moe({ranks(n_run)}, experts={e_run}, top_k=1, capacity_factor={c_run:g},"
            f" skew={HOT_SKEW:g}, tokens={t_run})"
        ),
    )


MOE = QuestionSet(
    MoeDraw.draw,
    (
        q_moe_capacity,
        q_moe_balanced_sent,
        q_moe_padded_sent,
        q_a2a_scales_with,
        q_hot_column,
        q_counts_first,
        q_all_to_one_dropped,
        q_predict_hot_dropped,
    ),
    formula_runner,
    "runner(world_size, experts, top_k, capacity_factor, skew, tokens)",
)


def moe_quiz(
    seed: int | None = None, runner: MoERunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 09: capacity, all-to-all volume, the hot expert, drops (U12, U1, U7)."""
    questions = MOE.build(seed, runner)
    return Quiz(_("Lesson 09: expert parallelism (MoE)"), questions, name=NAME, learner=learner)


register_bank(NAME, moe_quiz, MOE)
