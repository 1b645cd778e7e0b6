"""Question bank of lesson 12: synchronous against asynchronous training, with stragglers.

Every number comes from :class:`~edu_parallel.async_training.config.AsyncConfig` and its
formulas (torch-free). ``runner(world_size=None, **options) -> report`` trains one regime on real
ranks; the report has ``config``, ``applied`` (gradients the model received), ``dropped``,
``staleness_histogram`` and ``sent_bytes``. The lesson passes
:func:`edu_parallel.async_training.report.async_runner`; without one :func:`formula_runner`
predicts the same fields (no processes): the count of applied gradients exactly, the staleness
as the round-robin value ``W - 1`` (a real run spreads around it; the question is graded against
the run it shows).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ...async_training.config import PSI, AsyncConfig, ring_bytes_per_rank, world_size_for
from ...core.i18n import _
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import check_bank_args, register_bank

AsyncRunner = Callable[..., Any]
RUN_WORKERS = 3  # workers of the lesson's runs (its cluster has 4 ranks: a server and 3)
PREDICT_WORKERS = 4  # workers of the predict-then-run questions: a count the lesson never runs
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


def _place(rng: random.Random | None, right: str, wrong: list[str], default: int) -> tuple:
    """``wrong`` with ``right`` inserted at ``default`` (seed None) or at a drawn position."""
    at = default if rng is None else rng.randrange(len(wrong) + 1)
    return [*wrong[:at], right, *wrong[at:]], at


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


def async_quiz(
    seed: int | None = None, runner: AsyncRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 12: bytes of sync and local SGD, staleness, stragglers, backup workers, replay."""
    rng = check_bank_args(seed, runner, "runner(world_size=None, **options) (None: formulas)")
    run = runner or formula_runner

    def pick(default: Any, *options: Any) -> Any:
        return default if rng is None else rng.choice(options)

    w_bytes = pick(3, 2, 3, 4, 8)
    sync_cfg = AsyncConfig(w_bytes, "sync", steps=1)
    s_loc, h_loc = pick(100, 60, 100, 150), pick(4, 2, 4, 8, 16)
    local_cfg = AsyncConfig(2, "local-sgd", steps=s_loc, local_steps=h_loc)
    w_stale = pick(3, 2, 3, 4, 6, 8)
    s_slow, d_slow = pick(100, 50, 100, 200), pick(10.0, 5.0, 10.0, 20.0)
    w_run = pick(PREDICT_WORKERS, 2, PREDICT_WORKERS)
    b_run = pick(1, 1, 2) if w_run > 2 else 1
    backup = AsyncConfig(w_run + 1, "backup", steps=RUN_STEPS, backup=b_run)
    stale_choices = [str(k) for k in range(w_run)] + [_("{n} or more").format(n=w_run)]
    runs: dict[str, Any] = {}

    def run_mode(mode: str, **extra: Any) -> Callable[[], Any]:
        def once() -> Any:
            if mode not in runs:
                runs[mode] = run(world_size=w_run + 1, mode=mode, steps=RUN_STEPS, **extra)
            return runs[mode]

        return once

    def config(mode: str, extra: str = "") -> str:
        """The run as the lesson would write it (its ``cluster`` has a server and 3 workers)."""
        ranks = "cluster" if w_run == RUN_WORKERS else f"Cluster({w_run + 1})"
        return f'run_async({ranks}, "{mode}", steps={RUN_STEPS}{extra})'

    waits, waits_at = _place(
        rng,
        _(
            "The all-reduce cannot finish before the slowest rank sends its gradient, so every"
            " rank waits for it at every step"
        ),
        [
            _(
                "The straggler's gradient is computed on more samples, so the ring carries more"
                " bytes at every step and each of its messages takes longer to arrive"
            ),
            _("Every rank recomputes the straggler's gradient so that the average stays exact"),
            _("The fast ranks drop their own gradients and wait for the next step's batch"),
        ],
        2,
    )
    pays, pays_at = _place(
        rng,
        _(
            "Each step averages fewer samples (W - b gradients) and the late gradients' compute"
            " is wasted; the step time is the (W-b)-th fastest, not the slowest"
        ),
        [
            _(
                "The late gradients are applied one step later, on parameters that have moved"
                " since, so the model receives stale gradients as in asynchronous SGD and learns"
                " more slowly"
            ),
            _("The backup workers hold a second copy of the model, doubling the memory per worker"),
            _("The server waits for every worker but sends the parameters b times more often"),
        ],
        0,
    )
    replay_right = _(
        "The server records the order it applied updates and the version each gradient came"
        " from; replaying that order in one process gives the same bits"
    )
    determinism, det_at = _place(
        rng,
        replay_right,
        [
            _(
                "Seeding every worker's generator and the straggler delays with the same values"
                " makes two asynchronous runs bit-identical, whatever the timing of the pushes"
            ),
            _("Asynchronous runs cannot be checked at all: only their loss can be compared"),
            _("Running with one intra-op thread per rank removes the non-determinism"),
        ],
        3,
    )
    tail, tail_at = _place(
        rng,
        _(
            "Synchronous SGD: each step lasts as long as the largest of the W delays, and a heavy"
            " tail makes that maximum large often"
        ),
        [
            _(
                "Asynchronous SGD: a heavy-tailed delay makes every applied gradient stale by the"
                " same large amount, so all of the server's updates point the wrong way"
            ),
            _("Local SGD: its H local steps multiply each delay by H before the average"),
            _("None: a heavy tail has the same mean, so every regime loses the same time"),
        ],
        1,
    )

    questions = [
        Numeric(
            _(
                "Synchronous SGD on W = {w} workers averages the classifier's gradient (Psi ="
                " {psi} fp32 parameters) with a ring all-reduce every step. How many bytes does"
                " each rank send per step?"
            ).format(w=w_bytes, psi=f"{PSI:,}"),
            ring_bytes_per_rank(sync_cfg, PSI),
            units="bytes",
            explanation=_(
                "A ring all-reduce sends 2(W-1)/W of the buffer per rank (reduce-scatter, then"
                " all-gather): 2(W-1)/W * Psi * 4 bytes, every step (lesson 03)."
            ),
            params={"W": w_bytes, "psi": PSI},
            key="async_sync_bytes",
        ),
        Numeric(
            _(
                "Local SGD averages the parameters every H = {h} steps (and after the last). Over"
                " S = {s} steps, how many times fewer bytes does a rank send than synchronous SGD"
                " on the same workers?"
            ).format(h=h_loc, s=s_loc),
            s_loc / local_cfg.averages,
            units="times",
            explanation=_(
                "Both all-reduce the same Psi floats with the same ring; synchronous SGD does it S"
                " times, local SGD ceil(S/H) times, so the ratio is S / ceil(S/H) (about H). The"
                " price: the replicas drift apart between averages (Lin et al. 2018; Stich 2019)."
            ),
            params={"S": s_loc, "H": h_loc},
            key="async_local_bytes_ratio",
        ),
        Numeric(
            _(
                "Asynchronous parameter-server SGD with W = {w} equally fast workers taking turns:"
                " a worker pulls version v, computes, and pushes. How many other updates has the"
                " server applied by the time this gradient is applied (its staleness)?"
            ).format(w=w_stale),
            w_stale - 1,
            tolerance=0.0,
            units="updates",
            explanation=_(
                "While one worker computes, each of the other W - 1 pushes once, so its gradient"
                " lands W - 1 versions after the one it was computed on. A slow worker's gradients"
                " are staler still: the lesson's histogram has a long tail (Dean et al. 2012)."
            ),
            params={"W": w_stale},
            key="async_round_robin_staleness",
        ),
        Numeric(
            _(
                "Synchronous SGD runs S = {s} steps; one rank sleeps a fixed {d} ms in every"
                " gradient, the others not at all. At least how many seconds does the straggler"
                " add to the run?"
            ).format(s=s_slow, d=f"{d_slow:g}"),
            s_slow * d_slow / 1e3,
            units="s",
            explanation=_(
                "Every step ends with an all-reduce that needs the straggler's gradient, so every"
                " step waits its delay: at least S * d. Asynchronous SGD and backup workers do not"
                " wait for it; local SGD waits at each average for its H delays."
            ),
            params={"S": s_slow, "d_ms": d_slow},
            key="async_straggler_seconds",
        ),
        MultipleChoice(
            _("Why does one slow rank slow down every rank of synchronous all-reduce SGD?"),
            waits,
            waits_at,
            _(
                "The ring's steps pass chunks from rank to rank; none completes before the"
                " straggler has contributed, so the others sit idle in the all-reduce (the"
                " timeline's long grey bars). Chen et al. 2016 measured this tail on 100 workers."
            ),
            key="async_why_sync_waits",
        ),
        MultipleChoice(
            _(
                "Synchronous SGD with b backup workers (Chen et al. 2016): the server steps with"
                " the first W - b gradients that arrive. What does it pay for ignoring the"
                " slowest b?"
            ),
            pays,
            pays_at,
            _(
                "No gradient is stale (staleness 0), but each step's batch has W - b gradients,"
                " and the compute of the dropped ones is thrown away; in return a step waits for"
                " the (W-b)-th fastest worker instead of the slowest."
            ),
            key="async_backup_tradeoff",
        ),
        MultipleChoice(
            _(
                "Two asynchronous parameter-server runs with the same seeds end with different"
                " parameters. What can still be checked bit for bit?"
            ),
            determinism,
            det_at,
            _(
                "The order in which pushes reach the server depends on timing, so the run is not"
                " reproducible; but each run records the order and the version every gradient was"
                " computed from, and the one-process replay of that order ends with the server's"
                " exact parameters (the lesson's replay_matches)."
            ),
            key="async_determinism",
        ),
        MultipleChoice(
            _(
                "A random worker is slowed at each step by a heavy-tailed (Pareto) delay. Which"
                " regime loses the most time to it?"
            ),
            tail,
            tail_at,
            _(
                "A synchronous step waits for the slowest worker, so its time is the maximum of"
                " the delays; with a heavy tail a rare huge delay stalls everyone. Async SGD lets"
                " the others go on; local SGD spreads the delays over H steps before waiting."
            ),
            key="async_heavy_tail",
        ),
        PredictThenRun(
            _(
                "Backup workers: W = {w} workers, b = {b}, S = {s} steps. Predict how many"
                " gradients the server applies in all, then run it."
            ).format(w=w_run, b=b_run, s=RUN_STEPS),
            Numeric(
                _("Gradients applied"),
                backup.steps * backup.kept_per_step,
                tolerance=0.0,
                units="gradients",
                explanation=_("S steps of W - b gradients each."),
            ),
            run=run_mode("backup", backup=b_run),
            reveal=_reveal,
            explanation=_(
                "Each step applies exactly W - b gradients, so S (W - b); the pushes that arrive"
                " late are dropped and counted apart, and timing decides how many there are."
            ),
            truth=lambda report: report.applied,
            params={"W": w_run, "b": b_run, "S": RUN_STEPS},
            key="predict_backup_applied",
            config=config("backup", f", backup={b_run}"),
        ),
        PredictThenRun(
            _(
                "Asynchronous parameter server, W = {w} workers, no straggler: predict the most"
                " common staleness of an applied gradient, then run it."
            ).format(w=w_run),
            MultipleChoice(
                _("Most common staleness"),
                stale_choices,
                w_run - 1,
                _("With W workers taking turns, W - 1 other updates land while one computes."),
            ),
            run=run_mode("async-ps"),
            reveal=_reveal,
            explanation=_(
                "Round robin gives W - 1; on shared cores the order jitters, so the histogram"
                " spreads around it. You are graded against the run shown."
            ),
            truth=lambda report: min(
                max(report.staleness_histogram, key=report.staleness_histogram.get),
                len(stale_choices) - 1,
            ),
            params={"W": w_run},
            key="predict_async_staleness",
            config=config("async-ps"),
        ),
    ]
    return Quiz(
        _("Lesson 12: synchronous against asynchronous training"),
        questions,
        name="12_sync_async",
        learner=learner,
    )


register_bank("12_sync_async", async_quiz)
