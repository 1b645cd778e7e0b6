"""Question bank of lesson 12 (3D parallelism and the planner).

Every answer is computed by package code: the mesh's groups by
:class:`~edu_parallel.core.dims.ParallelDims`, bytes per rank and group by
:func:`edu_parallel.planner.traffic.group_bytes_per_rank` (equal to the 8-rank run's trace,
``tests/test_parallel_3d.py``), memory and time by the planner (``parallel_3d_planner.py``).
``runner(**layout) -> report`` runs one 3D step (the lesson passes
:func:`edu_parallel.parallel_3d.runner_3d`); without one, a report-shaped stand-in computed from
the traffic formula is used. References: Narayanan et al. 2021 (Megatron-LM), torchtitan.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from ...core.units import format_bytes
from ...parallel_3d.config import ITEMSIZE, Config3D, model_shape
from ...planner import group_bytes_per_rank
from ...planner.estimate import ITEMSIZE as WIRE_ITEMSIZE
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from .common import pick
from .parallel_3d_planner import q_across_nodes, q_planner_memory

NAME = "12_3d_planner"
Runner3D = Callable[..., Any]
LESSON = Config3D()  # the lesson's model and step
# what a report's peak activations count, by its row key (shown in the reveal)
MEASURES = {"activation_bytes": N_("activation bytes"), "in_flight": N_("in flight")}
# Other placements of the three binary coordinates of 8 ranks: bit k of the rank is that dimension.
ALT_ORDERS = ({"pp": 0, "tp": 1, "dp": 2}, {"tp": 2, "dp": 1, "pp": 0})
BIG = model_shape(layers=32, hidden=4096, heads=32, seq=2048)  # the bytes questions' model
LESSON_SIZES = {"dp": 1, "tp": 4, "pp": 2}  # the predict-then-run layout (the lesson prints others)


def formula_runner(dp: int = 2, tp: int = 2, pp: int = 2, ep: int = 1, **sizes: Any) -> Any:
    """The traffic formula shaped like a run's report (``rows`` with coordinates and bytes)."""
    cfg = Config3D(**sizes)
    dims = ParallelDims(dp * tp * pp, dp=dp, tp=tp, pp=pp, ep=ep)
    m = cfg.num_microbatches(pp)
    sent = group_bytes_per_rank(cfg.shape(), dims, cfg.micro_batch(dims), m, cfg.seq, cfg.zero, 4)
    rows = []
    for r, s in enumerate(sent):
        c = dims.coords(r)
        rows.append({"rank": r, **c, "sent_bytes_by_group": s, "in_flight": min(m, pp - c["pp"])})
    return SimpleNamespace(rows=rows, dims=dims)


@dataclass(frozen=True)
class Draw3D:
    """Lesson 12's parameters, drawn in one go."""

    rank: int
    """The rank whose groups the mesh question asks for."""
    big_dp: int
    """The data-parallel degree of the bytes questions (TP is 8, PP the rest of 64 GPUs)."""
    big_m: int
    """Microbatches per replica of the bytes questions."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> Draw3D:
        return cls(pick(rng, 5, 3, 5, 6), pick(rng, 4, 4, 8), pick(rng, 8, 8, 16))

    @property
    def big_dims(self) -> ParallelDims:
        return ParallelDims(64, dp=self.big_dp, tp=8, pp=64 // (8 * self.big_dp))

    def big_bytes(self, zero: int) -> dict[str, float]:
        """Bytes the first GPU sends per group and step, from the traffic formula."""
        dims, m = self.big_dims, self.big_m
        per_rank = group_bytes_per_rank(BIG, dims, 1, m, BIG.seq, zero, WIRE_ITEMSIZE)
        return per_rank[0]


def _groups_of(dims: ParallelDims, rank: int) -> dict[str, list[int]]:
    return {d: next(g for g in dims.groups(d) if rank in g) for d in ("tp", "dp", "pp")}


def _bit_groups(rank: int, bits: dict[str, int]) -> dict[str, list[int]]:
    """Groups of ``rank`` when dimension ``d`` is bit ``bits[d]`` of the rank (degrees of 2)."""
    return {d: sorted((rank, rank ^ (1 << b))) for d, b in bits.items()}


def _text(groups: dict[str, list[int]]) -> str:
    return f"TP {groups['tp']}, DP {groups['dp']}, PP {groups['pp']}"


def q_mesh_groups(d: Draw3D, run: Runner3D) -> MultipleChoice:
    """Rank r's TP, DP and PP groups on the DP2 x TP2 x PP2 mesh (TP fastest)."""
    r = d.rank
    right = _groups_of(ParallelDims(8, dp=2, tp=2, pp=2), r)
    wrong = [_bit_groups(r, bits) for bits in ({"dp": 0, "tp": 1, "pp": 2},) + ALT_ORDERS]
    return MultipleChoice(
        _(
            "DP2 x TP2 x PP2 on 8 ranks, laid out (pp, dp, tp) with TP fastest as Megatron-LM"
            " and torchtitan do. Which are rank {rank}'s groups?"
        ).format(rank=r),
        [_text(right), *(_text(w) for w in wrong)],
        0,
        _(
            "rank = (pp * dp_degree + dp) * tp_degree + tp: TP groups are consecutive ranks"
            " (so on a node they share NVLink), DP groups stride by tp, PP groups by dp * tp."
            " The lesson's mesh picture and ParallelDims.groups() say the same."
        ),
        key="mesh_groups",
    )


def q_tp_bytes_big(d: Draw3D, run: Runner3D) -> Numeric:
    """Bytes a first-stage GPU sends in its TP group per step."""
    dims, big = d.big_dims, d.big_bytes(0)
    return Numeric(
        _(
            "A 32-layer model with h = 4096 (12h² parameters per layer, no embeddings),"
            " sequence 2048, bf16, on {dp} x 8 x {pp} (DP x TP x PP), {m} microbatches of 1"
            " sequence per replica. How many bytes does one GPU of the FIRST stage send in its"
            " TP group per step?"
        ).format(dp=dims.dp, pp=dims.pp, m=d.big_m),
        big["tp"],
        units="bytes",
        explanation=_(
            "4 all-reduces of (b, s, h) per layer per microbatch, each 2(t-1)/t of its bytes,"
            " on L/p layers; the first stage of a model without embeddings skips one: its"
            " first layer's input needs no gradient, so that f never runs backward."
            " Here {size}."
        ).format(size=format_bytes(big["tp"])),
        params={"L": 32, "h": 4096, "s": 2048, "t": 8, "p": dims.pp, "M": d.big_m},
        key="tp_bytes_big",
    )


def q_zero1_dp_bytes(d: Draw3D, run: Runner3D) -> Numeric:
    """Bytes a GPU sends in its DP group per step with ZeRO-1 (errata E7)."""
    dims = d.big_dims
    return Numeric(
        _(
            "Same model and layout. How many bytes does one GPU send in its DP group per step"
            " with ZeRO-1 (reduce-scatter of gradients, all-gather of parameters)?"
        ),
        d.big_bytes(1)["dp"],
        units="bytes",
        explanation=_(
            "The rank holds 12h² · L/(p t) parameters; ZeRO-1 sends (d-1)/d of them twice,"
            " 2(d-1)/d in all: exactly what the plain all-reduce sends ({size}). ZeRO-1 saves"
            " memory, not bytes (errata E7)."
        ).format(size=format_bytes(d.big_bytes(0)["dp"])),
        params={"d": dims.dp, "p": dims.pp, "t": 8},
        key="zero1_dp_bytes",
    )


def _reveal_tp(report: Any) -> str:
    sent = [round(row["sent_bytes_by_group"]["tp"]) for row in report.rows]
    return _("TP bytes each rank sent, from the trace: {sent}").format(sent=sent)


def _peaks(report: Any) -> tuple[str, dict[int, float]]:
    """What the report counts as activations, and each stage's peak of it."""
    key = "activation_bytes" if "activation_bytes" in report.rows[0] else "in_flight"
    peak: dict[int, float] = {}
    for row in report.rows:
        peak[row["pp"]] = max(peak.get(row["pp"], 0), row[key])
    return key, peak


def _reveal_act(report: Any) -> str:
    key, by_stage = _peaks(report)
    return _("peak activations by stage ({measure}): {by_stage}").format(
        measure=_(MEASURES[key]), by_stage=by_stage
    )


def _heaviest_stage(report: Any) -> int:
    peak = _peaks(report)[1]
    top = max(peak.values())
    return 0 if peak[0] == top else (1 if peak[max(peak)] == top else 2)


def _call() -> str:
    return "run_3d(cluster, dp={dp}, tp={tp}, pp={pp})".format(**LESSON_SIZES)


def q_predict_tp_bytes(d: Draw3D, run: Runner3D) -> PredictThenRun:
    """Predict, then run: the bytes rank 0 sends in its TP group in the lesson's step."""
    sizes = dict(LESSON_SIZES)
    predicted = formula_runner(**sizes).rows[0]["sent_bytes_by_group"]["tp"]
    return PredictThenRun(
        _(
            "Predict the bytes rank 0 sends in its TP group in one step of the lesson's model"
            " ({layers} layers, h = {hidden}, batch {batch} x {seq}, fp32) laid out DP{dp} x"
            " TP{tp} x PP{pp}, then run it."
        ).format(
            layers=LESSON.layers,
            hidden=LESSON.hidden,
            batch=LESSON.batch,
            seq=LESSON.seq,
            **sizes,
        ),
        Numeric(
            _("Bytes rank 0 sent in its TP group"),
            predicted,
            tolerance=0.01,
            units="bytes",
            explanation=_(
                "(4 L/p - 1) M all-reduces on the first stage, each 2(t-1)/t of b s h x 4 B."
            ),
        ),
        run=lambda: run(**sizes),
        reveal=_reveal_tp,
        explanation=_(
            "The trace's all_reduce events on rank 0's TP group, each counted as a ring's"
            " 2(t-1)/t of its buffer; the planner's formula predicts them exactly."
        ),
        truth=lambda report: report.rows[0]["sent_bytes_by_group"]["tp"],
        params={**sizes, "itemsize": ITEMSIZE},
        key="predict_tp_bytes",
        config=_call(),
    )


def q_predict_heaviest_stage(d: Draw3D, run: Runner3D) -> PredictThenRun:
    """Predict, then run: which stage holds the most activations at its peak under 1F1B."""
    sizes = dict(LESSON_SIZES)
    return PredictThenRun(
        _(
            "In the same DP1 x TP4 x PP2 step (1F1B, 4 microbatches), which stage's ranks hold"
            " the most activations at their peak?"
        ),
        MultipleChoice(
            _("Which stage peaks highest?"),
            [
                _("The first stage: its 1F1B warm-up runs p forwards before its first backward"),
                _("The last stage: it also computes the loss of every microbatch"),
                _("Neither: 1F1B keeps one microbatch in flight on every stage"),
            ],
            0,
            _("1F1B's warm-up runs p - i forwards on stage i before its first backward."),
        ),
        run=lambda: run(**sizes),
        reveal=_reveal_act,
        truth=_heaviest_stage,
        params=sizes,
        key="predict_heaviest_stage",
        config=_call(),
    )


THREE_D = QuestionSet(
    Draw3D.draw,
    (
        q_mesh_groups,
        q_tp_bytes_big,
        q_zero1_dp_bytes,
        q_planner_memory,
        q_across_nodes,
        q_predict_tp_bytes,
        q_predict_heaviest_stage,
    ),
    formula_runner,
    "runner(**layout)",
)


def three_d_quiz(
    seed: int | None = None, runner: Runner3D | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 12: the mesh, bytes per group, memory and time from the planner (U6, U7, U14,
    U15)."""
    questions = THREE_D.build(seed, runner)
    return Quiz(_("Lesson 12: 3D parallelism and a planner"), questions, name=NAME, learner=learner)


register_bank(NAME, three_d_quiz, THREE_D)
