"""Question bank of lesson 10 (3D parallelism and the planner).

Every answer is computed by package code: the mesh's groups by
:class:`~edu_parallel.core.dims.ParallelDims`, bytes per rank and group by
:func:`edu_parallel.planner.traffic.group_bytes_per_rank` (equal to the 8-rank run's trace,
``tests/test_parallel_3d.py``), memory and time by the planner
(:func:`edu_parallel.planner.plan`), link times by :func:`edu_parallel.models.cost.predict`.
``runner(**layout) -> report`` runs one 3D step (the lesson passes
:func:`edu_parallel.parallel_3d.runner_3d`); without one, a report-shaped stand-in computed from
the traffic formula is used.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ...core.dims import ParallelDims
from ...core.errors import bad_value
from ...core.i18n import N_, _
from ...core.units import format_bytes
from ...models.cost import predict
from ...parallel_3d.config import ITEMSIZE, Config3D
from ...planner import ClusterSpec, group_bytes_per_rank, plan
from ...planner.estimate import ITEMSIZE as WIRE_ITEMSIZE
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import register_bank

Runner3D = Callable[..., Any]
LESSON = Config3D()  # the lesson's model and step
# what a report's peak activations count, by its row key (shown in the reveal)
MEASURES = {"activation_bytes": N_("activation bytes"), "in_flight": N_("in flight")}


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


def _groups_of(dims: ParallelDims, rank: int) -> dict[str, list[int]]:
    return {d: next(g for g in dims.groups(d) if rank in g) for d in ("tp", "dp", "pp")}


# Other placements of the three binary coordinates of 8 ranks: bit k of the rank is that dimension.
ALT_ORDERS = ({"pp": 0, "tp": 1, "dp": 2}, {"tp": 2, "dp": 1, "pp": 0})


def _bit_groups(rank: int, bits: dict[str, int]) -> dict[str, list[int]]:
    """Groups of ``rank`` when dimension ``d`` is bit ``bits[d]`` of the rank (degrees of 2)."""
    return {d: sorted((rank, rank ^ (1 << b))) for d, b in bits.items()}


def _text(groups: dict[str, list[int]]) -> str:
    return f"TP {groups['tp']}, DP {groups['dp']}, PP {groups['pp']}"


def three_d_quiz(
    seed: int | None = None, runner: Runner3D | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 10: the mesh, bytes per group, memory and time from the planner (U6, U7, U14,
    U15)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise bad_value("seed", seed, "an int or None")
    if runner is not None and not callable(runner):
        raise bad_value("runner", runner, "a callable runner(**layout), or None for the formula")
    run = runner or formula_runner
    rng = random.Random(seed) if seed is not None else None
    pick = (lambda options, default: default) if rng is None else (lambda o, d: rng.choice(o))

    # -- the mesh: rank r's groups in DP2 x TP2 x PP2 (TP fastest); wrong options: other orders
    mesh = ParallelDims(8, dp=2, tp=2, pp=2)
    r = pick((3, 5, 6), 5)
    right = _groups_of(mesh, r)
    wrong = [_bit_groups(r, bits) for bits in ({"dp": 0, "tp": 1, "pp": 2},) + ALT_ORDERS]

    # -- bytes per group for a real model, from the traffic formula (the run's count)
    shape_cfg = Config3D(layers=32, hidden=4096, heads=32, batch=64, seq=2048)
    big_dp = pick((4, 8), 4)
    big_dims = ParallelDims(64, dp=big_dp, tp=8, pp=64 // (8 * big_dp))
    big_m = pick((8, 16), 8)
    big = group_bytes_per_rank(
        shape_cfg.shape(), big_dims, 1, big_m, shape_cfg.seq, 0, WIRE_ITEMSIZE
    )[0]
    zero1 = group_bytes_per_rank(
        shape_cfg.shape(), big_dims, 1, big_m, shape_cfg.seq, 1, WIRE_ITEMSIZE
    )[0]

    # -- the planner: Llama 3 70B on 16 nodes of 8 H100
    cluster = ClusterSpec(16, 8, "h100")
    result = plan("llama3-70b", cluster, 1024, 8192)
    best = result.best
    tp_nvl = best.time_terms["tp"]
    ar_bytes = best.micro_batch * 8192 * result.model.hidden * WIRE_ITEMSIZE
    n_tp = tp_nvl / predict("ring", best.tp, ar_bytes, cluster.intra).time_s if tp_nvl else 0
    tp_ib = n_tp * predict("ring", best.tp, ar_bytes, cluster.inter).time_s
    tp_matters = tp_ib - tp_nvl > 0.05 * best.step_time_s
    layout = f"dp={best.dp}, tp={best.tp}, pp={best.pp}"

    # -- predict, then run: a layout the lesson does not print
    p_dp, p_tp, p_pp = 1, 4, 2
    lesson_sizes = {"dp": p_dp, "tp": p_tp, "pp": p_pp}
    predicted = formula_runner(**lesson_sizes).rows[0]["sent_bytes_by_group"]["tp"]

    def reveal_tp(report: Any) -> str:
        sent = [round(row["sent_bytes_by_group"]["tp"]) for row in report.rows]
        return _("TP bytes each rank sent, from the trace: {sent}").format(sent=sent)

    def reveal_act(report: Any) -> str:
        key = "activation_bytes" if "activation_bytes" in report.rows[0] else "in_flight"
        by_stage = {}
        for row in report.rows:
            by_stage[row["pp"]] = max(by_stage.get(row["pp"], 0), row[key])
        return _("peak activations by stage ({measure}): {by_stage}").format(
            measure=_(MEASURES[key]), by_stage=by_stage
        )

    def heaviest_stage(report: Any) -> int:
        key = "activation_bytes" if "activation_bytes" in report.rows[0] else "in_flight"
        peak = {}
        for row in report.rows:
            peak[row["pp"]] = max(peak.get(row["pp"], 0), row[key])
        top = max(peak.values())
        return 0 if peak[0] == top else (1 if peak[max(peak)] == top else 2)

    questions = [
        MultipleChoice(
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
        ),
        Numeric(
            _(
                "A 32-layer model with h = 4096 (12h² parameters per layer, no embeddings),"
                " sequence 2048, bf16, on {dp} x 8 x {pp} (DP x TP x PP), {m} microbatches of 1"
                " sequence per replica. How many bytes does one GPU of the FIRST stage send in its"
                " TP group per step?"
            ).format(dp=big_dims.dp, pp=big_dims.pp, m=big_m),
            big["tp"],
            units="bytes",
            explanation=_(
                "4 all-reduces of (b, s, h) per layer per microbatch, each 2(t-1)/t of its bytes,"
                " on L/p layers; the first stage of a model without embeddings skips one: its"
                " first layer's input needs no gradient, so that f never runs backward."
                " Here {size}."
            ).format(size=format_bytes(big["tp"])),
            params={"L": 32, "h": 4096, "s": 2048, "t": 8, "p": big_dims.pp, "M": big_m},
            key="tp_bytes_big",
        ),
        Numeric(
            _(
                "Same model and layout. How many bytes does one GPU send in its DP group per step"
                " with ZeRO-1 (reduce-scatter of gradients, all-gather of parameters)?"
            ),
            zero1["dp"],
            units="bytes",
            explanation=_(
                "The rank holds 12h² · L/(p t) parameters; ZeRO-1 sends (d-1)/d of them twice,"
                " 2(d-1)/d in all: exactly what the plain all-reduce sends ({size}). ZeRO-1 saves"
                " memory, not bytes (errata E7)."
            ).format(size=format_bytes(big["dp"])),
            params={"d": big_dims.dp, "p": big_dims.pp, "t": 8},
            key="zero1_dp_bytes",
        ),
        Numeric(
            _(
                "The planner's best layout for Llama 3 70B on 16 x 8 H100 (global batch 1024 x"
                " 8192 tokens) is {layout}. What is its memory per GPU, in GB (1e9 bytes)?"
            ).format(layout=layout),
            best.memory_bytes_per_gpu / 1e9,
            tolerance=0.02,
            units="GB",
            explanation=_(
                "Model states {states} GB (ZeRO-{zero} over dp={dp}, split by tp x pp) plus"
                " activations {acts} GB (Llama's per-layer bytes: SwiGLU, GQA, no dropout; L/p"
                " layers, min(M, p) microbatches in flight on the first stage, recompute"
                " {recompute})."
            ).format(
                states=f"{best.model_state_bytes / 1e9:.1f}",
                zero=best.zero,
                dp=best.dp,
                acts=f"{best.activation_bytes / 1e9:.1f}",
                recompute=best.recompute,
            ),
            params={"model": "llama3-70b", "nodes": 16},
            key="planner_memory",
        ),
        MultipleChoice(
            _(
                "Llama 3 70B on 16 nodes of 8 H100, NVLink inside a node and one 400 Gb/s NIC per"
                " GPU between nodes. Which dimension would you put across nodes, and why? (The"
                " planner ranks {count} configurations; its best is {layout}.)"
            ).format(count=f"{len(result.configs):,}", layout=layout),
            [
                _(
                    "PP and DP, never TP: TP's all-reduces sit on the critical path of every layer"
                    " and would take {ib} s per step over InfiniBand instead of {nvl} s over"
                    " NVLink, against a {step} s step"
                ).format(ib=f"{tp_ib:.2f}", nvl=f"{tp_nvl:.2f}", step=f"{best.step_time_s:.2f}"),
                _(
                    "TP: its all-reduces are small messages that latency hides, while PP's"
                    " point-to-point sends and DP's gradient sync need NVLink"
                ),
                _(
                    "Only DP: PP must stay inside a node because a stage boundary crossing nodes"
                    " adds a bubble, and TP is indifferent to the link"
                ),
                _(
                    "None in particular: with a rail-optimised network every dimension costs the"
                    " same whichever side of a node boundary it is on"
                ),
            ],
            0 if tp_matters else 3,
            _(
                "From the planner's own terms: the TP term of its best layout, re-priced with the"
                " ring all-reduce on the inter-node link (models.cost.predict), grows by {extra}"
                " s. PP sends one activation per microbatch to a neighbour and DP syncs once per"
                " step, overlapped with the backward, so they can cross nodes. Megatron-LM (2021)"
                " and Llama 3 keep TP = 8 inside the node for this reason."
            ).format(extra=f"{tp_ib - tp_nvl:.2f}"),
            key="across_nodes",
        ),
        PredictThenRun(
            _(
                "Predict the bytes rank 0 sends in its TP group in one step of the lesson's model"
                " ({layers} layers, h = {hidden}, batch {batch} x {seq}, fp32) laid out DP{dp} x"
                " TP{tp} x PP{pp}, then run it."
            ).format(
                layers=LESSON.layers,
                hidden=LESSON.hidden,
                batch=LESSON.batch,
                seq=LESSON.seq,
                dp=p_dp,
                tp=p_tp,
                pp=p_pp,
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
            run=lambda: run(**lesson_sizes),
            reveal=reveal_tp,
            explanation=_(
                "The trace's all_reduce events on rank 0's TP group, each counted as a ring's"
                " 2(t-1)/t of its buffer; the planner's formula predicts them exactly."
            ),
            truth=lambda report: report.rows[0]["sent_bytes_by_group"]["tp"],
            params={**lesson_sizes, "itemsize": ITEMSIZE},
            key="predict_tp_bytes",
            config=f"run_3d(cluster, dp={p_dp}, tp={p_tp}, pp={p_pp})",
        ),
        PredictThenRun(
            _(
                "In the same DP1 x TP4 x PP2 step (1F1B, 4 microbatches), which stage's ranks hold"
                " the most activations at their peak?"
            ),
            MultipleChoice(
                _("Which stage peaks highest?"),
                [
                    _(
                        "The first stage: its 1F1B warm-up runs p forwards before its first"
                        " backward"
                    ),
                    _("The last stage: it also computes the loss of every microbatch"),
                    _("Neither: 1F1B keeps one microbatch in flight on every stage"),
                ],
                0,
                _("1F1B's warm-up runs p - i forwards on stage i before its first backward."),
            ),
            run=lambda: run(**lesson_sizes),
            reveal=reveal_act,
            truth=heaviest_stage,
            params=lesson_sizes,
            key="predict_heaviest_stage",
            config=f"run_3d(cluster, dp={p_dp}, tp={p_tp}, pp={p_pp})",
        ),
    ]
    return Quiz(
        _("Lesson 10: 3D parallelism and a planner"),
        questions,
        name="10_3d_planner",
        learner=learner,
    )


register_bank("10_3d_planner", three_d_quiz)
