"""Lesson 14 in one process: replay a run's updates and score the model along the way.

The ranks' order of updates is decided by timing, so two asynchronous runs differ; but each run
records, on the server, the order in which it applied updates and which version every gradient
was computed from (the ``apply`` events of
:mod:`edu_parallel.async_training.param_server`). :func:`replay` recomputes every gradient from
that version on its worker's batch and applies it with the same functions the ranks call
(:mod:`edu_parallel.async_training.sgd`), one intra-op thread as on a rank: the parameters it
ends with equal the server's bit for bit. For ``sync`` and ``local-sgd`` the order is fixed and
the replay is the one-process reference, summing with the ring's own order of additions
(:func:`~edu_parallel.engine.execute.replay_plan`).

Along the way it scores the model on the held-out set (:func:`~edu_parallel.task.classifier.
evaluate`) at every *checkpoint*: after every step (``sync``, ``backup``), after every ``W``
updates (``async-ps``: one step's worth of samples) and after every average (``local-sgd``, whose
replicas differ in between). The scores cost the ranks nothing: the run's clock never sees them.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

import torch

from ..engine.execute import replay_plan
from ..task.classifier import evaluate
from ..task.threads import one_thread
from .config import AsyncConfig
from .sgd import apply, batch, build, flat_params, gradient, load, mean_of, ring


@dataclass
class Checkpoint:
    """The model after apply event ``index`` (0-based, in the replayed order)."""

    index: int
    step: float  # steps done: W gradients' worth of samples each (see AsyncConfig)
    samples: int  # samples whose gradient was applied so far
    loss: float  # held-out
    accuracy: float  # held-out
    time_s: float = float("nan")  # when the ranks got there (set by the report, from the trace)


@dataclass
class Replay:
    params: torch.Tensor  # (Psi,) after the last update
    checkpoints: list[Checkpoint] = field(default_factory=list)


def replay(config: AsyncConfig, applies: list[dict[str, Any]]) -> Replay:
    """Replay ``applies`` (the ``attrs`` of the server's ``apply`` events, in order; ignored for
    ``sync`` and ``local-sgd``) and score the checkpoints."""
    with one_thread():
        if config.mode in ("sync", "local-sgd"):
            # the order is fixed, so stragglers change nothing here: one replay per computation
            plain = {"straggler": "none", "straggler_rank": None, "distribution": None}
            kept = dataclasses.replace(config, **plain, delay_ms=None)
            return copy.deepcopy(_fixed_order(kept))
        return _server(config, applies)


def _score(model: torch.nn.Module, index: int, step: float, samples: int) -> Checkpoint:
    loss, acc = evaluate(model)
    return Checkpoint(index, step, samples, loss, acc)


def clear_cache() -> None:
    """Forget the cached fixed-order replays (a benchmark times them afresh)."""
    _fixed_order.cache_clear()


@functools.lru_cache(maxsize=8)
def _fixed_order(config: AsyncConfig) -> Replay:
    return _local(config) if config.mode == "local-sgd" else _sync(config)


def _sync(config: AsyncConfig) -> Replay:
    model, params = build(config)
    w_all = config.workers
    out = Replay(flat_params(params))
    for t in range(1, config.steps + 1):
        flats = [
            gradient(model, params, *batch(config, w, t)).mul_(1.0 / w_all) for w in range(w_all)
        ]
        if w_all > 1:
            replay_plan(ring(w_all), flats)
        apply(params, flats[0], config.lr)
        out.checkpoints.append(_score(model, t - 1, t, t * config.samples_per_step))
    out.params = flat_params(params)
    return out


def _local(config: AsyncConfig) -> Replay:
    replicas = [build(config) for _ in range(config.workers)]
    w_all = config.workers
    out = Replay(flat_params(replicas[0][1]))
    for t in range(1, config.steps + 1):
        for w, (model, params) in enumerate(replicas):
            apply(params, gradient(model, params, *batch(config, w, t)), config.lr)
        if t % config.local_steps == 0 or t == config.steps:
            flats = [flat_params(params).mul_(1.0 / w_all) for _, params in replicas]
            if w_all > 1:
                replay_plan(ring(w_all), flats)
            for _, params in replicas:
                load(params, flats[0])
            out.checkpoints.append(_score(replicas[0][0], t - 1, t, t * config.samples_per_step))
    out.params = flat_params(replicas[0][1])
    return out


def _server(config: AsyncConfig, applies: list[dict[str, Any]]) -> Replay:
    """The server's updates in their recorded order; each gradient from the version it read."""
    model, params = build(config)  # the server's parameters
    worker_model, worker_params = build(config)  # where a worker's gradient is recomputed
    versions = {0: flat_params(params)}
    wanted = collections.Counter(pulled for a in applies for _, _, pulled in a["grads"])
    async_ps = config.mode == "async-ps"
    lr = config.lr / config.workers if async_ps else config.lr
    out = Replay(flat_params(params))
    samples = 0
    for i, a in enumerate(applies):
        if a["version"] != i:
            raise ValueError(f"apply {i} moved version {a['version']}: the order is not complete")
        grads = []
        for w, t, pulled in a["grads"]:
            load(worker_params, versions[pulled])
            grads.append(gradient(worker_model, worker_params, *batch(config, w, t)))
            wanted[pulled] -= 1
            if wanted[pulled] == 0:
                del versions[pulled]
        apply(params, grads[0] if async_ps else mean_of(grads), lr)
        samples += len(grads) * config.rows
        if wanted[i + 1] > 0:
            versions[i + 1] = flat_params(params)
        if not async_ps:
            out.checkpoints.append(_score(model, i, i + 1, samples))
        elif (i + 1) % config.workers == 0 or i + 1 == len(applies):
            out.checkpoints.append(_score(model, i, (i + 1) / config.workers, samples))
    out.params = flat_params(params)
    return out
