"""Question bank of lesson 09 (pipeline parallelism): bubble conventions, memory, errata E2/E3,
ZB-H1's stash and torch's action names (F, I, W, B).

``runner(schedule, P, M) -> result`` runs a schedule; ``result`` has ``peak_activations_per_stage``
and ``bubble_fraction_measured``. The default times the plan in-process
(:func:`edu_parallel.pipeline_parallel.timing.time_schedule`); the lesson passes one that runs real
ranks (:func:`edu_parallel.pipeline_parallel.report.run_pipeline`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ...core.errors import bad_value
from ...core.i18n import _
from ...pipeline_parallel.builders import build_schedule
from ...pipeline_parallel.timing import (
    gpipe_bubble,
    interleaved_bubble,
    megatron_bubble,
    time_schedule,
)
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import register_bank

PipelineRunner = Callable[[str, int, int], Any]


def simulated_pipeline(schedule: str, num_ranks: int, microbatches: int) -> Any:
    """The schedule timed in-process with t_b = 2 t_f: peaks and bubble, no processes."""
    timeline = time_schedule(build_schedule(schedule, num_ranks, microbatches), 1.0, 2.0)
    return SimpleNamespace(
        peak_activations_per_stage=timeline.peak_activations_per_stage(),
        bubble_fraction_measured=timeline.bubble_fraction(),
    )


def pipeline_quiz(
    seed: int | None = None, runner: PipelineRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 09: bubble share and Megatron's convention, interleaving, memory of GPipe vs 1F1B."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_value("seed", seed, "an int or None")
    if runner is not None and not callable(runner):
        raise bad_value(
            "runner", runner, "a callable runner(schedule, P, M), or None for the simulation"
        )
    run = runner or simulated_pipeline
    rng = random.Random(seed) if seed is not None else None
    p = 4 if rng is None else rng.choice((2, 4, 8))
    m = 8 if rng is None else rng.choice((4, 8, 16, 32))
    v = 2 if rng is None else rng.choice((2, 4))
    m_v = p * (2 if rng is None else rng.choice((1, 2, 4)))  # interleaving needs M a multiple of P
    p_run, m_run = 4, 8 if rng is None else rng.choice((4, 8))

    zb_timeline = time_schedule(build_schedule("zb-h1", p, max(m, p)), 1.0, 1.0, 1.0)
    zb_peak = zb_timeline.peak_activations_per_stage()[p - 1]

    def reveal(result: Any) -> str:
        return _(
            "peak stashed activations per stage: {peaks}\nbubble (share of total time): {bubble}"
        ).format(
            peaks=list(result.peak_activations_per_stage),
            bubble=f"{result.bubble_fraction_measured:.4f}",
        )

    questions = [
        Numeric(
            _(
                "GPipe with P = {p} stages and M = {m} microbatches, equal stage times: what share"
                " of the total time is bubble?"
            ).format(p=p, m=m),
            gpipe_bubble(p, m),
            units="",
            explanation=_(
                "Each rank idles (P-1) stage-times while the pipeline fills and drains, out of "
                "(M+P-1) in all: (P-1)/(M+P-1), GPipe's convention (Huang et al. 2019 §2.3)."
            ),
            params={"P": p, "M": m},
            key="gpipe_share",
        ),
        Numeric(
            _(
                "Same pipeline (P = {p}, M = {m}): Megatron-LM writes the bubble relative to the"
                " ideal time M stage-times. What is that ratio?"
            ).format(p=p, m=m),
            megatron_bubble(p, m),
            units="",
            explanation=_(
                "(P-1)/M is the same idle time divided by the ideal time instead of the total time"
                " (Narayanan et al. 2021 §2.2.1); both conventions describe one bubble (errata E3)."
            ),
            params={"P": p, "M": m},
            key="megatron_ratio",
        ),
        MultipleChoice(
            _("What does 1F1B (PipeDream-Flush) change compared with GPipe, for the same P and M?"),
            [
                _("Same bubble; stashed activations drop from M to at most P per stage"),
                _("No bubble: each stage starts a backward as soon as it can, so none idles"),
                _("Half the bubble, with the same activation memory as GPipe per stage"),
                _("Same bubble; stashed activations drop from P to one per stage"),
            ],
            0,
            _(
                "Errata E2: 1F1B starts each microbatch's backward early, so a stage holds at most"
                " P-i microbatches (GPipe: all M). The fill and drain are unchanged, so the bubble"
                " is the same; interleaving or zero-bubble schedules are what shrink it."
            ),
            key="errata_e2",
        ),
        Numeric(
            _(
                "GPipe, P = {p}, M = {m}: how many microbatches' activations does stage 0 hold at"
                " its peak?"
            ).format(p=p, m=m),
            m,
            tolerance=0.0,
            units="microbatches",
            explanation=_(
                "GPipe runs every forward before any backward, so every stage stashes all M."
            ),
            params={"P": p, "M": m},
            key="gpipe_peak",
        ),
        Numeric(
            _(
                "Interleaved 1F1B with v = {v} model chunks per rank, P = {p}, M = {m}: what is the"
                " bubble relative to the ideal time?"
            ).format(v=v, p=p, m=m_v),
            interleaved_bubble(p, m_v, v),
            units="",
            explanation=_(
                "Each rank's stage is cut into v chunks, so fill and drain take 1/v as long: "
                "(1/v)(P-1)/M (Narayanan et al. 2021 §2.2), paid for with v times more messages."
            ),
            params={"P": p, "M": m_v, "v": v},
            key="interleaved_ratio",
        ),
        MultipleChoice(
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
                " gives (P-1)/(3P-1); the engine's measured idle share equals it (errata E3 names"
                " both conventions)."
            ),
            params={"P": p},
            key="outline_2p",
        ),
        MultipleChoice(
            _(
                "ZB-H1 with P = {p} stages and M = {m} microbatches, t_f = t_b = t_w: how many"
                " microbatches' activations does the last stage (stage {last}) hold at its peak?"
            ).format(p=p, m=max(m, p), last=p - 1),
            [
                _("{peak}, as many as stage 0: W is deferred, and the stash lives until W").format(
                    peak=zb_peak
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
            ).format(peaks=zb_timeline.peak_activations_per_stage()),
            params={"P": p, "M": max(m, p)},
            key="zb_h1_last_peak",
        ),
        MultipleChoice(
            _(
                "torch.distributed.pipelining writes a schedule's actions as '1F0', '1I0', '1W0'"
                " and '1B0'. In ZB-H1, which one is the pass that must reach stage 0 quickly (it"
                " sends the gradient of the stage's input), while another one waits to fill the"
                " bubble?"
            ),
            [
                _("I: the input gradient; W (weight gradient) is deferred, B is a full backward"),
                _("B: the backward; W is the weight gradient and I is unused"),
                _("W: the weight gradient is on the critical path; I waits"),
                _("F: the forward; ZB-H1 defers the backward B as a whole"),
            ],
            0,
            _(
                "torch's _ComputationType: F forward, I BACKWARD_INPUT, W BACKWARD_WEIGHT, B"
                " FULL_BACKWARD. The Zero Bubble paper calls the input-gradient pass 'B'; written"
                " next to a W under torch's names it would be a full backward, and torch's"
                " validator rejects it."
            ),
            key="torch_i_name",
        ),
        PredictThenRun(
            _(
                "Predict the peak number of stashed activations on stage 0 for 1F1B with P = {p},"
                " M = {m}, then run it."
            ).format(p=p_run, m=m_run),
            Numeric(
                _("Peak on stage 0"),
                min(p_run, m_run),
                tolerance=0.0,
                units="microbatches",
                explanation=_("1F1B: min(P - i, M) on stage i."),
            ),
            run=lambda: run("1f1b", p_run, m_run),
            reveal=reveal,
            explanation=_(
                "Stage 0 runs P forwards before its first backward frees one, then alternates, "
                "so it never holds more than min(P, M); GPipe would hold all M."
            ),
            truth=lambda result: result.peak_activations_per_stage[0],
            params={"P": p_run, "M": m_run},
            key="predict_1f1b_peak",
            config=f'run_pipeline(cluster, "1f1b", stages={p_run}, microbatches={m_run})',
        ),
    ]
    return Quiz(
        _("Lesson 09: pipeline parallelism"), questions, name="09_pipeline", learner=learner
    )


register_bank("09_pipeline", pipeline_quiz)
