"""The MoE layer's weights and data, seeded so that every rank builds the same bits.

:class:`ExpertBank`: E small MLPs ``h -> f -> h`` with GeLU; rank r of N owns experts
``[r E/N, (r+1) E/N)`` (:meth:`ExpertBank.shard`). :func:`init_moe` builds the router and the
experts from a seed, :func:`make_tokens` the global batch and its output gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


class ExpertBank(nn.Module):
    """``num`` experts ``y = GeLU(x W1 + b1) W2 + b2``, global indices ``first .. first+num-1``.

    Shapes: w1 (e, h, f), b1 (e, f), w2 (e, f, h), b2 (e, h).
    """

    def __init__(
        self, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor, first: int = 0
    ):
        super().__init__()
        self.w1, self.b1 = nn.Parameter(w1), nn.Parameter(b1)
        self.w2, self.b2 = nn.Parameter(w2), nn.Parameter(b2)
        self.first = first

    @property
    def num(self) -> int:
        return self.w1.shape[0]

    def expert(self, j: int, x: torch.Tensor) -> torch.Tensor:
        """Local expert ``j`` on rows ``x``: (m, h) -> (m, h)."""
        return F.gelu(x @ self.w1[j] + self.b1[j]) @ self.w2[j] + self.b2[j]

    def shard(self, rank: int, world_size: int) -> ExpertBank:
        """A copy of the E/N experts rank ``rank`` owns (E divisible by N)."""
        per = self.num // world_size
        s = slice(rank * per, (rank + 1) * per)
        return ExpertBank(
            *(p.detach()[s].clone() for p in (self.w1, self.b1, self.w2, self.b2)),
            first=self.first + rank * per,
        )


@dataclass
class MoEParams:
    """A whole MoE layer: the router (``nn.Linear(h, E)``) and all E experts."""

    router: nn.Linear
    experts: ExpertBank


def init_moe(
    experts: int,
    hidden: int,
    ffn: int | None = None,
    *,
    seed: int = 0,
    skew: float = 0.0,
    dtype: torch.dtype = torch.float32,
) -> MoEParams:
    """Seeded weights, identical on every rank. ``ffn`` defaults to ``2 * hidden``.

    ``skew`` is added to the router bias of expert 0: its logit grows by ``skew`` for every token,
    so it becomes the hot expert.
    """
    f = 2 * hidden if ffn is None else ffn
    g = torch.Generator().manual_seed(seed)
    router = nn.Linear(hidden, experts, dtype=dtype)
    with torch.no_grad():
        router.weight.copy_(torch.randn(experts, hidden, generator=g) / math.sqrt(hidden))
        router.bias.zero_()
        router.bias[0] = skew
    w1 = torch.randn(experts, hidden, f, generator=g, dtype=dtype) / math.sqrt(hidden)
    b1 = 0.1 * torch.randn(experts, f, generator=g, dtype=dtype)
    w2 = torch.randn(experts, f, hidden, generator=g, dtype=dtype) / math.sqrt(f)
    b2 = 0.1 * torch.randn(experts, hidden, generator=g, dtype=dtype)
    return MoEParams(router, ExpertBank(w1, b1, w2, b2))


def make_tokens(
    world_size: int, tokens: int, hidden: int, seed: int = 0, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch ``x`` (N T, h) (rank r holds rows [r T, (r+1) T)) and a seeded output
    gradient ``dy`` of the same shape for the backward check."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(world_size * tokens, hidden, generator=g, dtype=dtype)
    return x, torch.randn(world_size * tokens, hidden, generator=g, dtype=dtype)
