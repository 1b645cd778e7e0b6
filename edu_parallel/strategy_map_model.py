"""The model, data and measuring tools behind :mod:`edu_parallel.strategy_map`.

* :class:`MapConfig`: sizes of the tiny transformer-like model and of the training step.
* :func:`dense_weights` / :func:`moe_weights` / :func:`make_data`: seeded, the same bits on every
  process; :func:`dense_block` is ``x + W2 GeLU(W1 x + b1) + b2`` (``nn.Linear`` layout).
* :class:`SavedBytes`: activation bytes = what autograd saves for backward
  (``torch.autograd.graph.saved_tensors_hooks``, as :mod:`edu_parallel.pipeline_exec` measures),
  parameters excluded, each tensor counted once.
* :class:`Holdings`: the parameter tensors (or slices) a rank holds, written into the trace as
  "params" memory events and "holds" marks.
* :func:`reference_step`: the same step on one process (dense model or its MoE variant).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import bad_value

if TYPE_CHECKING:  # pure Python at import (the quiz bank reads the formulas); torch inside
    import torch

STRATEGIES = ("dp", "tp", "tp-sp", "pp", "ep")
STRATEGY_NAMES = {"dp": "DP", "tp": "TP", "tp-sp": "TP+SP", "pp": "PP", "ep": "EP"}
PP_SCHEDULES = ("gpipe", "1f1b")
DTYPE = "float32"  # every tensor of the model and the data: 4 bytes per element
ITEMSIZE = 4
STEP = 0  # the one training step every event belongs to
SYNC = "grad_sync"  # phase of the gradient all-reduce (DP, TP+SP, EP)
HOLDS = "holds"  # mark: one parameter tensor (or slice of one) a rank holds


@dataclass(frozen=True)
class MapConfig:
    """Sizes of the model and the step; validated by :func:`edu_parallel.strategy_map_report.check_map_args`.

    ``microbatches`` None: 2N for PP. ``capacity_factor`` 2.0 with ``top_k=2``, ``experts=4``
    gives a capacity of every token, so no token is dropped (``C >= E/k``).
    """

    layers: int = 4
    hidden: int = 16
    batch: int = 8
    seq: int = 4
    experts: int = 4
    top_k: int = 2
    capacity_factor: float = 2.0
    microbatches: int | None = None
    schedule: str = "1f1b"
    lr: float = 0.1
    seed: int = 0

    @property
    def ffn(self) -> int:
        return 4 * self.hidden

    def num_microbatches(self, world_size: int) -> int:
        return 2 * world_size if self.microbatches is None else self.microbatches


# ---------------------------------------------------------------- model, data, loss
def dense_weights(cfg: MapConfig) -> list[dict[str, torch.Tensor]]:
    """Seeded block weights, ``nn.Linear`` layout and init U(-1/sqrt(fan_in), +): w1 (4h, h),
    b1 (4h,), w2 (h, 4h), b2 (h,). The same bits on every process."""
    import torch

    g = torch.Generator().manual_seed(cfg.seed)
    h, f = cfg.hidden, cfg.ffn

    def u(*shape: int, fan_in: int) -> torch.Tensor:
        return ((torch.rand(*shape, generator=g) * 2 - 1) / fan_in**0.5).to(getattr(torch, DTYPE))

    return [{"w1": u(f, h, fan_in=h), "b1": u(f, fan_in=h), "w2": u(h, f, fan_in=f),
             "b2": u(h, fan_in=f)} for _ in range(cfg.layers)]  # fmt: skip


def moe_weights(cfg: MapConfig) -> list[Any]:
    """Per block an :class:`edu_parallel.moe.MoEParams` of E experts of width 4h/E."""
    import torch

    from .moe import init_moe

    return [init_moe(cfg.experts, cfg.hidden, cfg.ffn // cfg.experts, seed=cfg.seed + 101 + i,
                     dtype=getattr(torch, DTYPE)) for i in range(cfg.layers)]  # fmt: skip


def make_data(cfg: MapConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Input activations and target, both (b, s, h), seeded apart from the weights."""
    import torch

    g = torch.Generator().manual_seed(cfg.seed + 1_000_003)
    shape = (cfg.batch, cfg.seq, cfg.hidden)
    dtype = getattr(torch, DTYPE)
    return torch.randn(shape, generator=g).to(dtype), torch.randn(shape, generator=g).to(dtype)


def dense_block(x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """``x + W2 GeLU(W1 x + b1) + b2``: (b, s, h) @ (h, 4h) -> (b, s, 4h) @ (4h, h) -> (b, s, h)."""
    import torch.nn.functional as F

    return x + F.linear(F.gelu(F.linear(x, w["w1"], w["b1"])), w["w2"], w["b2"])


def sq_error(out: torch.Tensor, target: torch.Tensor, total: int) -> torch.Tensor:
    """This rank's share of the global MSE: sum of squared errors / all target elements."""
    return ((out - target) ** 2).sum() / total


# ---------------------------------------------------------------- measuring
class SavedBytes:
    """Bytes autograd saves for backward inside the block, parameters excluded, each tensor once
    (the hook :mod:`edu_parallel.pipeline_exec` uses, plus de-duplication)."""

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
        import torch

        with torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t):
            yield self


class Holdings:
    """The parameter tensors this rank holds: ``(name, tensor, index, full_shape)``, ``index`` the
    ``[lo, hi)`` per dimension of the full tensor. :meth:`record` writes "params" memory events
    and one "holds" mark per tensor into the trace."""

    def __init__(self) -> None:
        self.items: list[tuple[str, torch.Tensor, list[tuple[int, int]], tuple[int, ...]]] = []

    def add(self, name: str, t: torch.Tensor, full: torch.Tensor | None = None,
            dim: int = 0, rank: int = 0, parts: int = 1) -> torch.Tensor:  # fmt: skip
        """Hold a fresh leaf copy of ``t``: part ``rank`` of ``parts`` along ``dim`` of ``full``."""

        shape = tuple((full if full is not None else t).shape)
        leaf = t.detach().clone().requires_grad_(True)
        self.hold(name, leaf, slice_index(shape, rank, parts, dim), shape)
        return leaf

    def hold(self, name: str, t: torch.Tensor, index: list[tuple[int, int]] | None = None,
             full_shape: Sequence[int] | None = None) -> None:  # fmt: skip
        """Hold the leaf ``t`` itself (e.g. a module's parameter); default: the whole tensor."""
        shape = tuple(t.shape if full_shape is None else full_shape)
        self.items.append((name, t, index or [(0, d) for d in shape], shape))

    @property
    def params(self) -> list[torch.Tensor]:
        return [item[1] for item in self.items]

    def record(self, ctx: Any) -> None:
        for name, t, index, shape in self.items:
            nbytes = t.numel() * t.element_size()
            ctx.memory("params", nbytes, step=STEP, phase="init")
            ctx.mark(HOLDS, tensor=name, index=[list(i) for i in index], shape=list(shape),
                     nbytes=nbytes)  # fmt: skip

    def grads(self) -> dict[str, tuple[list[tuple[int, int]], torch.Tensor]]:
        """``{name: (index, gradient)}`` of every held tensor."""
        return {n: (i, t.grad.detach().clone()) for n, t, i, _ in self.items if t.grad is not None}

    def sgd(self, lr: float) -> None:
        import torch

        with torch.no_grad():
            for _, t, _, _ in self.items:
                if t.grad is not None:
                    t -= lr * t.grad


def slice_index(shape: Sequence[int], rank: int, parts: int, dim: int = 0) -> list[tuple[int, int]]:
    """``[lo, hi)`` per dimension of block ``rank`` of ``parts`` equal blocks along ``dim``."""
    index = [(0, d) for d in shape]
    per = shape[dim] // parts
    index[dim] = (rank * per, (rank + 1) * per)
    return index


def model_param_bytes(cfg: MapConfig, variant: str) -> int:
    """Bytes of all parameters of the dense model or of its MoE variant (one full copy)."""

    if variant == "dense":
        tensors = [t for w in dense_weights(cfg) for t in w.values()]
    else:
        tensors = [t for p in moe_weights(cfg) for m in (p.router, p.experts) for t in m.parameters()]  # fmt: skip
    return sum(t.numel() * t.element_size() for t in tensors)


def reference_step(cfg: MapConfig, variant: str, world_size: int) -> dict[str, Any]:
    """The step on one process: ``{"out" (b, s, h), "grads" {name: full gradient},
    "activation_bytes"}``. The MoE variant uses :func:`edu_parallel.moe.moe_reference` with one
    routing group per rank (capacity is counted per source rank, as the EP run does)."""

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
        from .moe import moe_reference

        layers = moe_weights(cfg)
        for i, p in enumerate(layers):
            named.update({f"block{i}.router.{k}": v for k, v in p.router.named_parameters()})
            named.update({f"block{i}.experts.{k}": v for k, v in p.experts.named_parameters()})

        def forward(t: torch.Tensor) -> torch.Tensor:
            b, s, h = t.shape
            for p in layers:  # (b s, h) tokens, rank r's tokens are the r-th of N groups
                tok = t.reshape(b * s, h)
                moe, _ = moe_reference(tok, p.router, p.experts, top_k=cfg.top_k,
                                       capacity_factor=cfg.capacity_factor, groups=world_size)  # fmt: skip
                t = (tok + moe).view(b, s, h)
            return t

    saved = SavedBytes(list(named.values()))
    with saved.counting():
        out = forward(x)
        loss = sq_error(out, y, y.numel())
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in named.items()}
    return {"out": out.detach(), "grads": grads, "activation_bytes": saved.bytes}


# ---------------------------------------------------------------- formulas (tests check them against runs)
def block_params(hidden: int) -> int:
    """One dense block: W1 (4h, h) + b1 (4h) + W2 (h, 4h) + b2 (h) = 8h^2 + 5h."""
    return 8 * hidden * hidden + 5 * hidden


def formula_sent_bytes(strategy: str, world_size: int, rank: int, *, layers: int, hidden: int,
                       tokens: int, itemsize: int = ITEMSIZE) -> float:  # fmt: skip
    """Bytes ``rank`` sends in one step of the dense strategies (ring volume for all-reduce).

    DP: ``2(N-1)/N * Psi`` (one gradient all-reduce); TP (Megatron MLP per block): one all-reduce of
    the (b, s, h) activations forward and one of their gradient backward per block,
    ``2L * 2(N-1)/N * T h``; PP: the stage's output activations forward (not the last stage) and
    its input gradient backward (not the first), ``T h`` each. ``T`` = tokens per step (b s).
    TP+SP (Korthikanti et al. 2022, arXiv 2205.05198, §4.2.2): per block and pass an all-gather and a
    reduce-scatter of (T, h), ``(N-1)/N T h`` each = TP's all-reduce; per block in backward one more
    all-gather of W1's input (only its sequence block was saved): ``+ L (N-1)/N T h``; and one
    all-reduce of the L replicated b2 gradients (each rank's covers only its tokens):
    ``+ 2(N-1)/N L h``.
    """
    n = world_size
    if strategy == "dp":
        return 2 * (n - 1) / n * layers * block_params(hidden) * itemsize
    if strategy in ("tp", "tp-sp"):
        tp = 2 * layers * 2 * (n - 1) / n * tokens * hidden * itemsize
        if strategy == "tp":
            return tp
        regather = layers * (n - 1) / n * tokens * hidden * itemsize
        return tp + regather + 2 * (n - 1) / n * layers * hidden * itemsize  # + the b2 sync
    if strategy == "pp":
        return ((rank < n - 1) + (rank > 0)) * tokens * hidden * itemsize
    raise bad_value(
        "strategy", strategy, "'dp', 'tp', 'tp-sp' or 'pp' (EP's bytes depend on the routing)"
    )


def formula_param_bytes(strategy: str, world_size: int, *, layers: int, hidden: int,
                        itemsize: int = ITEMSIZE) -> float:  # fmt: skip
    """Parameter bytes per rank: DP all; TP (and TP+SP) W1, b1, W2 split t ways, b2 replicated; PP L/N blocks."""
    n, h = world_size, hidden
    if strategy == "dp":
        return layers * block_params(h) * itemsize
    if strategy in ("tp", "tp-sp"):
        return layers * ((8 * h * h + 4 * h) / n + h) * itemsize
    if strategy == "pp":
        return layers / n * block_params(h) * itemsize
    raise bad_value(
        "strategy", strategy, "'dp', 'tp', 'tp-sp' or 'pp' (EP's bytes depend on the routing)"
    )
