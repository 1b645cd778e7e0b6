"""The input every collective exercise starts from, on each rank, and torch's builtin on it.

Rank r's buffer is ``core.inputs.make_input``: 2^r in every element by default (so a chunk's value
names the ranks summed into it and the step grid can draw contributors), or the case's
``pattern`` ("random": integers or normal floats, seeded per rank).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ..core.inputs import make_input
from ..core.units import torch_dtype
from ..engine.context import RankContext
from .spec import Case


def case_input(rank: int, case: Case) -> torch.Tensor:
    """Rank ``rank``'s buffer for ``case``: ``numel`` elements of ``dtype``."""
    values = make_input(rank, case.numel, case.dtype, case.option("pattern", "powers_of_two"))
    return torch.from_numpy(values).to(torch_dtype(case.dtype))


def watched_input(ctx: RankContext, case: Case) -> tuple[tuple[torch.Tensor], torch.Tensor]:
    """``prepare`` for a function of one buffer: the buffer, which the step grid also watches."""
    x = case_input(ctx.rank, case)
    return (x,), x


def builtin_on_input(ctx: RankContext, case: Case, collective: str, **kwargs: Any) -> torch.Tensor:
    """``torch.distributed.<collective>`` run on a fresh copy of this rank's input: what the
    learner's function should leave (an untraced ``finish``)."""
    expected = case_input(ctx.rank, case)
    getattr(dist, collective)(expected, **kwargs)
    return expected
