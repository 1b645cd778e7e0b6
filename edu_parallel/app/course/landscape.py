"""The communication libraries, as data: who makes each, for which hardware, what it runs, and how
torch reaches it (lesson 15, syllabus U19; errata E6).

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

from ...core.i18n import N_, _
from ...core.shown import shown
from ...engine.platform import BACKENDS as ENGINE_BACKENDS


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


NCCL_COLLECTIVES = N_(
    "AllReduce, Broadcast, Reduce, AllGather, ReduceScatter; send/recv (all-to-all, gather, "
    "scatter as grouped send/recv)"
)
LIBRARIES: tuple[Library, ...] = (
    Library(
        "NCCL",
        "NVIDIA",
        N_("NVIDIA GPUs: NVLink, NVSwitch, PCIe inside a node; InfiniBand, RoCE between nodes"),
        NCCL_COLLECTIVES,
        N_(
            "Ring, Tree (double binary tree), CollNet Direct/Chain (IB SHARP), NVLS and NVLSTree "
            "(NVSwitch SHARP), PAT; protocols LL, LL128, Simple; forced with NCCL_ALGO / NCCL_PROTO"
        ),
        "nccl",
        "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/ ; github.com/NVIDIA/nccl "
        "src/graph/tuning.cc",
    ),
    Library(
        "RCCL",
        "AMD",
        N_(
            "AMD Instinct GPUs: Infinity Fabric (xGMI), PCIe inside a node; InfiniBand, RoCE"
            " between"
        ),
        N_(
            "AllReduce, Broadcast, Reduce, AllGather, ReduceScatter; send/recv (all-to-all,"
            " gather, scatter as grouped send/recv) (NCCL's API)"
        ),
        N_("Ring, Tree; MSCCL and MSCCL++ integrated; protocols LL, LL128, Simple"),
        "nccl",
        N_(
            "github.com/ROCm/rccl ; ROCm docs (rccl). Not 'RCXL' (no such library); RCCLX is"
            " Meta's fork (github.com/meta-pytorch/torchcomms, comms/torchcomms/rcclx)"
        ),
    ),
    Library(
        "Gloo",
        "Meta",
        N_("CPUs over TCP (and ibverbs); the engine of this course runs on it"),
        N_(
            "allreduce, broadcast, reduce, allgather, reduce_scatter, alltoall, gather, scatter, "
            "barrier, send/recv"
        ),
        N_("ring, ring-chunked, halving-doubling, bcube (allreduce); direct exchanges"),
        "gloo",
        "github.com/pytorch/gloo ; https://pytorch.org/docs/stable/distributed.html",
    ),
    Library(
        "MPI",
        N_("the MPI Forum standard; Open MPI, MPICH, MVAPICH, Intel MPI"),
        N_(
            "CPUs and (CUDA- or ROCm-aware builds) GPUs; any HPC network (InfiniBand, Slingshot,"
            " ...)"
        ),
        N_(
            "every collective of the MPI standard (MPI_Allreduce, MPI_Alltoall, ...), point to"
            " point"
        ),
        N_(
            "per implementation: ring, recursive doubling, Rabenseifner, binomial trees (Thakur, "
            "Rabenseifner & Gropp 2005)"
        ),
        "mpi",
        N_("https://www.mpi-forum.org/docs/ ; torch needs a build from source with MPI"),
    ),
    Library(
        "oneCCL",
        "Intel (UXL Foundation)",
        N_(
            "Intel CPUs and Intel Data Center GPUs (Max series: Xe Link inside a node); Ethernet, "
            "InfiniBand between nodes"
        ),
        N_("allreduce, allgather, alltoall, broadcast, reduce, reduce_scatter, barrier"),
        N_(
            "chosen per operation (CCL_ALLREDUCE=direct, ring, double_tree, recursive_doubling, "
            "rabenseifner, 2d, ...)"
        ),
        "xccl",
        N_(
            "https://github.com/uxlfoundation/oneCCL ; torch >= 2.8 'xccl' on XPU (earlier: 'ccl' "
            "from oneccl_bindings_for_pytorch)"
        ),
    ),
    Library(
        "HCCL",
        "Huawei",
        N_("Ascend NPUs: HCCS inside a server, RoCE between servers"),
        N_("AllReduce, Broadcast, AllGather, ReduceScatter, Reduce, AlltoAll(V), send/recv"),
        N_(
            "Mesh, Ring, RHD (recursive halving-doubling), PairWise, NHR, NB; chosen per level of "
            "the topology (server, then cluster)"
        ),
        "hccl",
        N_(
            "https://www.hiascend.com (CANN HCCL docs); torch_npu registers 'hccl': "
            "dist.init_process_group('hccl')"
        ),
    ),
    Library(
        "MSCCL / MSCCL++",
        "Microsoft",
        N_("NVIDIA and AMD GPUs (runs inside NCCL/RCCL, or as its own library)"),
        N_("custom all-reduce, all-gather, all-to-all written as schedules"),
        N_(
            "MSCCL: algorithms written in a DSL (MSCCLang) and compiled to NCCL/RCCL; MSCCL++: "
            "GPU-initiated primitives (put, get, signal) to build them"
        ),
        N_("through nccl (inside NCCL/RCCL)"),
        "github.com/microsoft/msccl ; github.com/microsoft/mscclpp ; Cowan et al. 2023 (MSCCLang,"
        " ASPLOS)",
    ),
    Library(
        "NVSHMEM / rocSHMEM",
        "NVIDIA / AMD",
        N_("NVIDIA GPUs (NVLink, InfiniBand) / AMD GPUs: one symmetric memory over all GPUs"),
        N_("one-sided put, get, atomics, signals from inside kernels; a few collectives"),
        N_(
            "OpenSHMEM model: kernels communicate without the CPU (used by DeepEP's MoE all-to-all)"
        ),
        N_("none: torch.distributed._symmetric_memory and libraries built on it"),
        "https://docs.nvidia.com/nvshmem/ ; github.com/ROCm/rocSHMEM ; OpenSHMEM 1.5",
    ),
)


def libraries_table() -> pd.DataFrame:
    """:data:`LIBRARIES` as a table, one row per library."""
    prose = ("maker", "hardware", "collectives", "algorithms", "backend", "source")
    rows = [{k: _(v) if k in prose else v for k, v in asdict(lib).items()} for lib in LIBRARIES]
    return shown(
        pd.DataFrame(rows).set_index("name"),
        messages={"collectives": N_("collectives it runs")},
    )


# the headers of libraries_table (Library's fields), translated where the table is shown
LIBRARY_HEADERS = (
    N_("name"),
    N_("maker"),
    N_("hardware"),
    N_("collectives"),
    N_("algorithms"),
    N_("backend"),
    N_("source"),
)


# vendor -> (its torch device type, the library under the backend torch picks for it)
VENDORS: dict[str, tuple[str, str]] = {
    N_("NVIDIA GPU (CUDA)"): ("cuda", "NCCL"),
    N_("AMD GPU (ROCm: torch.cuda is HIP)"): ("cuda", "RCCL"),
    N_("Intel GPU (XPU)"): ("xpu", "oneCCL"),
    N_("CPU only (this machine)"): ("cpu", "Gloo"),
}
PLUGIN = {N_("Huawei Ascend NPU (torch_npu)"): ("npu", "hccl", "HCCL")}


def backend_table(default_map: dict[str, str] | None = None) -> pd.DataFrame:
    """Per vendor: the backend ``init_process_group`` picks for its device (from torch's
    ``default_device_backend_map``, or ``default_map``), the library under it, and the backend
    this course's engine uses there (it supports only ``ENGINE_BACKENDS``: NCCL with one GPU per
    rank, else gloo)."""
    known = dict(dist.Backend.default_device_backend_map if default_map is None else default_map)
    rows = []
    for vendor, (device, library) in VENDORS.items():
        backend = known.get(device, _("(not in this torch)"))
        rows.append((vendor, device, backend, library))
    for vendor, (device, backend, library) in PLUGIN.items():
        rows.append(
            (
                vendor,
                device,
                known.get(
                    device, _("{backend} (registered by the plugin)").format(backend=backend)
                ),
                library,
            )
        )
    out = []
    for vendor, device, backend, library in rows:
        engine = backend if backend in ENGINE_BACKENDS else "gloo"
        out.append(
            {
                N_("accelerator"): vendor,
                N_("torch device"): device,
                N_("torch backend"): backend,
                N_("library"): library,
                N_("this course's engine"): (
                    _("{backend} (one GPU per rank)").format(backend=engine)
                    if engine == "nccl"
                    else engine
                ),
            }
        )
    return shown(pd.DataFrame(out).set_index("accelerator"), values=(*VENDORS, *PLUGIN))
