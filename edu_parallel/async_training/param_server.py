"""Lesson 14 on the ranks: a parameter server, asynchronous or with backup workers.

Rank 0 is a dedicated server (lesson 04's parameter-server role, :mod:`edu_parallel.plans.ps`,
here with the update applied on the server as in Dean et al. 2012 and Li et al. 2014); ranks
``1..N-1`` are workers ``0..W-1``. A worker loops: receive parameters and their version, compute
its next gradient on them (the straggler delay included), push it, receive again, until the
server answers with version ``-1`` (stop). The server receives a push from whichever worker sends
first (gloo's receive from any source), so the order of updates is decided by timing:

* ``async-ps`` (:func:`async_server`; Downpour SGD, Dean et al. 2012; Hogwild!, Recht et al.
  2011, without the shared memory): every push is applied at once with ``lr / W`` and the worker
  gets the new version back. No barrier: the gradient was computed on the version the worker
  pulled, and every update applied since then makes it *stale* by one. After ``S * W`` updates the
  next push of each worker is discarded and answered with stop.
* ``backup`` (:func:`backup_server`; Chen et al. 2016, "Revisiting Distributed Synchronous SGD"):
  step ``s`` keeps the first ``W - b`` pushes computed on version ``s - 1``; their mean is applied
  with ``lr`` and those workers receive version ``s``. A push computed on an older version arrives
  late: it is dropped (a ``dropped`` mark) and its worker receives the current version at once.

The server records every push (a ``recv`` event from its worker, phase ``push``), every update
(an ``apply`` compute event whose ``attrs["grads"]`` lists ``[worker, t, pulled version]`` and
``attrs["version"]`` the version it was applied to), and every reply (a ``send``, phase
``pull``). The order of the ``apply`` events is the order to replay
(:mod:`edu_parallel.async_training.replay_run`): asynchronous runs are not bit-reproducible
from run to run, but a replay of their recorded order is, bit for bit.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ..core.schema import DROPPED_MARK
from ..engine.context import Pending, RankContext, nbytes_of
from .config import AsyncConfig
from .sgd import apply, build, flat_params, line_up, load, mean_of, record_apply, worker_gradient

STOP = -1.0  # the version of a reply that tells a worker to stop


class _Server:
    """The server's parameters, version, replies and the receive-from-anyone of pushes."""

    def __init__(self, ctx: RankContext, config: AsyncConfig):
        self.ctx, self.config = ctx, config
        self.model, self.params = build(config)
        numel = sum(p.numel() for p in self.params)
        self.inbox = torch.empty(numel)
        self.version = 0
        self.pulled: dict[int, int] = {}  # worker -> the version it was last sent
        self.pushes: dict[int, int] = dict.fromkeys(range(config.workers), 0)
        self.outbox: dict[int, tuple[torch.Tensor, Pending]] = {}
        self.stopped: set[int] = set()
        self.dropped = 0

    def reply(self, w: int, stop: bool = False) -> None:
        """Send worker ``w`` the parameters and their version (or stop), without blocking."""
        if w in self.outbox:
            self.outbox[w][1].wait()  # the previous reply's buffer may now be reused
        version = STOP if stop else float(self.version)
        buf = torch.cat([flat_params(self.params), torch.tensor([version])])
        rank = w + 1
        pending = self.ctx.isend(buf, rank, step=self.version, phase="pull")
        self.outbox[w] = (buf, pending)
        self.pulled[w] = self.version
        if stop:
            self.stopped.add(w)

    def receive(self) -> tuple[int, int]:
        """The next push from any worker, into ``inbox``: (worker, its gradient count t)."""
        ctx = self.ctx
        ctx.tracer.where(f"{self.config.mode} server: waiting for a push (version {self.version})")
        start = ctx.tracer.now()
        rank = dist.recv(self.inbox)  # from whichever worker sends first
        w = rank - 1
        self.pushes[w] += 1
        t = self.pushes[w]
        nbytes = nbytes_of(self.inbox)
        ctx.record("recv", "reduce", start, peer=rank, step=t, phase="push", nbytes=nbytes)
        return w, t

    def finish(self) -> dict[str, Any]:
        """Discard one last push of every worker still running and tell it to stop."""
        discarded = 0
        while len(self.stopped) < self.config.workers:
            w, _ = self.receive()
            if w not in self.stopped:
                discarded += 1
                self.reply(w, stop=True)
        for _, pending in self.outbox.values():
            pending.wait()
        return {
            "params": flat_params(self.params),
            "pushes": [self.pushes[w] for w in range(self.config.workers)],
            "dropped": self.dropped,
            "discarded": discarded,
        }


def async_server(ctx: RankContext, config: AsyncConfig) -> dict[str, Any]:
    """Apply every push at once with ``lr / W``; stop after ``S * W`` updates."""
    server = _Server(ctx, config)
    line_up(ctx)
    for w in range(config.workers):
        server.reply(w)
    lr = config.lr / config.workers
    budget = config.steps * config.workers
    for update in range(1, budget + 1):
        w, t = server.receive()
        start = ctx.tracer.now()
        apply(server.params, server.inbox, lr)
        record_apply(ctx, start, update, [[w, t, server.pulled[w]]], server.version)
        server.version += 1
        server.reply(w, stop=update == budget)
        ctx.progress(update, budget)
    return server.finish()


def backup_server(ctx: RankContext, config: AsyncConfig) -> dict[str, Any]:
    """Step with the first ``W - b`` fresh pushes of each step; drop the late ones."""
    server = _Server(ctx, config)
    line_up(ctx)
    for w in range(config.workers):
        server.reply(w)
    kept: list[tuple[int, int, torch.Tensor]] = []
    step = 1
    while step <= config.steps:
        w, t = server.receive()
        if server.pulled[w] != server.version:  # computed on an older version: late
            server.dropped += 1
            ctx.mark(DROPPED_MARK, worker=w, t=t, pulled=server.pulled[w], version=server.version)
            server.reply(w)
            continue
        kept.append((w, t, server.inbox.clone()))
        if len(kept) < config.kept_per_step:
            continue
        start = ctx.tracer.now()
        apply(server.params, mean_of([g for _, _, g in kept]), config.lr)
        grads = [[kw, kt, server.version] for kw, kt, _ in kept]
        record_apply(ctx, start, step, grads, server.version)
        server.version += 1
        for kw, _, _ in kept:
            server.reply(kw, stop=step == config.steps)
        kept.clear()
        ctx.progress(step, config.steps)
        step += 1
    return server.finish()


def ps_worker(ctx: RankContext, config: AsyncConfig) -> dict[str, Any]:
    """Pull, compute, push, until the server says stop."""
    model, params = build(config)
    w = ctx.rank - 1
    inbox = torch.empty(sum(p.numel() for p in params) + 1)
    line_up(ctx)
    t = 0
    while True:
        ctx.recv(inbox, 0, step=t, phase="pull")
        if float(inbox[-1]) == STOP:
            break
        load(params, inbox)
        t += 1
        g = worker_gradient(ctx, config, model, params, w, t)
        ctx.send(g, 0, step=t, phase="push")
    return {"gradients": t}


def server_job(ctx: RankContext, config: AsyncConfig) -> dict[str, Any]:
    """Rank 0 serves (``async-ps`` or ``backup``), the others work."""
    if ctx.rank != 0:
        return ps_worker(ctx, config)
    return async_server(ctx, config) if config.mode == "async-ps" else backup_server(ctx, config)
