"""Question bank of lesson 06 (data-parallel training): buckets, overlap, gradient accumulation.

Every number comes from :class:`~edu_parallel.data_parallel.config.DdpConfig` and its bucket
plan (:mod:`edu_parallel.data_parallel.buckets`), both torch-free. The drawn parameters and the
questions on buckets are in ``ddp_buckets.py``; accumulation, torch's DDP and the runs are here.

``runner(world_size=None, **options) -> report`` trains one of the DdpConfig models on real ranks;
the report has ``buckets`` (per bucket ``{"bucket", "params", "bytes"}``), ``per_rank_sent_bytes``,
``messages_per_step``, ``collectives_per_step``, ``formula_sent_bytes`` and
``torch_ddp_bucket_sizes``. The lesson passes
:func:`edu_parallel.data_parallel.report.ddp_runner`; without one :func:`formula_runner`
computes the same fields from the config (no processes), and ``tests/test_quiz_ddp.py`` checks it
against real ranks. References: Li et al. 2020 (PyTorch Distributed, VLDB).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ...core.i18n import _
from ...core.units import format_bytes
from ...data_parallel.buckets import bucket_line
from ...data_parallel.config import DdpConfig
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from .common import ranks, with_right
from .ddp_buckets import (
    DEFAULT_WORLD,
    ITEM,
    DdpDraw,
    DdpRunner,
    q_bucket_u_shape,
    q_bytes_per_step,
    q_default_buckets,
    q_messages_per_param,
    q_reverse_order,
)

NAME = "06_dp_bucketing_overlap"
RUN_ONLY = ("compare_torch", "link", "flops_per_s", "rows", "hook")  # no effect on the formulas
RUN_STEPS = 2  # the second iteration shows torch DDP's rebuilt buckets


def formula_runner(world_size: int | None = None, **options: Any) -> Any:
    """A run by formula, shaped like a :class:`~edu_parallel.data_parallel.report.DdpReport`:
    the bucket plan, bytes and messages that :class:`DdpConfig` predicts for ``options``."""
    kept = {k: v for k, v in options.items() if k not in RUN_ONLY}
    config = DdpConfig(DEFAULT_WORLD if world_size is None else world_size, **kept)
    plan = config.buckets()
    sent = config.bytes_per_step()
    return SimpleNamespace(
        config=config,
        buckets=[{"bucket": b.index, "params": list(b.params), "bytes": b.nbytes} for b in plan],
        per_rank_sent_bytes=[sent] * config.world_size,
        formula_sent_bytes=sent,
        messages_per_step=float(config.messages_per_step()),
        collectives_per_step=float(len(plan) if config.world_size > 1 else 0),
        torch_ddp_bucket_sizes=[],  # torch's DDP is not run
    )


def q_no_sync(d: DdpDraw, run: DdpRunner) -> MultipleChoice:
    """What no_sync() does during the first K-1 backward passes."""
    right = _(
        "Each rank adds the gradients into its own .grad; nothing is all-reduced until the K-th"
        " backward ends"
    )
    wrong = [
        _(
            "Each backward all-reduces its gradients, and the optimizer applies only the result"
            " of the K-th all-reduce"
        ),
        _(
            "Only the 1 MiB first bucket is all-reduced; the other buckets wait for the K-th"
            " backward to be sent"
        ),
        _(
            "The optimizer steps after every micro-batch with the learning rate divided by K,"
            " and no bucket is sent"
        ),
    ]
    return MultipleChoice(
        _(
            "Gradient accumulation over K micro-batches with DDP's no_sync() on the first K-1:"
            " what happens during those K-1 backward passes?"
        ),
        with_right(right, wrong, d.no_sync_at),
        d.no_sync_at,
        _(
            "Gradients add up in .grad (a sum of sums is the sum), so the all-reduce can wait:"
            " the K-th backward reduces the accumulated gradients once, bucket by bucket, and"
            " the optimizer steps once per K micro-batches."
        ),
        key="ddp_no_sync",
    )


def q_first_iteration(d: DdpDraw, run: DdpRunner) -> MultipleChoice:
    """Why torch's DDP uses one bucket in its first iteration."""
    right = _(
        "It does not know yet in which order gradients become ready; the first backward records"
        " that order, then it rebuilds"
    )
    wrong = [
        _(
            "The first iteration broadcasts the parameters from rank 0 and reuses the flat"
            " bucket buffer for that broadcast"
        ),
        _(
            "One bucket is faster while autograd compiles the graph; later iterations split it"
            " to save the memory of the flat buffer"
        ),
        _(
            "Its first bucket is limited to 1 MiB, and in the first iteration no gradient is"
            " bigger than that, so all of them fit in it"
        ),
    ]
    return MultipleChoice(
        _(
            "PyTorch's DDP (find_unused_parameters=False) reduces every gradient in ONE bucket"
            " in its first iteration, and uses its size-capped buckets from the second on. Why?"
        ),
        with_right(right, wrong, d.first_at),
        d.first_at,
        _(
            "The reducer's first assignment has a single bucket because the ready order is"
            " unknown (the registration order is only a guess). Its autograd hooks record the"
            " order in which gradients arrive, and it rebuilds the buckets from that order"
            " after the first iteration; the lesson sees it in torch_ddp_bucket_sizes."
        ),
        key="ddp_first_iteration",
    )


def q_accumulate_bytes(d: DdpDraw, run: DdpRunner) -> Numeric:
    """Bytes per micro-batch when K micro-batches share one all-reduce."""
    acc = DdpConfig(d.n_acc, "deep", accumulate=d.k_acc)
    return Numeric(
        _(
            "The deep model on N = {n_acc} ranks accumulates K = {k_acc} micro-batches per"
            " optimizer step, all-reducing only after the last one. Averaged over the K"
            " micro-batches, how many bytes does each rank send per micro-batch?"
        ).format(n_acc=d.n_acc, k_acc=d.k_acc),
        acc.bytes_per_step() / acc.accumulate,
        units="bytes",
        explanation=_(
            "One all-reduce per optimizer step still sends 2(N-1)/N * Psi * 4 bytes per rank;"
            " spread over K micro-batches that is 2(N-1)/N * Psi * 4 / K: accumulation cuts the"
            " communication per sample by K."
        ),
        params={"psi": acc.psi, "N": d.n_acc, "K": d.k_acc, "itemsize": ITEM},
        key="ddp_accumulate_bytes",
    )


def q_tied_bytes(d: DdpDraw, run: DdpRunner) -> Numeric:
    """Bytes per step of a model whose first and last weights are one tensor."""
    tied = DdpConfig(d.n_tied, "tied")
    return Numeric(
        _(
            "The tied model has 4 Linear 16x16 layers with biases whose first and last weight"
            " are one shared tensor. Trained on N = {n_tied} ranks, how many bytes does each"
            " rank send per optimizer step (fp32)?"
        ).format(n_tied=d.n_tied),
        tied.bytes_per_step(),
        units="bytes",
        explanation=_(
            "The shared weight is one parameter: its gradient (the sum of both uses) sits in"
            " one bucket and is reduced once. Psi = 3 * 16*16 + 4 * 16, and each rank sends"
            " 2(N-1)/N * Psi * 4 bytes."
        ),
        params={"psi": tied.psi, "N": d.n_tied, "itemsize": ITEM},
        key="ddp_tied_bytes",
    )


def _reveal(report: Any) -> str:
    lines = [_("the run made {n} buckets:").format(n=len(report.buckets))]
    lines += ["  " + bucket_line(b["bucket"], b["params"], b["bytes"]) for b in report.buckets]
    sent = ", ".join(format_bytes(int(x)) for x in report.per_rank_sent_bytes)
    lines.append(
        _(
            "messages per rank per step: {messages} ({collectives} all-reduces); bytes sent per"
            " rank per step: {sent}"
        ).format(
            messages=f"{report.messages_per_step:g}",
            collectives=f"{report.collectives_per_step:g}",
            sent=sent,
        )
    )
    sizes = getattr(report, "torch_ddp_bucket_sizes", None)
    if sizes:
        lines.append(
            _("torch DDP's bucket sizes per iteration (bytes): {sizes}").format(sizes=sizes)
        )
    return "\n".join(lines)


def _run(d: DdpDraw, run: DdpRunner) -> Any:
    """The run both predict-then-run questions read (the bank shares one between them)."""
    return run(world_size=d.n_run, model="deep", bucket_cap_mb=d.cap_run, steps=RUN_STEPS)


def _call(d: DdpDraw) -> str:
    """That run as the lesson would write it."""
    return f'run_ddp({ranks(d.n_run, DEFAULT_WORLD)}, "deep", bucket_cap_mb={d.cap_run:g})'


def q_predict_buckets(d: DdpDraw, run: DdpRunner) -> PredictThenRun:
    """Predict, then run: the buckets DDP makes for a cap the lesson does not print."""
    return PredictThenRun(
        _(
            "Predict how many buckets DDP makes for the deep model with bucket_cap_mb ="
            " {cap_run} (on {n_run} ranks), then run it."
        ).format(cap_run=f"{d.cap_run:g}", n_run=d.n_run),
        Numeric(
            _("Buckets"),
            len(DdpConfig(d.n_run, "deep", bucket_cap_mb=d.cap_run).buckets()),
            tolerance=0.0,
            units="buckets",
            explanation=_("Reverse order; a bucket closes when its bytes reach the cap."),
        ),
        run=lambda: _run(d, run),
        reveal=_reveal,
        explanation=_(
            "An explicit cap applies to the first bucket too. Layers of 1 MiB + 2 KiB join the"
            " open bucket until its bytes reach the cap, so each bucket holds the fewest whole"
            " layers that reach it (the last one may hold the remainder)."
        ),
        truth=lambda report: len(report.buckets),
        params={"model": "deep", "cap": d.cap_run, "N": d.n_run},
        key="predict_ddp_buckets",
        config=_call(d),
    )


def q_predict_messages(d: DdpDraw, run: DdpRunner) -> PredictThenRun:
    """Predict, then run: the messages each rank sends per step in that run."""
    return PredictThenRun(
        _(
            "Same run (deep model, bucket_cap_mb = {cap_run}, {n_run} ranks): predict how many"
            " messages each rank sends per optimizer step, then run it."
        ).format(cap_run=f"{d.cap_run:g}", n_run=d.n_run),
        Numeric(
            _("Messages per rank per step"),
            DdpConfig(d.n_run, "deep", bucket_cap_mb=d.cap_run).messages_per_step(),
            tolerance=0.0,
            units="messages",
            explanation=_("2(N-1) ring messages per bucket."),
        ),
        run=lambda: _run(d, run),
        reveal=_reveal,
        explanation=_(
            "Every bucket is one ring all-reduce: N-1 reduce-scatter and N-1 all-gather"
            " messages per rank, so 2(N-1) times the number of buckets; the trace counts the"
            " send events."
        ),
        truth=lambda report: report.messages_per_step,
        params={"model": "deep", "cap": d.cap_run, "N": d.n_run},
        key="predict_ddp_messages",
        config=_call(d),
    )


DDP = QuestionSet(
    DdpDraw.draw,
    (
        q_bytes_per_step,
        q_messages_per_param,
        q_default_buckets,
        q_reverse_order,
        q_bucket_u_shape,
        q_no_sync,
        q_accumulate_bytes,
        q_first_iteration,
        q_tied_bytes,
        q_predict_buckets,
        q_predict_messages,
    ),
    formula_runner,
    "runner(world_size=None, **options) (None: formulas)",
    share_runs=True,  # the two predict-then-run questions read one run
)


def ddp_quiz(
    seed: int | None = None, runner: DdpRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 06: bytes vs buckets, messages, DDP's buckets, overlap, accumulation, tied weights."""
    questions = DDP.build(seed, runner)
    return Quiz(_("Lesson 06: data-parallel training (DDP)"), questions, name=NAME, learner=learner)


register_bank(NAME, ddp_quiz, DDP)
