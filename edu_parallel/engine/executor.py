"""What runs a job on every rank: the :class:`Executor` interface and its :class:`RunResult`.

Two executors implement it: :class:`~edu_parallel.engine.cluster.Cluster` (a persistent pool of
forked ranks on this machine) and :class:`~edu_parallel.engine.torchrun.TorchrunExecutor` (this
process is one rank of a ``torchrun`` job). Runners are written against the interface, so the
same concept code runs in a notebook and on a GPU cluster. This module imports no torch, so the
command line can name the interface, and tell whether torchrun started it, without loading it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..core.dims import ParallelDims
from ..core.errors import bad_value
from ..core.trace import Trace
from .matching import first_size_mismatch
from .messages import RankOutput

Job = Callable[..., Any]  # fn(ctx: RankContext, *args, **kwargs), importable by name


@dataclass
class RunResult:
    """What ``Executor.run`` returns: one result per rank, the merged trace and the wall time."""

    results: list[Any]
    trace: Trace
    wall_s: float
    job_id: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def merge(
        cls, outputs: list[RankOutput], meta: dict[str, Any], wall_s: float, job_id: int = 0
    ) -> RunResult:
        """Join the ranks' outputs, in rank order, into one result list and one trace; raise
        :class:`~edu_parallel.engine.matching.MessageSizeError` when the trace shows a receive of
        another size than its message (gloo completes it silently: a wrong answer), traced or not
        (an untraced job keeps its sends and receives for this alone)."""
        trace = Trace(meta=dict(meta))
        for out in outputs:
            trace.events.extend(out.events)
            trace.snapshots.extend(out.snapshots)
        mismatch = first_size_mismatch(
            [*trace.events, *(m for out in outputs for m in out.messages)]
        )
        if mismatch is not None:
            raise mismatch
        return cls([out.result for out in outputs], trace, wall_s, job_id)


@runtime_checkable
class Executor(Protocol):
    """Runs ``fn(ctx, *args)`` on ``world_size`` ranks of a ``torch.distributed`` group."""

    world_size: int
    backend: str  # "gloo" or "nccl", resolved
    timeout: float  # seconds a job may take

    def run(self, fn: Job, *args: Any, trace: bool = True, **kwargs: Any) -> RunResult | None:
        """Every rank's result and the merged trace (None on the non-zero ranks of torchrun)."""
        ...

    def sized(self, world_size: int) -> AbstractContextManager[Executor]:
        """This executor when it has ``world_size`` ranks, else one of that size for a block."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Executor: ...

    def __exit__(self, *exc: Any) -> None: ...


def check_importable(fn: Any) -> None:
    """Workers import ``fn`` by name: it must be a top-level function of an importable module."""
    qual = getattr(fn, "__qualname__", "")
    module = getattr(fn, "__module__", None)
    if not callable(fn) or module in (None, "__main__") or "<" in qual:
        raise bad_value(
            "fn",
            fn,
            "a function defined at the top level of an importable module (workers import it by "
            "name; a notebook or __main__ function cannot be imported by a spawned worker)",
        )


def job_meta(executor: Executor, fn: Job, source: str) -> dict[str, Any]:
    """The ``meta`` every run's trace starts with."""
    return {
        "world_size": executor.world_size,
        "backend": executor.backend,
        "source": source,
        "fn": f"{fn.__module__}.{fn.__qualname__}",
    }


TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def in_torchrun() -> bool:
    """True when this process was started by torchrun (or another env:// launcher)."""
    return all(v in os.environ for v in TORCHRUN_VARS)


def partial_torchrun_vars() -> list[str]:
    """The torchrun variables that are set when not all of them are (a leftover environment:
    the command runs a local cluster, and says which to unset)."""
    present = [v for v in TORCHRUN_VARS if v in os.environ]
    return present if 0 < len(present) < len(TORCHRUN_VARS) else []


def torchrun_dims() -> ParallelDims:
    """The degrees of this torchrun job: ``WORLD_SIZE`` ranks (no local limit)."""
    return ParallelDims(int(os.environ["WORLD_SIZE"]))
