"""Parameter-server all-reduce: workers push gradients to servers, then pull the sum back.

The parameter server (Dean et al. 2012, DistBelief "Large Scale Distributed Deep Networks";
Li et al. 2014, "Scaling Distributed Machine Learning with the Parameter Server", OSDI) keeps the
model on server processes: workers push gradients, servers add them (and apply the update), the
workers pull fresh values. Here it is an all-reduce plan of two steps:

* ``push``: every rank sends its shard ``j`` to server ``j``, which adds it (``reduce``);
* ``pull``: server ``j`` sends its summed shard to every other rank (``copy``).

**One server** (``servers=1``, rank 0; the naive version): the buffer is one chunk, so the server
receives ``(N-1)·D`` and sends ``(N-1)·D`` while every other rank moves ``D`` each way: the same
bottleneck as the flat tree of :mod:`edu_parallel.plans.naive`, growing with ``N``.

**Sharded** (``servers=k``, ranks ``0..k-1``; Li et al. 2014 §3 partition the keys over servers
by consistent hashing): the buffer is cut into ``k`` chunks and chunk ``j`` is owned by server
``j``. The load on each server falls ``k``-fold.

The servers are **co-located**: ranks ``0..k-1`` are servers *and* workers, each holding a
gradient of its own, as in a data-parallel job where every GPU hosts a shard (BytePS and
MXNet-kvstore style). So server ``j`` receives ``(N-1)·D/k`` for its own shard, plus ``(k-1)·D/k``
of the other shards it pulls as a worker, and sends the same; a pure worker moves ``D`` each way:

    server: (N + k - 2)/k · D sent and received        worker: D sent and received

With ``k = N`` every rank is a server and moves ``2(N-1)/N·D``: exactly the ring's volume, in 2
steps instead of ``2(N-1)`` but with ``N-1`` messages per rank per step (an all-to-all pattern).
Dedicated servers (not modelled here) would receive ``N_workers·D/k`` each.
"""

from __future__ import annotations

from ..core.dims import ParallelDims
from ..core.errors import check_int
from .plan import MAX_PLAN_RANKS, Plan, Step, Transfer, plan_ranks


def parameter_server_plan(world_size: int | ParallelDims, servers: int = 1) -> Plan:
    """Push shard ``j`` to server ``j`` (reduce), then pull every shard back (copy)."""
    n = plan_ranks(world_size)
    return _ps_plan(n, check_int("servers", servers, 1, n))


def _ps_plan(n: int, k: int) -> Plan:
    """The plan of ``k`` servers among ``n`` ranks, both checked by the caller."""
    push = tuple(Transfer(r, j, j, "reduce") for r in range(n) for j in range(k) if r != j)
    pull = tuple(Transfer(j, r, j, "copy") for j in range(k) for r in range(n) if r != j)
    steps = (Step("push", push), Step("pull", pull)) if n > 1 else ()
    name = "parameter_server_allreduce" if k == 1 else f"sharded_ps{k}_allreduce"
    return Plan(name, "all_reduce", n, k, steps)


def sharded_parameter_server_plan(world_size: int | ParallelDims, servers: int = 2) -> Plan:
    """The sharded parameter server with ``min(servers, world_size)`` servers (default 2)."""
    n = plan_ranks(world_size)
    return _ps_plan(n, min(check_int("servers", servers, 1, MAX_PLAN_RANKS), n))


def ps_bytes_formula(world_size: int, nbytes: int, servers: int = 1) -> dict[str, list[float]]:
    """Bytes each rank sends and receives: servers ``(N+k-2)/k·D``, workers ``D``."""
    n = check_int("world_size", world_size, 1, MAX_PLAN_RANKS)
    k = check_int("servers", servers, 1, n)
    if n == 1:
        return {"sent": [0.0], "recv": [0.0]}
    per_rank = [(n + k - 2) / k * nbytes if r < k else float(nbytes) for r in range(n)]
    return {"sent": per_rank, "recv": list(per_rank)}
