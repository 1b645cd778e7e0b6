"""What an all-reduce holds in memory per rank, whether a run fits this machine, and how a rank
measures its own peak. Imports no torch: the command line refuses a size before torch loads.

A rank running :func:`~edu_parallel.comm.allreduce.allreduce_job` holds its buffer (the input,
reduced in place into the output), the builtin ``dist.all_reduce`` result it is checked against,
and the plan interpreter's scratch: the chunks it receives into a staging buffer in one step
(:func:`~edu_parallel.engine.execute.run_plan` stages a reduced chunk, and a copied one that the
rank also sends in that step). The ring stages one chunk, ``D / N``: ``2 + 1/N`` times the payload,
within :data:`PEAK_FACTOR` (3). The check, the tests and ``benchmarks/bench_engine.py`` use that
one number. The naive all-reduce's root stages ``N - 1`` whole buffers and needs more:
:func:`bytes_per_rank` counts it from the plan. (A 16-bit input is drawn in float32 and converted,
:func:`~edu_parallel.core.inputs.make_input`: 3x for a moment, before the reference exists.)

A rank measures its peak as the rise of its resident set over the job: the kernel's high-water mark
(``VmHWM``), reset at the start (``/proc/self/clear_refs``), minus the resident size then
(``VmRSS``). Only Linux offers both; elsewhere :func:`peak_reset` says no.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
from pathlib import Path
from typing import Any

from ..core.errors import spelling
from ..core.i18n import _
from ..core.inputs import chunk_bounds
from ..core.units import DTYPES, format_bytes
from ..plans.algorithms import AllReduceRun
from ..plans.collectives import CollectiveRun
from ..plans.layout import staged_transfers
from ..plans.plan import Plan

# A ring all-reduce holds at most this many times its payload per rank: the buffer (input, then
# output), the builtin's result it is checked against, and one chunk of scratch (D/N <= D/2).
PEAK_FACTOR = 3
# A run of many tensors of a few MiB or less (they come from the heap, not their own mappings)
# holds more than their bytes: freed holes are reused only in part. Measured up to 1.35x on the
# pipeline's ranks (tests/test_pipeline_memory.py); the bounds of the pipeline, 3D and MoE runs
# take their bytes times this.
HEAP_SLACK = 1.5
MEMINFO = Path("/proc/meminfo")
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def staged_chunks(plan: Plan) -> list[int]:
    """Per rank, the most chunks it receives into scratch in one step
    (:func:`~edu_parallel.plans.layout.staged_transfers`): the ring's one, the naive root's N-1."""
    return [
        max((len(staged_transfers(step, r)) for step in plan.steps), default=0)
        for r in range(plan.world_size)
    ]


def bytes_per_rank(run: AllReduceRun | CollectiveRun) -> list[int]:
    """What each rank holds at its peak running ``run``. An all-reduce: at least ``PEAK_FACTOR``
    times the payload, more where the plan stages more than one payload of scratch (the naive
    root). Another collective (:func:`~edu_parallel.comm.collective.collective_job`): a bound,
    ``PEAK_FACTOR`` times the payload (the buffer, the builtin's result, gloo's copy) plus one
    chunk (the builtin's copy of its input chunk) and the chunks the plan stages: measured on 4
    ranks, an all-gather peaks at 3.25x, a reduce-scatter at 3.3x (bound 3.5x), the others at
    3x or less (``tests/test_ring_memory.py``)."""
    buf = run.buffer
    bounds = chunk_bounds(buf.numel, run.plan.num_chunks)
    largest = max(b - a for a, b in zip(bounds, bounds[1:], strict=False)) * DTYPES[buf.dtype]
    payload = buf.real_bytes
    if isinstance(run, CollectiveRun):
        return [PEAK_FACTOR * payload + (1 + k) * largest for k in staged_chunks(run.plan)]
    return [max(PEAK_FACTOR * payload, 2 * payload + k * largest) for k in staged_chunks(run.plan)]


def free_memory_bytes(meminfo: Path = MEMINFO) -> int | None:
    """Bytes this machine can still give without swapping: ``MemAvailable`` of ``/proc/meminfo``
    (Linux), else the free pages ``sysconf`` reports, else None (unknown)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # the kernel writes kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_fits(
    run: AllReduceRun | CollectiveRun, ranks: int, size: Any, name: str = "size"
) -> None:
    """Raise a one-line ValueError when ``ranks`` ranks of ``run`` on this machine would need more
    memory than it has free; ``size`` is the value as the caller gave it, named ``name``. Nothing
    is checked when the free memory cannot be read."""
    free = free_memory_bytes()
    per_rank = bytes_per_rank(run)[:ranks]
    need = sum(per_rank)
    if free is None or need <= free:
        return
    factor = max(per_rank) / run.buffer.real_bytes
    raise ValueError(
        _(
            "{name}={value!r} needs about {need} on {ranks} ranks ({factor:.3g}x {size} per rank);"
            " this machine has {free} free"
        ).format(
            name=spelling(name),
            value=size,
            need=format_bytes(need),
            ranks=ranks,
            factor=factor,
            size=format_bytes(run.buffer.real_bytes),
            free=format_bytes(free),
        )
    )


def check_need(per_rank: int, ranks: int, here: int, options: str) -> None:
    """Raise a one-line ValueError when ``ranks`` ranks of ``per_rank`` bytes each, and ``here``
    bytes in this process (a reference computed beside the ranks), need more memory than this
    machine has free; ``options`` names what decides it (``--hidden=8192, --ffn=32768``).
    Nothing is checked when the free memory cannot be read."""
    free = free_memory_bytes()
    need = ranks * per_rank + here
    if free is None or need <= free:
        return
    raise ValueError(
        _(
            "{options} need about {need} ({ranks} ranks x {per_rank}, and {here} in this "
            "process for the reference); this machine has {free} free"
        ).format(
            options=options,
            need=format_bytes(need),
            ranks=ranks,
            per_rank=format_bytes(per_rank),
            here=format_bytes(here),
            free=format_bytes(free),
        )
    )


def _status_bytes(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise OSError(f"{field} not in {_STATUS}")


def trim_heap() -> None:
    """Give back what this process freed, before a measure of a job of many heap-sized tensors
    (the pipeline's and the 3D memory tests): collect garbage (a previous job's tensors) and
    return the heap's free pages to the system (glibc's ``malloc_trim``; nothing where there is
    none). Else the job reuses pages an earlier job freed and the measure sees less than it
    holds."""
    gc.collect()
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def peak_reset() -> bool:
    """Reset this process's resident high-water mark (Linux: ``clear_refs`` 5); False where the
    kernel cannot, so a caller says it measured nothing rather than a stale peak."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def resident_bytes() -> int:
    """This process's resident set now (``VmRSS``)."""
    return _status_bytes("VmRSS")


def peak_resident_bytes() -> int:
    """This process's resident high-water mark since the last :func:`peak_reset` (``VmHWM``)."""
    return _status_bytes("VmHWM")
