"""Gradient compressors as communication hooks, with error feedback.

Each compressor is a hook ``hook(ctx, flat, step, bucket)`` of lesson 06's trainer
(:func:`~edu_parallel.data_parallel.ddp.train_ddp`): it replaces the bucket ``flat`` in place by
the average over the ranks of what they sent, and moves every byte through the engine's plans
(ring all-reduce or ring all-gather), so the trace counts the wire bytes. ``C`` is the
compressor, ``p`` what it compresses, ``e`` the residual:

* error feedback (Seide et al. 2014; Stich et al. 2018, "Sparsified SGD with Memory";
  Karimireddy et al. 2019, "Error Feedback Fixes SignSGD"): ``p = g + e``, send ``C(p)``, keep
  ``e = p - C(p)``. Without it, what ``C`` drops is lost for good;
* :class:`Cast` (``fp16``, ``bf16``): ``C(p) = cast(p) / N``, all-reduced in 16 bits; torch's
  ``fp16_compress_hook`` does the same operations in the same order;
* :class:`TopK`: ``C(p)`` keeps the ``k`` largest ``|p_i|``. Every rank picks other indices, so
  the sparse vectors cannot be added on the way (an all-reduce adds equal positions): indices and
  values travel by all-gather, ``(N-1) * 8k`` bytes per rank, growing with ``N``;
* :class:`RandK`: ``k`` indices drawn from a generator every rank seeds alike (step, bucket), so
  the ``k`` values line up and an all-reduce sums them: ``2(N-1)/N * 4k`` bytes;
* :class:`Sign`: ``C(p) = (||p||_1 / d) sign(p)``: ``d / 8`` bytes of bits and a 4-byte scale per
  rank, by all-gather; each rank averages the ``N`` scaled signs (sign 0 is sent as +).

Every exchange records ``compress`` and ``decompress`` compute events (phase ``compress``) and a
``compress`` mark with the residual's norm, so the extra compute and the residual are read off
the trace. PowerSGD lives in :mod:`edu_parallel.compression.powersgd`.
"""

from __future__ import annotations

import functools

import torch

from ..core.schema import COMPRESS_MARK, COMPRESS_PHASE, GRAD_SYNC
from ..data_parallel.ddp import GradBucket
from ..engine.context import RankContext
from ..engine.execute import run_plan
from ..plans.collectives import ring_all_gather_plan
from ..plans.plan import Plan
from ..plans.ring import ring_allreduce_plan
from .config import CASTS, CompressConfig, kept

_BITS = 1 << torch.arange(8, dtype=torch.uint8)  # bit j of a byte has weight 2^j


@functools.cache
def _plan(kind: str, world_size: int) -> Plan:
    return (ring_allreduce_plan if kind == "all_reduce" else ring_all_gather_plan)(world_size)


def allreduce_sum(ctx: RankContext, buf: torch.Tensor, step: int) -> torch.Tensor:
    """Ring all-reduce (sum) of a 1-D buffer on the engine; fewer than ``N`` elements are padded
    to ``N``, so that no ring chunk is empty."""
    n = ctx.world_size
    pad = max(0, n - buf.numel())
    work = torch.cat([buf, buf.new_zeros(pad)]) if pad else buf
    run_plan(ctx, _plan("all_reduce", n), work, step=step, phase=GRAD_SYNC, snapshots=False)
    return work[: buf.numel()]


def allgather(ctx: RankContext, mine: torch.Tensor, step: int) -> torch.Tensor:
    """Ring all-gather of equal-length 1-D pieces: row ``r`` of the result is rank ``r``'s."""
    n, r, size = ctx.world_size, ctx.rank, mine.numel()
    buf = mine.new_zeros(n * size)
    buf[r * size : (r + 1) * size] = mine
    run_plan(ctx, _plan("all_gather", n), buf, step=step, phase=GRAD_SYNC, snapshots=False)
    return buf.view(n, size)


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """(d,) bool -> (ceil(d/8),) uint8, bit ``j`` of byte ``i`` is ``bits[8i + j]``."""
    pad = -bits.numel() % 8
    b = torch.cat([bits, bits.new_zeros(pad)]).view(-1, 8).to(torch.uint8)
    return (b * _BITS).sum(1, dtype=torch.uint8)


def unpack_bits(packed: torch.Tensor, d: int) -> torch.Tensor:
    """The inverse of :func:`pack_bits`: (ceil(d/8),) uint8 -> (d,) bool."""
    return ((packed.unsqueeze(1) & _BITS) != 0).reshape(-1)[:d]


class Compressor:
    """Error feedback around :meth:`exchange`; subclasses say what goes on the wire."""

    def __init__(self, config: CompressConfig):
        self.config = config
        self.residual: dict[int, torch.Tensor] = {}  # per bucket, kept between steps

    def __call__(self, ctx: RankContext, flat: torch.Tensor, step: int, bucket: GradBucket) -> None:
        ef = self.config.error_feedback
        if ef:
            flat.add_(self.residual.setdefault(bucket.index, torch.zeros_like(flat)))  # p = g + e
        p = flat.clone()
        local = self.exchange(ctx, flat, step, bucket)  # flat <- mean of C(p_r); local = C(p)
        if ef:
            self.residual[bucket.index] = p - local  # e = p - C(p)
        norm = float(self.residual[bucket.index].norm()) if ef else float((p - local).norm())
        ctx.mark(COMPRESS_MARK, step=step, bucket=bucket.index, residual_norm=norm, fed_back=ef)

    def exchange(
        self, ctx: RankContext, p: torch.Tensor, step: int, bucket: GradBucket
    ) -> torch.Tensor:
        raise NotImplementedError


class Cast(Compressor):
    """``fp16`` / ``bf16``: ``cast(p) / N``, all-reduced in 16 bits, cast back."""

    def exchange(
        self, ctx: RankContext, p: torch.Tensor, step: int, bucket: GradBucket
    ) -> torch.Tensor:
        dtype = getattr(torch, CASTS[self.config.method])
        with ctx.compute("compress", step=step, phase=COMPRESS_PHASE):
            c = p.to(dtype).div_(ctx.world_size)  # torch: buffer.to(dtype).div_(world_size)
            local = c.float() * ctx.world_size
        total = allreduce_sum(ctx, c, step)
        with ctx.compute("decompress", step=step, phase=COMPRESS_PHASE):
            p.copy_(total)
        return local


class TopK(Compressor):
    """The ``k`` largest-magnitude entries; indices and values by all-gather (int32 words)."""

    def exchange(
        self, ctx: RankContext, p: torch.Tensor, step: int, bucket: GradBucket
    ) -> torch.Tensor:
        d = p.numel()
        k = kept(d, self.config.ratio)
        with ctx.compute("compress", step=step, phase=COMPRESS_PHASE):
            idx = p.abs().topk(k, sorted=False).indices
            vals = p[idx]
            local = torch.zeros_like(p).index_put_((idx,), vals)
            word = torch.cat([idx.to(torch.int32), vals.view(torch.int32)])  # (2k,) int32
        rows = allgather(ctx, word, step)  # (N, 2k)
        with ctx.compute("decompress", step=step, phase=COMPRESS_PHASE):
            p.zero_()
            for row in rows:  # rank order: every rank adds in the same order
                p.index_add_(0, row[:k].long(), row[k:].view(torch.float32))
            p.div_(ctx.world_size)
        return local


class RandK(Compressor):
    """``k`` entries at indices drawn alike on every rank; their values by all-reduce."""

    def exchange(
        self, ctx: RankContext, p: torch.Tensor, step: int, bucket: GradBucket
    ) -> torch.Tensor:
        d = p.numel()
        k = kept(d, self.config.ratio)
        with ctx.compute("compress", step=step, phase=COMPRESS_PHASE):
            seed = (self.config.seed * 1_000_003 + step) * 1009 + bucket.index
            g = torch.Generator().manual_seed(seed)
            idx = torch.randperm(d, generator=g)[:k].sort().values  # the same on every rank
            vals = p[idx].div_(ctx.world_size)
            local = torch.zeros_like(p).index_put_((idx,), p[idx])
        total = allreduce_sum(ctx, vals, step)
        with ctx.compute("decompress", step=step, phase=COMPRESS_PHASE):
            p.zero_().index_put_((idx,), total)
        return local


class Sign(Compressor):
    """One bit per entry and a scale ``||p||_1 / d`` per rank, by all-gather (bytes)."""

    def exchange(
        self, ctx: RankContext, p: torch.Tensor, step: int, bucket: GradBucket
    ) -> torch.Tensor:
        d = p.numel()
        with ctx.compute("compress", step=step, phase=COMPRESS_PHASE):
            scale = p.abs().mean().reshape(1)  # ||p||_1 / d
            bits = p >= 0
            local = torch.where(bits, scale, -scale)
            word = torch.cat([pack_bits(bits), scale.view(torch.uint8)])  # (ceil(d/8) + 4,)
        rows = allgather(ctx, word, step)  # (N, ceil(d/8) + 4) uint8
        with ctx.compute("decompress", step=step, phase=COMPRESS_PHASE):
            p.zero_()
            for row in rows:
                s = row[-4:].clone().view(torch.float32)
                p.add_(torch.where(unpack_bits(row[:-4], d), s, -s))
            p.div_(ctx.world_size)
        return local


COMPRESSORS = {"fp16": Cast, "bf16": Cast, "topk": TopK, "randk": RandK, "sign": Sign}
