"""Question bank of lesson 13 (communication libraries, interconnects, frameworks).

Numbers come from the package: link bandwidths from :data:`~edu_parallel.models.links.LINKS`
(each the datasheet figure through the arithmetic of :data:`~edu_parallel.models.links.ARITHMETIC`),
all-reduce times from :func:`~edu_parallel.models.cost.predict`, retimed runs from
:func:`~edu_parallel.models.retiming.retime`, and the two-level all-reduce's bytes across nodes
from the formula ``2(K-1)/K · S/g`` that exercise 13 checks on real ranks. ``runner(world_size,
nbytes) -> Trace`` runs a ring all-reduce (the lesson passes
:func:`edu_parallel.comm.allreduce.cluster_runner`); without one, the in-process simulation
(:func:`~edu_parallel.quiz.registry.simulation_runner`) gives the same events.
"""

from __future__ import annotations

from typing import Any

from ...core.i18n import _
from ...core.units import format_bytes
from ...models.cost import predict
from ...models.links import LINKS
from ...models.retiming import cost_model, retime
from ..container import Quiz
from ..predict import PredictThenRun
from ..questions import MultipleChoice, Numeric
from ..registry import Runner, check_bank_args, register_bank, simulation_runner


def two_level_cross_bytes(nodes: int, gpus_per_node: int, nbytes: float) -> float:
    """Bytes each rank sends across nodes in the two-level all-reduce: ``2(K-1)/K · S/g``."""
    return 2 * (nodes - 1) / nodes * nbytes / gpus_per_node


def landscape_quiz(
    seed: int | None = None, runner: Runner | None = None, learner: str | None = None
) -> Quiz:
    """Lesson 13: libraries and backends (E6), interconnect bandwidths, the two-level all-reduce,
    and a run retimed on a preset (U13, U19)."""
    rng = check_bank_args(seed, runner)
    run = runner or simulation_runner
    pick = (lambda options, default: default) if rng is None else (lambda o, d: rng.choice(o))

    port = pick(("ib-hdr-200", "ib-ndr-400", "ib-xdr-800"), "ib-ndr-400")
    gbps = {"ib-hdr-200": 200, "ib-ndr-400": 400, "ib-xdr-800": 800}[port]
    nics = pick((4, 8), 8)
    nodes, gpn = pick((2, 4, 8), 4), pick((4, 8), 8)
    s = pick((64, 256, 1024), 256) * 2**20
    n_ptr, s_ptr = 8, pick((256, 1024), 1024) * 1024
    preset = pick(("nvlink4-h100", "pcie5-x16", "xgmi-mi300x"), "nvlink4-h100")
    ptr_pred = predict("ring", n_ptr, s_ptr, preset)
    xgmi, xgmi_gpu = LINKS["xgmi-mi300x"], LINKS["xgmi-mi300x-gpu"]
    cross = two_level_cross_bytes(nodes, gpn, s)

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

    questions = [
        MultipleChoice(
            _(
                "The course outline says 'RCXL is AMD's new multi-GPU communication library'."
                " Which is right?"
            ),
            [
                _(
                    "There is no RCXL: AMD's library is RCCL (NCCL's API, on ROCm); RCCLX is"
                    " Meta's fork of RCCL"
                ),
                _("RCXL replaced RCCL in ROCm 6 and is what torch loads on AMD GPUs"),
                _(
                    "RCXL is AMD's name for Infinity Fabric's collective engine, used instead of a"
                    " library"
                ),
                _("RCXL is the CXL-based successor of RCCL for MI300A's unified memory"),
            ],
            0,
            _(
                "Errata E6: AMD ships RCCL (github.com/ROCm/rccl) with MSCCL/MSCCL++ inside, and"
                " rocSHMEM; RCCLX is Meta's fork of RCCL in meta-pytorch/torchcomms. The lesson's"
                " libraries table lists both with sources."
            ),
            key="errata_e6",
        ),
        MultipleChoice(
            _(
                "A training script calls dist.init_process_group(backend=...) on a node of 8 AMD"
                " MI300X with a ROCm build of PyTorch. Which backend name gives it RCCL?"
            ),
            ["'nccl'", "'rccl'", "'gloo'", "'xccl'"],
            0,
            _(
                "ROCm builds of torch compile ProcessGroupNCCL against RCCL's NCCL-compatible API"
                " and torch.cuda runs on HIP, so the backend is still called 'nccl'"
                " (dist.Backend.default_device_backend_map maps 'cuda' to it). 'xccl' is oneCCL"
                " on Intel XPUs; 'gloo' runs on CPUs."
            ),
            key="rocm_backend",
        ),
        Numeric(
            _(
                "A ConnectX port runs InfiniBand at {gbps} Gb/s. How many GB/s (1e9 B/s) can one"
                " message use in one direction?"
            ).format(gbps=gbps),
            LINKS[port].bandwidth_Bps / 1e9,
            units="GB/s",
            explanation=_(
                "Network ports are quoted in bits per second per direction: {gbps} Gb/s / 8 ="
                " {gBps} GB/s ({source})."
            ).format(
                gbps=gbps, gBps=f"{LINKS[port].bandwidth_Bps / 1e9:g}", source=LINKS[port].source
            ),
            params={"gbps": gbps},
            key="port_gbps",
        ),
        Numeric(
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
        ),
        Numeric(
            _(
                "A rail-optimised node has {nics} GPUs, each with its own {gbps} Gb/s NIC. What"
                " bandwidth (GB/s) leaves the node in one direction when all GPUs send at once?"
            ).format(nics=nics, gbps=gbps),
            nics * LINKS[port].bandwidth_Bps / 1e9,
            units="GB/s",
            explanation=_(
                "{nics} NICs x {gBps} GB/s: every GPU has its own rail. An algorithm that sends all"
                " cross-node traffic from one GPU per node uses 1/{nics} of it; the two-level"
                " all-reduce gives each local rank its own shard and NIC."
            ).format(nics=nics, gBps=f"{LINKS[port].bandwidth_Bps / 1e9:g}"),
            params={"nics": nics, "gbps": gbps},
            key="node_nic_gbps",
        ),
        Numeric(
            _(
                "Two-level all-reduce of S = {size} on {nodes} nodes of {gpn} GPUs: reduce-scatter"
                " in the node, all-reduce each shard across nodes, all-gather in the node. How"
                " many bytes does each GPU send across nodes?"
            ).format(size=format_bytes(s), nodes=nodes, gpn=gpn),
            cross,
            units="bytes",
            explanation=_(
                "Each GPU all-reduces its S/g shard with the K-1 same-rank GPUs of the other"
                " nodes, a ring over K: 2(K-1)/K · S/g = {cross}. A leader per node would send"
                " 2(K-1)/K · S from one GPU, {gpn}x more on one NIC."
            ).format(cross=format_bytes(cross), gpn=gpn),
            params={"K": nodes, "g": gpn, "S": s},
            key="two_level_cross",
        ),
        MultipleChoice(
            _(
                "Which framework's central feature is the same sharding as this course's ZeRO-3"
                " and PyTorch's FSDP2 (parameters, gradients and optimizer states split over the"
                " data parallel ranks, parameters all-gathered when a layer needs them)?"
            ),
            [
                _("DeepSpeed (ZeRO stage 3)"),
                _("Megatron-LM's tensor parallelism"),
                _("JAX's pmap without sharding annotations"),
                _("NCCL's NVLS algorithm"),
            ],
            0,
            _(
                "ZeRO-3 is DeepSpeed's (Rajbhandari et al. 2020); FSDP2's fully_shard does the"
                " same per parameter with DTensor. Megatron-LM pairs TP and PP with a distributed"
                " optimizer (ZeRO-1-like); NVLS is an all-reduce algorithm, not a sharding."
            ),
            key="zero3_framework",
        ),
        PredictThenRun(
            _(
                "Predict the time of a ring all-reduce of {size} on {n} ranks when every message"
                " travels on {link} ({alpha} µs per message, {gBps} GB/s each way), in µs. Then"
                " run it on the cluster and retime its trace on that link."
            ).format(
                size=format_bytes(s_ptr),
                n=n_ptr,
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
            run=lambda: run(n_ptr, s_ptr),
            reveal=reveal,
            explanation=_(
                "The retimed trace takes 2(n-1) steps of α + S/(n·B): the ring's formula exactly,"
                " whatever the run took on this machine's shared cores."
            ),
            truth=retimed_us,
            params={"N": n_ptr, "S": s_ptr, "link": preset},
            key="predict_retimed_ring",
            config=f"retime(run_allreduce(cluster, {s_ptr}).trace, cost_model({preset!r}))",
        ),
    ]
    return Quiz(
        _("Lesson 13: libraries, interconnects and frameworks"),
        questions,
        name="13_landscape",
        learner=learner,
    )


register_bank("13_landscape", landscape_quiz)
