"""Question bank of lesson 11 (gradient compression): bytes, all-gather, error feedback, PowerSGD.

Every number comes from :class:`~edu_parallel.compression.config.CompressConfig` and
its wire-bytes formula (torch-free). ``runner(world_size=None, **options) -> report`` trains the
classifier with a compressor on real ranks; the report has ``wire_bytes_per_step``,
``compression_ratio``, ``messages_per_step`` and ``config``. The lesson passes
:func:`edu_parallel.compression.report.compress_runner`; without one
:func:`formula_runner` computes the same fields from the config (no processes), and
``tests/test_quiz_compress.py`` checks it against real ranks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ...compression.config import (
    CompressConfig,
    dense_bytes_per_step,
    kept,
    messages_per_step,
    powersgd_split,
    wire_bytes_per_step,
)
from ...compression.whatif import LARGE_MODEL, Measured, what_if
from ...core.i18n import _
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import check_bank_args, register_bank

CompressRunner = Callable[..., Any]
RUN_STEPS = 3  # a predict-then-run trains this many steps: the bytes per step do not change


def formula_runner(world_size: int | None = None, **options: Any) -> Any:
    """A run by formula, shaped like a :class:`~edu_parallel.compression.report.
    CompressReport`: the bytes, ratio and messages the config predicts."""
    kept_options = {k: v for k, v in options.items() if k != "compare_torch"}
    config = CompressConfig(2 if world_size is None else world_size, **kept_options)
    wire = wire_bytes_per_step(config)
    return SimpleNamespace(
        config=config,
        wire_bytes_per_step=wire,
        compression_ratio=dense_bytes_per_step(config) / wire,
    )


def _ranks(n: int) -> str:
    """The ranks of a run as the lesson writes them: its 2-rank ``cluster``, or a new one."""
    return "cluster" if n == 2 else f"Cluster({n})"


def _choices(rng: random.Random | None, right: str, wrong: list[str], default: int) -> tuple:
    """``wrong`` with ``right`` inserted at ``default`` (seed None) or at a drawn position."""
    pos = default if rng is None else rng.randrange(len(wrong) + 1)
    out = list(wrong)
    out.insert(pos, right)
    return out, pos


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


def compress_quiz(
    seed: int | None = None, runner: CompressRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 11: wire bytes, all-gather against all-reduce, error feedback, PowerSGD, payoff."""
    rng = check_bank_args(seed, runner, "runner(world_size=None, **options)")
    run = runner or formula_runner

    def pick(default: Any, *options: Any) -> Any:
        return default if rng is None else rng.choice(options)

    # 1: top-k bytes, by all-gather
    n_top, r_top = pick(8, 4, 8, 16), pick(0.01, 0.01, 0.02, 0.05)
    topk = CompressConfig(n_top, "topk", ratio=r_top)
    psi = topk.ddp().psi
    # 2: sign bytes
    n_sign = pick(4, 2, 4, 8)
    sign = CompressConfig(n_sign, "sign")
    # 5: PowerSGD values for one 128 x 128 weight
    rank = pick(2, 1, 2, 4, 8)
    u, p, q = powersgd_split([(128, 128)], rank)
    # predict, then run: top-k bytes on real ranks (a configuration the lesson does not print)
    n_run, r_run = pick(4, 2, 4), pick(0.05, 0.02, 0.05, 0.1)
    predicted = CompressConfig(n_run, "topk", ratio=r_run, error_feedback=True, steps=RUN_STEPS)
    n_ps, rank_ps = pick(2, 2, 4), pick(4, 2, 4, 8)
    predicted_ps = CompressConfig(n_ps, "powersgd", rank=rank_ps, steps=RUN_STEPS, start_step=0)
    topk_config = f'run_compress({_ranks(n_run)}, "topk", ratio={r_run:g}, error_feedback=True)'
    ps_config = f'run_compress({_ranks(n_ps)}, "powersgd", rank={rank_ps}, start_step=0)'
    runs: dict[str, Any] = {}

    def run_topk() -> Any:
        if "topk" not in runs:
            runs["topk"] = run(
                world_size=n_run, method="topk", ratio=r_run, error_feedback=True, steps=RUN_STEPS
            )
        return runs["topk"]

    def run_powersgd() -> Any:
        if "ps" not in runs:
            runs["ps"] = run(
                world_size=n_ps, method="powersgd", rank=rank_ps, steps=RUN_STEPS, start_step=0
            )
        return runs["ps"]

    gather, gather_at = _choices(
        rng,
        _("Each rank keeps other indices, so equal positions do not line up to be added"),
        [
            _("All-reduce cannot carry integers, and top-k must send its indices as integers"),
            _("An all-reduce would add the indices themselves and send them to the wrong ranks"),
            _("Top-k values are too small for the ring to add without losing their precision"),
        ],
        2,
    )
    feedback, feedback_at = _choices(
        rng,
        _("What was dropped is kept and added to the next gradient, so it is sent later"),
        [
            _("It sends the dropped entries to one rank, which applies them to the model alone"),
            _("It rescales the kept entries by d/k so that their expected value is the gradient"),
            _("It repeats the step whenever the loss rose, undoing a bad compressed update"),
        ],
        1,
    )
    randk, randk_at = _choices(
        rng,
        _("Every rank draws the same k indices from one seed, so the values line up"),
        [
            _("Random indices rarely collide, so the ring may add them without their positions"),
            _("Random-k sends all d entries but only k of them are non-zero, so sums still work"),
            _("Its values are rescaled by d/k, which makes the indices unnecessary on the wire"),
        ],
        3,
    )
    # 7: when it pays, from the what-if model on the formulas of a 4-rank run
    runs4 = [CompressConfig(4, m, error_feedback=m != "none") for m in ("none", "topk")]
    measured = [
        Measured(c.label, c.method, 4, psi, wire_bytes_per_step(c), messages_per_step(c))
        for c in runs4
    ]
    speed = what_if(measured, links=("nvlink4-h100", "eth-25g"))
    speedup = {row.link: row.speedup for row in speed.itertuples() if row.method != "none"}
    pays, pays_at = _choices(
        rng,
        _("On a slow link where communication outlasts backward and cannot hide under it"),
        [
            _("On NVLink, where the GPUs of a node exchange the most bytes per second"),
            _("Whenever the model is small, since a small gradient compresses best"),
            _("On any link: sending fewer bytes always makes a training step shorter"),
        ],
        0,
    )

    questions = [
        Numeric(
            _(
                "Top-k with ratio {ratio} on N = {n} ranks, on the classifier (Psi = {psi} fp32"
                " gradients in one bucket). Each kept entry travels as an int32 index and an fp32"
                " value, by ring all-gather. How many bytes does each rank send per step?"
            ).format(ratio=f"{r_top:g}", n=n_top, psi=f"{psi:,}"),
            wire_bytes_per_step(topk),
            units="bytes",
            explanation=_(
                "k = round(ratio * Psi) = {k}; every rank's 8k bytes must reach the N-1 others,"
                " and in a ring all-gather each rank forwards N-1 pieces: (N-1) * 8k bytes. It"
                " grows with N, unlike an all-reduce's 2(N-1)/N * 4 Psi."
            ).format(k=kept(psi, r_top)),
            params={"N": n_top, "ratio": r_top, "psi": psi, "k": kept(psi, r_top)},
            key="compress_topk_bytes",
        ),
        MultipleChoice(
            _("Why does top-k sparsification need an all-gather instead of an all-reduce?"),
            gather,
            gather_at,
            _(
                "An all-reduce adds element i of every rank into element i. Each rank's top-k"
                " picks its own indices, so rank 0's i-th kept value and rank 1's are different"
                " coordinates: every rank must see every (index, value) pair and add them itself."
            ),
            key="compress_topk_allgather",
        ),
        Numeric(
            _(
                "Sign compression on N = {n} ranks: each rank sends one bit per gradient entry"
                " (Psi = {psi}, packed into bytes) plus a 4-byte fp32 scale, by ring all-gather."
                " How many bytes does each rank send per step?"
            ).format(n=n_sign, psi=f"{psi:,}"),
            wire_bytes_per_step(sign),
            units="bytes",
            explanation=_(
                "ceil(Psi / 8) + 4 = {nbytes} bytes per rank, forwarded to the N-1 others:"
                " (N-1) * (ceil(Psi/8) + 4)."
            ).format(nbytes=math.ceil(psi / 8) + 4),
            params={"N": n_sign, "psi": psi},
            key="compress_sign_bytes",
        ),
        MultipleChoice(
            _(
                "Top-k 1% without error feedback stalls far below the target; with it, it tracks"
                " the uncompressed curve. What does error feedback do?"
            ),
            feedback,
            feedback_at,
            _(
                "e = p - C(p) is kept on each rank and added to the next step's gradient (p = g +"
                " e). An entry too small to be sent now grows until it is: nothing is lost, only"
                " delayed (Stich et al. 2018; Karimireddy et al. 2019)."
            ),
            key="compress_error_feedback",
        ),
        MultipleChoice(
            _(
                "Random-k sends the values of k entries, like top-k, but it can use an all-reduce."
                " Why?"
            ),
            randk,
            randk_at,
            _(
                "The indices come from a generator seeded alike on every rank (step, bucket), so"
                " every rank sends the values of the same k coordinates and the ring adds them"
                " position by position: 2(N-1)/N * 4k bytes, flat in N."
            ),
            key="compress_randk_allreduce",
        ),
        Numeric(
            _(
                "PowerSGD with rank r = {rank} compresses a 128 x 128 weight gradient M into P"
                " (128 x r) and Q (128 x r), each all-reduced. How many fp32 values of this weight"
                " does each step all-reduce, instead of 16,384?"
            ).format(rank=rank),
            p + q,
            tolerance=0.0,
            units="values",
            explanation=_(
                "P = M Q has n r values and Q = M^T P has m r: (n + m) r = 256 r, a compression"
                " of n m / ((n + m) r) = {ratio}x for this weight. Biases and other small tensors"
                " go uncompressed."
            ).format(ratio=f"{16384 / (p + q):g}"),
            params={"rank": rank, "P": p, "Q": q, "uncompressed": u},
            key="compress_powersgd_values",
        ),
        MultipleChoice(
            _(
                "Retimed for a {billions}-billion-parameter model on 4 ranks, top-k 1% with error"
                " feedback changes the step time by {nvlink}x on NVLink and by {eth}x on 25 Gb/s"
                " Ethernet (speed-ups). When does compression pay?"
            ).format(
                billions=f"{LARGE_MODEL['psi'] / 1e9:g}",
                nvlink=f"{speedup['nvlink4-h100']:.2f}",
                eth=f"{speedup['eth-25g']:.1f}",
            ),
            pays,
            pays_at,
            _(
                "DDP overlaps the all-reduce with backward. On NVLink the all-reduce already hides"
                " under backward, so compression only adds its own compute; on a slow link the"
                " communication is exposed, and cutting its bytes cuts the step."
            ),
            params={"speedup": speedup},
            key="compress_when_it_pays",
        ),
        PredictThenRun(
            _(
                "Predict how many bytes each rank sends per step with top-k ratio {ratio} and"
                " error feedback on {n} ranks, then run it."
            ).format(ratio=f"{r_run:g}", n=n_run),
            Numeric(
                _("Bytes per rank per step"),
                wire_bytes_per_step(predicted),
                units="bytes",
                explanation=_("(N-1) * 8k with k = round(ratio * Psi)."),
            ),
            run=run_topk,
            reveal=_reveal,
            explanation=_(
                "Error feedback changes which entries are sent, not how many: k int32 indices and"
                " k fp32 values per rank, all-gathered around the ring."
            ),
            truth=lambda report: report.wire_bytes_per_step,
            params={"N": n_run, "ratio": r_run},
            key="predict_compress_topk",
            config=topk_config,
        ),
        PredictThenRun(
            _(
                "PowerSGD rank {rank} on {n} ranks, compressing from the first step: predict the"
                " compression ratio against the fp32 all-reduce (dense bytes / sent bytes), then"
                " run it."
            ).format(rank=rank_ps, n=n_ps),
            Numeric(
                _("Compression ratio"),
                dense_bytes_per_step(predicted_ps) / wire_bytes_per_step(predicted_ps),
                tolerance=0.02,
                explanation=_(
                    "Weights: (n + m) r values each; biases uncompressed; every all-reduce sends"
                    " 2(N-1)/N of its buffer, so N cancels out of the ratio."
                ),
            ),
            run=run_powersgd,
            reveal=_reveal,
            explanation=_(
                "The classifier's weights are 128x32, 128x128 and 10x128; each one with (n + m) r"
                " * 2 < n m (torch's min_compression_rate) sends (n + m) r values for P and Q, the"
                " others and the 266 bias values go whole, against 22,026 fp32 values in all."
            ),
            truth=lambda report: report.compression_ratio,
            params={"N": n_ps, "rank": rank_ps},
            key="predict_compress_powersgd",
            config=ps_config,
        ),
    ]
    return Quiz(
        _("Lesson 11: gradient compression"), questions, name="11_compression", learner=learner
    )


register_bank("11_compression", compress_quiz)
