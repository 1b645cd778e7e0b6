"""How ranks start on this machine: the ``torch.distributed`` backend (NCCL with one GPU per rank,
else gloo) and the process start method (fork on Linux CPU, spawn where fork is unsafe)."""

from __future__ import annotations

import sys

import torch

from ..core.errors import bad_value, check_choice
from ..core.i18n import _

BACKENDS = ("auto", "gloo", "nccl")
# not "forkserver": its workers are children of the server, not of the cluster's process, and a
# rank ends itself when its parent is not the process that owns it (engine/worker.py)
START_METHODS = ("auto", "fork", "spawn")


def cuda_device_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_backend(backend: str, world_size: int) -> str:
    """``"auto"`` -> NCCL when there is one CUDA device per rank, else gloo; checks it can run."""
    check_choice("backend", backend, BACKENDS)
    gpus = cuda_device_count() if backend in ("auto", "nccl") else 0
    if backend == "auto":
        return "nccl" if gpus >= world_size else "gloo"
    if backend == "nccl" and gpus < world_size:
        raise bad_value(
            "backend",
            backend,
            _(
                "'gloo' here: 'nccl' needs one CUDA device per rank ({world_size}), this machine"
                " has {gpus}"
            ).format(world_size=world_size, gpus=gpus),
        )
    return backend


def resolve_start_method(start_method: str, backend: str) -> str:
    """fork on Linux CPU (fast); spawn where fork is unsafe: CUDA, or macOS."""
    check_choice("start_method", start_method, START_METHODS)
    if start_method != "auto":
        return start_method
    if (
        backend == "nccl"
        or sys.platform != "linux"
        or "torch.cuda" in sys.modules
        and _cuda_initialized()
    ):
        return "spawn"
    return "fork"


def _cuda_initialized() -> bool:
    return bool(torch.cuda.is_initialized())


def process_stopped(pid: int | None) -> bool:
    """Whether the process ``pid`` is stopped (SIGSTOP, a debugger), from ``/proc/<pid>/stat``'s
    state field (``T`` or ``t``); False where there is no ``/proc`` (macOS: the flight record's
    silent heartbeat says it there)."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("T", "t")
