"""Lesson 13's drawn parameters and its questions on why: top-k's all-gather, error feedback,
random-k's all-reduce, and when compression pays.

The numbers come from :class:`~edu_parallel.compression.config.CompressConfig`, its wire-bytes
formula and the what-if retiming (:func:`~edu_parallel.compression.whatif.what_if`), torch-free.
The bank is ``compression.py``. References: Stich et al. 2018; Karimireddy et al. 2019 (error
feedback); Vogels et al. 2019 (PowerSGD).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...compression.config import CompressConfig, messages_per_step, wire_bytes_per_step
from ...compression.runs import LESSON_RANKS, sweep_run
from ...compression.whatif import LARGE_MODEL, Measured, what_if
from ...core.i18n import _
from ..questions import MultipleChoice
from .common import pick, place, with_right

CompressRunner = Callable[..., Any]


@dataclass(frozen=True)
class CompressDraw:
    """Lesson 13's parameters, drawn in one go."""

    n_top: int
    """Ranks of the top-k bytes question."""
    r_top: float
    """Its top-k ratio."""
    n_sign: int
    """Ranks of the sign-compression question."""
    rank: int
    """PowerSGD's rank r for one 128 x 128 weight."""
    n_run: int
    """Ranks of the top-k run (a configuration the lesson does not print)."""
    r_run: float
    """Its top-k ratio."""
    n_ps: int
    """Ranks of the PowerSGD run."""
    rank_ps: int
    """Its PowerSGD rank."""
    gather_at: int
    """Where the right option of 'why top-k needs an all-gather' goes."""
    feedback_at: int
    """Where the right option of 'what error feedback does' goes."""
    randk_at: int
    """Where the right option of 'why random-k can all-reduce' goes."""
    pays_at: int
    """Where the right option of 'when compression pays' goes."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> CompressDraw:
        n_top, r_top = pick(rng, 8, 4, 8, 16), pick(rng, 0.01, 0.01, 0.02, 0.05)
        n_sign = pick(rng, 4, 2, 4, 8)
        rank = pick(rng, 2, 1, 2, 4, 8)
        n_run, r_run = pick(rng, 4, 2, 4), pick(rng, 0.05, 0.02, 0.05, 0.1)
        n_ps, rank_ps = pick(rng, 2, 2, 4), pick(rng, 4, 2, 4, 8)
        return cls(
            n_top,
            r_top,
            n_sign,
            rank,
            n_run,
            r_run,
            n_ps,
            rank_ps,
            gather_at=place(rng, 2),
            feedback_at=place(rng, 1),
            randk_at=place(rng, 3),
            pays_at=place(rng, 0),
        )

    @property
    def psi(self) -> int:
        """The classifier's gradient entries (one bucket)."""
        return CompressConfig(self.n_top, "topk", ratio=self.r_top).ddp().psi


def q_topk_allgather(d: CompressDraw, run: CompressRunner) -> MultipleChoice:
    """Why top-k sparsification needs an all-gather."""
    right = _("Each rank keeps other indices, so equal positions do not line up to be added")
    wrong = [
        _("All-reduce cannot carry integers, and top-k must send its indices as integers"),
        _("An all-reduce would add the indices themselves and send them to the wrong ranks"),
        _("Top-k values are too small for the ring to add without losing their precision"),
    ]
    return MultipleChoice(
        _("Why does top-k sparsification need an all-gather instead of an all-reduce?"),
        with_right(right, wrong, d.gather_at),
        d.gather_at,
        _(
            "An all-reduce adds element i of every rank into element i. Each rank's top-k"
            " picks its own indices, so rank 0's i-th kept value and rank 1's are different"
            " coordinates: every rank must see every (index, value) pair and add them itself."
        ),
        key="compress_topk_allgather",
    )


def q_error_feedback(d: CompressDraw, run: CompressRunner) -> MultipleChoice:
    """What error feedback does."""
    right = _("What was dropped is kept and added to the next gradient, so it is sent later")
    wrong = [
        _("It sends the dropped entries to one rank, which applies them to the model alone"),
        _("It rescales the kept entries by d/k so that their expected value is the gradient"),
        _("It repeats the step whenever the loss rose, undoing a bad compressed update"),
    ]
    return MultipleChoice(
        _(
            "Top-k 1% without error feedback stalls far below the target; with it, it tracks"
            " the uncompressed curve. What does error feedback do?"
        ),
        with_right(right, wrong, d.feedback_at),
        d.feedback_at,
        _(
            "e = p - C(p) is kept on each rank and added to the next step's gradient (p = g +"
            " e). An entry too small to be sent now grows until it is: nothing is lost, only"
            " delayed (Stich et al. 2018; Karimireddy et al. 2019)."
        ),
        key="compress_error_feedback",
    )


def q_randk_allreduce(d: CompressDraw, run: CompressRunner) -> MultipleChoice:
    """Why random-k can use an all-reduce."""
    right = _("Every rank draws the same k indices from one seed, so the values line up")
    wrong = [
        _("Random indices rarely collide, so the ring may add them without their positions"),
        _("Random-k sends all d entries but only k of them are non-zero, so sums still work"),
        _("Its values are rescaled by d/k, which makes the indices unnecessary on the wire"),
    ]
    return MultipleChoice(
        _("Random-k sends the values of k entries, like top-k, but it can use an all-reduce. Why?"),
        with_right(right, wrong, d.randk_at),
        d.randk_at,
        _(
            "The indices come from a generator seeded alike on every rank (step, bucket), so"
            " every rank sends the values of the same k coordinates and the ring adds them"
            " position by position: 2(N-1)/N * 4k bytes, flat in N."
        ),
        key="compress_randk_allreduce",
    )


def _speedup() -> dict[str, float]:
    """Top-k's speed-up per link for a large model: the what-if of the lesson's figure, on the
    lesson's ranks with the sweep's top-k and no compression, by the formulas its runs match."""
    runs = [CompressConfig(LESSON_RANKS, **sweep_run(m)) for m in ("none", "topk")]
    measured = [
        Measured(
            c.label,
            c.method,
            c.world_size,
            c.ddp().psi,
            wire_bytes_per_step(c),
            messages_per_step(c),
        )
        for c in runs
    ]
    speed = what_if(measured, links=("nvlink4-h100", "eth-25g"))
    return {row.link: row.speedup for row in speed.itertuples() if row.method != "none"}


def q_when_it_pays(d: CompressDraw, run: CompressRunner) -> MultipleChoice:
    """When compression pays, from the what-if retiming on two links."""
    speedup = _speedup()
    right = _("On a slow link where communication outlasts backward and cannot hide under it")
    wrong = [
        _("On NVLink, where the GPUs of a node exchange the most bytes per second"),
        _("Whenever the model is small, since a small gradient compresses best"),
        _("On any link: sending fewer bytes always makes a training step shorter"),
    ]
    return MultipleChoice(
        _(
            "Retimed for a {billions}-billion-parameter model on {n} ranks, top-k {percent}% with"
            " error feedback changes the step time by {nvlink}x on NVLink and by {eth}x on 25"
            " Gb/s Ethernet (speed-ups), as in the figure above. When does compression pay?"
        ).format(
            billions=f"{LARGE_MODEL['psi'] / 1e9:g}",
            n=LESSON_RANKS,
            percent=f"{100 * CompressConfig(LESSON_RANKS, **sweep_run('topk')).ratio:g}",
            nvlink=f"{speedup['nvlink4-h100']:.2f}",
            eth=f"{speedup['eth-25g']:.1f}",
        ),
        with_right(right, wrong, d.pays_at),
        d.pays_at,
        _(
            "DDP overlaps the all-reduce with backward. On NVLink the all-reduce already hides"
            " under backward, so compression only adds its own compute; on a slow link the"
            " communication is exposed, and cutting its bytes cuts the step."
        ),
        params={"speedup": speedup, "N": LESSON_RANKS},
        key="compress_when_it_pays",
    )
