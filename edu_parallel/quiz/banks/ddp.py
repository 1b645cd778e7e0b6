"""Question bank of lesson 05 (data-parallel training): buckets, overlap, gradient accumulation.

Every number comes from :class:`~edu_parallel.data_parallel.config.DdpConfig` and its bucket
plan (:mod:`edu_parallel.data_parallel.buckets`), both torch-free.

``runner(world_size=None, **options) -> report`` trains one of the DdpConfig models on real ranks;
the report has ``buckets`` (per bucket ``{"bucket", "params", "bytes"}``), ``per_rank_sent_bytes``,
``messages_per_step``, ``collectives_per_step``, ``formula_sent_bytes`` and
``torch_ddp_bucket_sizes``. The lesson passes
:func:`edu_parallel.data_parallel.report.ddp_runner`; without one :func:`formula_runner`
computes the same fields from the config (no processes), and ``tests/test_quiz_ddp.py`` checks it
against real ranks.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ...core.i18n import _
from ...core.units import format_bytes
from ...data_parallel.buckets import ITEMSIZE, bucket_line
from ...data_parallel.config import DTYPE, DdpConfig
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import check_bank_args, register_bank

DdpRunner = Callable[..., Any]
DEFAULT_WORLD = 4  # ranks of the formula runner when none is given (the lesson's cluster)
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


def _choices(
    rng: random.Random | None, right: str, wrong: list[str], default: int
) -> tuple[list[str], int]:
    """``wrong`` with ``right`` inserted at ``default`` (seed None) or at a drawn position."""
    pos = default if rng is None else rng.randrange(len(wrong) + 1)
    out = list(wrong)
    out.insert(pos, right)
    return out, pos


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


def ddp_quiz(
    seed: int | None = None, runner: DdpRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 05: bytes vs buckets, messages, DDP's buckets, overlap, accumulation, tied weights."""
    rng = check_bank_args(seed, runner, "runner(world_size=None, **options) (None: formulas)")
    run = runner or formula_runner

    def pick(default: Any, *options: Any) -> Any:
        return default if rng is None else rng.choice(options)

    item = ITEMSIZE[DTYPE]
    # 1: bytes per step, whatever the bucketing
    n_bytes, cap_bytes = pick(8, 2, 8, 16, 32), pick(4.0, 0.5, 4.0, 10.0)
    bucketed = DdpConfig(n_bytes, "deep", bucket_cap_mb=cap_bytes)
    # 2: messages with one all-reduce per parameter
    model_msg = pick("mlp", "mlp", "deep", "tied")
    n_msg = pick(4, 2, 4, 8)
    per_param = DdpConfig(n_msg, model_msg, sync="per-param")
    # 3: DDP's default buckets for the deep model
    default_plan = DdpConfig(DEFAULT_WORLD, "deep").buckets()
    # 6: gradient accumulation
    n_acc, k_acc = pick(4, 2, 4, 8), pick(4, 2, 4, 8)
    acc = DdpConfig(n_acc, "deep", accumulate=k_acc)
    # 8: tied weights
    n_tied = pick(2, 2, 4, 8, 16)
    tied = DdpConfig(n_tied, "tied")
    # predict, then run: buckets and messages of one run (not a configuration the lesson prints)
    n_run, cap_run = pick(2, 2, 4), pick(2.5, 0.5, 1.5, 2.5, 5.0, 7.0)
    predicted = DdpConfig(n_run, "deep", bucket_cap_mb=cap_run)
    ranks = "cluster" if n_run == DEFAULT_WORLD else f"Cluster({n_run})"
    config = f'run_ddp({ranks}, "deep", bucket_cap_mb={cap_run:g})'  # as the lesson would run it
    runs: list[Any] = []

    def run_once() -> Any:
        if not runs:
            runs.append(run(world_size=n_run, model="deep", bucket_cap_mb=cap_run, steps=RUN_STEPS))
        return runs[0]

    reverse, reverse_at = _choices(
        rng,
        _(
            "Backward makes the last layer's gradients first, so bucket 0 fills and is sent while"
            " backward still runs"
        ),
        [
            _(
                "The ring visits the ranks in reverse order, so the last rank's layer must come"
                " first in every bucket"
            ),
            _(
                "The optimizer updates the last layer first, so its averaged gradient is needed"
                " before any of the others"
            ),
            _(
                "Reverse order puts the biggest tensors together, which removes most of the padding"
                " that each bucket would carry"
            ),
        ],
        1,
    )
    u_shape, u_at = _choices(
        rng,
        _(
            "Tiny buckets each pay 2(N-1) message latencies; one huge bucket fills only when"
            " backward ends, so none of it overlaps"
        ),
        [
            _(
                "Tiny buckets send more bytes in all, and one huge bucket sends fewer bytes but"
                " needs a flat buffer as big as the whole model"
            ),
            _(
                "Tiny buckets overflow the network's queues; one huge bucket is cut by the ring"
                " into chunks too big to send"
            ),
            _(
                "The optimizer waits for every bucket twice, once per ring phase, and both extremes"
                " make the second wait grow with the model"
            ),
        ],
        3,
    )
    first, first_at = _choices(
        rng,
        _(
            "It does not know yet in which order gradients become ready; the first backward records"
            " that order, then it rebuilds"
        ),
        [
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
        ],
        0,
    )
    no_sync, no_sync_at = _choices(
        rng,
        _(
            "Each rank adds the gradients into its own .grad; nothing is all-reduced until the K-th"
            " backward ends"
        ),
        [
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
        ],
        2,
    )

    questions = [
        Numeric(
            _(
                "The deep model (8 Linear 512x512 layers with biases, fp32) trains on N = {n_bytes}"
                " ranks with bucket_cap_mb = {cap_bytes}. How many bytes does each rank send per"
                " optimizer step? (And would one all-reduce per parameter change it?)"
            ).format(n_bytes=n_bytes, cap_bytes=f"{cap_bytes:g}"),
            bucketed.bytes_per_step(),
            units="bytes",
            explanation=_(
                "Ring all-reduce: each rank sends 2(N-1)/N of every bucket, and the buckets hold"
                " every gradient once, so 2(N-1)/N * Psi * 4 bytes whatever the cap (Psi = 8 *"
                " (512*512 + 512)). The bucketing changes how many messages carry them, not the"
                " bytes."
            ),
            params={"psi": bucketed.psi, "N": n_bytes, "itemsize": item, "cap": cap_bytes},
            key="ddp_bytes_per_step",
        ),
        Numeric(
            _(
                "The {model_msg} model on N = {n_msg} ranks with sync='per-param': one ring"
                " all-reduce per parameter tensor (each weight and each bias). How many messages"
                " does each rank send per optimizer step?"
            ).format(model_msg=model_msg, n_msg=n_msg),
            per_param.messages_per_step(),
            tolerance=0.0,
            units="messages",
            explanation=_(
                "A ring all-reduce sends 2(N-1) messages per rank (N-1 in reduce-scatter, N-1 in"
                " all-gather), once per bucket; here every tensor is a bucket (a tied weight is one"
                " tensor). Each message pays the link latency, which is why DDP packs tensors into"
                " buckets."
            ),
            params={"N": n_msg, "model": model_msg, "buckets": len(per_param.buckets())},
            key="ddp_messages_per_param",
        ),
        Numeric(
            _(
                "DDP's default bucketing (bucket_cap_mb left at None: 25 MiB, with a 1 MiB first"
                " bucket) on the deep model, whose weights are exactly 1 MiB each. How many buckets"
                " does it make?"
            ),
            len(default_plan),
            tolerance=0.0,
            units="buckets",
            explanation=_(
                "Gradients are packed in reverse registration order and a bucket closes when its"
                " bytes reach the limit: 7.bias then 7.weight reach the 1 MiB first limit, so the"
                " last layer is bucket 0; the other 7 layers (7 MiB + biases) stay under 25 MiB and"
                " form bucket 1."
            ),
            params={"model": "deep", "cap": None, "sizes": default_plan.sizes},
            key="ddp_default_buckets",
        ),
        MultipleChoice(
            _(
                "DDP fills its buckets with the parameters in reverse registration order (the last"
                " layer first). Why?"
            ),
            reverse,
            reverse_at,
            _(
                "Autograd runs the layers backwards, so the last layer's gradients are ready first."
                " Packing them first lets bucket 0 fill and its all-reduce overlap with the rest of"
                " backward (Li et al. 2020, §3.2.3)."
            ),
            key="ddp_reverse_order",
        ),
        MultipleChoice(
            _(
                "Sweeping bucket_cap_mb on the deep model gives a U-shaped step time: slow with"
                " tiny buckets and slow with one bucket for everything. Why?"
            ),
            u_shape,
            u_at,
            _(
                "The bytes are the same at every cap. Tiny buckets multiply the messages, and each"
                " one pays the latency alpha; a single bucket waits for the whole backward, so its"
                " all-reduce is fully exposed. In between, buckets are sent as they fill and hide"
                " under backward (Li et al. 2020, Figure 2 and §5)."
            ),
            key="ddp_bucket_u_shape",
        ),
        MultipleChoice(
            _(
                "Gradient accumulation over K micro-batches with DDP's no_sync() on the first K-1:"
                " what happens during those K-1 backward passes?"
            ),
            no_sync,
            no_sync_at,
            _(
                "Gradients add up in .grad (a sum of sums is the sum), so the all-reduce can wait:"
                " the K-th backward reduces the accumulated gradients once, bucket by bucket, and"
                " the optimizer steps once per K micro-batches."
            ),
            key="ddp_no_sync",
        ),
        Numeric(
            _(
                "The deep model on N = {n_acc} ranks accumulates K = {k_acc} micro-batches per"
                " optimizer step, all-reducing only after the last one. Averaged over the K"
                " micro-batches, how many bytes does each rank send per micro-batch?"
            ).format(n_acc=n_acc, k_acc=k_acc),
            acc.bytes_per_step() / acc.accumulate,
            units="bytes",
            explanation=_(
                "One all-reduce per optimizer step still sends 2(N-1)/N * Psi * 4 bytes per rank;"
                " spread over K micro-batches that is 2(N-1)/N * Psi * 4 / K: accumulation cuts the"
                " communication per sample by K."
            ),
            params={"psi": acc.psi, "N": n_acc, "K": k_acc, "itemsize": item},
            key="ddp_accumulate_bytes",
        ),
        MultipleChoice(
            _(
                "PyTorch's DDP (find_unused_parameters=False) reduces every gradient in ONE bucket"
                " in its first iteration, and uses its size-capped buckets from the second on. Why?"
            ),
            first,
            first_at,
            _(
                "The reducer's first assignment has a single bucket because the ready order is"
                " unknown (the registration order is only a guess). Its autograd hooks record the"
                " order in which gradients arrive, and it rebuilds the buckets from that order"
                " after the first iteration; the lesson sees it in torch_ddp_bucket_sizes."
            ),
            key="ddp_first_iteration",
        ),
        Numeric(
            _(
                "The tied model has 4 Linear 16x16 layers with biases whose first and last weight"
                " are one shared tensor. Trained on N = {n_tied} ranks, how many bytes does each"
                " rank send per optimizer step (fp32)?"
            ).format(n_tied=n_tied),
            tied.bytes_per_step(),
            units="bytes",
            explanation=_(
                "The shared weight is one parameter: its gradient (the sum of both uses) sits in"
                " one bucket and is reduced once. Psi = 3 * 16*16 + 4 * 16, and each rank sends"
                " 2(N-1)/N * Psi * 4 bytes."
            ),
            params={"psi": tied.psi, "N": n_tied, "itemsize": item},
            key="ddp_tied_bytes",
        ),
        PredictThenRun(
            _(
                "Predict how many buckets DDP makes for the deep model with bucket_cap_mb ="
                " {cap_run} (on {n_run} ranks), then run it."
            ).format(cap_run=f"{cap_run:g}", n_run=n_run),
            Numeric(
                _("Buckets"),
                len(predicted.buckets()),
                tolerance=0.0,
                units="buckets",
                explanation=_("Reverse order; a bucket closes when its bytes reach the cap."),
            ),
            run=run_once,
            reveal=_reveal,
            explanation=_(
                "An explicit cap applies to the first bucket too. Layers of 1 MiB + 2 KiB join the"
                " open bucket until its bytes reach the cap, so each bucket holds the fewest whole"
                " layers that reach it (the last one may hold the remainder)."
            ),
            truth=lambda report: len(report.buckets),
            params={"model": "deep", "cap": cap_run, "N": n_run},
            key="predict_ddp_buckets",
            config=config,
        ),
        PredictThenRun(
            _(
                "Same run (deep model, bucket_cap_mb = {cap_run}, {n_run} ranks): predict how many"
                " messages each rank sends per optimizer step, then run it."
            ).format(cap_run=f"{cap_run:g}", n_run=n_run),
            Numeric(
                _("Messages per rank per step"),
                predicted.messages_per_step(),
                tolerance=0.0,
                units="messages",
                explanation=_("2(N-1) ring messages per bucket."),
            ),
            run=run_once,
            reveal=_reveal,
            explanation=_(
                "Every bucket is one ring all-reduce: N-1 reduce-scatter and N-1 all-gather"
                " messages per rank, so 2(N-1) times the number of buckets; the trace counts the"
                " send events."
            ),
            truth=lambda report: report.messages_per_step,
            params={"model": "deep", "cap": cap_run, "N": n_run},
            key="predict_ddp_messages",
            config=config,
        ),
    ]
    return Quiz(
        _("Lesson 05: data-parallel training (DDP)"),
        questions,
        name="05_dp_bucketing_overlap",
        learner=learner,
    )


register_bank("05_dp_bucketing_overlap", ddp_quiz)
