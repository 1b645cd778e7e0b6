"""Data-parallel training executed on the ranks: buckets, overlap with backward, accumulation.

Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training" (VLDB,
arXiv 2006.15704) §3.2: every rank holds the whole model, runs forward and backward on its own
rows, and the gradients are averaged with all-reduce before the optimizer step. :func:`train_ddp`
does it three ways (``DdpConfig.sync``), each on the buckets the config carries (made once
by its check) and with the reducer of :mod:`edu_parallel.data_parallel.reducer`:

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
from collections.abc import Iterable
from typing import Any

import torch

from ..core.schema import GRAD_SYNC, STEP_END_MARK, STEP_START_MARK
from ..engine.context import RankContext
from ..engine.execute import run_plan
from ..engine.stream import CommStream
from ..plans.plan import Plan
from ..plans.ring import ring_allreduce_plan
from ..task.classifier import evaluate
from .config import DdpConfig
from .model import build_model, linears, loss_of, microbatch, sgd_step, trained_params
from .reducer import BucketReducer, CommHook, GradBucket, LayerTimer
from .torch_ddp import torch_ddp_run


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
    """A short hash of a tensor's bits: equal digests, equal tensors. SHA-256 over the tensor's
    own memory (no copy): with the CPU's SHA instructions it hashes the deep model's 8 MiB in
    about a third of blake2b's time, three times per rank and run."""
    bits = memoryview(t.detach().contiguous().numpy()).cast("B")
    return hashlib.sha256(bits).hexdigest()[:24]


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


def forward_backward(
    ctx: RankContext,
    config: DdpConfig,
    model: torch.nn.Sequential,
    timer: LayerTimer,
    step: int,
    k: int,
) -> float:
    """Micro-batch ``k`` of ``step``: a traced forward, then backward layer by layer (the
    gradient hooks fill and issue the buckets meanwhile). Returns its share of the loss."""
    x, y = microbatch(config, step, ctx.rank, k)  # (b, d_in), (b, d_out) or labels (b,)
    start = ctx.tracer.now()
    loss = loss_of(config, model(x), y) / config.accumulate
    flops = sum(f["forward_flops"] for f in timer.layer_flops)
    attrs = {"microbatch": k, "flops": flops, "rows": config.microbatch}
    ctx.record_compute(
        "forward", 0, start, ctx.tracer.now(), step=step, phase="forward", attrs=attrs
    )
    timer.begin(step, k)
    loss.backward()
    timer.close()
    return float(loss.detach())


def _flat(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def train_ddp(ctx: RankContext, config: DdpConfig, hook: CommHook | None = None) -> dict[str, Any]:
    """Run ``config.steps`` SGD steps of data-parallel training on this rank (see module doc)."""
    model = build_model(config)
    params = dict(trained_params(model))
    timer = LayerTimer(ctx, layer_flops(config))
    losses: list[float] = []
    evals: list[tuple[float, float]] = []  # (held-out loss, accuracy) after each step
    scored = ctx.rank == 0 and config.spec.task == "classify"
    with CommStream(ctx.tracer.now, name=f"comm-rank{ctx.rank}") as stream:
        timer.watch(linears(model))
        overlap = config.sync == "overlap"
        reducer = BucketReducer(
            ctx, config.buckets(), params, hook or allreduce_mean_hook, stream, timer, overlap
        )
        for step in range(1, config.steps + 1):
            if config.line_up:
                ctx.barrier()  # line the ranks up so that step times compare
            ctx.mark(STEP_START_MARK, step=step)
            ctx.tracer.where(f"ddp step {step}")
            model.zero_grad(set_to_none=True)
            reducer.reset()
            step_loss = 0.0
            for k in range(config.accumulate):
                reducer.require_backward_grad_sync = k == config.accumulate - 1  # else no_sync
                step_loss += forward_backward(ctx, config, model, timer, step, k)
            losses.append(step_loss)
            if not overlap:
                reducer.sync_gradients()
            reducer.wait()  # the optimizer may not run before every bucket is reduced
            reducer.copy_back()
            with ctx.compute("optimizer", step=step, phase="optimizer"):
                sgd_step(list(params.values()), config.lr)
            ctx.mark(STEP_END_MARK, step=step)
            ctx.progress(step, config.steps)
            if scored:
                with ctx.tracer.paused():
                    evals.append(evaluate(model))
            if step == 1:
                grads1 = _flat(p.grad for p in params.values())
        # one step: the last gradients are the first ones, flattened and hashed once
        grads = grads1 if config.steps == 1 else _flat(p.grad for p in params.values())
    final = _flat(p.detach() for p in params.values())
    first = digest(grads1)
    out: dict[str, Any] = {
        "losses": losses,
        "evals": evals,
        "digests": [first, first if grads is grads1 else digest(grads), digest(final)],
    }
    if ctx.rank == 0:
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
