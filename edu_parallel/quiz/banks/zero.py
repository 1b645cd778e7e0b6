"""Question bank of lesson 06 (ZeRO and FSDP): every number comes from the memory calculator.

``runner(stage, world_size) -> report`` trains the lesson's small model under ZeRO ``stage``; the
report has ``per_rank_peak_model_state_bytes``. The default evaluates the ZeRO formula for that
model (no processes); the lesson passes one that runs real ranks
(:func:`edu_parallel.zero.report.run_zero`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ...core.errors import bad_value
from ...core.i18n import _
from ...memory.communication import comm_bytes_per_step, fsdp_collectives_per_step
from ...memory.model_states import largest_model_that_fits, model_state_bytes
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import register_bank

ZeroRunner = Callable[[int, int], Any]
SMALL_MODEL_PARAMS = 3 * (
    16 * 16 + 16
)  # edu_parallel.zero.stages's default MLP: 3 Linear(16, 16) layers
GB = 1e9


def formula_runner(stage: int, world_size: int) -> Any:
    """The ZeRO formula for the lesson's small model, shaped like a run's report."""
    per_rank = model_state_bytes(SMALL_MODEL_PARAMS, world_size, zero=stage).bytes_per_gpu
    return SimpleNamespace(per_rank_peak_model_state_bytes=[per_rank] * world_size)


def zero_quiz(
    seed: int | None = None, runner: ZeroRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 06: bytes per GPU by stage, what fits, communication (errata E7, E8), U15."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_value("seed", seed, _("an int or None"))
    if runner is not None and not callable(runner):
        raise bad_value(
            "runner",
            runner,
            _("a callable {signature}, or None for the formula").format(
                signature="runner(stage, world_size)"
            ),
        )
    run = runner or formula_runner
    rng = random.Random(seed) if seed is not None else None
    psi = 7.5e9 if rng is None else rng.choice((1.5e9, 7.5e9, 13e9, 70e9))
    n = 64 if rng is None else rng.choice((8, 16, 64, 256))
    stage = 2 if rng is None else rng.choice((1, 2, 3))
    gpu_gib = 80 if rng is None else rng.choice((24, 40, 80))
    n_run = 2 if rng is None else rng.choice((2, 4))  # the lesson prints N = 4
    stage_run = 2 if rng is None else rng.choice((1, 2, 3))
    size = f"{psi / 1e9:g}B"
    units = 32 if rng is None else rng.choice((12, 24, 32, 80))

    def reveal(report: Any) -> str:
        return _("model-state bytes per rank, counted from the ledger: {bytes}").format(
            bytes=list(report.per_rank_peak_model_state_bytes)
        )

    questions = [
        Numeric(
            _(
                "A {size}-parameter model trained with mixed-precision Adam and plain data"
                " parallelism: how many bytes of model state does each GPU hold?"
            ).format(size=size),
            model_state_bytes(psi, n, zero=0).bytes_per_gpu,
            units="bytes",
            explanation=_(
                "16 bytes per parameter: 2 for fp16/bf16 params, 2 for grads, 4 + 4 + 4 for the"
                " fp32 master copy and Adam's m and v (ZeRO §3.1, K = 12), replicated on every GPU."
            ),
            params={"psi": psi, "N": n},
            key="dp_bytes",
        ),
        Numeric(
            _(
                "The same {size} model on {n} GPUs with ZeRO-{stage}: bytes of model state per GPU?"
            ).format(size=size, n=n, stage=stage),
            model_state_bytes(psi, n, zero=stage).bytes_per_gpu,
            units="bytes",
            explanation=_(
                "ZeRO-1 4Ψ + 12Ψ/N, ZeRO-2 2Ψ + 14Ψ/N, ZeRO-3 16Ψ/N (ZeRO Figure 1; errata E8):"
                " each stage shards one more kind of state over the N data-parallel ranks."
            ),
            params={"psi": psi, "N": n, "stage": stage},
            key="zero_bytes",
        ),
        MultipleChoice(
            _(
                "How much does each GPU send per training step under ZeRO-1 and ZeRO-2, compared"
                " with plain DP?"
            ),
            [
                _("The same as DP: a reduce-scatter plus an all-gather, 2Ψ bytes in all"),
                _("Less: each rank only exchanges the gradients of its own optimizer shard, 2Ψ/N"),
                _("Twice as much: the sharded optimizer state must be all-gathered every step"),
                _("Nothing: each rank updates its own shard, so no collective is needed"),
            ],
            0,
            _(
                "Errata E7 (ZeRO §7): ZeRO-1/2 move 2Ψ per rank like DP; ZeRO-3 gathers the"
                " parameters in forward and again in backward, 3Ψ, 1.5x DP. The lesson counts these"
                " bytes from the traces."
            ),
            key="errata_e7",
        ),
        Numeric(
            _(
                "ZeRO-3 on {n} GPUs: how many bytes does each GPU send per step for a {size} model"
                " (16-bit gradients and parameters, ring collectives)?"
            ).format(n=n, size=size),
            comm_bytes_per_step(psi, n, zero=3),
            units="bytes",
            explanation=_(
                "Reduce-scatter of gradients plus two all-gathers of parameters, each (N-1)/N of 2Ψ"
                " bytes: 3·(N-1)/N·2Ψ, 1.5x the DP all-reduce."
            ),
            params={"psi": psi, "N": n},
            key="zero3_comm",
        ),
        Numeric(
            _(
                "With ZeRO-3 on {n} GPUs of {gpu_gib} GiB each, what is the largest model"
                " (parameters) whose model states fit (activations not counted)?"
            ).format(n=n, gpu_gib=gpu_gib),
            largest_model_that_fits(gpu_gib * 2**30, n, zero=3),
            units="params",
            explanation=_(
                "16Ψ/N <= memory, so Ψ <= N·memory/16: memory grows with the number of GPUs, which"
                " is what lets ZeRO-3 train models no single GPU could hold."
            ),
            params={"N": n, "gpu_gib": gpu_gib},
            key="zero3_largest",
        ),
        Numeric(
            _(
                "FSDP2 wraps each of {units} transformer layers with fully_shard (the root holds no"
                " parameters of its own) and reshards after forward. How many collectives does one"
                " training step issue?"
            ).format(units=units),
            fsdp_collectives_per_step(units, True),
            units="collectives",
            explanation=_(
                "Per unit: an all-gather before forward, another before backward (it was"
                " resharded), a reduce-scatter of its gradients. The bytes are ZeRO-3's whatever"
                " the cut; the count (latency) and the peak of gathered parameters (one unit plus"
                " the prefetched next) depend on it."
            ),
            params={"units": units, "reshard": True},
            key="fsdp_collectives",
        ),
        MultipleChoice(
            _(
                "ZeRO and tensor/pipeline parallelism both cut memory per GPU. What is the"
                " difference (U15)?"
            ),
            [
                _(
                    "ZeRO shards the training state and gathers it to compute; TP/PP split the"
                    " computation itself"
                ),
                _(
                    "ZeRO splits the layers across GPUs, like PP; TP/PP shard the optimizer state,"
                    " like ZeRO-1"
                ),
                _(
                    "None: both give each GPU a part of the weights and of the math, under"
                    " different names"
                ),
                _(
                    "ZeRO only saves memory without data parallelism, while TP/PP work with any"
                    " data-parallel degree"
                ),
            ],
            0,
            _(
                "ZeRO is data parallelism without replication: state is sharded and gathered on"
                " demand (communication for memory). TP splits a layer's math, PP splits the"
                " layers; they combine (ZeRO-1 with TP/PP in 3D)."
            ),
            key="zero_vs_tp",
        ),
        PredictThenRun(
            _(
                "Predict the model-state bytes per rank when the lesson's small model ({params}"
                " parameters) trains with ZeRO-{stage_run} on {n_run} ranks, then run it."
            ).format(params=SMALL_MODEL_PARAMS, stage_run=stage_run, n_run=n_run),
            Numeric(
                _("Model-state bytes per rank"),
                model_state_bytes(SMALL_MODEL_PARAMS, n_run, zero=stage_run).bytes_per_gpu,
                tolerance=0.02,
                units="bytes",
                explanation=_("The ZeRO formula with Ψ = the small model's parameters."),
            ),
            run=lambda: run(stage_run, n_run),
            reveal=reveal,
            explanation=_(
                "The ledger counts the real tensors on each rank (bf16 params and grads, fp32"
                " master, m, v); they match the formula up to the padding of uneven shards."
            ),
            truth=lambda report: report.per_rank_peak_model_state_bytes[0],
            params={"psi": SMALL_MODEL_PARAMS, "N": n_run, "stage": stage_run},
            key="predict_zero_rank_bytes",
            config=f"run_zero(Cluster({n_run}), {stage_run})",
        ),
    ]
    return Quiz(_("Lesson 06: ZeRO and FSDP"), questions, name="06_zero_fsdp", learner=learner)


register_bank("06_zero_fsdp", zero_quiz)
