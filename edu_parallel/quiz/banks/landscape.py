"""Question bank of lesson 15 (communication libraries, interconnects, frameworks).

Numbers come from the package: link bandwidths from :data:`~edu_parallel.models.links.LINKS`
(each the datasheet figure through the arithmetic of :data:`~edu_parallel.models.links.ARITHMETIC`),
all-reduce times from :func:`~edu_parallel.models.cost.predict`, retimed runs from
:func:`~edu_parallel.models.retiming.retime`, and the two-level all-reduce's bytes across nodes
from the formula ``2(K-1)/K · S/g`` that exercise 15 checks on real ranks; the questions on
libraries and frameworks are in ``landscape_libraries.py``. ``runner(world_size,
nbytes) -> Trace`` runs a ring all-reduce (the lesson passes
:func:`edu_parallel.comm.allreduce.cluster_runner`); without one, the in-process simulation
(:func:`~edu_parallel.quiz.registry.simulation_runner`) gives the same events.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ...core.i18n import _
from ...core.units import format_bytes
from ...models.cost import predict
from ...models.links import LINKS
from ...models.retiming import cost_model, retime
from ..container import Quiz
from ..numeric import Numeric
from ..predict import PredictThenRun
from ..registry import QuestionSet, Runner, register_bank, simulation_runner
from .common import pick
from .landscape_libraries import q_errata_e6, q_rocm_backend, q_zero3_framework

NAME = "15_landscape"
PORT_GBPS = {"ib-hdr-200": 200, "ib-ndr-400": 400, "ib-xdr-800": 800}  # InfiniBand ports, Gb/s
N_PTR = 8  # ranks of the retimed ring


def two_level_cross_bytes(nodes: int, gpus_per_node: int, nbytes: float) -> float:
    """Bytes each rank sends across nodes in the two-level all-reduce: ``2(K-1)/K · S/g``."""
    return 2 * (nodes - 1) / nodes * nbytes / gpus_per_node


@dataclass(frozen=True)
class LandscapeDraw:
    """Lesson 15's parameters, drawn in one go."""

    port: str
    """The InfiniBand port preset, a key of :data:`PORT_GBPS`."""
    nics: int
    """GPUs (one NIC each) of the rail-optimised node."""
    nodes: int
    """Nodes of the two-level all-reduce."""
    gpn: int
    """GPUs per node of the two-level all-reduce."""
    s: int
    """Bytes of the two-level all-reduce."""
    s_ptr: int
    """Bytes of the retimed ring."""
    preset: str
    """The link preset the ring is retimed on."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> LandscapeDraw:
        port = pick(rng, "ib-ndr-400", "ib-hdr-200", "ib-ndr-400", "ib-xdr-800")
        nics = pick(rng, 8, 4, 8)
        nodes, gpn = pick(rng, 4, 2, 4, 8), pick(rng, 8, 4, 8)
        s = pick(rng, 256, 64, 256, 1024) * 2**20
        s_ptr = pick(rng, 1024, 256, 1024) * 1024
        preset = pick(rng, "nvlink4-h100", "nvlink4-h100", "pcie5-x16", "xgmi-mi300x")
        return cls(port, nics, nodes, gpn, s, s_ptr, preset)

    @property
    def gbps(self) -> int:
        return PORT_GBPS[self.port]


def q_port_gbps(d: LandscapeDraw, run: Runner) -> Numeric:
    """The GB/s one InfiniBand port gives one message in one direction."""
    link = LINKS[d.port]
    return Numeric(
        _(
            "A ConnectX port runs InfiniBand at {gbps} Gb/s. How many GB/s (1e9 B/s) can one"
            " message use in one direction?"
        ).format(gbps=d.gbps),
        link.bandwidth_Bps / 1e9,
        units="GB/s",
        explanation=_(
            "Network ports are quoted in bits per second per direction: {gbps} Gb/s / 8 ="
            " {gBps} GB/s ({source})."
        ).format(gbps=d.gbps, gBps=f"{link.bandwidth_Bps / 1e9:g}", source=_(link.source)),
        params={"gbps": d.gbps},
        key="port_gbps",
    )


def q_xgmi_gpu_gbps(d: LandscapeDraw, run: Runner) -> Numeric:
    """An MI300X's Infinity Fabric bandwidth in one direction, all links together."""
    xgmi, xgmi_gpu = LINKS["xgmi-mi300x"], LINKS["xgmi-mi300x-gpu"]
    return Numeric(
        _(
            "An AMD MI300X has 7 Infinity Fabric links to the other 7 GPUs of its node, each"
            " 128 GB/s bidirectional. What bandwidth (GB/s) does it have in one direction, all"
            " links together?"
        ),
        xgmi_gpu.bandwidth_Bps / 1e9,
        units="GB/s",
        explanation=_(
            "7 x 128 GB/s = 896 GB/s both ways, {gpu} GB/s each way. But one message to one"
            " peer uses one link: {link} GB/s. RCCL runs several rings over different links to"
            " use all seven (an H100's NVSwitch gives any pair the full 450 GB/s)."
        ).format(gpu=f"{xgmi_gpu.bandwidth_Bps / 1e9:g}", link=f"{xgmi.bandwidth_Bps / 1e9:g}"),
        params={"links": 7, "link_bidir_gbps": 128},
        key="xgmi_gpu_gbps",
    )


def q_node_nic_gbps(d: LandscapeDraw, run: Runner) -> Numeric:
    """The bandwidth that leaves a rail-optimised node in one direction."""
    port_gBps = LINKS[d.port].bandwidth_Bps / 1e9
    return Numeric(
        _(
            "A rail-optimised node has {nics} GPUs, each with its own {gbps} Gb/s NIC. What"
            " bandwidth (GB/s) leaves the node in one direction when all GPUs send at once?"
        ).format(nics=d.nics, gbps=d.gbps),
        d.nics * LINKS[d.port].bandwidth_Bps / 1e9,
        units="GB/s",
        explanation=_(
            "{nics} NICs x {gBps} GB/s: every GPU has its own rail. An algorithm that sends all"
            " cross-node traffic from one GPU per node uses 1/{nics} of it; the two-level"
            " all-reduce gives each local rank its own shard and NIC."
        ).format(nics=d.nics, gBps=f"{port_gBps:g}"),
        params={"nics": d.nics, "gbps": d.gbps},
        key="node_nic_gbps",
    )


def q_two_level_cross(d: LandscapeDraw, run: Runner) -> Numeric:
    """Bytes each GPU sends across nodes in the two-level all-reduce."""
    cross = two_level_cross_bytes(d.nodes, d.gpn, d.s)
    return Numeric(
        _(
            "Two-level all-reduce of S = {size} on {nodes} nodes of {gpn} GPUs: reduce-scatter"
            " in the node, all-reduce each shard across nodes, all-gather in the node. How"
            " many bytes does each GPU send across nodes?"
        ).format(size=format_bytes(d.s), nodes=d.nodes, gpn=d.gpn),
        cross,
        units="bytes",
        explanation=_(
            "Each GPU all-reduces its S/g shard with the K-1 same-rank GPUs of the other"
            " nodes, a ring over K: 2(K-1)/K · S/g = {cross}. A leader per node would send"
            " 2(K-1)/K · S from one GPU, {gpn}x more on one NIC."
        ).format(cross=format_bytes(cross), gpn=d.gpn),
        params={"K": d.nodes, "g": d.gpn, "S": d.s},
        key="two_level_cross",
    )


def q_predict_retimed_ring(d: LandscapeDraw, run: Runner) -> PredictThenRun:
    """Predict, then run: a ring all-reduce's time retimed on a link preset."""
    preset, s_ptr = d.preset, d.s_ptr
    ptr_pred = predict("ring", N_PTR, s_ptr, preset)

    def retimed_us(trace: Any) -> float:
        return retime(trace, cost_model(preset)).duration * 1e6

    def reveal(trace: Any) -> str:
        t = f"{retimed_us(trace):.2f}"
        n = len(trace.events)
        if trace.meta.get("time_unit", "s") == "s":  # a real run; a simulation counts steps
            return _(
                "the run's {n} events retimed on {link}: {t} µs (as measured here: {ms} ms)"
            ).format(n=n, link=preset, t=t, ms=f"{trace.duration * 1e3:.2f}")
        return _("the run's {n} events retimed on {link}: {t} µs").format(n=n, link=preset, t=t)

    return PredictThenRun(
        _(
            "Predict the time of a ring all-reduce of {size} on {n} ranks when every message"
            " travels on {link} ({alpha} µs per message, {gBps} GB/s each way), in µs. Then"
            " run it on the cluster and retime its trace on that link."
        ).format(
            size=format_bytes(s_ptr),
            n=N_PTR,
            link=preset,
            alpha=f"{LINKS[preset].alpha_s * 1e6:g}",
            gBps=f"{LINKS[preset].bandwidth_Bps / 1e9:g}",
        ),
        Numeric(
            _("Retimed all-reduce time"),
            ptr_pred.time_s * 1e6,
            units="µs",
            explanation=_("2(n-1)·α + 2(n-1)/n·S/B: {t} µs.").format(
                t=f"{ptr_pred.time_s * 1e6:.2f}"
            ),
        ),
        run=lambda: run(N_PTR, s_ptr),
        reveal=reveal,
        explanation=_(
            "The retimed trace takes 2(n-1) steps of α + S/(n·B): the ring's formula exactly,"
            " whatever the run took on this machine's shared cores."
        ),
        truth=retimed_us,
        params={"N": N_PTR, "S": s_ptr, "link": preset},
        key="predict_retimed_ring",
        config=f"retime(run_allreduce(cluster, {s_ptr}).trace, cost_model({preset!r}))",
    )


LANDSCAPE = QuestionSet(
    LandscapeDraw.draw,
    (
        q_errata_e6,
        q_rocm_backend,
        q_port_gbps,
        q_xgmi_gpu_gbps,
        q_node_nic_gbps,
        q_two_level_cross,
        q_zero3_framework,
        q_predict_retimed_ring,
    ),
    simulation_runner,
)


def landscape_quiz(
    seed: int | None = None, runner: Runner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 15: libraries and backends (E6), interconnect bandwidths, the two-level all-reduce,
    and a run retimed on a preset (U13, U19)."""
    questions = LANDSCAPE.build(seed, runner)
    return Quiz(
        _("Lesson 15: libraries, interconnects and frameworks"),
        questions,
        name=NAME,
        learner=learner,
    )


register_bank(NAME, landscape_quiz, LANDSCAPE)
