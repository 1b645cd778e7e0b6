"""The model, data and measuring tools behind :mod:`edu_parallel.strategy_map.strategies`.

* :func:`dense_weights` / :func:`moe_weights` / :func:`make_data`: seeded, the same bits on every
  process; :func:`dense_block` is ``x + W2 GeLU(W1 x + b1) + b2`` (``nn.Linear`` layout).
* :class:`SavedBytes`: activation bytes = what autograd saves for backward
  (``torch.autograd.graph.saved_tensors_hooks``, as :mod:`edu_parallel.pipeline_parallel.execute`
  measures), parameters excluded, each tensor counted once.
* :class:`Holdings`: the parameter tensors (or slices) a rank holds, written into the trace as
  "params" memory events and "holds" marks.
* :func:`reference_step`: the same step on one process (dense model or its MoE variant), with
  one intra-op thread (:func:`one_thread`, as every rank has).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..core.schema import HOLDS_MARK, PARAMS
from ..engine.context import RankContext
from ..expert_parallel.experts import init_moe
from ..expert_parallel.layer import moe_reference
from ..task.threads import one_thread
from .formulas import DTYPE, STEP, MapConfig, slice_index


# ---------------------------------------------------------------- model, data, loss
def dense_weights(cfg: MapConfig) -> list[dict[str, torch.Tensor]]:
    """Seeded block weights, ``nn.Linear`` layout and init U(-1/sqrt(fan_in), +): w1 (4h, h),
    b1 (4h,), w2 (h, 4h), b2 (h,). The same bits on every process."""

    g = torch.Generator().manual_seed(cfg.seed)
    h, f = cfg.hidden, cfg.ffn

    def u(*shape: int, fan_in: int) -> torch.Tensor:
        return ((torch.rand(*shape, generator=g) * 2 - 1) / fan_in**0.5).to(getattr(torch, DTYPE))

    return [
        {
            "w1": u(f, h, fan_in=h),
            "b1": u(f, fan_in=h),
            "w2": u(h, f, fan_in=f),
            "b2": u(h, fan_in=f),
        }
        for _ in range(cfg.layers)
    ]


def moe_weights(cfg: MapConfig) -> list[Any]:
    """Per block an :class:`edu_parallel.expert_parallel.experts.MoEParams` of E experts of width
    4h/E."""

    return [
        init_moe(
            cfg.experts,
            cfg.hidden,
            cfg.ffn // cfg.experts,
            seed=cfg.seed + 101 + i,
            dtype=getattr(torch, DTYPE),
        )
        for i in range(cfg.layers)
    ]


def make_data(cfg: MapConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Input activations and target, both (b, s, h), seeded apart from the weights."""

    g = torch.Generator().manual_seed(cfg.seed + 1_000_003)
    shape = (cfg.batch, cfg.seq, cfg.hidden)
    dtype = getattr(torch, DTYPE)
    return torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype)


def dense_block(x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """``x + W2 GeLU(W1 x + b1) + b2``: (b, s, h) @ (h, 4h) -> (b, s, 4h) @ (4h, h) -> (b, s, h)."""

    return x + F.linear(F.gelu(F.linear(x, w["w1"], w["b1"])), w["w2"], w["b2"])


def sq_error(out: torch.Tensor, target: torch.Tensor, total: int) -> torch.Tensor:
    """This rank's share of the global MSE: sum of squared errors / all target elements."""
    return ((out - target) ** 2).sum() / total


# ---------------------------------------------------------------- measuring
class SavedBytes:
    """Bytes autograd saves for backward inside the block, parameters excluded, each tensor once
    (the hook :mod:`edu_parallel.pipeline_parallel.execute` uses, plus de-duplication)."""

    def __init__(self, params: Sequence[torch.Tensor]):
        self.param_storages = {p.untyped_storage().data_ptr() for p in params}
        self.seen: set[tuple[Any, ...]] = set()
        self.bytes = 0

    def pack(self, t: torch.Tensor) -> torch.Tensor:

        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.dtype)
        if key[0] not in self.param_storages and key not in self.seen:
            self.seen.add(key)
            self.bytes += t.numel() * t.element_size()
        return t

    @contextlib.contextmanager
    def counting(self) -> Iterator[SavedBytes]:

        with torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t):
            yield self


class Holdings:
    """The parameter tensors this rank holds: ``(name, tensor, index, full_shape)``, ``index`` the
    ``[lo, hi)`` per dimension of the full tensor. :meth:`record` writes "params" memory events
    and one "holds" mark per tensor into the trace."""

    def __init__(self) -> None:
        self.items: list[tuple[str, torch.Tensor, list[tuple[int, int]], tuple[int, ...]]] = []

    def add(
        self,
        name: str,
        t: torch.Tensor,
        full: torch.Tensor | None = None,
        dim: int = 0,
        rank: int = 0,
        parts: int = 1,
    ) -> torch.Tensor:
        """Hold a fresh leaf copy of ``t``: part ``rank`` of ``parts`` along ``dim`` of ``full``."""

        shape = tuple((full if full is not None else t).shape)
        leaf = t.detach().clone().requires_grad_(True)
        self.hold(name, leaf, slice_index(shape, rank, parts, dim), shape)
        return leaf

    def hold(
        self,
        name: str,
        t: torch.Tensor,
        index: list[tuple[int, int]] | None = None,
        full_shape: Sequence[int] | None = None,
    ) -> None:
        """Hold the leaf ``t`` itself (e.g. a module's parameter); default: the whole tensor."""
        shape = tuple(t.shape if full_shape is None else full_shape)
        self.items.append((name, t, index or [(0, d) for d in shape], shape))

    @property
    def params(self) -> list[torch.Tensor]:
        return [item[1] for item in self.items]

    def record(self, ctx: RankContext) -> None:
        for name, t, index, shape in self.items:
            nbytes = t.numel() * t.element_size()
            ctx.memory(PARAMS, nbytes, step=STEP, phase="init")
            ctx.mark(
                HOLDS_MARK,
                tensor=name,
                index=[list(i) for i in index],
                shape=list(shape),
                nbytes=nbytes,
            )

    def grads(self) -> dict[str, tuple[list[tuple[int, int]], torch.Tensor]]:
        """``{name: (index, gradient)}`` of every held tensor."""
        return {n: (i, t.grad.detach().clone()) for n, t, i, _ in self.items if t.grad is not None}

    def sgd(self, lr: float) -> None:

        with torch.no_grad():
            for _, t, _, _ in self.items:
                if t.grad is not None:
                    t -= lr * t.grad


def model_param_bytes(cfg: MapConfig, variant: str) -> int:
    """Bytes of all parameters of the dense model or of its MoE variant (one full copy)."""

    if variant == "dense":
        tensors = [t for w in dense_weights(cfg) for t in w.values()]
    else:
        tensors = [
            t for p in moe_weights(cfg) for m in (p.router, p.experts) for t in m.parameters()
        ]
    return sum(t.numel() * t.element_size() for t in tensors)


def reference_step(cfg: MapConfig, variant: str, world_size: int) -> dict[str, Any]:
    """The step on one process: ``{"out" (b, s, h), "grads" {name: full gradient},
    "activation_bytes"}``. The MoE variant uses
    :func:`edu_parallel.expert_parallel.layer.moe_reference` with one routing group per rank
    (capacity is counted per source rank, as the EP run does)."""
    with one_thread():
        return _reference_step(cfg, variant, world_size)


def _reference_step(cfg: MapConfig, variant: str, world_size: int) -> dict[str, Any]:
    x, y = make_data(cfg)
    named: dict[str, torch.Tensor] = {}
    if variant == "dense":
        blocks = [{k: v.requires_grad_(True) for k, v in w.items()} for w in dense_weights(cfg)]
        named = {f"block{i}.{k}": v for i, w in enumerate(blocks) for k, v in w.items()}

        def forward(t: torch.Tensor) -> torch.Tensor:
            for w in blocks:
                t = dense_block(t, w)  # (b, s, h)
            return t

    else:
        layers = moe_weights(cfg)
        for i, p in enumerate(layers):
            named.update({f"block{i}.router.{k}": v for k, v in p.router.named_parameters()})
            named.update({f"block{i}.experts.{k}": v for k, v in p.experts.named_parameters()})

        def forward(t: torch.Tensor) -> torch.Tensor:
            b, s, h = t.shape
            for p in layers:  # (b s, h) tokens, rank r's tokens are the r-th of N groups
                tok = t.reshape(b * s, h)
                moe, _ = moe_reference(
                    tok,
                    p.router,
                    p.experts,
                    top_k=cfg.top_k,
                    capacity_factor=cfg.capacity_factor,
                    groups=world_size,
                )
                t = (tok + moe).view(b, s, h)
            return t

    saved = SavedBytes(list(named.values()))
    with saved.counting():
        out = forward(x)
        loss = sq_error(out, y, y.numel())
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in named.items()}
    return {"out": out.detach(), "grads": grads, "activation_bytes": saved.bytes}
