"""The strategy map's questions in bytes, which left lesson 01 for the lesson that turns bytes into
time (issue 32): what DP, TP and PP send per step, TP's parameter bytes, the crossover ``T*`` with
gradient accumulation, and a predict-then-run on TP's bytes.

:data:`MAP_BYTES` is a :class:`~edu_parallel.quiz.registry.QuestionSet` that no lesson registers
yet: a bank takes it whole (``MAP_BYTES.build(seed, runner)``), or a few of its functions. Every
number comes from :mod:`edu_parallel.strategy_map.formulas` and
:mod:`edu_parallel.strategy_map.crossover`, which the tests check against real runs.
``runner(world_size) -> report`` runs the lesson's model
(:func:`edu_parallel.strategy_map.report.map_runner`); the default evaluates the formula for the
lesson's model (no processes), shaped like a report. References: Shoeybi et al. 2019
(Megatron-LM), Korthikanti et al. 2022 (sequence parallelism).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...core.i18n import _
from ...strategy_map.crossover import crossover_tokens
from ...strategy_map.formulas import (
    MapConfig,
    block_params,
    formula_param_bytes,
    formula_sent_bytes,
)
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..registry import QuestionSet
from .common import pick, ranks

MapRunner = Callable[[int], Any]
LESSON = MapConfig()  # the lesson's model: edu_parallel.strategy_map.strategies's defaults
ITEM = 2  # bf16 gradients and activations of the paper questions


def _lesson_sizes() -> dict[str, int]:
    return {"layers": LESSON.layers, "hidden": LESSON.hidden, "tokens": LESSON.batch * LESSON.seq}


def formula_runner(world_size: int) -> Any:
    """TP's bytes per rank for the lesson's model by the formula, shaped like a run's report."""
    sent = formula_sent_bytes("tp", world_size, 0, **_lesson_sizes())
    tp = SimpleNamespace(per_rank=[{"sent_bytes": sent}] * world_size)
    return SimpleNamespace(runs={"tp": tp})


@dataclass(frozen=True)
class MapDraw:
    """Lesson 01's parameters, drawn in one go."""

    n: int
    """GPUs of the paper questions (the pipeline has at least 4 stages)."""
    h: int
    """Hidden size of the paper questions' MLP blocks."""
    layers: int
    """MLP blocks of the paper questions' model."""
    tokens: int
    """Tokens per step of the paper questions."""
    n_run: int
    """Ranks of the TP run (the lesson prints N = 4)."""
    accumulate: int
    """Micro-batches per optimizer step in the crossover question."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> MapDraw:
        n, h = pick(rng, 8, 2, 4, 8), pick(rng, 4096, 1024, 2048, 4096)
        layers, tokens = pick(rng, 32, 16, 24, 32), pick(rng, 8, 4, 8, 16) * 2048
        return cls(n, h, layers, tokens, pick(rng, 2, 2, 4), pick(rng, 8, 2, 4, 8, 16))

    @property
    def big(self) -> dict[str, int]:
        """The paper questions' model, as the formulas take it."""
        return {"layers": self.layers, "hidden": self.h, "tokens": self.tokens, "itemsize": ITEM}


def q_map_dp_sent(d: MapDraw, run: MapRunner) -> Numeric:
    """Bytes each GPU sends per step under data parallelism."""
    psi = d.layers * block_params(d.h)
    return Numeric(
        _(
            "Data parallelism on {n} GPUs for a model of {layers} MLP blocks with h = {h}"
            " ({psi} parameters, bf16 gradients, one bucket, ring all-reduce): how many bytes"
            " does each GPU send per step?"
        ).format(n=d.n, layers=d.layers, h=d.h, psi=f"{psi:,}"),
        formula_sent_bytes("dp", d.n, 0, **d.big),
        units="bytes",
        explanation=_(
            "The gradient all-reduce: 2(N-1)/N of the gradient bytes (Psi x 2 B), whatever the"
            " batch size: DP's traffic grows with the MODEL. Measured in the lesson: 2(N-1)/N x"
            " Psi x 4 B."
        ),
        params={"N": d.n, "psi": psi, "itemsize": ITEM},
        key="map_dp_sent",
    )


def q_map_tp_sent(d: MapDraw, run: MapRunner) -> Numeric:
    """Bytes each GPU sends per step under Megatron tensor parallelism."""
    return Numeric(
        _(
            "Tensor parallelism (Megatron MLP) over {n} GPUs, same {layers} blocks with h ="
            " {h}, {tokens} tokens per step, bf16 activations: bytes each GPU sends per step"
            " (forward and backward)?"
        ).format(n=d.n, layers=d.layers, h=d.h, tokens=f"{d.tokens:,}"),
        formula_sent_bytes("tp", d.n, 0, **d.big),
        units="bytes",
        explanation=_(
            "Each block all-reduces its (tokens, h) output forward (g) and the gradient of its"
            " input backward (f): 2L all-reduces of T h x 2 B, each 2(N-1)/N of that per rank."
            " TP's traffic grows with the TOKENS, not the parameters: with a small batch TP"
            " sends less than DP."
        ),
        params={"N": d.n, "L": d.layers, "h": d.h, "T": d.tokens, "itemsize": ITEM},
        key="map_tp_sent",
    )


def q_map_pp_sent(d: MapDraw, run: MapRunner) -> Numeric:
    """Bytes a middle pipeline stage sends per step."""
    stages = max(d.n, 4)
    return Numeric(
        _(
            "Pipeline parallelism with {stages} stages, {tokens} tokens per step, h = {h},"
            " bf16: how many bytes does stage 1 (a middle stage) send per step?"
        ).format(stages=stages, tokens=f"{d.tokens:,}", h=d.h),
        formula_sent_bytes("pp", stages, 1, **d.big),
        units="bytes",
        explanation=_(
            "Its output activations to the next stage (T h x 2 B over all microbatches) and the"
            " gradient of its input to the previous one (the same size): 2 T h x 2 B,"
            " independent of the number of stages and of the parameters; only neighbours talk."
        ),
        params={"T": d.tokens, "h": d.h, "itemsize": ITEM},
        key="map_pp_sent",
    )


def q_map_layer_crossover(d: MapDraw, run: MapRunner) -> Numeric:
    """Above how many tokens per micro-batch TP sends more than DP."""
    return Numeric(
        _(
            "A full transformer layer (attention + MLP, 12h^2 parameters, no biases) with h ="
            " {h}, trained with gradient accumulation over {k} micro-batches per optimizer"
            " step: above how many tokens PER MICRO-BATCH does TP send more bytes per step than"
            " DP?"
        ).format(h=d.h, k=d.accumulate),
        crossover_tokens(d.h, "bare", d.accumulate),
        units="tokens",
        explanation=_(
            "DP all-reduces 12h^2 gradients per layer ONCE per step; TP all-reduces a (T, h)"
            " activation 4 times per layer in EVERY micro-batch: 12h^2 = 4 k T h, so"
            " T* = 3h/k (the MLP block alone: 4h + 2.5 with k = 1)."
        ),
        params={"h": d.h, "k": d.accumulate},
        key="map_layer_crossover",
    )


def q_map_tp_param_bytes(d: MapDraw, run: MapRunner) -> Numeric:
    """Parameter bytes per GPU under tensor parallelism."""
    return Numeric(
        _(
            "TP over {n} GPUs: parameter bytes per GPU for the {layers} blocks with h = {h} in"
            " bf16 (W1, b1 and W2 split, b2 replicated)?"
        ).format(n=d.n, layers=d.layers, h=d.h),
        formula_param_bytes("tp", d.n, layers=d.layers, hidden=d.h, itemsize=ITEM),
        units="bytes",
        explanation=_(
            "(8h^2 + 4h)/t of the split tensors plus the replicated h-element bias b2, per"
            " block: almost exactly 1/t of the model. Activations are another story: without"
            " sequence parallelism every TP rank keeps the full (b, s, h) tensors."
        ),
        params={"N": d.n, "L": d.layers, "h": d.h, "itemsize": ITEM},
        key="map_tp_param_bytes",
    )


def _reveal(report: Any) -> str:
    sent = [row["sent_bytes"] for row in report.runs["tp"].per_rank]
    return _("bytes each rank sent in the TP step, from the trace: {sent}").format(sent=sent)


def q_predict_map_tp_sent(d: MapDraw, run: MapRunner) -> PredictThenRun:
    """Predict, then run: the bytes rank 0 sends in one TP step of the lesson's model."""
    n_run, lesson = d.n_run, _lesson_sizes()
    return PredictThenRun(
        _(
            "Predict the bytes rank 0 sends in one TP step of the lesson's model ({layers}"
            " blocks, h = {h}, {tokens} tokens, fp32) on {n} ranks, then run it."
        ).format(layers=lesson["layers"], h=lesson["hidden"], tokens=lesson["tokens"], n=n_run),
        Numeric(
            _("Bytes sent by rank 0"),
            formula_sent_bytes("tp", n_run, 0, **lesson),
            tolerance=0.02,
            units="bytes",
            explanation=_("2L all-reduces of T h x 4 B, each 2(N-1)/N of that per rank."),
        ),
        run=lambda: run(n_run),
        reveal=_reveal,
        explanation=_(
            "The trace holds 2L all_reduce events per rank (L forward, L backward); the ring"
            " volume of each is 2(N-1)/N of its (T, h) buffer."
        ),
        truth=lambda report: report.runs["tp"].per_rank[0]["sent_bytes"],
        params={"N": n_run, **lesson},
        key="predict_map_tp_sent",
        config=f"run_strategy_map({ranks(n_run)})",
    )


MAP_BYTES = QuestionSet(
    MapDraw.draw,
    (
        q_map_dp_sent,
        q_map_tp_sent,
        q_map_pp_sent,
        q_map_layer_crossover,
        q_map_tp_param_bytes,
        q_predict_map_tp_sent,
    ),
    formula_runner,
    "runner(world_size)",
)
