"""PyTorch's own ``DistributedDataParallel`` on the same ranks, model and data, for comparison.

:func:`torch_ddp_run` wraps the lesson's model in ``torch.nn.parallel.DistributedDataParallel``
(same ``bucket_cap_mb``; ``None`` is its default) and trains the same steps with ``no_sync`` for
accumulation. It registers a communication hook (``DistributedDataParallel.register_comm_hook``,
the seam where lesson 13's compression plugs in) that does what DDP's built-in reduction does,
``buffer * (1/N)`` then ``all_reduce``, and records each ``GradBucket`` it is handed: index,
bytes and parameter names, per iteration. DDP's first iteration runs with one bucket (with
``find_unused_parameters=False`` it does not yet know the order gradients arrive in); it then
rebuilds the buckets in the order it saw, and its logging data reports them
(``_get_ddp_logging_data()``: ``rebuilt_bucket_sizes``, ``rebuilt_per_bucket_param_indices``).
"""

from __future__ import annotations

import contextlib
import statistics
from typing import Any

import torch
import torch._dynamo  # noqa: F401 - DDP's constructor imports it (1.5 s): here, before ranks fork
import torch.distributed as dist

from ..engine.context import RankContext
from .config import DdpConfig
from .model import build_model, loss_of, microbatch, sgd_step, trained_params


def torch_ddp_run(ctx: RankContext, config: DdpConfig) -> dict[str, Any]:
    """Train with torch DDP; return its buckets, gradients, parameters and step times."""
    n, r = ctx.world_size, ctx.rank
    model = build_model(config)
    names = [name for name, _ in trained_params(model)]
    by_id = {id(p): name for name, p in trained_params(model)}
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=config.effective_cap_mb)
    seen: list[list[dict[str, Any]]] = []

    def hook(_state, bucket):  # noqa: ANN001, ANN202 - DDP rejects string annotations
        buf = bucket.buffer()
        seen[-1].append(
            {
                "index": bucket.index(),
                "nbytes": buf.numel() * buf.element_size(),
                "params": [by_id[id(p)] for p in bucket.parameters()],
            }
        )
        buf.mul_(1.0 / n)  # what DDP's reducer does without a hook: grad * (1/N)
        return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])

    ddp.register_comm_hook(None, hook)
    params = [p for _, p in trained_params(model)]
    times, out = [], {}
    # DDP rebuilds its buckets at the second iteration and logs them from the third on
    for step in range(1, max(config.steps, 3) + 1):
        seen.append([])
        ctx.barrier()
        start = ctx.tracer.now()
        model.zero_grad(set_to_none=True)
        for k in range(config.accumulate):
            sync = k == config.accumulate - 1
            with contextlib.nullcontext() if sync else ddp.no_sync():
                x, y = microbatch(config, step, r, k)  # (b, d_in), (b, d_out)
                loss = loss_of(config, ddp(x), y) / config.accumulate
                loss.backward()
        grads = torch.cat([p.grad.reshape(-1) for _, p in trained_params(model)])
        sgd_step(params, config.lr)
        times.append(ctx.tracer.now() - start)
        ctx.progress(step, max(config.steps, 3))
        if step == 1:
            out["grads1"] = grads
        if step == config.steps:
            out["grads"] = grads
            out["params"] = torch.cat([p.detach().reshape(-1) for _, p in trained_params(model)])
    data = ddp._get_ddp_logging_data()
    sizes = [int(x) for x in str(data.get("rebuilt_bucket_sizes", "")).split(",") if x.strip()]
    indices = [
        [names[int(i)] for i in group.split()]
        for group in str(data.get("rebuilt_per_bucket_param_indices", "")).split(",")
        if group.strip()
    ]
    out.update(
        hook_buckets=seen,
        logged_bucket_sizes=sizes,
        logged_bucket_params=indices,
        step_time_s=statistics.median(times[1:]),
    )
    return out
