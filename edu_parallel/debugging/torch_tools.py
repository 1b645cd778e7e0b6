"""Torch's own tools for a hung or mismatched job, run on gloo here as a learner would on a cluster.

* :func:`monitored_barrier_text`: ``torch.distributed.monitored_barrier(timeout=...)`` (gloo only)
  is a barrier whose rank 0 collects every other rank's arrival, one by one, and raises naming the
  rank that did not arrive in time; the other ranks raise too, saying to read rank 0's log. Here
  one rank skips it on purpose and the function returns torch's own message;
* :func:`fingerprint_text`: with ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (or
  ``torch.distributed.set_debug_level(DebugLevel.DETAIL)``) a process group created then is
  wrapped (``ProcessGroupWrapper``): before each collective, the ranks all-gather its
  "fingerprint" (operation, tensor shapes, dtypes, devices, sequence number) on a helper gloo group
  and raise "Detected mismatch between collectives on ranks ..." if they differ. Here rank 0 calls
  another collective (or another size) than the others, and the function returns torch's message.

Both run on a fresh group of their own (``dist.new_group(backend="gloo")``), destroyed afterwards:
a failed monitored barrier leaves its group's connections closed, and the debug level applies only
to groups created while it is set. The cluster's default group is untouched, and the cluster runs
its next job on the same ranks. What gloo logs on file descriptor 2 while the tool fails (its
``ProcessGroupGloo.cpp`` error line) is held and dropped, since the message returned says it.

References: PyTorch docs, "Distributed communication package", sections "Debugging
torch.distributed applications" (``monitored_barrier``, ``TORCH_DISTRIBUTED_DEBUG``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..core.errors import bad_value, check_choice, check_int, check_positive
from ..core.i18n import _
from ..engine.context import RankContext

MISMATCHES = ("op", "size")  # all_gather against all_reduce; all_reduce of 4 against 8 elements
MAX_BARRIER_S = 10.0  # a monitored barrier's timeout, at most: the job waits that long


@contextlib.contextmanager
def held_stderr() -> Iterator[None]:
    """Hold what C++ code writes to file descriptor 2 during the block, then drop it."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as held:
            os.dup2(held.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def barrier_job(ctx: RankContext, missing: int, timeout_s: float) -> str:
    """A rank job: every rank but ``missing`` enters a monitored barrier of ``timeout_s`` on a
    fresh gloo group; returns the text of the error the rank got ("" for none)."""
    # its own timeout too: a rank's send to rank 0, which waits until rank 0 receives, then
    # fails after timeout_s, and not after the cluster's group timeout
    wait = timedelta(seconds=timeout_s)
    group = dist.new_group(backend="gloo", timeout=wait)
    text = ""
    try:
        if ctx.rank != missing:
            ctx.tracer.where("monitored_barrier")
            with held_stderr():
                try:
                    dist.monitored_barrier(group=group, timeout=wait)
                except RuntimeError as err:
                    text = str(err)
    finally:
        # the missing rank keeps its end of the group open until the others have timed out:
        # a rank that closed it would fail their wait at once, with "Connection reset by peer"
        ctx.barrier()
        dist.destroy_process_group(group)
    return text


def monitored_barrier_text(cluster: Any, missing: int, timeout_s: float = 1.0) -> str:
    """Torch's own error when rank ``missing`` skips ``monitored_barrier``: the message rank 0
    raised (it names the missing rank); when rank 0 is the one missing, the lowest other rank's
    (it names rank 0 as the rank it waited for). Takes about ``timeout_s``."""
    n = cluster.world_size
    if n < 2:
        raise bad_value("world_size", n, _("at least 2 ranks: one skips the barrier"))
    check_int("missing", missing, 0, n - 1)
    wait = check_positive("timeout_s", timeout_s)
    if wait > MAX_BARRIER_S:
        valid = _("a number of seconds in (0, {most}]").format(most=f"{MAX_BARRIER_S:g}")
        raise bad_value("timeout_s", timeout_s, valid)
    run = cluster.run(barrier_job, missing, wait, timeout=max(cluster.timeout, wait + 10.0))
    texts: list[str] = run.results
    first = next((t for t in texts if t), "")
    return texts[0] or first


def fingerprint_job(ctx: RankContext, mismatch: str) -> str:
    """A rank job: on a group created under ``DebugLevel.DETAIL``, rank 0 calls ``all_gather``
    (``mismatch="op"``) or an ``all_reduce`` of twice the elements (``"size"``) while the other
    ranks call ``all_reduce`` of 4; returns the text of the error the rank got ("" for none)."""
    was = dist.get_debug_level()
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    try:
        group = dist.new_group(backend="gloo")  # wrapped: the fingerprint check
    finally:
        dist.set_debug_level(was)
    text = ""
    try:
        x = torch.ones(4)
        ctx.tracer.where("fingerprint check")
        with held_stderr():
            try:
                if ctx.rank == 0 and mismatch == "op":
                    out = [torch.empty(4) for _r in range(ctx.world_size)]
                    dist.all_gather(out, x, group=group)
                elif ctx.rank == 0:
                    dist.all_reduce(torch.ones(8), group=group)
                else:
                    dist.all_reduce(x, group=group)
            except RuntimeError as err:
                text = str(err)
    finally:
        dist.destroy_process_group(group)
    return text


def fingerprint_text(cluster: Any, mismatch: str = "op") -> str:
    """Torch's own error when rank 0 calls another collective (``mismatch="op"``: all_gather
    against all_reduce) or another size (``"size"``) than the others, on a group created under
    ``TORCH_DISTRIBUTED_DEBUG=DETAIL``: rank 0's message, which names both sides."""
    check_choice("mismatch", mismatch, MISMATCHES)
    if cluster.world_size < 2:
        raise bad_value(
            "world_size", cluster.world_size, _("at least 2 ranks: rank 0 differs from the others")
        )
    texts: list[str] = cluster.run(fingerprint_job, mismatch).results
    return texts[0] or next((t for t in texts if t), "")
