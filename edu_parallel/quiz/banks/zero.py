"""Question bank of lesson 07 (ZeRO and FSDP): every number comes from the memory calculator.

``runner(stage, world_size) -> report`` trains the lesson's small model under ZeRO ``stage``; the
report has ``per_rank_peak_model_state_bytes``. The default evaluates the ZeRO formula for that
model (no processes); the lesson passes one that runs real ranks
(:func:`edu_parallel.zero.report.run_zero`). References: Rajbhandari et al. 2020 (ZeRO), PyTorch
FSDP2's ``fully_shard``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...core.i18n import _
from ...memory.communication import comm_bytes_per_step, fsdp_collectives_per_step
from ...memory.model_states import largest_model_that_fits, model_state_bytes
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from .common import pick

NAME = "07_zero_fsdp"
ZeroRunner = Callable[[int, int], Any]
SMALL_MODEL_PARAMS = 3 * (16 * 16 + 16)  # edu_parallel.zero.stages's default MLP: 3 Linear(16, 16)


def formula_runner(stage: int, world_size: int) -> Any:
    """The ZeRO formula for the lesson's small model, shaped like a run's report."""
    per_rank = model_state_bytes(SMALL_MODEL_PARAMS, world_size, zero=stage).bytes_per_gpu
    return SimpleNamespace(per_rank_peak_model_state_bytes=[per_rank] * world_size)


@dataclass(frozen=True)
class ZeroDraw:
    """Lesson 07's parameters, drawn in one go."""

    psi: float
    """Parameters of the paper questions' model."""
    n: int
    """GPUs of the paper questions."""
    stage: int
    """The ZeRO stage of the bytes-per-GPU question."""
    gpu_gib: int
    """Memory per GPU, GiB, of the largest-model question."""
    n_run: int
    """Ranks of the run (the lesson prints N = 4)."""
    stage_run: int
    """The ZeRO stage of the run."""
    units: int
    """Transformer layers FSDP2 wraps, one unit each."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> ZeroDraw:
        psi, n = pick(rng, 7.5e9, 1.5e9, 7.5e9, 13e9, 70e9), pick(rng, 64, 8, 16, 64, 256)
        stage, gpu_gib = pick(rng, 2, 1, 2, 3), pick(rng, 80, 24, 40, 80)
        n_run, stage_run = pick(rng, 2, 2, 4), pick(rng, 2, 1, 2, 3)
        return cls(psi, n, stage, gpu_gib, n_run, stage_run, pick(rng, 32, 12, 24, 32, 80))

    @property
    def size(self) -> str:
        """The model's size as the questions write it: ``"7.5B"``."""
        return f"{self.psi / 1e9:g}B"


def q_dp_bytes(d: ZeroDraw, run: ZeroRunner) -> Numeric:
    """Model-state bytes per GPU under plain data parallelism."""
    psi, n, size = d.psi, d.n, d.size
    return Numeric(
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
    )


def q_zero_bytes(d: ZeroDraw, run: ZeroRunner) -> Numeric:
    """Model-state bytes per GPU under a ZeRO stage."""
    psi, n, stage, size = d.psi, d.n, d.stage, d.size
    return Numeric(
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
    )


def q_errata_e7(d: ZeroDraw, run: ZeroRunner) -> MultipleChoice:
    """Errata E7: what ZeRO-1 and ZeRO-2 send compared with DP."""
    return MultipleChoice(
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
    )


def q_zero3_comm(d: ZeroDraw, run: ZeroRunner) -> Numeric:
    """Bytes each GPU sends per step under ZeRO-3."""
    psi, n, size = d.psi, d.n, d.size
    return Numeric(
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
    )


def q_zero3_largest(d: ZeroDraw, run: ZeroRunner) -> Numeric:
    """The largest model whose states fit under ZeRO-3."""
    n, gpu_gib = d.n, d.gpu_gib
    return Numeric(
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
    )


def q_fsdp_collectives(d: ZeroDraw, run: ZeroRunner) -> Numeric:
    """Collectives per step when FSDP2 wraps every layer."""
    units = d.units
    return Numeric(
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
    )


def q_zero_vs_tp(d: ZeroDraw, run: ZeroRunner) -> MultipleChoice:
    """How ZeRO differs from tensor and pipeline parallelism (U15)."""
    return MultipleChoice(
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
    )


def _reveal(report: Any) -> str:
    return _("model-state bytes per rank, counted from the ledger: {bytes}").format(
        bytes=list(report.per_rank_peak_model_state_bytes)
    )


def q_predict_zero_rank_bytes(d: ZeroDraw, run: ZeroRunner) -> PredictThenRun:
    """Predict, then run: the model-state bytes per rank of the small model."""
    n_run, stage_run = d.n_run, d.stage_run
    return PredictThenRun(
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
        reveal=_reveal,
        explanation=_(
            "The ledger counts the real tensors on each rank (bf16 params and grads, fp32"
            " master, m, v); they match the formula up to the padding of uneven shards."
        ),
        truth=lambda report: report.per_rank_peak_model_state_bytes[0],
        params={"psi": SMALL_MODEL_PARAMS, "N": n_run, "stage": stage_run},
        key="predict_zero_rank_bytes",
        config=f"run_zero(Cluster({n_run}), {stage_run})",
    )


ZERO = QuestionSet(
    ZeroDraw.draw,
    (
        q_dp_bytes,
        q_zero_bytes,
        q_errata_e7,
        q_zero3_comm,
        q_zero3_largest,
        q_fsdp_collectives,
        q_zero_vs_tp,
        q_predict_zero_rank_bytes,
    ),
    formula_runner,
    "runner(stage, world_size)",
)


def zero_quiz(
    seed: int | None = None, runner: ZeroRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 07: bytes per GPU by stage, what fits, communication (errata E7, E8), U15."""
    questions = ZERO.build(seed, runner)
    return Quiz(_("Lesson 07: ZeRO and FSDP"), questions, name=NAME, learner=learner)


register_bank(NAME, zero_quiz, ZERO)
