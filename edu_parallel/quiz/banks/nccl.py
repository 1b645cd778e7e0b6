"""Question bank of lesson 05 (NCCL in practice): NCCL's tuner (errata E9), its protocols, a
forced choice, and the hierarchical all-reduce's cross-node bytes, predicted then run.

The answers come from :func:`edu_parallel.models.nccl.selection.nccl_choose` (NCCL 2.30.7's
``tuning.cc`` model) and :func:`edu_parallel.plans.hierarchical.hierarchical_bytes_formula`
(reduce-scatter in the node, the shard across nodes on each GPU's own NIC, all-gather).
``runner(nodes, nbytes) -> Trace`` runs the hierarchical all-reduce on 4 ranks split into
``nodes`` pretend nodes; the default simulates its plan, the lesson passes
:func:`edu_parallel.comm.hierarchical.hierarchical_runner`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core.i18n import _
from ...core.trace import Trace
from ...core.units import KIB, format_bytes
from ...models.links import LINKS
from ...models.nccl.selection import nccl_choose
from ...models.nccl.systems import NCCL_SYSTEMS
from ...models.simulation import simulate
from ...models.topology import Topology, sent_by_link_class
from ...plans.hierarchical import hierarchical_allreduce_plan, hierarchical_bytes_formula
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..questions import MultipleChoice
from ..registry import QuestionSet, register_bank
from .common import pick

PROTOCOLS = ["LL", "LL128", "Simple"]
TINY, HUGE = 64, 1 << 30  # the two message sizes of the protocol questions, bytes
HIER_SIZE = 1 << 30  # bytes of the hierarchical all-reduce
NAME = "05_nccl_in_practice"
RUN_RANKS = 4  # the lesson's cluster: the predict-then-run splits it into pretend nodes
HierRunner = Callable[[int, int], Trace]


@dataclass(frozen=True)
class NcclDraw:
    """The NCCL questions' parameters."""

    system: str
    """The machine NCCL's tuner models, a key of :data:`NCCL_SYSTEMS`."""
    k: int
    """Nodes of the hierarchical all-reduce."""
    g: int
    """GPUs per node (one NIC each) of the hierarchical all-reduce."""
    forced_size: int
    """Bytes of the all-reduce whose tuner pick is compared with a forced Ring/Simple."""
    run_size: int
    """Bytes of the predict-then-run hierarchical all-reduce (never the lesson's 1 MiB)."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> NcclDraw:
        system = pick(rng, "8x8-h100-ndr", "8x8-h100-ndr", "2x8-a100-hdr")
        k, g = pick(rng, (8, 8), (8, 8), (4, 8), (16, 4))
        forced = pick(rng, 64 * KIB, 16 * KIB, 64 * KIB, 256 * KIB)
        run_size = pick(rng, 96 * KIB, 64 * KIB, 192 * KIB, 384 * KIB)
        return cls(system, k, g, forced, run_size)


def simulated_hierarchical(nodes: int, nbytes: int) -> Trace:
    """The hierarchical all-reduce on :data:`RUN_RANKS` virtual ranks (no processes)."""
    shape = Topology.split(RUN_RANKS, nodes, LINKS["nvlink4-h100"])
    plan = hierarchical_allreduce_plan(shape.nodes, shape.gpus_per_node)
    trace, _ = simulate(plan, nbytes, "float32", with_data=False)
    trace.meta.update(nodes=shape.nodes, gpus_per_node=shape.gpus_per_node)
    return trace


def cross_node_bytes(trace: Trace) -> list[int]:
    """Bytes each rank of a hierarchical run sent across its pretend nodes, from the trace."""
    nodes = int(trace.meta["nodes"])
    shape = Topology.split(trace.world_size, nodes, LINKS["nvlink4-h100"])
    return sent_by_link_class(trace, shape)[1]


def q_errata_e9(d: NcclDraw, run: Any = None) -> MultipleChoice:
    """Errata E9: how NCCL picks its algorithm."""
    return MultipleChoice(
        _(
            "The outline says NCCL uses a tree across nodes and a ring for large clusters. What"
            " does NCCL 2.30.7 do for each collective call?"
        ),
        [
            _(
                "Its tuner predicts latency + bytes/bandwidth for every algorithm and protocol"
                " that can run on this system, and runs the fastest"
            ),
            _("It runs a tree whenever the job spans more than one node"),
            _("It runs a ring once the job has more than a fixed number of ranks"),
            _("It runs whatever NCCL_ALGO names; without it, always a ring"),
        ],
        0,
        _(
            "ncclTopoTuneModel and ncclTopoGetAlgoTime (src/graph/tuning.cc) time each"
            " algorithm x protocol pair for this size and topology; the winner changes with both"
            " (errata E9). NCCL_ALGO and NCCL_PROTO only narrow the candidates."
        ),
        key="errata_e9",
    )


def q_nccl_proto_small(d: NcclDraw, run: Any = None) -> MultipleChoice:
    """The protocol NCCL's tuner runs for a tiny all-reduce."""
    s = NCCL_SYSTEMS[d.system]
    small = nccl_choose("all_reduce", TINY, s)
    return MultipleChoice(
        _(
            "NCCL's tuner on {system}: which protocol does it run for an all-reduce of {size}?"
        ).format(system=s.describe(), size=format_bytes(TINY)),
        PROTOCOLS,
        PROTOCOLS.index(small.proto),
        _(
            "NCCL picks {pick}. A tiny message is latency-bound, and LL (8-byte flag+data"
            " stores, no separate synchronisation) has the lowest latency of the three; it pays"
            " with half the bandwidth, which does not matter at this size (tuning.cc, NCCL"
            " 2.30.7)."
        ).format(pick=f"{small.algo}/{small.proto}"),
        params={"system": d.system, "S": TINY},
        key="nccl_proto_small",
    )


def q_nccl_proto_large(d: NcclDraw, run: Any = None) -> MultipleChoice:
    """The protocol NCCL's tuner runs for a 1 GiB all-reduce."""
    large = nccl_choose("all_reduce", HUGE, NCCL_SYSTEMS[d.system])
    return MultipleChoice(
        _("And for {size} on the same machine?").format(size=format_bytes(HUGE)),
        PROTOCOLS,
        PROTOCOLS.index(large.proto),
        _(
            "NCCL picks {pick}. A large message is bandwidth-bound: Simple moves data at full"
            " bandwidth with a few synchronisations per chunk, and its higher latency no longer"
            " counts. NCCL_PROTO=^Simple would force the slower protocols."
        ).format(pick=f"{large.algo}/{large.proto}"),
        params={"system": d.system, "S": HUGE},
        key="nccl_proto_large",
    )


def q_hier_cross_bytes(d: NcclDraw, run: Any = None) -> Numeric:
    """Bytes each GPU sends across nodes in the hierarchical all-reduce."""
    return Numeric(
        _(
            "A hierarchical all-reduce of {size} on {k} nodes of {g} GPUs, one NIC per GPU:"
            " reduce-scatter in the node, each GPU all-reduces its shard across nodes over its"
            " own NIC, all-gather. How many bytes does each GPU send across nodes?"
        ).format(size=format_bytes(HIER_SIZE), k=d.k, g=d.g),
        hierarchical_bytes_formula(d.k, d.g, HIER_SIZE)["inter"],
        units="bytes",
        explanation=_(
            "Each GPU holds a 1/g shard after the reduce-scatter and ring-all-reduces it over K"
            " nodes: 2(K-1)/K · S/g, all g NICs busy at once. A leader per node would send"
            " 2(K-1)/K · S over one NIC."
        ),
        params={"K": d.k, "g": d.g, "S": HIER_SIZE},
        key="hier_cross_bytes",
    )


def q_forced_ring_simple(d: NcclDraw, run: Any = None) -> Numeric:
    """How much slower a forced Ring/Simple is than the tuner's own pick."""
    s = NCCL_SYSTEMS[d.system]
    own = nccl_choose("all_reduce", d.forced_size, s)
    forced = nccl_choose("all_reduce", d.forced_size, s, nccl_algo="Ring", nccl_proto="Simple")
    return Numeric(
        _(
            "On {system}, an all-reduce of {size}: the tuner picks {pick}. With NCCL_ALGO=Ring"
            " NCCL_PROTO=Simple set, how many microseconds longer does NCCL's model say it takes?"
        ).format(
            system=s.describe(), size=format_bytes(d.forced_size), pick=f"{own.algo}/{own.proto}"
        ),
        forced.time_us - own.time_us,
        units="µs",
        explanation=_(
            "Forced: {forced} µs; the tuner's {pick}: {own} µs. At this size the latency terms"
            " decide, and Simple's are the largest: forcing a pair is for experiments, never"
            " faster than a right pick."
        ).format(
            forced=f"{forced.time_us:.1f}",
            own=f"{own.time_us:.1f}",
            pick=f"{own.algo}/{own.proto}",
        ),
        params={"system": d.system, "S": d.forced_size},
        key="forced_ring_simple",
    )


def q_predict_hier_cross(d: NcclDraw, run: HierRunner) -> PredictThenRun:
    """Predict, then run: the bytes a rank sends across nodes in the hierarchical all-reduce."""
    nodes, g = 2, RUN_RANKS // 2
    want = hierarchical_bytes_formula(nodes, g, d.run_size)["inter"]

    def reveal(trace: Trace) -> str:
        return _("bytes sent across nodes, per rank (counted from the trace): {sent}").format(
            sent=cross_node_bytes(trace)
        )

    return PredictThenRun(
        _(
            "Predict how many bytes each rank sends across nodes in a hierarchical all-reduce of"
            " {size} on {n} ranks split into {nodes} pretend nodes, then run it."
        ).format(size=format_bytes(d.run_size), n=RUN_RANKS, nodes=nodes),
        Numeric(
            _("Bytes each rank sends across nodes"),
            want,
            units="bytes",
            explanation=_("2(K-1)/K · S/g with K = {k} nodes of g = {g} ranks.").format(
                k=nodes, g=g
            ),
        ),
        run=lambda: run(nodes, d.run_size),
        reveal=reveal,
        explanation=_(
            "Only the middle phase crosses nodes: each rank all-reduces its 1/g shard with its"
            " peer in the other node, so 2(K-1)/K · S/g; the reduce-scatter and all-gather stay"
            " inside the node."
        ),
        truth=lambda trace: max(cross_node_bytes(trace)),
        params={"K": nodes, "g": g, "S": d.run_size},
        key="predict_hier_cross",
        config=f"run_hierarchical(cluster, nodes={nodes}, size={d.run_size})",
    )


NCCL_PRACTICE = QuestionSet(
    NcclDraw.draw,
    (
        q_errata_e9,
        q_nccl_proto_small,
        q_nccl_proto_large,
        q_forced_ring_simple,
        q_hier_cross_bytes,
        q_predict_hier_cross,
    ),
    simulated_hierarchical,
    "runner(nodes, nbytes) -> Trace",
)


def nccl_quiz(
    seed: int | None = None, runner: HierRunner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 05: NCCL's tuner (errata E9), protocols, a forced choice, the hierarchical bytes.

    ``runner(nodes, nbytes) -> Trace`` runs the hierarchical all-reduce on 4 ranks; the default
    simulates it, the lesson passes :func:`edu_parallel.comm.hierarchical.hierarchical_runner`."""
    questions = NCCL_PRACTICE.build(seed, runner)
    return Quiz(_("Lesson 05: NCCL in practice"), questions, name=NAME, learner=learner)


register_bank(NAME, nccl_quiz, NCCL_PRACTICE)
