"""Question bank of lesson 08 (tensor parallelism): numbers from the TP formulas.

``runner(mode, world_size) -> report`` runs tensor-parallel ``mode`` (a report with
``per_rank_sent_bytes``). The default evaluates
:func:`~edu_parallel.tensor_parallel.report.tp_sent_bytes` (no processes); the lesson passes
:func:`~edu_parallel.tensor_parallel.report.tp_runner`, which runs real ranks with the lesson's
sizes (b=2, s=4, h=8, float64). References: Shoeybi et al. 2019 (Megatron-LM), Korthikanti et al.
2022 (sequence parallelism).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...core.i18n import _
from ...tensor_parallel.formulas import (
    allreduce_message_bytes,
    attention_sent_bytes,
    sp_sent_bytes_per_pass,
    tp_sent_bytes,
)
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from .common import pick

NAME = "08_tensor_parallel"
TPRunner = Callable[[str, int], Any]
LESSON = {"batch": 2, "seq": 4, "hidden": 8, "itemsize": 8}  # tp_run's defaults, float64


def formula_runner(mode: str, world_size: int) -> Any:
    """The formula for the lesson's sizes, shaped like a run's report."""
    sent = tp_sent_bytes(
        mode, world_size, LESSON["batch"], LESSON["seq"], LESSON["hidden"], LESSON["itemsize"]
    )
    return SimpleNamespace(per_rank_sent_bytes=[sent] * world_size)


@dataclass(frozen=True)
class TpDraw:
    """Lesson 08's parameters, drawn in one go."""

    b: int
    """Micro-batch size of the paper questions."""
    s: int
    """Sequence length of the paper questions."""
    h: int
    """Hidden size of the paper questions."""
    t: int
    """Tensor-parallel degree of the paper questions."""
    n_run: int
    """Ranks of the run (the lesson prints its layers on 4)."""
    mode_run: str
    """The layer of the run: 'column', 'row' or 'mlp'."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> TpDraw:
        b, s = pick(rng, 8, 1, 4, 8, 16), pick(rng, 2048, 1024, 2048, 4096)
        h, t = pick(rng, 4096, 2048, 4096, 8192, 12288), pick(rng, 8, 2, 4, 8)
        return cls(b, s, h, t, pick(rng, 2, 2, 4), pick(rng, "mlp", "column", "row", "mlp"))


def q_errata_e4_column(d: TpDraw, run: TPRunner) -> MultipleChoice:
    """Errata E4: what a column-parallel layer holds, and its forward's collective."""
    return MultipleChoice(
        _(
            "Column-parallel linear layer (A split along its output columns, X replicated):"
            " what does each rank hold after its local matmul, and which collective does the"
            " FORWARD pass need?"
        ),
        [
            _("A slice of Y's columns; no collective (backward all-reduces dX)"),
            _("A partial sum of the full Y; an all-reduce to add the ranks' parts"),
            _("A partial sum of the full Y; an all-gather to join the ranks' parts"),
            _("The full Y; no collective in either pass"),
        ],
        0,
        _(
            "Y_r = X A_r is block r of Y's columns. The sum appears in BACKWARD: dX = sum_r"
            " dY_r A_r^T, so dX is all-reduced (Megatron's f). The syllabus has this reversed"
            " (errata E4); the lesson ran both rules."
        ),
        key="errata_e4_column",
    )


def q_errata_e4_row(d: TpDraw, run: TPRunner) -> MultipleChoice:
    """Errata E4: what a row-parallel layer holds, and what its forward needs."""
    return MultipleChoice(
        _(
            "Row-parallel linear layer (A split along its input rows, X split along its last"
            " dim): what does each rank hold after its local matmul, and what does the forward"
            " pass need?"
        ),
        [
            _("A partial sum of the full Y; an all-reduce (Megatron's g)"),
            _("A slice of Y's columns; an all-gather to join the slices"),
            _("A slice of Y's columns; nothing, the next layer takes slices"),
            _("A partial sum of the full Y; an all-gather to join the parts"),
        ],
        0,
        _(
            "X_r A_r has Y's full shape but only rank r's share of the inner sum over the input"
            " dimension, so the ranks' outputs must be summed: all-reduce. Concatenating them"
            " (the syllabus's all-gather) gives a (s, t*h) tensor of partial sums, not Y."
        ),
        key="errata_e4_row",
    )


def q_tp_allreduce_bytes(d: TpDraw, run: TPRunner) -> Numeric:
    """The bytes of the tensor one all-reduce of Megatron's MLP reduces."""
    b, s, h, t = d.b, d.s, d.h, d.t
    return Numeric(
        _(
            "Megatron's MLP block with b={b}, s={s}, h={h} in bf16 (2 bytes) on t={t} GPUs: how"
            " many bytes is the tensor that ONE all-reduce reduces?"
        ).format(b=b, s=s, h=h, t=t),
        allreduce_message_bytes(b, s, h, 2),
        units="bytes",
        explanation=_(
            "Both all-reduces (g after B in forward, f before A in backward) act on the block's"
            " input/output activation of shape (b, s, h): b*s*h*itemsize bytes, whatever t is."
        ),
        params={"b": b, "s": s, "h": h, "itemsize": 2, "t": t},
        key="tp_allreduce_bytes",
    )


def q_tp_mlp_sent(d: TpDraw, run: TPRunner) -> Numeric:
    """Bytes each GPU sends for one forward and backward of the MLP block."""
    b, s, h, t = d.b, d.s, d.h, d.t
    return Numeric(
        _(
            "The same MLP block (b={b}, s={s}, h={h}, bf16, t={t}): how many bytes does each"
            " GPU SEND for one forward and backward pass with ring all-reduces?"
        ).format(b=b, s=s, h=h, t=t),
        tp_sent_bytes("mlp", t, b, s, h, 2),
        units="bytes",
        explanation=_(
            "Two all-reduces of b*s*h*2 bytes, each 2(t-1)/t of it sent per rank:"
            " 4(t-1)/t*b*s*h*2. This is per layer and per micro-batch, on the critical path:"
            " why TP stays inside a node (NVLink)."
        ),
        params={"b": b, "s": s, "h": h, "itemsize": 2, "t": t},
        key="tp_mlp_sent",
    )


def q_tp_layer_sent(d: TpDraw, run: TPRunner) -> Numeric:
    """Bytes each GPU sends for one forward and backward of a whole layer."""
    b, s, h, t = d.b, d.s, d.h, d.t
    return Numeric(
        _(
            "A whole transformer layer under Megatron TP (b={b}, s={s}, h={h}, bf16, t={t}):"
            " attention with its heads split over the GPUs, then the MLP block. How many bytes"
            " does each GPU SEND for one forward and backward of one micro-batch?"
        ).format(b=b, s=s, h=h, t=t),
        sum(attention_sent_bytes(t, b, s, h, 2).values()) + tp_sent_bytes("mlp", t, b, s, h, 2),
        units="bytes",
        explanation=_(
            "Attention costs what the MLP costs: g after the output projection Wo (forward), f"
            " before the Q, K, V projections (backward), each an all-reduce of the (b, s, h)"
            " activation; heads never mix, so attention itself needs nothing. Four all-reduces"
            " per layer and micro-batch: 4 x 2(t-1)/t x b*s*h*2 (the lesson's attention run"
            " counts its two in the trace)."
        ),
        params={"b": b, "s": s, "h": h, "itemsize": 2, "t": t},
        key="tp_layer_sent",
    )


def q_sp_forward_sent(d: TpDraw, run: TPRunner) -> Numeric:
    """Bytes each GPU sends in the MLP's forward with sequence parallelism."""
    b, s, h, t = d.b, d.s, d.h, d.t
    return Numeric(
        _(
            "With sequence parallelism (b={b}, s={s}, h={h}, bf16, t={t}) the forward pass of"
            " the MLP block runs an all-gather and a reduce-scatter instead of one all-reduce."
            " How many bytes does each GPU send in that FORWARD pass?"
        ).format(b=b, s=s, h=h, t=t),
        sp_sent_bytes_per_pass(t, b, s, h, 2)["forward"],
        units="bytes",
        explanation=_(
            "All-gather and reduce-scatter of the (b, s, h) tensor each send (t-1)/t*b*s*h*2"
            " per rank, together 2(t-1)/t*b*s*h*2: exactly one ring all-reduce (which IS a"
            " reduce-scatter plus an all-gather). No extra bytes in forward; backward gathers X"
            " once more, because the column layer kept only its sequence block: that is how SP"
            " divides the activations by t (Korthikanti et al. 2022)."
        ),
        params={"b": b, "s": s, "h": h, "itemsize": 2, "t": t},
        key="sp_forward_sent",
    )


def q_why_columns(d: TpDraw, run: TPRunner) -> MultipleChoice:
    """Why Megatron splits the first MLP matrix by columns."""
    return MultipleChoice(
        _("Why does Megatron split the FIRST MLP matrix A by columns rather than by rows?"),
        [
            _("GeLU is nonlinear: whole columns of XA let each rank apply it locally"),
            _("Column splits need less weight memory, since A is wider than it is tall"),
            _("Row splits would need an all-gather of X before the matmul, every step"),
            _("It makes no difference: GeLU(a + b) = GeLU(a) + GeLU(b) for every a and b"),
        ],
        0,
        _(
            "GeLU(X1 A1 + X2 A2) != GeLU(X1 A1) + GeLU(X2 A2). Splitting A by columns makes"
            " GeLU local, and then B split by rows takes those column slices as its split"
            " input: one all-reduce per pass (Megatron §3)."
        ),
        key="why_columns",
    )


def q_predict_tp_sent(d: TpDraw, run: TPRunner) -> PredictThenRun:
    """Predict, then run: the bytes rank 0 sends for one layer with the lesson's sizes."""
    n_run, mode_run = d.n_run, d.mode_run
    lb, ls, lh, li = LESSON["batch"], LESSON["seq"], LESSON["hidden"], LESSON["itemsize"]
    return PredictThenRun(
        _(
            "Predict how many bytes rank 0 sends for one forward and backward of the"
            " '{mode_run}' layer on {n_run} ranks with the lesson's sizes (b={lb}, s={ls},"
            " h={lh}, ffn=4h, float64), then run it."
        ).format(mode_run=mode_run, n_run=n_run, lb=lb, ls=ls, lh=lh),
        Numeric(
            _("Bytes rank 0 sends (ring volume)"),
            tp_sent_bytes(mode_run, n_run, lb, ls, lh, li),
            units="bytes",
            explanation=_(
                "Each all-reduce of the (b, s, h) activation sends 2(N-1)/N * b*s*h*8 bytes per"
                " rank."
            ),
        ),
        run=lambda: run(mode_run, n_run),
        reveal=lambda report: _("bytes sent per rank, from the trace: {sent}").format(
            sent=list(report.per_rank_sent_bytes)
        ),
        explanation=_(
            "column: one all-reduce (dX, backward); row: one (Y, forward); mlp: both. The"
            " trace's collective events, converted to ring volume, equal the formula."
        ),
        truth=lambda report: report.per_rank_sent_bytes[0],
        params={"mode": mode_run, "N": n_run, "b": lb, "s": ls, "h": lh, "itemsize": li},
        config=f'run_tp(Cluster({n_run}), "{mode_run}")',
        key="predict_tp_sent",
    )


TP = QuestionSet(
    TpDraw.draw,
    (
        q_errata_e4_column,
        q_errata_e4_row,
        q_tp_allreduce_bytes,
        q_tp_mlp_sent,
        q_tp_layer_sent,
        q_sp_forward_sent,
        q_why_columns,
        q_predict_tp_sent,
    ),
    formula_runner,
    "runner(mode, world_size)",
)


def tp_quiz(
    seed: int | None = None, runner: TPRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 08: which collective each layer needs (errata E4), bytes of Megatron's MLP and of a
    whole layer with attention, SP."""
    questions = TP.build(seed, runner)
    return Quiz(_("Lesson 08: tensor parallelism"), questions, name=NAME, learner=learner)


register_bank(NAME, tp_quiz, TP)
