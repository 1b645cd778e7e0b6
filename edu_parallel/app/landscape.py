"""The communication libraries, as data: who makes each, for which hardware, what it runs, and how
torch reaches it (lesson 13, syllabus U19; errata E6).

:data:`LIBRARIES` is one row per library; :func:`libraries_table` shows it. :func:`backend_table`
says which ``torch.distributed`` backend the course's code gets on each vendor's accelerators,
read from the installed torch (``dist.Backend.default_device_backend_map``, the backend
``init_process_group`` picks per device type) and from the engine's own rule
(:func:`edu_parallel.engine.platform.resolve_backend`: NCCL with one GPU per rank, else gloo).
The frameworks are in :mod:`.landscape_frameworks`.

Sources are named in each row. Two facts the syllabus gets wrong (errata E6): there is no AMD
library called "RCXL"; AMD's library is **RCCL**, and **RCCLX** is Meta's fork of RCCL
(``meta-pytorch/torchcomms``, ``comms/torchcomms/rcclx``). On ROCm, torch's ``"nccl"`` backend
is RCCL: ROCm builds of torch compile ``ProcessGroupNCCL`` against RCCL's NCCL-compatible API.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd
import torch.distributed as dist
from pandas.io.formats.style import Styler

from ..engine.platform import BACKENDS as ENGINE_BACKENDS


@dataclass(frozen=True)
class Library:
    """One communication library: ``backend`` is the name ``init_process_group`` takes."""

    name: str
    maker: str
    hardware: str
    collectives: str
    algorithms: str
    backend: str
    source: str


NCCL_COLLECTIVES = (
    "AllReduce, Broadcast, Reduce, AllGather, ReduceScatter; send/recv (all-to-all, gather, "
    "scatter as grouped send/recv)"
)
LIBRARIES: tuple[Library, ...] = (
    Library(
        "NCCL",
        "NVIDIA",
        "NVIDIA GPUs: NVLink, NVSwitch, PCIe inside a node; InfiniBand, RoCE between nodes",
        NCCL_COLLECTIVES,
        "Ring, Tree (double binary tree), CollNet Direct/Chain (IB SHARP), NVLS and NVLSTree "
        "(NVSwitch SHARP), PAT; protocols LL, LL128, Simple; forced with NCCL_ALGO / NCCL_PROTO",
        "nccl",
        "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/ ; github.com/NVIDIA/nccl "
        "src/graph/tuning.cc",
    ),
    Library(
        "RCCL",
        "AMD",
        "AMD Instinct GPUs: Infinity Fabric (xGMI), PCIe inside a node; InfiniBand, RoCE between",
        NCCL_COLLECTIVES + " (NCCL's API)",
        "Ring, Tree; MSCCL and MSCCL++ integrated; protocols LL, LL128, Simple",
        "nccl",
        "github.com/ROCm/rccl ; ROCm docs (rccl). Not 'RCXL' (no such library); RCCLX is Meta's "
        "fork (github.com/meta-pytorch/torchcomms, comms/torchcomms/rcclx)",
    ),
    Library(
        "Gloo",
        "Meta",
        "CPUs over TCP (and ibverbs); the engine of this course runs on it",
        "allreduce, broadcast, reduce, allgather, reduce_scatter, alltoall, gather, scatter, "
        "barrier, send/recv",
        "ring, ring-chunked, halving-doubling, bcube (allreduce); direct exchanges",
        "gloo",
        "github.com/pytorch/gloo ; https://pytorch.org/docs/stable/distributed.html",
    ),
    Library(
        "MPI",
        "the MPI Forum standard; Open MPI, MPICH, MVAPICH, Intel MPI",
        "CPUs and (CUDA- or ROCm-aware builds) GPUs; any HPC network (InfiniBand, Slingshot, ...)",
        "every collective of the MPI standard (MPI_Allreduce, MPI_Alltoall, ...), point to point",
        "per implementation: ring, recursive doubling, Rabenseifner, binomial trees (Thakur, "
        "Rabenseifner & Gropp 2005)",
        "mpi",
        "https://www.mpi-forum.org/docs/ ; torch needs a build from source with MPI",
    ),
    Library(
        "oneCCL",
        "Intel (UXL Foundation)",
        "Intel CPUs and Intel Data Center GPUs (Max series: Xe Link inside a node); Ethernet, "
        "InfiniBand between nodes",
        "allreduce, allgather, alltoall, broadcast, reduce, reduce_scatter, barrier",
        "chosen per operation (CCL_ALLREDUCE=direct, ring, double_tree, recursive_doubling, "
        "rabenseifner, 2d, ...)",
        "xccl",
        "https://github.com/uxlfoundation/oneCCL ; torch >= 2.8 'xccl' on XPU (earlier: 'ccl' "
        "from oneccl_bindings_for_pytorch)",
    ),
    Library(
        "HCCL",
        "Huawei",
        "Ascend NPUs: HCCS inside a server, RoCE between servers",
        "AllReduce, Broadcast, AllGather, ReduceScatter, Reduce, AlltoAll(V), send/recv",
        "Mesh, Ring, RHD (recursive halving-doubling), PairWise, NHR, NB; chosen per level of "
        "the topology (server, then cluster)",
        "hccl",
        "https://www.hiascend.com (CANN HCCL docs); torch_npu registers 'hccl': "
        "dist.init_process_group('hccl')",
    ),
    Library(
        "MSCCL / MSCCL++",
        "Microsoft",
        "NVIDIA and AMD GPUs (runs inside NCCL/RCCL, or as its own library)",
        "custom all-reduce, all-gather, all-to-all written as schedules",
        "MSCCL: algorithms written in a DSL (MSCCLang) and compiled to NCCL/RCCL; MSCCL++: "
        "GPU-initiated primitives (put, get, signal) to build them",
        "through nccl (inside NCCL/RCCL)",
        "github.com/microsoft/msccl ; github.com/microsoft/mscclpp ; Cowan et al. 2023 (MSCCLang,"
        " ASPLOS)",
    ),
    Library(
        "NVSHMEM / rocSHMEM",
        "NVIDIA / AMD",
        "NVIDIA GPUs (NVLink, InfiniBand) / AMD GPUs: one symmetric memory over all GPUs",
        "one-sided put, get, atomics, signals from inside kernels; a few collectives",
        "OpenSHMEM model: kernels communicate without the CPU (used by DeepEP's MoE all-to-all)",
        "none: torch.distributed._symmetric_memory and libraries built on it",
        "https://docs.nvidia.com/nvshmem/ ; github.com/ROCm/rocSHMEM ; OpenSHMEM 1.5",
    ),
)


def libraries_table() -> pd.DataFrame:
    """:data:`LIBRARIES` as a table, one row per library."""
    return pd.DataFrame([asdict(lib) for lib in LIBRARIES]).set_index("name")


def wrapped(table: pd.DataFrame) -> Styler:
    """``table`` with long words (URLs, module paths) allowed to break, so that a table of prose
    fits the notebook's width instead of scrolling sideways."""
    return table.style.set_properties(**{"overflow-wrap": "anywhere", "text-align": "left"})


# vendor -> (its torch device type, the library under the backend torch picks for it)
VENDORS: dict[str, tuple[str, str]] = {
    "NVIDIA GPU (CUDA)": ("cuda", "NCCL"),
    "AMD GPU (ROCm: torch.cuda is HIP)": ("cuda", "RCCL"),
    "Intel GPU (XPU)": ("xpu", "oneCCL"),
    "CPU only (this machine)": ("cpu", "Gloo"),
}
PLUGIN = {"Huawei Ascend NPU (torch_npu)": ("npu", "hccl", "HCCL")}


def backend_table(default_map: dict[str, str] | None = None) -> pd.DataFrame:
    """Per vendor: the backend ``init_process_group`` picks for its device (from torch's
    ``default_device_backend_map``, or ``default_map``), the library under it, and the backend
    this course's engine uses there (it supports only ``ENGINE_BACKENDS``: NCCL with one GPU per
    rank, else gloo)."""
    known = dict(dist.Backend.default_device_backend_map if default_map is None else default_map)
    rows = []
    for vendor, (device, library) in VENDORS.items():
        backend = known.get(device, "(not in this torch)")
        rows.append((vendor, device, backend, library))
    for vendor, (device, backend, library) in PLUGIN.items():
        rows.append(
            (vendor, device, known.get(device, f"{backend} (registered by the plugin)"), library)
        )
    out = []
    for vendor, device, backend, library in rows:
        engine = backend if backend in ENGINE_BACKENDS else "gloo"
        out.append(
            {
                "accelerator": vendor,
                "torch device": device,
                "torch backend": backend,
                "library": library,
                "this course's engine": engine
                + (" (one GPU per rank)" if engine == "nccl" else ""),
            }
        )
    return pd.DataFrame(out).set_index("accelerator")
