"""The data-parallel lesson's model, data and single-process references.

* :func:`build_model`: an ``nn.Sequential`` of ``nn.Linear`` + ReLU in fp32, its weights the same
  seeded values as the ZeRO lesson's (:func:`~edu_parallel.task.mlp.init_master`),
  a tied model sharing one ``nn.Parameter`` between its first and last layer, frozen layers with
  ``requires_grad=False``.
* :func:`microbatch`: micro-batch ``j = k N + r`` of a step's global batch belongs to rank ``r``'s
  ``k``-th accumulation; the global batch is fixed by the model (``batch`` rows).
* :func:`reference_grads`: one process computes each rank's accumulated gradient, scales it by
  ``1/N`` as DDP's reducer does (``mul_out(bucket_view, grad, 1/N)``) and sums the buckets by
  replaying the ring all-reduce of the ranks (:func:`~edu_parallel.engine.execute.replay_plan`),
  so it equals the ranks bit for bit. :func:`big_batch_grads` is one backward over the whole
  batch: equal up to the order of additions.
* :func:`loss_of`: MSE against random targets, or cross-entropy for the ``classifier`` task of
  :mod:`edu_parallel.task.classifier` (whose batches that module draws).
"""

from __future__ import annotations

import functools

import torch

from ..engine.execute import replay_plan
from ..plans.ring import ring_allreduce_plan
from ..task.classifier import labelled, task_loss
from ..task.mlp import global_batch, init_master, layer_views
from ..task.threads import one_thread
from .config import DdpConfig


@functools.lru_cache(maxsize=4)
def _initial_weights(dims: tuple[int, ...], seed: int) -> torch.Tensor:
    """:func:`init_master`, kept: a persistent worker builds the same model run after run."""
    return init_master(dims, seed)


def build_model(config: DdpConfig) -> torch.nn.Sequential:
    """The config's MLP in fp32, seeded; Linear ``i`` is module ``2 i`` (ReLU between)."""
    dims = config.spec.dims
    master = _initial_weights(dims, config.seed)  # read only: copied into the layers
    model = torch.nn.Sequential()
    views = layer_views(master, dims)
    for i, (w, b) in enumerate(views):
        # no random init: the seeded weights overwrite it (deep: 8 weights of 1 MiB, filled twice)
        layer = torch.nn.utils.skip_init(torch.nn.Linear, w.shape[1], w.shape[0])
        with torch.no_grad():
            layer.weight.copy_(w)  # (d_out, d_in)
            layer.bias.copy_(b)
        model.append(layer)
        if i < len(views) - 1:
            model.append(torch.nn.ReLU())
    if config.spec.tied:  # the last layer uses the first layer's weight: one Parameter
        model[-1].weight = model[0].weight
    for i in range(config.freeze):
        model[2 * i].requires_grad_(False)
    return model


def linears(model: torch.nn.Sequential) -> list[torch.nn.Linear]:
    return [m for m in model if isinstance(m, torch.nn.Linear)]


def trained_params(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    """(name, parameter) that need a gradient, registration order, shared ones once."""
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def step_batch(config: DdpConfig, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of ``step``: inputs (batch, d_in) and targets (batch, d_out), or for
    the classifier task labels (batch,)."""
    if config.spec.task == "classify":
        return labelled(config.seed + 7919 * step, config.spec.batch)
    dims = config.spec.dims
    return global_batch(dims, config.spec.batch, 1, config.seed + 7919 * step)


def loss_of(config: DdpConfig, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The model's mean loss: MSE, or cross-entropy for the classifier task."""
    if config.spec.task == "classify":
        return task_loss(out, target)
    return torch.nn.functional.mse_loss(out, target)


def microbatch(
    config: DdpConfig, step: int, rank: int, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s ``k``-th micro-batch of ``step``: rows of micro-batch ``k N + rank``."""
    x, y = step_batch(config, step)
    b, j = config.microbatch, k * config.world_size + rank
    return x[j * b : (j + 1) * b].clone(), y[j * b : (j + 1) * b].clone()


def local_backward(
    config: DdpConfig, model: torch.nn.Sequential, step: int, rank: int, k: int
) -> float:
    """Forward and backward of one micro-batch; the loss is divided by ``K`` so that the
    accumulated gradient is that of the mean over the rank's rows. Returns the loss."""
    x, y = microbatch(config, step, rank, k)  # (b, d_in), (b, d_out)
    loss = loss_of(config, model(x), y) / config.accumulate
    loss.backward()
    return float(loss.detach()) * config.accumulate


def reference_grads(config: DdpConfig, model: torch.nn.Sequential, step: int) -> None:
    """Set ``p.grad`` of ``model`` to what the ranks hold after synchronising ``step``."""
    n = config.world_size
    params = dict(trained_params(model))
    plan = config.buckets()
    flats: dict[int, list[torch.Tensor]] = {b.index: [] for b in plan}
    for r in range(n):
        model.zero_grad(set_to_none=True)
        for k in range(config.accumulate):
            local_backward(config, model, step, r, k)
        for b in plan:
            flat = torch.cat([params[name].grad.reshape(-1) for name in b.params])
            flats[b.index].append(flat.mul_(1.0 / n))  # DDP's reducer: grad * (1/N)
    ring = ring_allreduce_plan(n)
    for b in plan:
        replay_plan(ring, flats[b.index])  # every rank's copy is now the same sum
        at = 0
        for name in b.params:
            p = params[name]
            p.grad.copy_(flats[b.index][0][at : at + p.numel()].view_as(p))
            at += p.numel()


def sgd_step(params: list[torch.Tensor], lr: float) -> None:
    """``torch.optim.SGD(lr=lr)``'s update written out (no momentum, no weight decay; the
    single-tensor path it takes on CPU): ``p -= lr * p.grad``. Written out because constructing a
    ``torch.optim`` optimizer first imports ``torch._dynamo`` (1.5 s per process)."""
    with torch.no_grad():
        for p in params:
            p.add_(p.grad, alpha=-lr)


def reference_training(config: DdpConfig) -> tuple[torch.nn.Sequential, list[torch.Tensor]]:
    """One process, ``config.steps`` SGD steps with the ranks' synchronised gradients.

    Returns the model after the last step and the gradients of the last step (registration
    order). Runs with one intra-op thread, as every rank does."""
    with one_thread():
        model = build_model(config)
        params = [p for _, p in trained_params(model)]
        grads: list[torch.Tensor] = []
        for step in range(1, config.steps + 1):
            reference_grads(config, model, step)
            grads = [p.grad.clone() for _, p in trained_params(model)]
            sgd_step(params, config.lr)
        return model, grads


def big_batch_grads(config: DdpConfig, model: torch.nn.Sequential, step: int) -> list[torch.Tensor]:
    """Gradients of one backward over the whole global batch of ``step`` (mean loss), with one
    intra-op thread (:func:`one_thread`)."""
    with one_thread():
        model.zero_grad(set_to_none=True)
        x, y = step_batch(config, step)  # (batch, d_in), (batch, d_out)
        loss_of(config, model(x), y).backward()
        return [p.grad.clone() for _, p in trained_params(model)]
