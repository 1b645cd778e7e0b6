"""A send/recv exchange that deadlocks, and its two fixes: :func:`exchange`, :func:`run_exchange`.

The ranks pair up, 0 with 1, 2 with 3, ..., and each sends its partner a small tensor and receives
the partner's. The :data:`ORDERS`:

* ``"recv_first"``: both partners call a blocking ``recv`` first, then ``send``. Each waits for a
  message the other will send only after its own receive: a deadlock. (gloo's ``send`` waits, too,
  until the receiver has posted its receive, as a rendezvous protocol does, so "both send first"
  deadlocks the same way.) The cluster stops the job at its timeout, and the engine's diagnosis
  names the cycle from the ranks' flight records (``kind == "deadlock"``, ``cycles``);
* ``"even_sends_first"``: the even rank of each pair sends, then receives; the odd one receives,
  then sends. Every receive has a send already under way: no cycle;
* ``"batched"``: both operations are posted at once with ``torch.distributed.batch_isend_irecv``
  (a list of ``P2POp``) and waited together, so the order no longer matters. The
  :class:`~edu_parallel.engine.context.RankContext` has no batched call: the batch goes to torch
  directly, and this module writes its two entries into the rank's flight record and its trace
  itself (``ctx.isend``/``ctx.irecv`` record theirs), so a batched exchange that hangs is
  diagnosed like the others.

References: the MPI standard's semantics of point-to-point communication (an exchange in which
both sides receive first deadlocks; one that relies on buffered sends is "unsafe"), and Gropp,
Lusk and Skjellum, *Using MPI* (MIT Press), on ordering the sends and receives of an exchange;
``torch.distributed.batch_isend_irecv`` (PyTorch docs, "Point-to-point communication").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ..core.diagnosis import Diagnosis
from ..core.diagnosis_text import explain
from ..core.errors import JobTimeoutError, bad_value, check_choice, check_timeout
from ..core.i18n import _
from ..engine.context import RankContext, dtype_name, nbytes_of

ORDERS = ("recv_first", "even_sends_first", "batched")
SIZE = 4  # elements of the tensor each rank sends
PHASE = "exchange"


@dataclass(frozen=True)
class ExchangeResult:
    """What :func:`run_exchange` saw: ``ok`` when every rank received its partner's tensor.

    ``values``: what each rank received (its first element; rank r sends ``r`` in every element),
    empty when the job did not finish; ``diagnosis``: the engine's finding when it hung."""

    order: str
    ok: bool
    values: tuple[float, ...]
    diagnosis: Diagnosis | None
    message: str
    elapsed_s: float


def partner(rank: int) -> int:
    """The rank ``rank`` exchanges with: 0 <-> 1, 2 <-> 3, ..."""
    return rank ^ 1


def exchange(ctx: RankContext, order: str) -> torch.Tensor:
    """A rank job: swap a tensor of :data:`SIZE` elements with the partner in ``order``; returns
    what arrived (rank r sends ``r`` in every element, the buffer starts at -1)."""
    peer = partner(ctx.rank)
    mine = torch.full((SIZE,), float(ctx.rank))
    got = torch.full((SIZE,), -1.0)
    with ctx.step(0, PHASE):
        if order == "recv_first":
            ctx.recv(got, peer)  # the partner is here too: neither reaches its send
            ctx.send(mine, peer)
        elif order == "even_sends_first":
            if ctx.rank % 2 == 0:
                ctx.send(mine, peer)
                ctx.recv(got, peer)
            else:
                ctx.recv(got, peer)
                ctx.send(mine, peer)
        else:
            batched_exchange(ctx, mine, got, peer)
    return got


def batched_exchange(ctx: RankContext, mine: torch.Tensor, got: torch.Tensor, peer: int) -> None:
    """``dist.batch_isend_irecv([P2POp(isend, mine, peer), P2POp(irecv, got, peer)])``, waited,
    with both operations written into the rank's flight record and trace as ``ctx`` would."""
    flight, start = ctx.tracer.flight, ctx.tracer.now()
    entries = [-1, -1]
    if flight is not None:
        entries = [
            flight.p2p("send", peer, 0, dtype_name(mine), mine.numel()),
            flight.p2p("recv", peer, 0, dtype_name(got), got.numel()),
        ]
    said = _("{phase} step {step}: waiting on batch with rank {peer}")
    ctx.tracer.where(said.format(phase=PHASE, step=0, peer=peer))
    ops = [dist.P2POp(dist.isend, mine, peer), dist.P2POp(dist.irecv, got, peer)]
    for entry, work in zip(entries, dist.batch_isend_irecv(ops), strict=True):
        if flight is not None:
            flight.block(entry)
        work.wait()
        if flight is not None:
            flight.done(entry)
    end = ctx.tracer.now()
    for kind, op, t in (("send", "isend", mine), ("recv", "copy", got)):
        fields: dict[str, Any] = {"peer": peer, "nbytes": nbytes_of(t), "tag": 0}
        ctx.record(kind, op, start, end, step=0, phase=PHASE, **fields)


def run_exchange(cluster: Any, order: str, timeout: float | None = None) -> ExchangeResult:
    """Run :func:`exchange` on every rank of ``cluster`` (an even number of ranks) in ``order``.

    A deadlock (``"recv_first"``) ends at ``timeout`` (default: the cluster's) with the engine's
    diagnosis; the cluster then restarts its ranks on its next job (``cluster.restarts``)."""
    check_choice("order", order, ORDERS)
    limit = None if timeout is None else check_timeout("timeout", timeout)
    n = cluster.world_size
    if n % 2:
        raise bad_value(
            "world_size", n, _("an even number of ranks: they pair up, 0 with 1, 2 with 3, ...")
        )
    t0 = time.perf_counter()
    try:
        run = cluster.run(exchange, order, timeout=limit)
    except JobTimeoutError as err:
        elapsed = time.perf_counter() - t0
        found = err.diagnosis
        why = explain(found) if found is not None else str(err).splitlines()[0]
        said = _("{order}: hung after {seconds} s; {why}").format(
            order=order, seconds=f"{elapsed:.2f}", why=why
        )
        return ExchangeResult(order, False, (), found, said, elapsed)
    elapsed = time.perf_counter() - t0
    got = list(run.results)
    wrong = [r for r, t in enumerate(got) if not torch.equal(t, torch.full_like(t, partner(r)))]
    values = tuple(float(t[0]) for t in got)
    ok = not wrong
    if ok:
        said = _("{order}: every rank received its partner's tensor in {seconds} s").format(
            order=order, seconds=f"{elapsed:.2f}"
        )
    else:
        said = _("{order}: rank {rank} received {got}, not its partner's (rank {peer}'s)").format(
            order=order, rank=wrong[0], got=got[wrong[0]].tolist(), peer=partner(wrong[0])
        )
    return ExchangeResult(order, ok, values, None, said, elapsed)
