"""Question bank of lesson 10 (pipeline parallelism): bubble conventions, memory, errata E2/E3,
ZB-H1's stash and torch's action names (F, I, W, B).

``runner(schedule, P, M) -> result`` runs a schedule; ``result`` has ``peak_activations_per_stage``
and ``bubble_fraction_retimed``. The default times the plan in-process
(:func:`edu_parallel.pipeline_parallel.timing.time_schedule`); the lesson passes one that runs real
ranks (:func:`edu_parallel.pipeline_parallel.report.run_pipeline`). The questions that draw
nothing are in ``pipeline_why.py``. References: Huang et al. 2019
(GPipe), Narayanan et al. 2021 (Megatron-LM), Qi et al. 2023 (Zero Bubble).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...core.i18n import _
from ...pipeline_parallel.builders import build_schedule
from ...pipeline_parallel.timing import (
    Timeline,
    gpipe_bubble,
    interleaved_bubble,
    megatron_bubble,
    time_schedule,
)
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from .common import pick
from .pipeline_why import q_errata_e2, q_torch_i_name

NAME = "10_pipeline"
PipelineRunner = Callable[[str, int, int], Any]
P_RUN = 4  # stages of the 1F1B run


def simulated_pipeline(schedule: str, num_ranks: int, microbatches: int) -> Any:
    """The schedule timed in-process with t_b = 2 t_f: peaks and bubble, no processes."""
    timeline = time_schedule(build_schedule(schedule, num_ranks, microbatches), 1.0, 2.0)
    return SimpleNamespace(
        peak_activations_per_stage=timeline.peak_activations_per_stage(),
        bubble_fraction_retimed=timeline.bubble_fraction(),
    )


@dataclass(frozen=True)
class PipelineDraw:
    """Lesson 10's parameters, drawn in one go."""

    p: int
    """Pipeline stages of the paper questions."""
    m: int
    """Microbatches of the paper questions."""
    v: int
    """Model chunks per rank of the interleaved question."""
    m_v: int
    """Microbatches of the interleaved question (a multiple of ``p``)."""
    m_run: int
    """Microbatches of the 1F1B run (on :data:`P_RUN` stages)."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> PipelineDraw:
        p, m = pick(rng, 4, 2, 4, 8), pick(rng, 8, 4, 8, 16, 32)
        v = pick(rng, 2, 2, 4)
        m_v = p * pick(rng, 2, 1, 2, 4)  # interleaving needs M a multiple of P
        return cls(p, m, v, m_v, pick(rng, 8, 4, 8))


def q_gpipe_share(d: PipelineDraw, run: PipelineRunner) -> Numeric:
    """GPipe's bubble as a share of the total time."""
    return Numeric(
        _(
            "GPipe with P = {p} stages and M = {m} microbatches, equal stage times: what share"
            " of the total time is bubble?"
        ).format(p=d.p, m=d.m),
        gpipe_bubble(d.p, d.m),
        units="",
        explanation=_(
            "Each rank idles (P-1) stage-times while the pipeline fills and drains, out of "
            "(M+P-1) in all: (P-1)/(M+P-1), GPipe's convention (Huang et al. 2019 §2.3)."
        ),
        params={"P": d.p, "M": d.m},
        key="gpipe_share",
    )


def q_megatron_ratio(d: PipelineDraw, run: PipelineRunner) -> Numeric:
    """The same bubble relative to the ideal time, Megatron-LM's convention."""
    return Numeric(
        _(
            "Same pipeline (P = {p}, M = {m}): Megatron-LM writes the bubble relative to the"
            " ideal time M stage-times. What is that ratio?"
        ).format(p=d.p, m=d.m),
        megatron_bubble(d.p, d.m),
        units="",
        explanation=_(
            "(P-1)/M is the same idle time divided by the ideal time instead of the total time"
            " (Narayanan et al. 2021 §2.2.1); both conventions describe one bubble (errata E3)."
        ),
        params={"P": d.p, "M": d.m},
        key="megatron_ratio",
    )


def q_gpipe_peak(d: PipelineDraw, run: PipelineRunner) -> Numeric:
    """The microbatches' activations GPipe's stage 0 holds at its peak."""
    return Numeric(
        _(
            "GPipe, P = {p}, M = {m}: how many microbatches' activations does stage 0 hold at"
            " its peak?"
        ).format(p=d.p, m=d.m),
        d.m,
        tolerance=0.0,
        units="microbatches",
        explanation=_(
            "GPipe runs every forward before any backward, so every stage stashes all M."
        ),
        params={"P": d.p, "M": d.m},
        key="gpipe_peak",
    )


def q_interleaved_ratio(d: PipelineDraw, run: PipelineRunner) -> Numeric:
    """The bubble of interleaved 1F1B relative to the ideal time."""
    return Numeric(
        _(
            "Interleaved 1F1B with v = {v} model chunks per rank, P = {p}, M = {m}: what is the"
            " bubble relative to the ideal time?"
        ).format(v=d.v, p=d.p, m=d.m_v),
        interleaved_bubble(d.p, d.m_v, d.v),
        units="",
        explanation=_(
            "Each rank's stage is cut into v chunks, so fill and drain take 1/v as long: "
            "(1/v)(P-1)/M (Narayanan et al. 2021 §2.2), paid for with v times more messages."
        ),
        params={"P": d.p, "M": d.m_v, "v": d.v},
        key="interleaved_ratio",
    )


def q_outline_2p(d: PipelineDraw, run: PipelineRunner) -> MultipleChoice:
    """Errata E3: is the outline's (P-1)/(3P-1) for M = 2P right?"""
    p = d.p
    return MultipleChoice(
        _(
            "The outline gives the bubble share for M = 2P as (P-1)/(3P-1). For P = {p}, is"
            " that right?"
        ).format(p=p),
        [
            _("Yes: (P-1)/(M+P-1) with M = 2P is (P-1)/(3P-1) = {share}").format(
                share=f"{gpipe_bubble(p, 2 * p):.4f}"
            ),
            _("No: with M = 2P it is (P-1)/(2P), since fill and drain take P-1 slots each"),
            _("No: with M = 2P microbatches the bubble is fully hidden, so it is 0"),
            _("No: it is 1/(3P), one idle slot per stage out of the 3P in the schedule"),
        ],
        0,
        _(
            "With equal stage times the GPipe formula holds exactly, and substituting M = 2P"
            " gives (P-1)/(3P-1); the idle share of the engine's executed order, retimed, equals"
            " it (errata E3 names both conventions)."
        ),
        params={"P": p},
        key="outline_2p",
    )


def _zb_timeline(d: PipelineDraw) -> Timeline:
    """ZB-H1 timed with t_f = t_b = t_w on the paper questions' P and max(M, P)."""
    return time_schedule(build_schedule("zb-h1", d.p, max(d.m, d.p)), 1.0, 1.0, 1.0)


def q_zb_h1_last_peak(d: PipelineDraw, run: PipelineRunner) -> MultipleChoice:
    """The activations ZB-H1's last stage holds at its peak."""
    p, m = d.p, max(d.m, d.p)
    peaks = _zb_timeline(d).peak_activations_per_stage()
    return MultipleChoice(
        _(
            "ZB-H1 with P = {p} stages and M = {m} microbatches, t_f = t_b = t_w: how many"
            " microbatches' activations does the last stage (stage {last}) hold at its peak?"
        ).format(p=p, m=m, last=p - 1),
        [
            _("{peak}, as many as stage 0: W is deferred, and the stash lives until W").format(
                peak=peaks[p - 1]
            ),
            _("1, as in 1F1B: the last stage runs each backward right after its forward"),
            _("{budget}, ZB-H2's budget of 2P - 1: W's are deferred to the very end").format(
                budget=2 * p - 1
            ),
        ],
        0,
        _(
            "Stage i defers each W by i microbatches, and a stage keeps a microbatch's stash"
            " until its W has read it, so every stage holds P in flight: the first stage's"
            " 1F1B peak, which ZB-H1 never exceeds (Qi et al. 2023 §2.1). Counted by the"
            " timing model: {peaks} per stage."
        ).format(peaks=peaks),
        params={"P": p, "M": m},
        key="zb_h1_last_peak",
    )


def _reveal(result: Any) -> str:
    return _(
        "peak stashed activations per stage: {peaks}\nbubble (share of total time): {bubble}"
    ).format(
        peaks=list(result.peak_activations_per_stage),
        bubble=f"{result.bubble_fraction_retimed:.4f}",
    )


def q_predict_1f1b_peak(d: PipelineDraw, run: PipelineRunner) -> PredictThenRun:
    """Predict, then run: the peak stash of 1F1B's stage 0."""
    m_run = d.m_run
    return PredictThenRun(
        _(
            "Predict the peak number of stashed activations on stage 0 for 1F1B with P = {p},"
            " M = {m}, then run it."
        ).format(p=P_RUN, m=m_run),
        Numeric(
            _("Peak on stage 0"),
            min(P_RUN, m_run),
            tolerance=0.0,
            units="microbatches",
            explanation=_("1F1B: min(P - i, M) on stage i."),
        ),
        run=lambda: run("1f1b", P_RUN, m_run),
        reveal=_reveal,
        explanation=_(
            "Stage 0 runs P forwards before its first backward frees one, then alternates, "
            "so it never holds more than min(P, M); GPipe would hold all M."
        ),
        truth=lambda result: result.peak_activations_per_stage[0],
        params={"P": P_RUN, "M": m_run},
        key="predict_1f1b_peak",
        config=f'run_pipeline(cluster, "1f1b", stages={P_RUN}, microbatches={m_run})',
    )


PIPELINE = QuestionSet(
    PipelineDraw.draw,
    (
        q_gpipe_share,
        q_megatron_ratio,
        q_errata_e2,
        q_gpipe_peak,
        q_interleaved_ratio,
        q_outline_2p,
        q_zb_h1_last_peak,
        q_torch_i_name,
        q_predict_1f1b_peak,
    ),
    simulated_pipeline,
    "runner(schedule, P, M)",
)


def pipeline_quiz(
    seed: int | None = None, runner: PipelineRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 10: bubble share and Megatron's convention, interleaving, memory of GPipe vs 1F1B."""
    questions = PIPELINE.build(seed, runner)
    return Quiz(_("Lesson 10: pipeline parallelism"), questions, name=NAME, learner=learner)


register_bank(NAME, pipeline_quiz, PIPELINE)
