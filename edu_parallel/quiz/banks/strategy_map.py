"""Question bank of lesson 01 (the parallelism map): what each strategy splits and what it sends.

Every number comes from :mod:`edu_parallel.strategy_map.model`'s formulas, which the tests check
against real runs. ``runner(world_size) -> report`` runs the lesson's model under the four
strategies (:func:`edu_parallel.strategy_map.report.map_runner`); the default evaluates the
formula for the lesson's model (no processes), shaped like a report.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ...core.errors import bad_value
from ...core.i18n import _
from ...strategy_map.crossover import crossover_tokens
from ...strategy_map.formulas import (
    MapConfig,
    block_params,
    formula_param_bytes,
    formula_sent_bytes,
)
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import register_bank

MapRunner = Callable[[int], Any]
LESSON = MapConfig()  # the lesson's model: edu_parallel.strategy_map.strategies's defaults


def _lesson_sizes() -> dict[str, int]:
    return {"layers": LESSON.layers, "hidden": LESSON.hidden, "tokens": LESSON.batch * LESSON.seq}


def formula_runner(world_size: int) -> Any:
    """TP's bytes per rank for the lesson's model by the formula, shaped like a run's report."""
    sent = formula_sent_bytes("tp", world_size, 0, **_lesson_sizes())
    tp = SimpleNamespace(per_rank=[{"sent_bytes": sent}] * world_size)
    return SimpleNamespace(runs={"tp": tp})


def map_quiz(
    seed: int | None = None, runner: MapRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 01: what DP, TP, PP, EP split; bytes they send; the syllabus's table checked (U1,
    U7)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_value("seed", seed, "an int or None")
    if runner is not None and not callable(runner):
        raise bad_value("runner", runner, "a callable runner(world_size), or None for the formula")
    run = runner or formula_runner
    rng = random.Random(seed) if seed is not None else None
    n = 8 if rng is None else rng.choice((2, 4, 8))
    h = 4096 if rng is None else rng.choice((1024, 2048, 4096))
    layers = 32 if rng is None else rng.choice((16, 24, 32))
    tokens = 8 * 2048 if rng is None else rng.choice((4, 8, 16)) * 2048
    n_run = 2 if rng is None else rng.choice((2, 4))  # the lesson prints N = 4
    accumulate = 8 if rng is None else rng.choice((2, 4, 8, 16))
    item = 2  # bf16 gradients and activations
    big = {"layers": layers, "hidden": h, "tokens": tokens, "itemsize": item}
    psi = layers * block_params(h)
    lesson = _lesson_sizes()

    def reveal(report: Any) -> str:
        sent = [row["sent_bytes"] for row in report.runs["tp"].per_rank]
        return _("bytes each rank sent in the TP step, from the trace: {sent}").format(sent=sent)

    questions = [
        MultipleChoice(
            _("What does each strategy split across the ranks (U1)?"),
            [
                _(
                    "DP the batch, TP the weight matrices inside a layer, PP the layers, EP the"
                    " experts of a MoE layer"
                ),
                _(
                    "DP the weight matrices inside each layer, TP the batch, PP the experts of a"
                    " MoE layer, EP the layers"
                ),
                _(
                    "DP the layers, TP the optimizer state, PP the batch, EP the tokens' hidden"
                    " dimension"
                ),
                _("All four split the batch; they differ only in which collective they use"),
            ],
            0,
            _(
                "The lesson's split picture, read from what each rank held: DP full copies with"
                " 1/N of the batch, TP 1/t of W1, b1 and W2 (b2 replicated), PP whole blocks on"
                " one rank each, EP E/N experts per block with the router replicated."
            ),
            key="what_splits",
        ),
        Numeric(
            _(
                "Data parallelism on {n} GPUs for a model of {layers} MLP blocks with h = {h}"
                " ({psi} parameters, bf16 gradients, one bucket, ring all-reduce): how many bytes"
                " does each GPU send per step?"
            ).format(n=n, layers=layers, h=h, psi=f"{psi:,}"),
            formula_sent_bytes("dp", n, 0, **big),
            units="bytes",
            explanation=_(
                "The gradient all-reduce: 2(N-1)/N of the gradient bytes (Psi x 2 B), whatever the"
                " batch size: DP's traffic grows with the MODEL. Measured in the lesson: 2(N-1)/N x"
                " Psi x 4 B."
            ),
            params={"N": n, "psi": psi, "itemsize": item},
            key="map_dp_sent",
        ),
        Numeric(
            _(
                "Tensor parallelism (Megatron MLP) over {n} GPUs, same {layers} blocks with h ="
                " {h}, {tokens} tokens per step, bf16 activations: bytes each GPU sends per step"
                " (forward and backward)?"
            ).format(n=n, layers=layers, h=h, tokens=f"{tokens:,}"),
            formula_sent_bytes("tp", n, 0, **big),
            units="bytes",
            explanation=_(
                "Each block all-reduces its (tokens, h) output forward (g) and the gradient of its"
                " input backward (f): 2L all-reduces of T h x 2 B, each 2(N-1)/N of that per rank."
                " TP's traffic grows with the TOKENS, not the parameters: with a small batch TP"
                " sends less than DP."
            ),
            params={"N": n, "L": layers, "h": h, "T": tokens, "itemsize": item},
            key="map_tp_sent",
        ),
        Numeric(
            _(
                "Pipeline parallelism with {stages} stages, {tokens} tokens per step, h = {h},"
                " bf16: how many bytes does stage 1 (a middle stage) send per step?"
            ).format(stages=max(n, 4), tokens=f"{tokens:,}", h=h),
            formula_sent_bytes("pp", max(n, 4), 1, **big),
            units="bytes",
            explanation=_(
                "Its output activations to the next stage (T h x 2 B over all microbatches) and the"
                " gradient of its input to the previous one (the same size): 2 T h x 2 B,"
                " independent of the number of stages and of the parameters; only neighbours talk."
            ),
            params={"T": tokens, "h": h, "itemsize": item},
            key="map_pp_sent",
        ),
        Numeric(
            _(
                "A full transformer layer (attention + MLP, 12h^2 parameters, no biases) with h ="
                " {h}, trained with gradient accumulation over {k} micro-batches per optimizer"
                " step: above how many tokens PER MICRO-BATCH does TP send more bytes per step than"
                " DP?"
            ).format(h=h, k=accumulate),
            crossover_tokens(h, "bare", accumulate),
            units="tokens",
            explanation=_(
                "DP all-reduces 12h^2 gradients per layer ONCE per step; TP all-reduces a (T, h)"
                " activation 4 times per layer in EVERY micro-batch: 12h^2 = 4 k T h, so"
                " T* = 3h/k (the MLP block alone: 4h + 2.5 with k = 1). The lesson measures it on"
                " lesson 10's model."
            ),
            params={"h": h, "k": accumulate},
            key="map_layer_crossover",
        ),
        Numeric(
            _(
                "TP over {n} GPUs: parameter bytes per GPU for the {layers} blocks with h = {h} in"
                " bf16 (W1, b1 and W2 split, b2 replicated)?"
            ).format(n=n, layers=layers, h=h),
            formula_param_bytes("tp", n, layers=layers, hidden=h, itemsize=item),
            units="bytes",
            explanation=_(
                "(8h^2 + 4h)/t of the split tensors plus the replicated h-element bias b2, per"
                " block: almost exactly 1/t of the model. Activations are another story: without"
                " sequence parallelism every TP rank keeps the full (b, s, h) tensors."
            ),
            params={"N": n, "L": layers, "h": h, "itemsize": item},
            key="map_tp_param_bytes",
        ),
        MultipleChoice(
            _(
                "The outline says DP 'does not save memory' while TP, PP and EP 'split it'. What"
                " did the measured table show for the lesson's model?"
            ),
            [
                _(
                    "Right for parameters only: DP holds 1/N of the activations, TP without"
                    " sequence parallelism more than DP"
                ),
                _(
                    "Right for both: DP keeps a full copy of parameters and activations, the"
                    " other three split both by their degree"
                ),
                _(
                    "Wrong for parameters: every strategy holds all of them, and only the"
                    " activations are split"
                ),
                _("PP holds no activations: each stage passes them on to the next stage at once"),
            ],
            0,
            _(
                "Per-rank activation bytes come from the tensors autograd saved on each rank: DP"
                " 1/N, TP 1/t of the 4h-wide ones but all of the h-wide ones (TP+SP splits those"
                " along the sequence too and gathers W1's input again in backward: DP's level, for"
                " one more all-gather per block), PP its own blocks (times the microbatches in"
                " flight), EP its tokens plus routing bookkeeping. Memory saving depends on WHAT"
                " you count."
            ),
            key="memory_errata",
        ),
        PredictThenRun(
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
            reveal=reveal,
            explanation=_(
                "The trace holds 2L all_reduce events per rank (L forward, L backward); the ring"
                " volume of each is 2(N-1)/N of its (T, h) buffer."
            ),
            truth=lambda report: report.runs["tp"].per_rank[0]["sent_bytes"],
            params={"N": n_run, **lesson},
            key="predict_map_tp_sent",
            config="run_strategy_map(" + ("cluster" if n_run == 4 else f"Cluster({n_run})") + ")",
        ),
    ]
    return Quiz(
        _("Lesson 01: the parallelism map"), questions, name="01_parallelism_map", learner=learner
    )


register_bank("01_parallelism_map", map_quiz)
