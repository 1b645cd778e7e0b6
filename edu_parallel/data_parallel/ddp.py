"""Data-parallel training executed on the ranks: buckets, overlap with backward, accumulation.

Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training" (VLDB,
arXiv 2006.15704) §3.2: every rank holds the whole model, runs forward and backward on its own
rows, and the gradients are averaged with all-reduce before the optimizer step. :func:`train_ddp`
does it three ways (``DdpConfig.sync``), each on the buckets of
:mod:`edu_parallel.data_parallel.buckets`:

* ``per-param``: one all-reduce per parameter, issued after backward;
* ``bucketed``: one all-reduce per bucket, issued after backward;
* ``overlap``: a ``register_post_accumulate_grad_hook`` on every parameter copies its gradient
  into its bucket; when a bucket's last gradient is in, the bucket is issued on the rank's
  communication stream (:class:`~edu_parallel.engine.stream.CommStream`) while backward goes on.
  Buckets are issued in index order, as DDP's reducer does, so every rank runs the same
  collectives in the same order. The optimizer step waits on every handle.

With ``accumulate = K`` the first ``K-1`` micro-batches only accumulate into ``.grad`` (DDP's
``no_sync``); the last one synchronises. A bucket is reduced by a *communication hook*
``hook(ctx, flat, step, bucket)`` (DDP's ``register_comm_hook`` seam, where the compressors of
:mod:`edu_parallel.compression.compressors` plug in): ``flat`` is the bucket's buffer, to be
replaced in place by the average of every rank's, and ``bucket`` a :class:`GradBucket` (index,
parameter names and shapes, like torch's ``GradBucket``). The default
:func:`allreduce_mean_hook` multiplies by ``1/N`` and runs the engine's ring all-reduce (lesson
03), so every byte is a ``send`` event and the single-process reference can replay the same
additions (:mod:`edu_parallel.data_parallel.model`). For the ``classifier`` task rank 0 also
scores the model on the held-out set after every step (untraced).

The trace: per micro-batch a ``forward`` compute event and one ``backward`` compute event per
layer (``attrs``: layer, flops, rows, micro-batch); on the synchronising micro-batch a
``grad_ready`` mark when a parameter's gradient is accumulated and a ``bucket_ready`` mark when a
bucket is issued; per bucket a ``collective`` ``all_reduce`` event on the stream (``attrs``:
bucket, issued, waited, released, after_layer) spanning its ring's sends and receives (phase
``grad_sync``).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..core.schema import (
    BUCKET_READY_MARK,
    GRAD_READY_MARK,
    GRAD_SYNC,
    STEP_END_MARK,
    STEP_START_MARK,
)
from ..engine.context import RankContext
from ..engine.execute import run_plan
from ..engine.stream import CommStream, Handle
from ..plans.plan import Plan
from ..plans.ring import ring_allreduce_plan
from ..task.classifier import evaluate
from .config import DdpConfig
from .model import build_model, linears, loss_of, microbatch, sgd_step, trained_params
from .torch_ddp import torch_ddp_run


@dataclass(frozen=True)
class GradBucket:
    """What a hook learns about the bucket besides its buffer (torch's ``GradBucket``): its
    index, and its parameters' names and shapes in buffer order."""

    index: int
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Each parameter's gradient as a view of ``flat``, shaped like the parameter."""
        sizes = [math.prod(s) for s in self.shapes]
        return [v.view(s) for v, s in zip(flat.split(sizes), self.shapes, strict=True)]


CommHook = Callable[[RankContext, torch.Tensor, int, GradBucket], None]


@functools.cache
def _ring(world_size: int) -> Plan:
    return ring_allreduce_plan(world_size)


def allreduce_mean_hook(
    ctx: RankContext, flat: torch.Tensor, step: int, bucket: GradBucket | None = None
) -> None:
    """DDP's default: ``flat * (1/N)``, then a ring all-reduce (sum) of the bucket in place."""
    flat.mul_(1.0 / ctx.world_size)
    if ctx.world_size > 1:
        run_plan(ctx, _ring(ctx.world_size), flat, step=step, phase=GRAD_SYNC, snapshots=False)


def digest(t: torch.Tensor) -> str:
    """A short hash of a tensor's bits: equal digests, equal tensors."""
    return hashlib.blake2b(t.detach().contiguous().numpy().tobytes(), digest_size=12).hexdigest()


class _Backward:
    """Per-step state of the backward pass: which layer runs, which buckets are full."""

    def __init__(self, ctx: RankContext, config: DdpConfig, layer_flops: list[dict[str, int]]):
        self.ctx, self.config, self.layer_flops = ctx, config, layer_flops
        self.step = 0
        self.micro = 0
        self.layer: int | None = None
        self.layer_start = 0.0

    def begin(self, step: int, micro: int) -> None:
        self.step, self.micro = step, micro
        self.layer, self.layer_start = len(self.layer_flops) - 1, self.ctx.tracer.now()

    def layer_started(self, i: int) -> None:
        """A Linear's output gradient has arrived: its backward starts now."""
        if i != self.layer:
            self.close()
            self.layer, self.layer_start = i, self.ctx.tracer.now()

    def close(self) -> None:
        """End the running layer's ``backward`` compute event."""
        if self.layer is not None:
            flops = self.layer_flops[self.layer]
            attrs = {"layer": self.layer, "microbatch": self.micro, **flops}
            now = self.ctx.tracer.now()
            self.ctx.record_compute(
                "backward", 0, self.layer_start, now, step=self.step, phase="backward", attrs=attrs
            )
            self.layer = None


def layer_flops(config: DdpConfig) -> list[dict[str, int]]:
    """Per Linear: forward and backward FLOPs of one micro-batch (``2 b d_in d_out`` per GEMM;
    backward computes dW when the weight is trained and dX when the input needs a gradient)."""
    b, out = config.microbatch, []
    dims = config.spec.dims
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=False)):
        gemm = 2 * b * d_in * d_out  # (b, d_in) @ (d_in, d_out)
        trained = i >= config.freeze
        back = (gemm if trained else 0) + (gemm if i > config.freeze else 0) + b * d_out
        out.append({"forward_flops": gemm, "flops": back if trained else 0, "rows": b})
    return out


def train_ddp(ctx: RankContext, config: DdpConfig, hook: CommHook | None = None) -> dict[str, Any]:
    """Run ``config.steps`` SGD steps of data-parallel training on this rank (see module doc)."""
    hook = hook or allreduce_mean_hook
    r = ctx.rank
    model = build_model(config)
    params = dict(trained_params(model))
    plan = config.buckets()
    flats = {b.index: torch.empty(sum(params[x].numel() for x in b.params)) for b in plan}
    shapes = {b.index: tuple(tuple(params[x].shape) for x in b.params) for b in plan}
    grad_buckets = {b.index: GradBucket(b.index, tuple(b.params), shapes[b.index]) for b in plan}
    views: dict[str, tuple[int, torch.Tensor]] = {}
    for b in plan:
        at = 0
        for name in b.params:
            p = params[name]
            views[name] = (b.index, flats[b.index][at : at + p.numel()].view_as(p))
            at += p.numel()
    flops = layer_flops(config)
    state = _Backward(ctx, config, flops)
    overlap = config.sync == "overlap"
    handles: dict[int, Handle] = {}
    events: dict[int, Any] = {}
    pending: dict[int, int] = {}
    ready: set[int] = set()
    next_bucket = [0]

    def reduce(b: int, step: int, issued: float, after_layer: int | None) -> None:
        start = ctx.tracer.now()
        hook(ctx, flats[b], step, grad_buckets[b])
        attrs = {"bucket": b, "issued": issued, "after_layer": after_layer}
        nbytes = flats[b].numel() * flats[b].element_size()
        events[b] = ctx.record(
            "collective",
            "all_reduce",
            start,
            step=step,
            phase=GRAD_SYNC,
            nbytes=nbytes,
            attrs=attrs,
        )

    def issue_ready(stream: CommStream) -> None:
        """Issue full buckets in index order (DDP: a bucket waits for the ones before it)."""
        while next_bucket[0] in ready:
            b = next_bucket[0]
            now = ctx.tracer.now()
            ctx.mark(BUCKET_READY_MARK, bucket=b, step=state.step, layer=state.layer)
            handles[b] = stream.issue(reduce, b, state.step, now, state.layer)
            next_bucket[0] += 1

    def on_grad(name: str, p: torch.Tensor, stream: CommStream) -> None:
        if state.micro != config.accumulate - 1:
            return  # no_sync: gradients only accumulate locally
        b, view = views[name]
        ctx.mark(GRAD_READY_MARK, param=name, bucket=b, step=state.step, layer=state.layer)
        if not overlap:
            return  # copied and issued after backward
        view.copy_(p.grad)
        pending[b] -= 1
        if pending[b] == 0:
            ready.add(b)
            issue_ready(stream)

    def on_forward(i: int, _m: Any, _inp: Any, out: torch.Tensor) -> None:
        if out.requires_grad:
            out.register_hook(lambda g: state.layer_started(i))

    losses: list[float] = []
    evals: list[tuple[float, float]] = []  # (held-out loss, accuracy) after each step
    scored = r == 0 and config.spec.task == "classify"
    with CommStream(ctx.tracer.now, name=f"comm-rank{r}") as stream:
        for i, layer in enumerate(linears(model)):
            layer.register_forward_hook(functools.partial(on_forward, i))
        for name, p in params.items():
            p.register_post_accumulate_grad_hook(functools.partial(on_grad, name, stream=stream))
        out: dict[str, Any] = {"plan": plan.to_text()}
        for step in range(1, config.steps + 1):
            if config.line_up:
                ctx.barrier()  # line the ranks up so that step times compare
            ctx.mark(STEP_START_MARK, step=step)
            ctx.tracer.where(f"ddp step {step}")
            model.zero_grad(set_to_none=True)
            handles.clear()
            events.clear()
            ready.clear()
            pending.update({b.index: len(b.params) for b in plan})
            next_bucket[0] = 0
            step_loss = 0.0
            for k in range(config.accumulate):
                x, y = microbatch(config, step, r, k)  # (b, d_in), (b, d_out) or labels (b,)
                start = ctx.tracer.now()
                loss = loss_of(config, model(x), y) / config.accumulate
                fwd = sum(f["forward_flops"] for f in flops)
                attrs = {"microbatch": k, "flops": fwd, "rows": config.microbatch}
                end = ctx.tracer.now()
                ctx.record_compute(
                    "forward", 0, start, end, step=step, phase="forward", attrs=attrs
                )
                state.begin(step, k)
                loss.backward()
                state.close()
                step_loss += float(loss.detach())
            losses.append(step_loss)
            if not overlap:  # after backward: copy every gradient into its bucket, then issue
                for name, p in params.items():
                    views[name][1].copy_(p.grad)
                ready.update(b.index for b in plan)
                state.layer = None
                issue_ready(stream)
            for b in plan:  # the optimizer may not run before every bucket is reduced
                handles[b.index].wait()
                events[b.index].attrs.update(
                    waited=handles[b.index].waited, released=handles[b.index].released
                )
            for name, p in params.items():
                p.grad.copy_(views[name][1])
            with ctx.compute("optimizer", step=step, phase="optimizer"):
                sgd_step(list(params.values()), config.lr)
            ctx.mark(STEP_END_MARK, step=step)
            if scored:
                with ctx.tracer.paused():
                    evals.append(evaluate(model))
            if step == 1:
                grads1 = torch.cat([p.grad.reshape(-1) for p in params.values()])
        grads = torch.cat([p.grad.reshape(-1) for p in params.values()])
    final = torch.cat([p.detach().reshape(-1) for p in params.values()])
    out.update(
        losses=losses,
        evals=evals,
        digests=[digest(grads1), digest(grads), digest(final)],
    )
    if r == 0:
        out.update(grads1=grads1, grads=grads, params=final)
    return out


def ddp_job(
    ctx: RankContext, config: DdpConfig, hook: CommHook | None = None, compare_torch: bool = True
) -> dict[str, Any]:
    """On every rank: :func:`train_ddp`, traced; then (untraced) torch's DDP on the same model.
    Only rank 0 returns tensors; every rank returns digests of its gradients and parameters."""
    out = train_ddp(ctx, config, hook)
    if compare_torch:
        with ctx.tracer.paused():
            ref = torch_ddp_run(ctx, config)
        ref["digests"] = [digest(ref[k]) for k in ("grads1", "grads", "params")]
        if ctx.rank != 0:
            ref = {k: v for k, v in ref.items() if not isinstance(v, torch.Tensor)}
        out["torch"] = ref
    return out
