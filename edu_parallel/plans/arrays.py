"""Plans as columns: one numpy row per transfer, for simulating thousands of ranks quickly.

A :class:`~edu_parallel.plans.plan.Plan` of the ring all-reduce on 1024 ranks holds about two
million :class:`~edu_parallel.plans.plan.Transfer` objects; building them alone takes seconds. A
:class:`PlanArrays` holds the same plan as six integer columns (``step``, ``src``, ``dst``,
``chunk``, ``to_chunk``, ``op``), rows in step order, plus the phase name of every step.
:meth:`PlanArrays.from_plan` and :meth:`PlanArrays.to_plan` convert exactly both ways, and
:func:`ring_allreduce_arrays` / :func:`naive_allreduce_arrays` build the big plans straight as
columns, equal to ``PlanArrays.from_plan(ring_allreduce_plan(n))`` (resp. the naive plan).

    >>> pa = ring_allreduce_arrays(1024)          # ~2M rows, milliseconds
    >>> pa.num_rows, pa.num_steps
    (2095104, 2046)

``op`` is :data:`OP_REDUCE` (0) or :data:`OP_COPY` (1). ``to_chunk`` is where the data lands
(``Transfer.to_chunk``); ``dst_chunk_given`` remembers, for an exact round trip, which rows had an
explicit ``dst_chunk`` equal to ``chunk`` (``None``: no such row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import bad_value, check_int
from .plan import MAX_PLAN_RANKS, Plan, Step, Transfer

OP_REDUCE, OP_COPY = 0, 1
OP_NAMES = ("reduce", "copy")
_OP_CODES = {name: code for code, name in enumerate(OP_NAMES)}
INDEX_DTYPE = np.int32  # ranks, chunks and steps fit; halves the memory of 2M-row plans
COLUMNS = ("step", "src", "dst", "chunk", "to_chunk", "op")


@dataclass(frozen=True, eq=False)
class PlanArrays:
    """A :class:`Plan` as columns: row ``i`` is a transfer of step ``step[i]`` (rows sorted by
    step).

    ``phases[s]`` names step ``s``'s phase (steps without transfers keep their entry, so the round
    trip is exact). Arrays are made read-only. Use :meth:`equals` to compare two of them.
    """

    name: str
    collective: str
    world_size: int
    num_chunks: int
    phases: tuple[str, ...]
    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    chunk: np.ndarray
    to_chunk: np.ndarray
    op: np.ndarray
    root: int = 0
    dst_chunk_given: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "phases", tuple(self.phases))
        rows = None
        for name in COLUMNS:
            dtype = np.int8 if name == "op" else INDEX_DTYPE
            col = np.ascontiguousarray(getattr(self, name), dtype=dtype).view()  # caller's stays
            if col.ndim != 1 or (rows is not None and len(col) != rows):
                raise bad_value(name, f"array of shape {col.shape}", f"a 1-D array of {rows} rows")
            rows = len(col)
            col.flags.writeable = False
            object.__setattr__(self, name, col)
        if self.dst_chunk_given is not None:
            given = np.ascontiguousarray(self.dst_chunk_given, dtype=bool).view()
            if given.shape != (rows,):
                raise bad_value("dst_chunk_given", f"array of shape {given.shape}", f"{rows} bools")
            given.flags.writeable = False
            object.__setattr__(self, "dst_chunk_given", given)
        if rows:
            n, c = self.world_size, self.num_chunks
            checks = [
                ("step", self.step, len(self.phases)),
                ("src", self.src, n),
                ("dst", self.dst, n),
                ("chunk", self.chunk, c),
                ("to_chunk", self.to_chunk, c),
                ("op", self.op, 2),
            ]
            for name, col, high in checks:
                if col.min() < 0 or col.max() >= high:
                    raise bad_value(
                        name, f"values in [{col.min()}, {col.max()}]", f"values in [0, {high})"
                    )
            if (self.step[1:] < self.step[:-1]).any():
                raise bad_value("step", "an unsorted column", "rows sorted by step")

    # ------------------------------------------------------------------ derived facts
    @property
    def num_rows(self) -> int:
        """Number of transfers."""
        return len(self.step)

    @property
    def num_steps(self) -> int:
        """Number of steps, empty ones included (as ``len(plan.steps)``)."""
        return len(self.phases)

    def step_offsets(self) -> np.ndarray:
        """``offsets[s]:offsets[s + 1]`` are the rows of step ``s`` (length ``num_steps + 1``)."""
        return np.searchsorted(self.step, np.arange(self.num_steps + 1), side="left")

    def equals(self, other: PlanArrays) -> bool:
        """True when both describe the same plan (same header, phases and rows)."""
        head = ("name", "collective", "world_size", "num_chunks", "phases", "root")
        if any(getattr(self, k) != getattr(other, k) for k in head):
            return False
        if not all(np.array_equal(getattr(self, k), getattr(other, k)) for k in COLUMNS):
            return False
        return np.array_equal(self._given(), other._given())

    def _given(self) -> np.ndarray:
        """Per row: was ``dst_chunk`` given explicitly (not None) in the Transfer?"""
        moved = self.to_chunk != self.chunk
        return moved if self.dst_chunk_given is None else moved | self.dst_chunk_given

    # ------------------------------------------------------------------ conversions
    @classmethod
    def from_plan(cls, plan: Plan) -> PlanArrays:
        """The columns of ``plan`` (loops over its Transfer objects once)."""
        transfers = [t for s in plan.steps for t in s.transfers]
        bad = {t.op for t in transfers} - set(_OP_CODES)
        if bad:
            raise bad_value("op", sorted(bad)[0], "'reduce' or 'copy'")
        step = np.repeat(np.arange(len(plan.steps)), [len(s.transfers) for s in plan.steps])
        chunk = np.fromiter((t.chunk for t in transfers), INDEX_DTYPE, len(transfers))
        to_chunk = np.fromiter((t.to_chunk for t in transfers), INDEX_DTYPE, len(transfers))
        same = np.fromiter(
            (t.dst_chunk is not None and t.dst_chunk == t.chunk for t in transfers),
            bool,
            len(transfers),
        )
        return cls(
            plan.name,
            plan.collective,
            plan.world_size,
            plan.num_chunks,
            tuple(s.phase for s in plan.steps),
            step,
            np.fromiter((t.src for t in transfers), INDEX_DTYPE, len(transfers)),
            np.fromiter((t.dst for t in transfers), INDEX_DTYPE, len(transfers)),
            chunk,
            to_chunk,
            np.fromiter((_OP_CODES[t.op] for t in transfers), np.int8, len(transfers)),
            plan.root,
            same if same.any() else None,
        )

    def to_plan(self) -> Plan:
        """The :class:`Plan` these columns describe (builds one Transfer per row)."""
        given = self._given().tolist()
        ops = [OP_NAMES[o] for o in self.op.tolist()]
        rows = zip(
            self.src.tolist(),
            self.dst.tolist(),
            self.chunk.tolist(),
            self.to_chunk.tolist(),
            ops,
            given,
            strict=True,
        )
        transfers = [Transfer(s, d, c, o, t if g else None) for s, d, c, t, o, g in rows]
        offsets = self.step_offsets().tolist()
        steps = tuple(
            Step(phase, tuple(transfers[offsets[i] : offsets[i + 1]]))
            for i, phase in enumerate(self.phases)
        )
        return Plan(self.name, self.collective, self.world_size, self.num_chunks, steps, self.root)


# ---------------------------------------------------------------------- big plans as columns
def ring_allreduce_arrays(world_size: int) -> PlanArrays:
    """``PlanArrays.from_plan(ring_allreduce_plan(n))`` without building Transfer objects.

    Reduce-scatter step ``s``: rank ``r`` sends chunk ``(r - s) mod N`` to ``r + 1`` (reduce);
    all-gather step ``s``: chunk ``(r + 1 - s) mod N`` (copy).
    """
    n = check_int("world_size", world_size, 1, MAX_PLAN_RANKS)
    half = n - 1
    steps = np.arange(2 * half, dtype=INDEX_DTYPE)
    gather = steps >= half
    offset = np.where(gather, 1 - (steps - half), -steps) + n  # in [2, n]: no negative modulo
    ranks = np.arange(n, dtype=INDEX_DTYPE)
    chunk = np.add.outer(offset, ranks).ravel()
    np.remainder(chunk, n, out=chunk)
    return PlanArrays(
        "ring_allreduce",
        "all_reduce",
        n,
        n,
        ("reduce-scatter",) * half + ("all-gather",) * half,
        np.repeat(steps, n),
        np.tile(ranks, 2 * half),
        np.tile((ranks + 1) % n, 2 * half),
        chunk,
        chunk,
        np.repeat(gather.astype(np.int8), n),
    )


def naive_allreduce_arrays(world_size: int, root: int = 0) -> PlanArrays:
    """``PlanArrays.from_plan(naive_allreduce_plan(n, root))`` without Transfer objects."""
    n = check_int("world_size", world_size, 1, MAX_PLAN_RANKS)
    root = check_int("root", root, 0, n - 1)
    others = np.array([r for r in range(n) if r != root], dtype=np.int64)
    k = len(others)
    fixed = np.full(k, root)
    zeros = np.zeros(2 * k, dtype=np.int64)
    return PlanArrays(
        "naive_allreduce",
        "all_reduce",
        n,
        1,
        ("reduce", "broadcast") if k else (),
        np.repeat([0, 1], k),
        np.concatenate([others, fixed]),
        np.concatenate([fixed, others]),
        zeros,
        zeros,
        np.repeat([OP_REDUCE, OP_COPY], k),
        root,
    )
