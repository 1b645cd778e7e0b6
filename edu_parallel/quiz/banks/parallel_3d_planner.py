"""Lesson 12's questions on the planner, which draw no parameter: the memory per GPU of its best
layout for Llama 3 70B on 16 x 8 H100, and which dimension to put across nodes (U14, U15).

Memory and time come from :func:`edu_parallel.planner.plan`, link times from
:func:`edu_parallel.models.cost.predict`. The plan is computed once per process (it ranks
thousands of layouts). The bank is ``parallel_3d.py``. References: Narayanan et al. 2021
(Megatron-LM), Llama 3 (2024).
"""

from __future__ import annotations

import functools
from typing import Any

from ...core.i18n import _
from ...models.cost import predict
from ...planner import ClusterSpec, PlannerResult, plan
from ...planner.estimate import ITEMSIZE as WIRE_ITEMSIZE
from ..numeric import Numeric
from ..questions import MultipleChoice

CLUSTER = ClusterSpec(16, 8, "h100")
MODEL, BATCH, SEQ = "llama3-70b", 1024, 8192


@functools.cache
def llama_plan() -> PlannerResult:
    """The planner's ranking for Llama 3 70B on :data:`CLUSTER` (computed once)."""
    return plan(MODEL, CLUSTER, BATCH, SEQ)


def _layout() -> str:
    best = llama_plan().best
    return f"dp={best.dp}, tp={best.tp}, pp={best.pp}"


def q_planner_memory(d: Any, run: Any) -> Numeric:
    """The memory per GPU of the planner's best layout."""
    best = llama_plan().best
    return Numeric(
        _(
            "The planner's best layout for Llama 3 70B on 16 x 8 H100 (global batch 1024 x"
            " 8192 tokens) is {layout}. What is its memory per GPU, in GB (1e9 bytes)?"
        ).format(layout=_layout()),
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
        params={"model": MODEL, "nodes": 16},
        key="planner_memory",
    )


def q_across_nodes(d: Any, run: Any) -> MultipleChoice:
    """Which dimension to put across nodes, from the planner's own terms."""
    result = llama_plan()
    best = result.best
    tp_nvl = best.time_terms["tp"]
    ar_bytes = best.micro_batch * SEQ * result.model.hidden * WIRE_ITEMSIZE
    n_tp = tp_nvl / predict("ring", best.tp, ar_bytes, CLUSTER.intra).time_s if tp_nvl else 0
    tp_ib = n_tp * predict("ring", best.tp, ar_bytes, CLUSTER.inter).time_s
    tp_matters = tp_ib - tp_nvl > 0.05 * best.step_time_s
    return MultipleChoice(
        _(
            "Llama 3 70B on 16 nodes of 8 H100, NVLink inside a node and one 400 Gb/s NIC per"
            " GPU between nodes. Which dimension would you put across nodes, and why? (The"
            " planner ranks {count} configurations; its best is {layout}.)"
        ).format(count=f"{len(result.configs):,}", layout=_layout()),
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
    )
