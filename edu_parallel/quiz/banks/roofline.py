"""Question bank of lesson 11 (bytes become time): arithmetic intensity, the crossover, overlap.

Every number comes from :mod:`edu_parallel.roofline.formulas` (checked against the ranks by
``tests/test_roofline.py``) and :mod:`edu_parallel.roofline.gpu` (modelled with published rates);
two of lesson 01's byte questions (``strategy_map_bytes.py``: TP's bytes per step, the crossover
with accumulation) come along with the sweeps they belong to.
``runner(accumulation) -> report`` runs lesson 11's sweep with those microbatch counts
(:func:`edu_parallel.roofline.sweep.sweep_runner`); the default is the formula, shaped like a
report (the all-reduce does not depend on ``k``). Reference: the JAX Scaling Book, "All About
Rooflines"; Narayanan et al. 2021 for TP within a node.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...core.i18n import _
from ...roofline.formulas import dp_crossover_tokens, ring_factor
from ...roofline.gpu import ACROSS, H100_FLOPS, IN_NODE
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from . import strategy_map_bytes as map_bytes
from .common import pick, place, ranks, with_right

NAME = "11_bytes_to_time"
SweepRunner = Callable[[tuple[int, ...]], Any]
BIG_PARAMS = 10**9  # the paper questions' model (its size cancels out of DP's crossover)
ITEM = 2  # bf16 gradients
SAME, TIMES_K, OVER_K, TWICE = range(4)  # the predict question's choices, in the bank's order


def formula_runner(accumulation: tuple[int, ...]) -> Any:
    """The all-reduce per step by the formula, one value per ``k``: it does not change."""
    return SimpleNamespace(comm_s=[1.0] * len(accumulation), accumulation=accumulation)


@dataclass(frozen=True)
class RooflineDraw:
    """Lesson 11's parameters, drawn in one go."""

    n: int
    """GPUs of the paper questions."""
    tokens: int
    """Tokens per GPU per step of the intensity question."""
    k: int
    """Microbatches of the predict-then-run question."""
    at: int
    """Where the right option of the multiple-choice questions goes."""
    map: map_bytes.MapDraw
    """Lesson 01's byte questions' parameters (their model, ranks and accumulation)."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> RooflineDraw:
        n, tokens = pick(rng, 8, 8, 16, 64), pick(rng, 4096, 1024, 2048, 4096)
        return cls(n, tokens, pick(rng, 8, 4, 8), place(rng, 0), map_bytes.MapDraw.draw(rng))


def q_dp_intensity(d: RooflineDraw, run: Any) -> Numeric:
    """DP's FLOPs per byte sent: its tokens per GPU."""
    return Numeric(
        _(
            "Data parallelism on {n} GPUs, {t} tokens per GPU per step, bf16 gradients (one ring"
            " all-reduce): how many FLOPs does a GPU compute per byte it sends?"
        ).format(n=d.n, t=f"{d.tokens:,}"),
        6 * d.tokens / (ring_factor(d.n) * ITEM),
        units="FLOPs per byte",
        explanation=_(
            "6 Psi T FLOPs against 2(N-1)/N Psi x 2 bytes: the parameters cancel, 3NT/(2(N-1))."
            " DP's arithmetic intensity is its tokens per GPU."
        ),
        params={"N": d.n, "T": d.tokens, "itemsize": ITEM},
        key="dp_intensity",
    )


def q_dp_crossover_h100(d: RooflineDraw, run: Any) -> Numeric:
    """The tokens per GPU above which DP is compute-bound on H100s across nodes."""
    return Numeric(
        _(
            "H100s at 400 TFLOP/s, one NDR 400 NIC (50 GB/s) each, {n} GPUs across nodes, bf16"
            " gradients, latency ignored: above how many tokens per GPU per step is DP's step"
            " compute-bound (modelled)?"
        ).format(n=d.n),
        dp_crossover_tokens(BIG_PARAMS, d.n, H100_FLOPS, 0.0, ACROSS.bandwidth_Bps, ITEM),
        tolerance=0.02,
        units="tokens",
        explanation=_(
            "6 T / (2(N-1)/N x 2) = F / B = 400e12 / 50e9 = 8,000 FLOPs per byte, so T* = (F/B)"
            " x 2(N-1)/N x 2 / 6: thousands of tokens per GPU, where this machine needs a handful."
        ),
        params={"N": d.n, "F": H100_FLOPS, "B": ACROSS.bandwidth_Bps},
        key="dp_crossover_h100",
    )


def q_overlap(d: RooflineDraw, run: Any) -> Numeric:
    """When overlap with backward hides DP's all-reduce completely."""
    crossing = dp_crossover_tokens(BIG_PARAMS, d.n, H100_FLOPS, 0.0, ACROSS.bandwidth_Bps, ITEM)
    return Numeric(
        _(
            "The same {n} H100s, DP's all-reduce overlapped with the backward pass (two thirds of"
            " the compute): above how many tokens per GPU does backward hide it completely?"
        ).format(n=d.n),
        1.5 * crossing,
        tolerance=0.02,
        units="tokens",
        explanation=_(
            "Hidden when the all-reduce fits in backward, 4 Psi T / F: 3/2 of the crossover"
            " without overlap (the last bucket, issued as backward ends, is left out)."
        ),
        params={"N": d.n, "F": H100_FLOPS, "B": ACROSS.bandwidth_Bps},
        key="overlap_tokens",
    )


def q_tp_in_node(d: RooflineDraw, run: Any) -> MultipleChoice:
    """Why tensor parallelism stays inside a node."""
    right = _(
        "TP's FLOPs per byte is about its width h, whatever the batch: above NVLink's F/B,"
        " below one NIC's"
    )
    wrong = [
        _("TP sends fewer bytes than DP at any batch size, so it does not need the network"),
        _("TP's FLOPs per byte grows with the batch, and batches are small inside a node"),
        _("TP communicates only once per step, after backward, like DP"),
    ]
    return MultipleChoice(
        _("Why do Megatron-LM and Llama 3 keep tensor parallelism inside a node (modelled)?"),
        with_right(right, wrong, d.at),
        d.at,
        _(
            "Per block TP computes 6 x 8h^2/N FLOPs per token and sends 2 all-reduces of h"
            " values per token: 12h/((N-1)e) FLOPs per byte, the width. For h = 8192 that is"
            " above NVLink's {nv} and below a NIC's {ib} FLOPs per byte (lesson 11's GPU table)."
        ).format(
            nv=f"{H100_FLOPS / IN_NODE.bandwidth_Bps:,.0f}",
            ib=f"{H100_FLOPS / ACROSS.bandwidth_Bps:,.0f}",
        ),
        key="tp_in_node",
    )


def q_batch(d: RooflineDraw, run: Any) -> MultipleChoice:
    """A larger batch helps DP, not TP."""
    right = _("DP's share falls (same all-reduce, twice the compute); TP's stays the same")
    wrong = [
        _("Both shares halve: the all-reduces are amortised over more tokens"),
        _("TP's share falls, DP's grows: DP sends more gradients for more tokens"),
        _("Neither changes: communication always grows with compute"),
    ]
    return MultipleChoice(
        _(
            "Twice the tokens per step, same GPUs: what happens to each strategy's"
            " communication share?"
        ),
        with_right(right, wrong, d.at),
        d.at,
        _(
            "DP all-reduces the gradients, Psi values, whatever the batch; TP all-reduces"
            " activations, T h values, so its bytes grow with the tokens as its FLOPs do."
        ),
        key="batch_share",
    )


def q_map_tp_sent(d: RooflineDraw, run: Any) -> Numeric:
    """Lesson 01's sweep: the bytes a TP rank sends per step (they grow with the tokens)."""
    return map_bytes.q_map_tp_sent(d.map, run)


def q_map_layer_crossover(d: RooflineDraw, run: Any) -> Numeric:
    """Lesson 01's sweep: TP's byte crossover against DP with gradient accumulation."""
    return map_bytes.q_map_layer_crossover(d.map, run)


def _choice(report: Any) -> int:
    """The choice the measured ratio (k microbatches over one) falls in."""
    k, ratio = report.accumulation[-1], report.comm_s[-1] / report.comm_s[0]
    if 1 / 1.6 < ratio < 1.6:
        return SAME
    if ratio >= k / 2:
        return TIMES_K
    return TWICE if ratio >= 1.6 else OVER_K


def _reveal(report: Any) -> str:
    a, b = report.comm_s[0], report.comm_s[-1]
    return _("all-reduce per step, measured: {a} ms with one microbatch, {b} ms with {k}").format(
        a=f"{a * 1e3:.2f}", b=f"{b * 1e3:.2f}", k=report.accumulation[-1]
    )


def q_predict_accumulation(d: RooflineDraw, run: SweepRunner) -> PredictThenRun:
    """Predict, then run: DP's all-reduce per step with k microbatches accumulated."""
    ks = (1, d.k)
    choices = [
        _("About the same"),
        _("About {k} times longer").format(k=d.k),
        _("About {k} times shorter").format(k=d.k),
        _("About twice as long"),
    ]
    return PredictThenRun(
        _(
            "DP on 2 ranks accumulates {k} microbatches per optimizer step instead of 1. Predict"
            " how its all-reduce time per step changes, then run both on the ranks."
        ).format(k=d.k),
        MultipleChoice(
            _("DP's all-reduce time per step with {k} microbatches").format(k=d.k),
            choices,
            SAME,
            _("The gradients add up on each rank; the bucket is all-reduced once per step."),
        ),
        run=lambda: run(ks),
        reveal=_reveal,
        explanation=_(
            "Accumulation adds compute, not communication: DP's intensity is the tokens per"
            " optimizer step, k T, which is how a larger batch helps DP."
        ),
        truth=_choice,
        params={"k": d.k},
        key="predict_accumulation",
        config=f"run_sweep({ranks(2, 2)}, accumulation={ks})",
    )


ROOFLINE = QuestionSet(
    RooflineDraw.draw,
    (
        q_dp_intensity,
        q_dp_crossover_h100,
        q_tp_in_node,
        q_batch,
        q_map_tp_sent,
        q_map_layer_crossover,
        q_overlap,
        q_predict_accumulation,
    ),
    formula_runner,
    "runner(accumulation)",
)


def roofline_quiz(
    seed: int | None = None, runner: SweepRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 11: FLOPs per byte against F/B, DP's crossover, TP in a node, overlap (U7)."""
    questions = ROOFLINE.build(seed, runner)
    return Quiz(_("Lesson 11: bytes become time"), questions, name=NAME, learner=learner)


register_bank(NAME, roofline_quiz, ROOFLINE)
