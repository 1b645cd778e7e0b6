"""Question bank of lesson 01 (the parallelism map): what each strategy splits, what travels, why
each exists, and a predict-then-run on what a TP rank holds.

The lesson teaches no formula, so neither does its quiz: its numbers are read from the lesson's run
(``runner(world_size) -> report`` runs the lesson's model under TP,
:func:`edu_parallel.strategy_map.report.map_runner`; the default evaluates
:func:`~edu_parallel.strategy_map.formulas.formula_param_bytes`, which the tests check against the
runs, shaped like a report). The questions that draw nothing are in ``strategy_map_why.py``; the
questions in bytes that left the lesson (``T*``, bytes per step) are in ``strategy_map_bytes.py``.
References: Shoeybi et al. 2019 (Megatron-LM); Lepikhin et al. 2020 (GShard).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...core.i18n import _
from ...strategy_map.formulas import MapConfig, formula_param_bytes
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..registry import QuestionSet, register_bank
from .common import pick, ranks
from .strategy_map_why import (
    NEEDS,
    q_memory_errata,
    q_what_splits,
    q_what_travels,
    q_which_strategy,
)

NAME = "01_parallelism_map"
MapRunner = Callable[[int], Any]
LESSON = MapConfig()  # the lesson's model: edu_parallel.strategy_map.strategies's defaults
RUN_RANKS = 2  # the predict-then-run's TP degree: the lesson's table shows 4


def formula_runner(world_size: int) -> Any:
    """A TP rank's parameter bytes for the lesson's model by the formula, shaped like a report."""
    held = formula_param_bytes("tp", world_size, layers=LESSON.layers, hidden=LESSON.hidden)
    tp = SimpleNamespace(per_rank=[{"param_bytes": held}] * world_size)
    return SimpleNamespace(runs={"tp": tp})


@dataclass(frozen=True)
class MapDraw:
    """Lesson 01's parameters, drawn in one go."""

    need: int
    """Which need the "which strategy" question names: an index of ``NEEDS``."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> MapDraw:
        return cls(pick(rng, 1, *range(len(NEEDS))))


def _reveal(report: Any) -> str:
    held = [row["param_bytes"] for row in report.runs["tp"].per_rank]
    return _("parameter bytes each TP rank holds, from the trace: {held}").format(held=held)


def q_predict_map_tp_params(d: MapDraw, run: MapRunner) -> PredictThenRun:
    """Predict, then run: the parameter bytes of one TP rank on 2 ranks."""
    n, c = RUN_RANKS, LESSON
    sizes = {"layers": c.layers, "hidden": c.hidden}
    whole, four = formula_param_bytes("dp", 1, **sizes), formula_param_bytes("tp", 4, **sizes)
    return PredictThenRun(
        _(
            "On 4 ranks each TP rank held {four:,} of the model's {whole:,} parameter bytes. On"
            " {n} ranks, how many parameter bytes does each TP rank hold? Predict, then run it."
        ).format(four=int(four), whole=int(whole), n=n),
        Numeric(
            _("Parameter bytes of one TP rank"),
            formula_param_bytes("tp", n, **sizes),
            tolerance=0.02,
            units="bytes",
            explanation=_(
                "W1, b1 and W2 are split in {n}; b2 stays whole on every rank: a little more"
                " than 1/{n} of the model."
            ).format(n=n),
        ),
        run=lambda: run(n),
        reveal=_reveal,
        explanation=_(
            "Each rank records every tensor it holds in its trace: a 1/N slice of W1, b1 and W2"
            " in each block, and the whole b2 (it is added after the partial outputs are summed)."
        ),
        truth=lambda report: report.runs["tp"].per_rank[0]["param_bytes"],
        params={"N": n, "layers": c.layers, "hidden": c.hidden},
        key="predict_map_tp_params",
        config=f"run_strategy_map({ranks(n)}, ['tp'])",
    )


MAP = QuestionSet(
    MapDraw.draw,
    (
        q_what_splits,
        q_what_travels,
        q_memory_errata,
        q_which_strategy,
        q_predict_map_tp_params,
    ),
    formula_runner,
    "runner(world_size)",
)


def map_quiz(
    seed: int | None = None, runner: MapRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 01: what DP, TP, PP, EP split and send, why each exists; the syllabus's table
    checked (U1, U7)."""
    questions = MAP.build(seed, runner)
    return Quiz(_("Lesson 01: the parallelism map"), questions, name=NAME, learner=learner)


register_bank(NAME, map_quiz, MAP)
