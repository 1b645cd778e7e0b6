"""Question bank of lesson 13 (gradient compression): bytes, all-gather, error feedback, PowerSGD.

Every number comes from :class:`~edu_parallel.compression.config.CompressConfig` and
its wire-bytes formula (torch-free); the drawn parameters and the questions on why are in
``compression_why.py``, the bytes and the runs here. ``runner(world_size=None, **options) ->
report`` trains the classifier with a compressor on real ranks; the report has
``wire_bytes_per_step``, ``compression_ratio``, ``messages_per_step`` and ``config``. The lesson
passes :func:`edu_parallel.compression.report.compress_runner`; without one
:func:`formula_runner` computes the same fields from the config (no processes), and
``tests/test_quiz_compress.py`` checks it against real ranks.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from ...compression.config import (
    CompressConfig,
    dense_bytes_per_step,
    kept,
    powersgd_split,
    wire_bytes_per_step,
)
from ...compression.runs import LESSON_RANKS
from ...core.i18n import _
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..registry import QuestionSet, register_bank
from .common import ranks
from .compression_why import (
    CompressDraw,
    CompressRunner,
    q_error_feedback,
    q_randk_allreduce,
    q_topk_allgather,
    q_when_it_pays,
)

NAME = "13_compression"
RUN_STEPS = 3  # a predict-then-run trains this many steps: the bytes per step do not change


def formula_runner(world_size: int | None = None, **options: Any) -> Any:
    """A run by formula, shaped like a :class:`~edu_parallel.compression.report.
    CompressReport`: the bytes, ratio and messages the config predicts."""
    kept_options = {k: v for k, v in options.items() if k != "compare_torch"}
    config = CompressConfig(LESSON_RANKS if world_size is None else world_size, **kept_options)
    wire = wire_bytes_per_step(config)
    return SimpleNamespace(
        config=config,
        wire_bytes_per_step=wire,
        compression_ratio=dense_bytes_per_step(config) / wire,
    )


def q_topk_bytes(d: CompressDraw, run: CompressRunner) -> Numeric:
    """Bytes each rank sends per step with top-k by all-gather."""
    psi = d.psi
    return Numeric(
        _(
            "Top-k with ratio {ratio} on N = {n} ranks, on the classifier (Psi = {psi} fp32"
            " gradients in one bucket). Each kept entry travels as an int32 index and an fp32"
            " value, by ring all-gather. How many bytes does each rank send per step?"
        ).format(ratio=f"{d.r_top:g}", n=d.n_top, psi=f"{psi:,}"),
        wire_bytes_per_step(CompressConfig(d.n_top, "topk", ratio=d.r_top)),
        units="bytes",
        explanation=_(
            "k = round(ratio * Psi) = {k}; every rank's 8k bytes must reach the N-1 others,"
            " and in a ring all-gather each rank forwards N-1 pieces: (N-1) * 8k bytes. It"
            " grows with N, unlike an all-reduce's 2(N-1)/N * 4 Psi."
        ).format(k=kept(psi, d.r_top)),
        params={"N": d.n_top, "ratio": d.r_top, "psi": psi, "k": kept(psi, d.r_top)},
        key="compress_topk_bytes",
    )


def q_sign_bytes(d: CompressDraw, run: CompressRunner) -> Numeric:
    """Bytes each rank sends per step with sign compression."""
    psi = d.psi
    return Numeric(
        _(
            "Sign compression on N = {n} ranks: each rank sends one bit per gradient entry"
            " (Psi = {psi}, packed into bytes) plus a 4-byte fp32 scale, by ring all-gather."
            " How many bytes does each rank send per step?"
        ).format(n=d.n_sign, psi=f"{psi:,}"),
        wire_bytes_per_step(CompressConfig(d.n_sign, "sign")),
        units="bytes",
        explanation=_(
            "ceil(Psi / 8) + 4 = {nbytes} bytes per rank, forwarded to the N-1 others:"
            " (N-1) * (ceil(Psi/8) + 4)."
        ).format(nbytes=math.ceil(psi / 8) + 4),
        params={"N": d.n_sign, "psi": psi},
        key="compress_sign_bytes",
    )


def q_powersgd_values(d: CompressDraw, run: CompressRunner) -> Numeric:
    """The fp32 values PowerSGD all-reduces for one 128 x 128 weight."""
    u, p, q = powersgd_split([(128, 128)], d.rank)
    return Numeric(
        _(
            "PowerSGD with rank r = {rank} compresses a 128 x 128 weight gradient M into P"
            " (128 x r) and Q (128 x r), each all-reduced. How many fp32 values of this weight"
            " does each step all-reduce, instead of 16,384?"
        ).format(rank=d.rank),
        p + q,
        tolerance=0.0,
        units="values",
        explanation=_(
            "P = M Q has n r values and Q = M^T P has m r: (n + m) r = 256 r, a compression"
            " of n m / ((n + m) r) = {ratio}x for this weight. Biases and other small tensors"
            " go uncompressed."
        ).format(ratio=f"{16384 / (p + q):g}"),
        params={"rank": d.rank, "P": p, "Q": q, "uncompressed": u},
        key="compress_powersgd_values",
    )


def _reveal(report: Any) -> str:
    c = report.config
    return _(
        "{label} on {n} ranks: each rank sent {sent} B per step (counted from the trace); the"
        " fp32 all-reduce would send {dense} B: ratio {ratio}x"
    ).format(
        label=c.label,
        n=c.world_size,
        sent=f"{report.wire_bytes_per_step:,.0f}",
        dense=f"{dense_bytes_per_step(c):,.0f}",
        ratio=f"{report.compression_ratio:.1f}",
    )


def q_predict_topk(d: CompressDraw, run: CompressRunner) -> PredictThenRun:
    """Predict, then run: top-k's bytes per rank and step, with error feedback."""
    n, r = d.n_run, d.r_run
    predicted = CompressConfig(n, "topk", ratio=r, error_feedback=True, steps=RUN_STEPS)
    return PredictThenRun(
        _(
            "Predict how many bytes each rank sends per step with top-k ratio {ratio} and"
            " error feedback on {n} ranks, then run it."
        ).format(ratio=f"{r:g}", n=n),
        Numeric(
            _("Bytes per rank per step"),
            wire_bytes_per_step(predicted),
            units="bytes",
            explanation=_("(N-1) * 8k with k = round(ratio * Psi)."),
        ),
        run=lambda: run(world_size=n, method="topk", ratio=r, error_feedback=True, steps=RUN_STEPS),
        reveal=_reveal,
        explanation=_(
            "Error feedback changes which entries are sent, not how many: k int32 indices and"
            " k fp32 values per rank, all-gathered around the ring."
        ),
        truth=lambda report: report.wire_bytes_per_step,
        params={"N": n, "ratio": r},
        key="predict_compress_topk",
        config=f'run_compress({ranks(n, LESSON_RANKS)}, "topk", ratio={r:g}, error_feedback=True)',
    )


def q_predict_powersgd(d: CompressDraw, run: CompressRunner) -> PredictThenRun:
    """Predict, then run: PowerSGD's compression ratio against the fp32 all-reduce."""
    n, rank = d.n_ps, d.rank_ps
    predicted = CompressConfig(n, "powersgd", rank=rank, steps=RUN_STEPS, start_step=0)
    return PredictThenRun(
        _(
            "PowerSGD rank {rank} on {n} ranks, compressing from the first step: predict the"
            " compression ratio against the fp32 all-reduce (dense bytes / sent bytes), then"
            " run it."
        ).format(rank=rank, n=n),
        Numeric(
            _("Compression ratio"),
            dense_bytes_per_step(predicted) / wire_bytes_per_step(predicted),
            tolerance=0.02,
            explanation=_(
                "Weights: (n + m) r values each; biases uncompressed; every all-reduce sends"
                " 2(N-1)/N of its buffer, so N cancels out of the ratio."
            ),
        ),
        run=lambda: run(world_size=n, method="powersgd", rank=rank, steps=RUN_STEPS, start_step=0),
        reveal=_reveal,
        explanation=_(
            "The classifier's weights are 128x32, 128x128 and 10x128; each one with (n + m) r"
            " * 2 < n m (torch's min_compression_rate) sends (n + m) r values for P and Q, the"
            " others and the 266 bias values go whole, against 22,026 fp32 values in all."
        ),
        truth=lambda report: report.compression_ratio,
        params={"N": n, "rank": rank},
        key="predict_compress_powersgd",
        config=f'run_compress({ranks(n, LESSON_RANKS)}, "powersgd", rank={rank}, start_step=0)',
    )


COMPRESS = QuestionSet(
    CompressDraw.draw,
    (
        q_topk_bytes,
        q_topk_allgather,
        q_sign_bytes,
        q_error_feedback,
        q_randk_allreduce,
        q_powersgd_values,
        q_when_it_pays,
        q_predict_topk,
        q_predict_powersgd,
    ),
    formula_runner,
    "runner(world_size=None, **options)",
)


def compress_quiz(
    seed: int | None = None, runner: CompressRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 13: wire bytes, all-gather against all-reduce, error feedback, PowerSGD, payoff."""
    questions = COMPRESS.build(seed, runner)
    return Quiz(_("Lesson 13: gradient compression"), questions, name=NAME, learner=learner)


register_bank(NAME, compress_quiz, COMPRESS)
