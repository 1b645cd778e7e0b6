"""What the banks share: a drawn parameter, the right option's drawn place, a run as the lesson
writes it.

A bank draws every parameter in its ``draw(rng)``; with ``rng`` None (no seed) each takes the
lesson's teaching default. The helpers here keep that one rule in one place.
"""

from __future__ import annotations

import random
from typing import Any

from ...core.units import DTYPES

WRONG_OPTIONS = 3  # a drawn-place question has the right option and three wrong ones


def pick(rng: random.Random | None, default: Any, *options: Any) -> Any:
    """``default`` without a seed, else one of ``options`` drawn from ``rng``."""
    return default if rng is None else rng.choice(options)


def place(rng: random.Random | None, default: int, wrong: int = WRONG_OPTIONS) -> int:
    """Where the right option goes among ``wrong`` others: ``default``, or a drawn place."""
    return default if rng is None else rng.randrange(wrong + 1)


def with_right(right: str, wrong: list[str], at: int) -> list[str]:
    """The options of a question: ``wrong`` with ``right`` inserted at ``at``."""
    return [*wrong[:at], right, *wrong[at:]]


def ranks(n: int, lesson_n: int = 4) -> str:
    """The ranks of a run as the lesson writes them: its ``cluster`` of ``lesson_n``, or a new
    ``Cluster(n)``."""
    return "cluster" if n == lesson_n else f"Cluster({n})"


def run_size(rng: random.Random | None, n: int) -> int:
    """A ring run's size that splits into ``n`` equal float32 chunks (16 KiB per rank by
    default)."""
    return n * DTYPES["float32"] * pick(rng, 4096, 256, 1024, 4096)


def allreduce_call(n: int, nbytes: int) -> str:
    """A ring run as the lesson would write it: ``run_allreduce(cluster, nbytes, "float32")``."""
    return f'run_allreduce({ranks(n)}, {nbytes}, "float32")'
