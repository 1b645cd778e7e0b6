"""Lesson 14's drawn parameters and its questions on what each regime costs: the bytes of
synchronous and local SGD, the staleness of asynchronous SGD, what a straggler adds and why, and a
heavy-tailed delay.

Every number comes from :class:`~edu_parallel.async_training.config.AsyncConfig` and its formulas
(torch-free). The bank is ``async_training.py``. References: Dean et al. 2012 (Downpour SGD),
Chen et al. 2016 (backup workers), Lin et al. 2018 and Stich 2019 (local SGD).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...async_training.config import PSI, AsyncConfig, ring_bytes_per_rank
from ...core.i18n import _
from ..numeric import Numeric
from ..questions import MultipleChoice
from .common import pick, place, with_right

AsyncRunner = Callable[..., Any]
PREDICT_WORKERS = 4  # workers of the predict-then-run questions: a count the lesson never runs


@dataclass(frozen=True)
class AsyncDraw:
    """Lesson 14's parameters, drawn in one go."""

    w_bytes: int
    """Workers of synchronous SGD in the bytes question."""
    s_loc: int
    """Steps of the local-SGD question."""
    h_loc: int
    """Local steps between two averages."""
    w_stale: int
    """Workers of the round-robin staleness question."""
    s_slow: int
    """Steps of the straggler question."""
    d_slow: float
    """The straggler's delay per gradient, ms."""
    w_run: int
    """Workers of the predict-then-run questions (a server rank besides)."""
    b_run: int
    """Backup workers of the backup run."""
    waits_at: int
    """Where the right option of 'why one slow rank slows all' goes."""
    pays_at: int
    """Where the right option of 'what backup workers pay' goes."""
    det_at: int
    """Where the right option of 'what can be checked bit for bit' goes."""
    tail_at: int
    """Where the right option of 'who loses most to a heavy tail' goes."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> AsyncDraw:
        w_bytes = pick(rng, 3, 2, 3, 4, 8)
        s_loc, h_loc = pick(rng, 100, 60, 100, 150), pick(rng, 4, 2, 4, 8, 16)
        w_stale = pick(rng, 3, 2, 3, 4, 6, 8)
        s_slow, d_slow = pick(rng, 100, 50, 100, 200), pick(rng, 10.0, 5.0, 10.0, 20.0)
        w_run = pick(rng, PREDICT_WORKERS, 2, PREDICT_WORKERS)
        b_run = pick(rng, 1, 1, 2) if w_run > 2 else 1
        return cls(
            w_bytes,
            s_loc,
            h_loc,
            w_stale,
            s_slow,
            d_slow,
            w_run,
            b_run,
            waits_at=place(rng, 2),
            pays_at=place(rng, 0),
            det_at=place(rng, 3),
            tail_at=place(rng, 1),
        )


def q_sync_bytes(d: AsyncDraw, run: AsyncRunner) -> Numeric:
    """Bytes each rank sends per step of synchronous SGD."""
    return Numeric(
        _(
            "Synchronous SGD on W = {w} workers averages the classifier's gradient (Psi ="
            " {psi} fp32 parameters) with a ring all-reduce every step. How many bytes does"
            " each rank send per step?"
        ).format(w=d.w_bytes, psi=f"{PSI:,}"),
        ring_bytes_per_rank(AsyncConfig(d.w_bytes, "sync", steps=1), PSI),
        units="bytes",
        explanation=_(
            "A ring all-reduce sends 2(W-1)/W of the buffer per rank (reduce-scatter, then"
            " all-gather): 2(W-1)/W * Psi * 4 bytes, every step (lesson 03)."
        ),
        params={"W": d.w_bytes, "psi": PSI},
        key="async_sync_bytes",
    )


def q_local_bytes_ratio(d: AsyncDraw, run: AsyncRunner) -> Numeric:
    """How many times fewer bytes local SGD sends than synchronous SGD."""
    local = AsyncConfig(2, "local-sgd", steps=d.s_loc, local_steps=d.h_loc)
    return Numeric(
        _(
            "Local SGD averages the parameters every H = {h} steps (and after the last). Over"
            " S = {s} steps, how many times fewer bytes does a rank send than synchronous SGD"
            " on the same workers?"
        ).format(h=d.h_loc, s=d.s_loc),
        d.s_loc / local.averages,
        units="times",
        explanation=_(
            "Both all-reduce the same Psi floats with the same ring; synchronous SGD does it S"
            " times, local SGD ceil(S/H) times, so the ratio is S / ceil(S/H) (about H). The"
            " price: the replicas drift apart between averages (Lin et al. 2018; Stich 2019)."
        ),
        params={"S": d.s_loc, "H": d.h_loc},
        key="async_local_bytes_ratio",
    )


def q_round_robin_staleness(d: AsyncDraw, run: AsyncRunner) -> Numeric:
    """The staleness of a gradient when W equal workers take turns."""
    return Numeric(
        _(
            "Asynchronous parameter-server SGD with W = {w} equally fast workers taking turns:"
            " a worker pulls version v, computes, and pushes. How many other updates has the"
            " server applied by the time this gradient is applied (its staleness)?"
        ).format(w=d.w_stale),
        d.w_stale - 1,
        tolerance=0.0,
        units="updates",
        explanation=_(
            "While one worker computes, each of the other W - 1 pushes once, so its gradient"
            " lands W - 1 versions after the one it was computed on. A slow worker's gradients"
            " are staler still: the lesson's histogram has a long tail (Dean et al. 2012)."
        ),
        params={"W": d.w_stale},
        key="async_round_robin_staleness",
    )


def q_straggler_seconds(d: AsyncDraw, run: AsyncRunner) -> Numeric:
    """The time one straggler adds to synchronous SGD."""
    return Numeric(
        _(
            "Synchronous SGD runs S = {s} steps; one rank sleeps a fixed {d} ms in every"
            " gradient, the others not at all. At least how many seconds does the straggler"
            " add to the run?"
        ).format(s=d.s_slow, d=f"{d.d_slow:g}"),
        d.s_slow * d.d_slow / 1e3,
        units="s",
        explanation=_(
            "Every step ends with an all-reduce that needs the straggler's gradient, so every"
            " step waits its delay: at least S * d. Asynchronous SGD and backup workers do not"
            " wait for it; local SGD waits at each average for its H delays."
        ),
        params={"S": d.s_slow, "d_ms": d.d_slow},
        key="async_straggler_seconds",
    )


def q_why_sync_waits(d: AsyncDraw, run: AsyncRunner) -> MultipleChoice:
    """Why one slow rank slows every rank of synchronous SGD."""
    right = _(
        "The all-reduce cannot finish before the slowest rank sends its gradient, so every"
        " rank waits for it at every step"
    )
    wrong = [
        _(
            "The straggler's gradient is computed on more samples, so the ring carries more"
            " bytes at every step and each of its messages takes longer to arrive"
        ),
        _("Every rank recomputes the straggler's gradient so that the average stays exact"),
        _("The fast ranks drop their own gradients and wait for the next step's batch"),
    ]
    return MultipleChoice(
        _("Why does one slow rank slow down every rank of synchronous all-reduce SGD?"),
        with_right(right, wrong, d.waits_at),
        d.waits_at,
        _(
            "The ring's steps pass chunks from rank to rank; none completes before the"
            " straggler has contributed, so the others sit idle in the all-reduce (the"
            " timeline's long grey bars). Chen et al. 2016 measured this tail on 100 workers."
        ),
        key="async_why_sync_waits",
    )


def q_heavy_tail(d: AsyncDraw, run: AsyncRunner) -> MultipleChoice:
    """Which regime loses the most time to a heavy-tailed delay."""
    right = _(
        "Synchronous SGD: each step lasts as long as the largest of the W delays, and a heavy"
        " tail makes that maximum large often"
    )
    wrong = [
        _(
            "Asynchronous SGD: a heavy-tailed delay makes every applied gradient stale by the"
            " same large amount, so all of the server's updates point the wrong way"
        ),
        _("Local SGD: its H local steps multiply each delay by H before the average"),
        _("None: a heavy tail has the same mean, so every regime loses the same time"),
    ]
    return MultipleChoice(
        _(
            "A random worker is slowed at each step by a heavy-tailed (Pareto) delay. Which"
            " regime loses the most time to it?"
        ),
        with_right(right, wrong, d.tail_at),
        d.tail_at,
        _(
            "A synchronous step waits for the slowest worker, so its time is the maximum of"
            " the delays; with a heavy tail a rare huge delay stalls everyone. Async SGD lets"
            " the others go on; local SGD spreads the delays over H steps before waiting."
        ),
        key="async_heavy_tail",
    )
