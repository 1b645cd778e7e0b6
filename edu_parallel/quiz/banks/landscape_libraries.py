"""Lesson 15's questions on libraries and frameworks, which draw no parameter: errata E6 (there
is no RCXL), the backend name a ROCm build of torch uses for RCCL, and the framework of ZeRO-3.

The bank is ``landscape.py``. Sources: github.com/ROCm/rccl, meta-pytorch/torchcomms (RCCLX),
PyTorch's ``dist.Backend``, Rajbhandari et al. 2020 (ZeRO).
"""

from __future__ import annotations

from typing import Any

from ...core.i18n import _
from ..questions import MultipleChoice


def q_errata_e6(d: Any, run: Any) -> MultipleChoice:
    """Errata E6: there is no 'RCXL'."""
    return MultipleChoice(
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
    )


def q_rocm_backend(d: Any, run: Any) -> MultipleChoice:
    """The backend name that gives a ROCm build of torch RCCL."""
    return MultipleChoice(
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
    )


def q_zero3_framework(d: Any, run: Any) -> MultipleChoice:
    """Which framework's central feature is ZeRO-3's sharding."""
    return MultipleChoice(
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
    )
