"""Question bank of lesson 14: synchronous against asynchronous training, with stragglers.

Every number comes from :class:`~edu_parallel.async_training.config.AsyncConfig` and its
formulas (torch-free); the drawn parameters and the questions on costs are in ``async_costs.py``,
backup workers, determinism and the runs here. ``runner(world_size=None, **options) -> report``
trains one regime on real ranks; the report has ``config``, ``applied`` (gradients the model
received), ``dropped``, ``staleness_histogram`` and ``sent_bytes``. The lesson passes
:func:`edu_parallel.async_training.report.async_runner`; without one :func:`formula_runner`
predicts the same fields (no processes): the count of applied gradients exactly, the staleness
as the round-robin value ``W - 1`` (a real run spreads around it; the question is graded against
the run it shows).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...async_training.config import PSI, AsyncConfig, ring_bytes_per_rank, world_size_for
from ...core.i18n import _
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from .async_costs import PREDICT_WORKERS as PREDICT_WORKERS  # the lesson's tests read it here
from .async_costs import (
    AsyncDraw,
    AsyncRunner,
    q_heavy_tail,
    q_local_bytes_ratio,
    q_round_robin_staleness,
    q_straggler_seconds,
    q_sync_bytes,
    q_why_sync_waits,
)
from .common import ranks, with_right

NAME = "14_sync_async"
RUN_WORKERS = 3  # workers of the lesson's runs (its cluster has 4 ranks: a server and 3)
RUN_STEPS = 60


def formula_runner(world_size: int | None = None, **options: Any) -> Any:
    """A run by formula, shaped like an :class:`~edu_parallel.async_training.report.
    AsyncReport`: applied gradients, staleness at the round-robin value, bytes by formula."""
    mode = options.get("mode", "sync")
    c = AsyncConfig(world_size or world_size_for(mode, RUN_WORKERS), **options)
    applied = c.steps * c.kept_per_step
    staleness = c.workers - 1 if c.mode == "async-ps" else 0
    sent = ring_bytes_per_rank(c, PSI)
    return SimpleNamespace(
        config=c,
        applied=applied,
        dropped=None,  # timing decides it
        staleness_histogram={staleness: applied},
        sent_bytes=[sent] * c.world_size,
    )


def q_backup_tradeoff(d: AsyncDraw, run: AsyncRunner) -> MultipleChoice:
    """What synchronous SGD with backup workers pays for ignoring the slowest."""
    right = _(
        "Each step averages fewer samples (W - b gradients) and the late gradients' compute"
        " is wasted; the step time is the (W-b)-th fastest, not the slowest"
    )
    wrong = [
        _(
            "The late gradients are applied one step later, on parameters that have moved"
            " since, so the model receives stale gradients as in asynchronous SGD and learns"
            " more slowly"
        ),
        _("The backup workers hold a second copy of the model, doubling the memory per worker"),
        _("The server waits for every worker but sends the parameters b times more often"),
    ]
    return MultipleChoice(
        _(
            "Synchronous SGD with b backup workers (Chen et al. 2016): the server steps with"
            " the first W - b gradients that arrive. What does it pay for ignoring the"
            " slowest b?"
        ),
        with_right(right, wrong, d.pays_at),
        d.pays_at,
        _(
            "No gradient is stale (staleness 0), but each step's batch has W - b gradients,"
            " and the compute of the dropped ones is thrown away; in return a step waits for"
            " the (W-b)-th fastest worker instead of the slowest."
        ),
        key="async_backup_tradeoff",
    )


def q_determinism(d: AsyncDraw, run: AsyncRunner) -> MultipleChoice:
    """What can still be checked bit for bit in asynchronous training."""
    right = _(
        "The server records the order it applied updates and the version each gradient came"
        " from; replaying that order in one process gives the same bits"
    )
    wrong = [
        _(
            "Seeding every worker's generator and the straggler delays with the same values"
            " makes two asynchronous runs bit-identical, whatever the timing of the pushes"
        ),
        _("Asynchronous runs cannot be checked at all: only their loss can be compared"),
        _("Running with one intra-op thread per rank removes the non-determinism"),
    ]
    return MultipleChoice(
        _(
            "Two asynchronous parameter-server runs with the same seeds end with different"
            " parameters. What can still be checked bit for bit?"
        ),
        with_right(right, wrong, d.det_at),
        d.det_at,
        _(
            "The order in which pushes reach the server depends on timing, so the run is not"
            " reproducible; but each run records the order and the version every gradient was"
            " computed from, and the one-process replay of that order ends with the server's"
            " exact parameters (the lesson's replay_matches)."
        ),
        key="async_determinism",
    )


def _reveal(report: Any) -> str:
    c = report.config
    hist = ", ".join(f"{k}: {v}" for k, v in report.staleness_histogram.items())
    if report.dropped is None:
        text = _(
            "{mode} on {n} ranks (W = {w} workers), {steps} steps: the model received {applied}"
            " gradients; staleness (value: count): {hist}"
        )
    else:
        text = _(
            "{mode} on {n} ranks (W = {w} workers), {steps} steps: the model received {applied}"
            " gradients; late gradients dropped: {dropped}; staleness (value: count): {hist}"
        )
    return text.format(
        mode=c.mode,
        n=c.world_size,
        w=c.workers,
        steps=c.steps,
        applied=report.applied,
        dropped=report.dropped,
        hist=hist,
    )


def _call(d: AsyncDraw, mode: str, extra: str = "") -> str:
    """The run as the lesson would write it (its ``cluster`` has a server and 3 workers)."""
    cluster = ranks(d.w_run + 1, RUN_WORKERS + 1)
    return f'run_async({cluster}, "{mode}", steps={RUN_STEPS}{extra})'


def q_predict_backup_applied(d: AsyncDraw, run: AsyncRunner) -> PredictThenRun:
    """Predict, then run: the gradients the server applies with backup workers."""
    w, b = d.w_run, d.b_run
    backup = AsyncConfig(w + 1, "backup", steps=RUN_STEPS, backup=b)
    return PredictThenRun(
        _(
            "Backup workers: W = {w} workers, b = {b}, S = {s} steps. Predict how many"
            " gradients the server applies in all, then run it."
        ).format(w=w, b=b, s=RUN_STEPS),
        Numeric(
            _("Gradients applied"),
            backup.steps * backup.kept_per_step,
            tolerance=0.0,
            units="gradients",
            explanation=_("S steps of W - b gradients each."),
        ),
        run=lambda: run(world_size=w + 1, mode="backup", steps=RUN_STEPS, backup=b),
        reveal=_reveal,
        explanation=_(
            "Each step applies exactly W - b gradients, so S (W - b); the pushes that arrive"
            " late are dropped and counted apart, and timing decides how many there are."
        ),
        truth=lambda report: report.applied,
        params={"W": w, "b": b, "S": RUN_STEPS},
        key="predict_backup_applied",
        config=_call(d, "backup", f", backup={b}"),
    )


def q_predict_async_staleness(d: AsyncDraw, run: AsyncRunner) -> PredictThenRun:
    """Predict, then run: the most common staleness of an asynchronous run."""
    w = d.w_run
    stale_choices = [str(k) for k in range(w)] + [_("{n} or more").format(n=w)]
    return PredictThenRun(
        _(
            "Asynchronous parameter server, W = {w} workers, no straggler: predict the most"
            " common staleness of an applied gradient, then run it."
        ).format(w=w),
        MultipleChoice(
            _("Most common staleness"),
            stale_choices,
            w - 1,
            _("With W workers taking turns, W - 1 other updates land while one computes."),
        ),
        run=lambda: run(world_size=w + 1, mode="async-ps", steps=RUN_STEPS),
        reveal=_reveal,
        explanation=_(
            "Round robin gives W - 1; on shared cores the order jitters, so the histogram"
            " spreads around it. You are graded against the run shown."
        ),
        truth=lambda report: min(
            max(report.staleness_histogram, key=report.staleness_histogram.get),
            len(stale_choices) - 1,
        ),
        params={"W": w},
        key="predict_async_staleness",
        config=_call(d, "async-ps"),
    )


ASYNC = QuestionSet(
    AsyncDraw.draw,
    (
        q_sync_bytes,
        q_local_bytes_ratio,
        q_round_robin_staleness,
        q_straggler_seconds,
        q_why_sync_waits,
        q_backup_tradeoff,
        q_determinism,
        q_heavy_tail,
        q_predict_backup_applied,
        q_predict_async_staleness,
    ),
    formula_runner,
    "runner(world_size=None, **options) (None: formulas)",
)


def async_quiz(
    seed: int | None = None, runner: AsyncRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 14: bytes of sync and local SGD, staleness, stragglers, backup workers, replay."""
    questions = ASYNC.build(seed, runner)
    return Quiz(
        _("Lesson 14: synchronous against asynchronous training"),
        questions,
        name=NAME,
        learner=learner,
    )


register_bank(NAME, async_quiz, ASYNC)
