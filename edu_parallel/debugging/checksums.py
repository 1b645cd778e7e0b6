"""A rank that diverges, caught by comparing parameter checksums across ranks.

Data parallelism keeps one model per rank and trusts that they stay equal: the same initial
parameters (every rank seeds alike) and the same averaged gradient each step. A rank whose job
seeds otherwise (``torch.manual_seed(seed + rank)`` where ``torch.manual_seed(seed)`` was meant)
starts from other parameters; the all-reduce still averages the gradients, so nothing fails, and
its model stays apart from the others' for ever. No error names it: the ranks' checksums do.

* :func:`param_checksum`: the sum, in float64, of every parameter element, what practitioners
  print per rank to compare (equal parameters give equal sums, bit for bit);
* :func:`divergence_step` (a rank job): a seeded ``nn.Linear``, one SGD step of data parallelism
  with all-reduced gradients, the checksum before and after;
* :func:`compare_checksums`: the ranks whose checksum differs from the majority's;
* :func:`run_divergence`: all three on a cluster, with a chosen ``diverging_rank``.

References: PyTorch's DDP broadcasts rank 0's model state from its constructor for this reason
(the docs' "Distributed Data Parallel" note, "Internal Design"); Li et al., "PyTorch
Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..core.diagnosis_text import ranks_label
from ..core.errors import bad_value, check_int, check_non_negative, check_seed
from ..core.i18n import _
from ..engine.context import RankContext

IN_FEATURES, OUT_FEATURES, BATCH = 4, 2, 8  # the tiny model and each rank's batch
LR = 0.1


def param_checksum(
    model_or_tensors: torch.nn.Module | torch.Tensor | Iterable[torch.Tensor],
) -> float:
    """The sum of every element of a model's parameters (or of the tensors given), in float64.

    A sum, not a hash: ranks with equal parameters get equal sums bit for bit (the same elements
    added in the same order), and parameters that differ anywhere almost surely get different
    sums. Two different sets of parameters can share a sum (a permutation does); as a check that
    ranks agree, that is enough, and it is one number a rank can print or all-gather."""
    if isinstance(model_or_tensors, torch.nn.Module):
        tensors: Iterable[Any] = model_or_tensors.parameters()
    elif isinstance(model_or_tensors, torch.Tensor):
        tensors = [model_or_tensors]
    else:
        tensors = model_or_tensors
    total = 0.0
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise bad_value(
                "model_or_tensors", t, _("a torch.nn.Module, a tensor or an iterable of tensors")
            )
        total += float(t.detach().to(torch.float64).sum())
    return total


def divergence_step(ctx: RankContext, diverging_rank: int | None, seed: int) -> tuple[float, float]:
    """A rank job: build ``nn.Linear(4, 2)`` seeded with ``seed`` (``seed + 1 + rank`` on
    ``diverging_rank``: the +1 makes rank 0 diverge too), take one SGD step on this rank's batch
    with the gradients averaged by all-reduce; return the checksums before and after."""
    mine = seed + 1 + ctx.rank if ctx.rank == diverging_rank else seed
    torch.manual_seed(mine)
    model = torch.nn.Linear(IN_FEATURES, OUT_FEATURES)
    before = param_checksum(model)
    data = torch.Generator().manual_seed(seed * 1000 + ctx.rank)  # each rank its own batch
    x = torch.randn(BATCH, IN_FEATURES, generator=data)
    y = torch.randn(BATCH, OUT_FEATURES, generator=data)
    with ctx.step(0, "step"):
        with ctx.compute("forward+backward"):
            torch.nn.functional.mse_loss(model(x), y).backward()
        for p in model.parameters():
            ctx.collective("all_reduce", p.grad)
            with torch.no_grad():
                p -= LR * p.grad / ctx.world_size
    return before, param_checksum(model)


def compare_checksums(checksums: Sequence[float], rtol: float = 0.0) -> tuple[int, ...]:
    """The ranks whose checksum differs from the majority's (by more than ``rtol`` relative).

    The reference is the value most ranks agree with; on a tie, the side that holds the lowest
    rank (so with two ranks that differ, rank 1 is named: two ranks cannot say which is wrong).
    ``rtol=0`` asks for equality, right for ranks that did the same float operations."""
    values = [float(c) for c in checksums]
    if not values or not all(math.isfinite(v) for v in values):
        raise bad_value("checksums", list(checksums), _("a non-empty list of finite numbers"))
    tol = check_non_negative("rtol", rtol)

    def same(a: float, b: float) -> bool:
        return abs(a - b) <= tol * max(abs(a), abs(b))

    support = [sum(same(v, w) for w in values) for v in values]
    ref = values[support.index(max(support))]  # index(): the lowest rank on a tie
    return tuple(r for r, v in enumerate(values) if not same(v, ref))


@dataclass(frozen=True)
class DivergenceReport:
    """What :func:`run_divergence` found: each rank's checksum ``before`` and ``after`` the
    step, the ``differing`` ranks (after the step) and a ``message``."""

    diverging_rank: int | None
    before: tuple[float, ...]
    after: tuple[float, ...]
    differing: tuple[int, ...]
    message: str


def run_divergence(cluster: Any, diverging_rank: int | None, seed: int = 0) -> DivergenceReport:
    """One data-parallel step on every rank of ``cluster``, ``diverging_rank`` seeded otherwise
    (None: every rank seeded alike), and the ranks its checksums tell apart (on two ranks, a
    tie: rank 1 is named whichever diverged, see :func:`compare_checksums`)."""
    if diverging_rank is not None:
        check_int("diverging_rank", diverging_rank, 0, cluster.world_size - 1)
    check_seed("seed", seed)
    run = cluster.run(divergence_step, diverging_rank, seed)
    before = tuple(b for b, _a in run.results)
    after = tuple(a for _b, a in run.results)
    differing = compare_checksums(after)
    if differing:
        said = (
            _(
                "{ranks} holds other parameters than the others after one step (checksum "
                "{theirs} against {ours}): seeded otherwise, its model never comes back, since "
                "every rank adds the same averaged gradient"
            )
            if len(differing) == 1
            else _(
                "{ranks} hold other parameters than the others after one step (checksum "
                "{theirs} against {ours}): seeded otherwise, their models never come back, since "
                "every rank adds the same averaged gradient"
            )
        ).format(
            ranks=ranks_label(differing),
            theirs=f"{after[differing[0]]:.6f}",
            ours=f"{after[next(r for r in range(len(after)) if r not in differing)]:.6f}",
        )
    else:
        said = _("every rank holds the same parameters after one step: checksum {value}").format(
            value=f"{after[0]:.6f}"
        )
    return DivergenceReport(diverging_rank, before, after, differing, said)
