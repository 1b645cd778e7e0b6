"""PowerSGD: rank-``r`` gradient compression by one step of power iteration, as a comm hook.

Vogels, Karimireddy & Jaggi 2019, "PowerSGD: Practical Low-Rank Gradient Compression for
Distributed Optimization" (NeurIPS, arXiv 1905.13727), Algorithm 1, in the form of torch's
``torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook`` (its defaults: warm start, error
feedback, ``min_compression_rate = 2``, ``orthogonalization_epsilon = 0``, ``random_seed = 0``).
Per bucket, each weight gradient viewed as an ``n x m`` matrix ``M`` (``n`` = rows of the
parameter) is compressed when ``(n + m) r * 2 < n m``; the rest (biases) go uncompressed:

1. ``M += e`` (error feedback), keep a copy;
2. all-reduce the uncompressed tensors (sum, then ``/ N``);
3. ``P = M Q`` (``(n, m) @ (m, r)``), all-reduce ``P`` (sum), orthogonalise ``P``;
4. ``Q = M^T P`` (``(m, n) @ (n, r)``), all-reduce ``Q``, ``Q /= N``;
5. ``M = P Q^T`` (``(n, r) @ (r, m)``): the rank-``r`` approximation of the mean gradient;
6. ``e = copy - M`` (torch's convention: the residual is taken against the *averaged*
   approximation, so it also holds the difference between this rank's gradient and the mean;
   the paper's Algorithm 2 takes it against the rank's own decompressed update).

``Q`` starts from ``N(0, 1)`` drawn by a generator seeded with
``numpy.random.RandomState(0).randint(10^9)`` (the same draw torch makes) and is re-used
between steps (warm start): one power-iteration step per training step. The first
``start_step`` steps run plain mean all-reduce, as torch's ``start_powerSGD_iter`` does.
Orthogonalisation is Gram-Schmidt for ``r <= 2`` and a QR factorisation above, as in torch.
"""

from __future__ import annotations

import numpy as np
import torch

from ..core.schema import COMPRESS_MARK, COMPRESS_PHASE
from ..data_parallel.ddp import GradBucket, allreduce_mean_hook
from ..engine.context import RankContext
from .compressors import allreduce_sum
from .config import MIN_COMPRESSION_RATE, CompressConfig


def orthogonalize(m: torch.Tensor) -> None:
    """Make the columns of ``m`` (1, n, r) orthonormal in place (Gram-Schmidt, or QR if r > 2)."""
    r = m.shape[2]
    if r > 2:
        q, _ = torch.linalg.qr(m)
        m.copy_(q)
        return
    for i in range(r):
        col = m[:, :, i : i + 1]  # (1, n, 1)
        col /= torch.norm(col, dim=1, keepdim=True)
        if i + 1 < r:
            rest = m[:, :, i + 1 :]
            rest -= torch.sum(col * rest, dim=1, keepdim=True) * col


def compressible(shape: tuple[int, ...], rank: int) -> bool:
    """torch's rule: an ``n x m`` view is worth compressing if ``(n + m) r * 2 < n m``."""
    n = shape[0]
    m = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return (n + m) * min(n, m, rank) * MIN_COMPRESSION_RATE < n * m


class PowerSGD:
    """The hook; its state (residuals, ``P`` and ``Q`` per bucket) lives on each rank."""

    def __init__(self, config: CompressConfig):
        self.config = config
        self.rng: np.random.RandomState | None = None
        self.error: dict[int, torch.Tensor] = {}
        self.p_mem: dict[int, torch.Tensor] = {}
        self.q_mem: dict[int, torch.Tensor] = {}

    def __call__(self, ctx: RankContext, flat: torch.Tensor, step: int, bucket: GradBucket) -> None:
        c, b, n = self.config, bucket.index, ctx.world_size
        if step <= c.start_step:  # torch: vanilla all-reduce while iter < start_powerSGD_iter
            allreduce_mean_hook(ctx, flat, step, bucket)
            return
        if self.rng is None:
            self.rng = np.random.RandomState(c.seed)
        ef = c.error_feedback
        with ctx.compute("compress", step=step, phase=COMPRESS_PHASE):
            if ef:
                flat.add_(self.error.setdefault(b, torch.zeros_like(flat)))
            copy = flat.clone()
            grads = bucket.views(flat)
            by_shape: dict[tuple[int, ...], list[torch.Tensor]] = {}  # torch groups by shape
            for g in grads:
                if compressible(tuple(g.shape), c.rank):
                    m = g.view(g.shape[0], -1)
                    by_shape.setdefault(tuple(m.shape), []).append(m)
            big = [m for group in by_shape.values() for m in group]
            small = [g for g in grads if not compressible(tuple(g.shape), c.rank)]
            mats = [m.unsqueeze(0) for m in big]  # (1, n, m) each
            ranks = [min(m.shape[1], m.shape[2], c.rank) for m in mats]
            fresh = b not in self.p_mem
            p_shapes = [(m.shape[1], r) for m, r in zip(mats, ranks, strict=True)]  # (n, r)
            q_shapes = [(m.shape[2], r) for m, r in zip(mats, ranks, strict=True)]  # (m, r)
            if fresh:
                self.p_mem[b] = flat.new_empty(sum(x * r for x, r in p_shapes))
                self.q_mem[b] = flat.new_empty(sum(x * r for x, r in q_shapes))
            ps, qs = _split(self.p_mem[b], p_shapes), _split(self.q_mem[b], q_shapes)
            if fresh:
                g = torch.Generator().manual_seed(int(self.rng.randint(1_000_000_000)))
                for q in qs:
                    q.copy_(torch.randn(*q.shape, generator=g))
            for q in qs:
                orthogonalize(q)
            for m, q, p in zip(mats, qs, ps, strict=True):
                torch.bmm(m, q, out=p)  # (1, n, m) @ (1, m, r) -> (1, n, r)
            flat_small = torch.cat([t.reshape(-1) for t in small]) if small else flat[:0]
        total = allreduce_sum(ctx, flat_small, step).div_(n)
        at = 0
        for t in small:
            t.copy_(total[at : at + t.numel()].view_as(t))
            at += t.numel()
        self.p_mem[b].copy_(allreduce_sum(ctx, self.p_mem[b], step))
        with ctx.compute("compress", step=step, phase=COMPRESS_PHASE):
            for p in ps:
                orthogonalize(p)
            for m, p, q in zip(mats, ps, qs, strict=True):
                torch.bmm(m.transpose(1, 2), p, out=q)  # (1, m, n) @ (1, n, r) -> (1, m, r)
        self.q_mem[b].copy_(allreduce_sum(ctx, self.q_mem[b], step)).div_(n)
        with ctx.compute("decompress", step=step, phase=COMPRESS_PHASE):
            for p, q, m in zip(ps, qs, mats, strict=True):
                torch.bmm(p, q.transpose(1, 2), out=m)  # (1, n, r) @ (1, r, m) -> (1, n, m)
        if ef:
            self.error[b] = copy - flat
        norm = float((copy - flat).norm())
        ctx.mark(COMPRESS_MARK, step=step, bucket=b, residual_norm=norm, fed_back=ef)


def _split(mem: torch.Tensor, shapes: list[tuple[int, int]]) -> list[torch.Tensor]:
    """Views (1, rows, r) of consecutive pieces of ``mem``."""
    out, at = [], 0
    for rows, r in shapes:
        out.append(mem[at : at + rows * r].view(1, rows, r))
        at += rows * r
    return out
