"""Plans: an algorithm as pure data.

A :class:`Plan` splits every rank's buffer into ``num_chunks`` chunks and lists :class:`Step` s.
A step is a set of :class:`Transfer` s that run concurrently: ``src`` sends its chunk ``chunk``
to ``dst``, which adds it (``"reduce"``) or overwrites with it (``"copy"``) at chunk
``dst_chunk`` (the same index unless given: all-to-all, gather and scatter move chunks to other
places). Every transfer of a step reads the state at the start of the step.

Workers interpret a plan (:func:`edu_parallel.engine.execute.run_plan`);
:mod:`edu_parallel.models.simulation` runs the same plan in-process on virtual ranks;
:func:`edu_parallel.plans.checker.validate` checks it symbolically, tracking which ranks' inputs
each chunk holds, and :func:`~edu_parallel.plans.checker.explain` prints the rank x step grid
with the first error marked.

Text form, one step per line, round-tripping through :meth:`Plan.to_text`/:meth:`Plan.from_text`::

    plan ring_allreduce all_reduce n=3 chunks=3
    reduce-scatter | 0>1:c0+ 1>2:c1+ 2>0:c2+
    ...

``+`` is reduce, ``=`` is copy; ``0>2:c1>c0=`` copies rank 0's chunk 1 into rank 2's chunk 0.

The validator tracks *items*: item ``(q, k)`` is rank q's input chunk k. Every (rank, chunk) holds
a set of items (a bitmask, bit ``q * num_chunks + k``); a reduce adds sets, a copy replaces one.
Each collective names the sets it must end with, e.g. all-reduce: every rank's chunk k holds
``{(q, k) for all q}``; all-to-all: rank r's chunk k holds ``{(k, r)}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.dims import ParallelDims
from ..core.errors import bad_value, check_int

MAX_PLAN_RANKS = 4096  # plans are pure data; simulation can go this far
OPS = {"reduce": "+", "copy": "="}
_OP_FROM_SYMBOL = {v: k for k, v in OPS.items()}
COLLECTIVES = (
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "reduce",
    "all_to_all",
    "gather",
    "scatter",
)


def plan_ranks(world_size: int | ParallelDims) -> int:
    """The ranks a plan is built for. A run's :class:`~edu_parallel.core.dims.ParallelDims` was
    validated where the run started (the CLI, a cluster) and is trusted: its world size is taken
    as it is. A plain int from the Python API is checked here, once, in [1, MAX_PLAN_RANKS]."""
    if isinstance(world_size, ParallelDims):
        return world_size.world_size
    return check_int("world_size", world_size, 1, MAX_PLAN_RANKS)


@dataclass(frozen=True, slots=True)
class Transfer:
    """``src`` sends its chunk ``chunk`` to ``dst``, which applies ``op`` ("reduce" or "copy") to
    its chunk ``dst_chunk`` (None: the same index as ``chunk``)."""

    src: int
    dst: int
    chunk: int
    op: str = "reduce"
    dst_chunk: int | None = None

    @property
    def to_chunk(self) -> int:
        """The receiver's chunk that the data lands in."""
        return self.chunk if self.dst_chunk is None else self.dst_chunk

    def text(self) -> str:
        move = f">c{self.dst_chunk}" if self.dst_chunk is not None else ""
        return f"{self.src}>{self.dst}:c{self.chunk}{move}{OPS.get(self.op, '?')}"


@dataclass(frozen=True, slots=True)
class Step:
    """Transfers that run at the same time, inside one named phase."""

    phase: str
    transfers: tuple[Transfer, ...]


@dataclass(frozen=True)
class Plan:
    """An algorithm for one collective, as data. ``root`` is used by rooted collectives."""

    name: str
    collective: str
    world_size: int
    num_chunks: int
    steps: tuple[Step, ...]
    root: int = 0

    # ------------------------------------------------------------- derived facts
    def phases(self) -> list[str]:
        seen: dict[str, None] = {}
        for s in self.steps:
            seen.setdefault(s.phase, None)
        return list(seen)

    def steps_per_phase(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            out[s.phase] = out.get(s.phase, 0) + 1
        return out

    def sent_chunks(self) -> list[int]:
        """How many chunks each rank sends over the whole plan."""
        counts = [0] * self.world_size
        for s in self.steps:
            for t in s.transfers:
                counts[t.src] += 1
        return counts

    def sent_bytes(self, chunk_bytes: list[int]) -> dict[str, list[int]]:
        """Planned bytes per phase per rank, given each chunk's size in bytes."""
        out: dict[str, list[int]] = {}
        for s in self.steps:
            row = out.setdefault(s.phase, [0] * self.world_size)
            for t in s.transfers:
                row[t.src] += chunk_bytes[t.chunk]
        return out

    # ------------------------------------------------------------- text form
    def to_text(self) -> str:
        head = f"plan {self.name} {self.collective} n={self.world_size} chunks={self.num_chunks}"
        if self.collective in ROOTED:
            head += f" root={self.root}"
        lines = [head]
        for s in self.steps:
            lines.append(f"{s.phase} | " + " ".join(t.text() for t in s.transfers))
        return "\n".join(lines)

    @classmethod
    def from_text(cls, text: str) -> Plan:
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        head = re.fullmatch(
            r"plan (\S+) (\S+) n=(\d+) chunks=(\d+)(?: root=(\d+))?", lines[0] if lines else ""
        )
        if not head:
            raise bad_value(
                "text",
                lines[0] if lines else "",
                "a first line 'plan NAME COLLECTIVE n=N chunks=C'",
            )
        steps = []
        for number, line in enumerate(lines[1:], start=2):
            phase, sep, body = line.partition("|")
            if not sep:
                raise bad_value(f"text line {number}", line, "'PHASE | SRC>DST:cCHUNK+ ...'")
            transfers = []
            for token in body.split():
                m = re.fullmatch(r"(\d+)>(\d+):c(\d+)(?:>c(\d+))?([+=])", token)
                if not m:
                    raise bad_value(
                        f"text line {number} token", token, "'SRC>DST:cCHUNK+' or '...='"
                    )
                dst_chunk = int(m[4]) if m[4] is not None else None
                transfers.append(
                    Transfer(int(m[1]), int(m[2]), int(m[3]), _OP_FROM_SYMBOL[m[5]], dst_chunk)
                )
            steps.append(Step(phase.strip(), tuple(transfers)))
        return cls(
            name=head[1],
            collective=head[2],
            world_size=int(head[3]),
            num_chunks=int(head[4]),
            steps=tuple(steps),
            root=int(head[5] or 0),
        )


ROOTED = ("broadcast", "reduce", "gather", "scatter")
REDUCTIONS = ("all_reduce", "reduce", "reduce_scatter")


class PlanError(ValueError):
    """A plan that does not compute its collective; the message holds the marked grid."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a plan: at ``step`` (None: after the last step) on ``rank``."""

    step: int | None
    rank: int
    message: str
