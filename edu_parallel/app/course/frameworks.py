"""The training frameworks, as data: what each parallelises, where this course builds the same idea,
and what the framework adds that the course does not (lesson 15, syllabus U13).

:data:`FRAMEWORKS` holds Megatron-LM, DeepSpeed, PyTorch FSDP2 / torchtitan, Colossal-AI and
JAX/XLA (GSPMD). Each :class:`Framework` maps its parallelisms to :class:`Same` entries: the
module of this package (a dotted path) and the lesson (a stem of
:data:`edu_parallel.app.course.lessons.LESSONS`) that run the same idea on real ranks;
``tests/test_landscape.py`` imports every module and finds every lesson. Sources: the papers and
repositories named in each row.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...core.i18n import N_, _
from ...core.shown import shown


@dataclass(frozen=True)
class Same:
    """``idea`` of a framework, built in this course by ``module`` and taught in ``lesson``."""

    idea: str
    module: str
    lesson: str


@dataclass(frozen=True)
class Framework:
    name: str
    maker: str
    parallelisms: str
    ours: tuple[Same, ...]
    adds: str
    source: str


TP = Same(
    N_("tensor parallel (column/row, Megatron MLP)"),
    "edu_parallel.tensor_parallel.layers",
    "08_tensor_parallel",
)
SP = Same(
    N_("sequence parallel (reduce-scatter/all-gather around TP)"),
    "edu_parallel.tensor_parallel.layers",
    "08_tensor_parallel",
)
PP = Same(
    N_("pipeline schedules (GPipe, 1F1B, interleaved, ZB-H1)"),
    "edu_parallel.pipeline_parallel.builders",
    "10_pipeline",
)
ZERO = Same(N_("ZeRO-1/2/3 sharding"), "edu_parallel.zero.stages", "07_zero_fsdp")
FSDP = Same(N_("FSDP2 fully_shard, run for real"), "edu_parallel.zero.fsdp", "07_zero_fsdp")
EP = Same(
    N_("expert parallel (all-to-all dispatch)"),
    "edu_parallel.expert_parallel.layer",
    "09_expert_parallel",
)
DDP = Same(
    N_("data parallel with buckets overlapped with backward"),
    "edu_parallel.data_parallel.ddp",
    "06_dp_bucketing_overlap",
)
MESH = Same(
    N_("a device mesh of DP x TP x PP groups"), "edu_parallel.parallel_3d.mesh", "12_3d_planner"
)
PLAN = Same(
    N_("searching layouts by memory and time"), "edu_parallel.planner.planning", "12_3d_planner"
)
MEMORY = Same(N_("model-state bytes per GPU"), "edu_parallel.memory.model_states", "07_zero_fsdp")
COMPRESS = Same(
    N_("gradient compression with error feedback"),
    "edu_parallel.compression.compressors",
    "13_compression",
)
COLLECTIVES = Same(
    N_("the collectives a compiler inserts"), "edu_parallel.plans.collectives", "02_collectives"
)

FRAMEWORKS: tuple[Framework, ...] = (
    Framework(
        "Megatron-LM (Megatron-Core)",
        "NVIDIA",
        N_(
            "TP + SP, PP (1F1B, interleaved), DP with a distributed optimizer (ZeRO-1-like), "
            "context parallel (CP), expert parallel (EP)"
        ),
        (TP, SP, PP, ZERO, EP, MESH),
        N_(
            "context parallelism (attention split over the sequence), Transformer Engine's fused "
            "kernels and FP8, TP communication overlapped with GEMMs, distributed checkpoints"
        ),
        "Shoeybi et al. 2019 (arXiv 1909.08053); Narayanan et al. 2021 (arXiv 2104.04473); "
        "Korthikanti et al. 2022 (arXiv 2205.05198); github.com/NVIDIA/Megatron-LM",
    ),
    Framework(
        "DeepSpeed",
        "Microsoft",
        N_(
            "ZeRO-1/2/3, ZeRO-Offload / ZeRO-Infinity, PP (1F1B), TP with Megatron (3D), "
            "DeepSpeed-MoE, Ulysses sequence parallel, 1-bit Adam / compression"
        ),
        (ZERO, MEMORY, PP, EP, COMPRESS),
        N_(
            "offload of optimizer states and parameters to CPU and NVMe, ZeRO++ (quantized and "
            "hierarchical ZeRO communication), Ulysses (all-to-all over the sequence)"
        ),
        "Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054); Ren et al. 2021 (ZeRO-Offload, "
        "arXiv 2101.06840); Jacobs et al. 2023 (Ulysses, arXiv 2309.14509); "
        "github.com/deepspeedai/DeepSpeed",
    ),
    Framework(
        "PyTorch FSDP2 / torchtitan",
        "Meta (PyTorch)",
        N_(
            "FSDP2 (per-parameter DTensor sharding, fully_shard), TP + SP (parallelize_module), PP "
            "(torch.distributed.pipelining), CP, composed on a DeviceMesh"
        ),
        (FSDP, TP, SP, PP, MESH, DDP),
        N_(
            "DTensor and DeviceMesh as one abstraction, torch.compile, Float8 training, async TP, "
            "context parallelism, distributed checkpointing"
        ),
        "Liang et al. 2024 (TorchTitan, arXiv 2410.06511); "
        "https://pytorch.org/docs/stable/distributed.fsdp.fully_shard.html ; "
        "github.com/pytorch/torchtitan",
    ),
    Framework(
        "Colossal-AI",
        "HPC-AI Tech",
        N_(
            "DP, ZeRO with Gemini (chunked CPU/GPU memory), 1D/2D/2.5D/3D TP, PP, sequence "
            "parallel, MoE; combined by a HybridParallelPlugin"
        ),
        (ZERO, TP, PP, EP, PLAN),
        N_(
            "2D, 2.5D and 3D tensor parallelism (matrices split over a grid), Gemini's"
            " heterogeneous memory manager, automatic parallelisation search"
        ),
        "Li et al. 2023 (Colossal-AI, ICPP; arXiv 2110.14883); github.com/hpcaitech/ColossalAI",
    ),
    Framework(
        "JAX / XLA (GSPMD)",
        "Google",
        N_(
            "any mix of DP, FSDP-style and TP sharding from annotations on a device mesh; PP by "
            "hand (shard_map)"
        ),
        (MESH, COLLECTIVES, TP),
        N_(
            "the compiler partitions the program and inserts every collective from sharding "
            "annotations: no communication code by hand; TPU's ICI torus"
        ),
        "Xu et al. 2021 (GSPMD, arXiv 2105.04663); "
        "https://docs.jax.dev/en/latest/notebooks/Distributed_arrays_and_automatic_parallelization.html",
    ),
)


def frameworks_table() -> pd.DataFrame:
    """One row per framework: what it parallelises, where the course builds it, what it adds."""
    rows = [
        {
            N_("framework"): f.name,
            N_("maker"): f.maker,
            N_("parallelisms"): _(f.parallelisms),
            N_("in this course"): "; ".join(
                _("{idea}: lesson {lesson}").format(idea=_(s.idea), lesson=s.lesson[:2])
                for s in f.ours
            ),
            N_("adds"): _(f.adds),
            N_("source"): f.source,
        }
        for f in FRAMEWORKS
    ]
    return shown(pd.DataFrame(rows).set_index("framework"))


def mapping_table() -> pd.DataFrame:
    """One row per (framework, idea): the module and lesson of this course that run it."""
    rows = [
        {
            N_("framework"): f.name,
            N_("idea"): s.idea,
            N_("module"): s.module,
            N_("lesson"): s.lesson,
        }
        for f in FRAMEWORKS
        for s in f.ours
    ]
    ideas = {s.idea for f in FRAMEWORKS for s in f.ours}  # shown translated, indexed in English
    return shown(pd.DataFrame(rows).set_index(["framework", "idea"]), values=ideas)
