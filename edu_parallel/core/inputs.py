"""Deterministic per-rank inputs, shared by the real engine and the in-process simulation.

``"powers_of_two"`` gives rank ``r`` a buffer of ``2**r`` everywhere, so any partial sum reads as
the set of ranks it contains (binary digits): the animation colours cells by that set, straight from
the data. ``"random"`` is seeded by ``(seed, rank)``; ``"rank"`` is ``r`` everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import bad_value, check_choice, check_seed, spelling
from .i18n import _
from .units import DTYPES, INTEGER_DTYPES, check_dtype, parse_size

PATTERNS = ("powers_of_two", "random", "rank")
MAX_POWERS_RANKS = 24  # 2**23 is still exact in float32
# the largest finite value of each dtype (numpy's finfo/iinfo; numpy has no bfloat16: its 8-bit
# exponent is float32's, with 7 fraction bits, so (2 - 2^-7) * 2^127)
LARGEST = {
    "float16": float(np.finfo(np.float16).max),
    "bfloat16": (2 - 2**-7) * 2.0**127,
    "float32": float(np.finfo(np.float32).max),
    "float64": float(np.finfo(np.float64).max),
    "int32": int(np.iinfo(np.int32).max),
    "int64": int(np.iinfo(np.int64).max),
}


@dataclass(frozen=True)
class Buffer:
    """Every rank's input buffer of one run, checked once: ``nbytes`` (``4096``, ``"1MiB"``; parsed
    to an int), ``dtype``, ``pattern`` and ``seed``. Runners take one and pass it down."""

    nbytes: int
    dtype: str = "float32"
    pattern: str = "random"
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "nbytes", parse_size(self.nbytes))
        check_dtype(self.dtype)
        item = DTYPES[self.dtype]
        if self.nbytes % item:  # rounding it silently would run another size than asked
            lower = self.nbytes // item * item
            such = f"{lower} or {lower + item}" if lower else f"{item} or {2 * item}"
            raise bad_value(
                "size",
                self.nbytes,
                f"a whole number of {self.dtype} elements ({item} bytes each), such as {such}",
            )
        check_choice("pattern", self.pattern, PATTERNS)
        object.__setattr__(self, "seed", check_seed("seed", self.seed))

    def total(self, world_size: int) -> int | None:
        """The exact all-reduced sum of every element on ``world_size`` ranks, for the patterns
        that fix it (``2^N - 1`` for powers of two, ``N(N-1)/2`` for rank); None for random."""
        n = world_size
        return {"powers_of_two": 2**n - 1, "rank": n * (n - 1) // 2}.get(self.pattern)

    def check_sum(self, world_size: int) -> None:
        """Refuse a pattern whose sum on ``world_size`` ranks passes the dtype's largest value: the
        all-reduce would give inf (or wrap around), and no algorithm could match another."""
        total = self.total(world_size)
        if total is None or total <= LARGEST[self.dtype]:
            return
        fits = max(n for n in range(1, world_size) if (self.total(n) or 0) <= LARGEST[self.dtype])
        valid = _(
            "a dtype that holds the sum {total} of pattern {pattern!r} on {n} ranks ({dtype}'s "
            "largest value is {largest:g}): a wider dtype, {world_size} <= {fits}, or "
            "{pattern_option} 'random'"
        )
        raise bad_value(
            "dtype",
            self.dtype,
            valid.format(
                total=total,
                pattern=self.pattern,
                n=world_size,
                dtype=self.dtype,
                largest=LARGEST[self.dtype],
                fits=fits,
                world_size=spelling("world_size"),
                pattern_option=spelling("pattern"),
            ),
        )

    @property
    def numel(self) -> int:
        """Elements per rank: ``nbytes`` rounded down to whole elements (at least one)."""
        return numel_for(self.nbytes, self.dtype)

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtype]

    @property
    def real_bytes(self) -> int:
        """Bytes of the buffer actually run: ``numel * itemsize``."""
        return self.numel * self.itemsize

    def values(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s input (:func:`make_input`)."""
        return make_input(rank, self.numel, self.dtype, self.pattern, self.seed)


def numel_for(nbytes: int, dtype: str) -> int:
    """Elements in a buffer of ``nbytes`` (rounded down, at least one)."""
    return max(1, nbytes // DTYPES[check_dtype(dtype)])


def make_input(
    rank: int, numel: int, dtype: str = "float32", pattern: str = "random", seed: int = 0
) -> np.ndarray:
    """Rank ``rank``'s input buffer as a numpy array of ``numel`` elements."""
    check_choice("pattern", pattern, PATTERNS)
    np_dtype = {"bfloat16": "float32"}.get(dtype, dtype)  # numpy has no bfloat16; torch converts
    if pattern == "powers_of_two":
        if rank >= MAX_POWERS_RANKS:
            raise ValueError(
                f"pattern='powers_of_two' supports world sizes up to {MAX_POWERS_RANKS}, "
                f"got rank {rank}: use pattern='random'"
            )
        return np.full(numel, 2**rank, dtype=np_dtype)
    if pattern == "rank":
        return np.full(numel, rank, dtype=np_dtype)
    rng = np.random.default_rng([seed, rank])
    if dtype in INTEGER_DTYPES:
        return rng.integers(-1000, 1000, size=numel, dtype=np_dtype)
    return rng.standard_normal(numel, dtype=np.float32).astype(np_dtype, copy=False)


def chunk_bounds(numel: int, num_chunks: int) -> list[int]:
    """Element offsets of ``num_chunks`` near-equal chunks, like ``torch.tensor_split``:
    the first ``numel % num_chunks`` chunks hold one element more."""
    base, extra = divmod(numel, num_chunks)
    bounds = [0]
    for k in range(num_chunks):
        bounds.append(bounds[-1] + base + (1 if k < extra else 0))
    return bounds


def contributors(value: float) -> list[int]:
    """Ranks whose ``powers_of_two`` inputs sum to ``value`` (its set binary digits)."""
    v = int(round(value))
    return [i for i in range(v.bit_length()) if v >> i & 1] if v > 0 else []
