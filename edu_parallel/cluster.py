"""A persistent pool of ranks: :class:`Cluster`.

``Cluster(4)`` forks four workers (spawns them where fork is unsafe: CUDA, macOS), joins them in a
``torch.distributed`` group (gloo on CPU, NCCL with one GPU per rank) through a TCPStore that the
parent itself serves on 127.0.0.1, and keeps them alive across many jobs and notebook cells.
``cluster.run(fn, *args)`` runs an importable ``fn(ctx, *args)`` on every rank and returns a
:class:`RunResult`: the per-rank results and the merged :class:`~edu_parallel.trace.Trace`.

Failures become errors that name the rank and its step: a rank that raises (:class:`WorkerError`,
with the remote traceback), a rank that dies, a job that hangs (:class:`JobTimeoutError` naming the
ranks that did not finish). After a failure the workers are stopped and the next ``run`` starts
fresh ones, so the caller can go on. Ctrl-C stops the workers too.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import pickle
import signal
import sys
import time
import weakref
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import wait
from typing import Any

from .errors import (
    ClusterClosedError,
    JobTimeoutError,
    WorkerError,
    bad_value,
    check_choice,
    check_int,
    check_positive,
)
from .trace import Trace
from .worker import STATUS_BYTES, read_status, worker_main

MAX_WORLD_SIZE = 16  # CPU ranks on one machine; more only makes a 2-core laptop crawl
BACKENDS = ("auto", "gloo", "nccl")
START_METHODS = ("auto", "fork", "spawn", "forkserver")
_LIVE: weakref.WeakSet[Cluster] = weakref.WeakSet()


@dataclass
class RunResult:
    """What ``Cluster.run`` returns: one result per rank, the merged trace and the wall time."""

    results: list[Any]
    trace: Trace
    wall_s: float
    job_id: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def merge(
        cls, replies: list[Any], meta: dict[str, Any], wall_s: float, job_id: int = 0
    ) -> RunResult:
        """Join per-rank ``(result, events, snapshots)`` replies into one result and trace."""
        trace = Trace(meta=dict(meta))
        results = []
        for result, events, snapshots in replies:
            results.append(result)
            trace.events.extend(events)
            trace.snapshots.extend(snapshots)
        return cls(results, trace, wall_s, job_id)


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_backend(backend: str, world_size: int) -> str:
    """ "auto" -> NCCL when there is one CUDA device per rank, else gloo; checks that it can run."""
    check_choice("backend", backend, BACKENDS)
    gpus = cuda_device_count() if backend in ("auto", "nccl") else 0
    if backend == "auto":
        return "nccl" if gpus >= world_size else "gloo"
    if backend == "nccl" and gpus < world_size:
        raise bad_value(
            "backend", backend,
            f"'gloo' here: 'nccl' needs one CUDA device per rank ({world_size}), this machine has {gpus}",
        )  # fmt: skip
    return backend


def resolve_start_method(start_method: str, backend: str) -> str:
    """fork on Linux CPU (fast); spawn where fork is unsafe: CUDA, or macOS."""
    check_choice("start_method", start_method, START_METHODS)
    if start_method != "auto":
        return start_method
    if (
        backend == "nccl"
        or sys.platform != "linux"
        or "torch.cuda" in sys.modules
        and _cuda_initialized()
    ):
        return "spawn"
    return "fork"


def _cuda_initialized() -> bool:
    import torch

    return bool(torch.cuda.is_initialized())


_warm = False


def warm_parent() -> None:
    """Pay once, in the parent, for lazy imports that every forked rank would pay on its own.

    The first ``tensor.backward(gradient)`` of a process imports torch's symbolic-shape helpers
    (sympy, about 0.5 s). Four ranks doing that at once on two cores added about 1.5 s to the first
    training job of a cluster (tensor parallelism, pipelines); done before the fork, the ranks
    inherit it and share its memory.
    """
    global _warm
    if not _warm:
        import torch

        _warm = True
        x = torch.zeros(1, requires_grad=True)
        (x * 1.0).backward(torch.ones(1))


def check_importable(fn: Any) -> None:
    """Workers import ``fn`` by name: it must be a top-level function of an importable module."""
    qual = getattr(fn, "__qualname__", "")
    module = getattr(fn, "__module__", None)
    if not callable(fn) or module in (None, "__main__") or "<" in qual:
        raise bad_value(
            "fn", fn,
            "a function defined at the top level of an importable module (workers import it by name; "
            "a notebook or __main__ function cannot be imported by a spawned worker)",
        )  # fmt: skip


class Cluster:
    """``world_size`` live ranks in a ``torch.distributed`` group, reused across jobs.

    Args:
        world_size: ranks, 1..16 (gloo) or 1..number of GPUs (nccl).
        backend: "auto", "gloo" or "nccl".
        timeout: seconds a job may take before :class:`JobTimeoutError` (default 30).
        start_method: "auto" (fork on Linux CPU, spawn for CUDA/macOS), "fork", "spawn", "forkserver".
        port: TCP port of the rendezvous store on 127.0.0.1; None picks a free one.
        snapshot_limit: buffers up to this many bytes per rank are copied into traces.
    """

    def __init__(self, world_size: int = 4, backend: str = "auto", *, timeout: float = 30.0,
                 start_method: str = "auto", port: int | None = None, snapshot_limit: int = 4096):  # fmt: skip
        self.world_size = check_int("world_size", world_size, 1, MAX_WORLD_SIZE)
        self.backend = resolve_backend(backend, self.world_size)
        self.start_method = resolve_start_method(start_method, self.backend)
        self.timeout = check_positive("timeout", timeout)
        self.port = None if port is None else check_int("port", port, 1, 65535)
        self.snapshot_limit = check_int("snapshot_limit", snapshot_limit, 0)
        self.restarts = 0
        self.startup_s = 0.0
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._store: Any = None
        self._job_id = 0
        self._state = "stopped"  # stopped -> running -> (stopped after a failure) | closed
        self._last_failure = ""
        self._start()
        _LIVE.add(self)

    # ------------------------------------------------------------------ lifecycle
    @property
    def alive(self) -> bool:
        return self._state == "running"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def __repr__(self) -> str:
        return (f"Cluster(world_size={self.world_size}, backend={self.backend!r}, "
                f"start_method={self.start_method!r}, state={self._state!r})")  # fmt: skip

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _start(self) -> None:
        import torch.distributed as dist

        t0 = time.perf_counter()
        if self.start_method == "fork":
            warm_parent()
        ctx = mp.get_context(self.start_method)
        self._status = ctx.RawArray("c", STATUS_BYTES * self.world_size)
        # Workers first, store second: no store thread exists in the parent at fork time.
        for rank in range(self.world_size):
            parent_end, child_end = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=worker_main,
                args=(rank, self.world_size, self.backend, child_end, self._status, os.getpid()),
                name=f"edu-parallel-rank{rank}", daemon=True,
            )  # fmt: skip
            proc.start()
            child_end.close()
            self._procs.append(proc)
            self._conns.append(parent_end)
        try:
            # The parent serves the store: a taken port fails here at once instead of leaving
            # store clients waiting forever.
            self._store = dist.TCPStore("127.0.0.1", self.port or 0, self.world_size + 1,
                                        is_master=True, timeout=timedelta(seconds=10),
                                        wait_for_workers=False)  # fmt: skip
        except Exception as exc:
            self._kill()
            if self.port is not None and "in use" in str(exc).lower() or "EADDRINUSE" in str(exc):
                raise bad_value(
                    "port",
                    self.port,
                    "a free TCP port on 127.0.0.1, or None to pick one (this one is in use)",
                ) from None
            raise
        msg = pickle.dumps(("init", self._store.port, self.timeout + 30.0))
        for conn in self._conns:
            conn.send_bytes(msg)
        self._state = "running"
        startup_timeout = max(self.timeout, 60.0 if self.start_method != "fork" else 20.0)
        self._collect(-1, startup_timeout, "joining the process group")
        self.startup_s = time.perf_counter() - t0

    def close(self) -> None:
        """Stop the workers. A closed cluster cannot run jobs; create a new one."""
        if self._state == "closed":
            return
        if self._state == "running":
            for conn in self._conns:
                try:
                    conn.send_bytes(pickle.dumps(("close",)))
                except OSError:
                    pass
            deadline = time.monotonic() + 2.0
            for p in self._procs:
                p.join(max(0.0, deadline - time.monotonic()))
        self._kill()
        self._state = "closed"

    def __del__(self) -> None:  # a notebook cell re-run rebinds `cluster`: stop the old workers
        try:
            if self._state != "closed":
                self._kill()
                self._state = "closed"
        except Exception:
            pass

    def _kill(self) -> None:
        for p in self._procs:
            if p.is_alive():
                p.kill()
        for p in self._procs:
            p.join(5.0)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []
        self._store = None

    def _fail(self, reason: str) -> None:
        """Stop every worker after a failure; the next ``run`` starts fresh ones."""
        self._kill()
        self._state = "stopped"
        self._last_failure = reason

    def where(self, rank: int) -> str:
        """What ``rank`` was last doing (its published step)."""
        return read_status(self._status, rank) or "not started"

    # ------------------------------------------------------------------ jobs
    def run(
        self, fn: Any, *args: Any, timeout: float | None = None, trace: bool = True, **kwargs: Any
    ) -> RunResult:
        """Run ``fn(ctx, *args, **kwargs)`` on every rank; return results and the merged trace."""
        if self._state == "closed":
            raise ClusterClosedError(
                f"this cluster is closed; create a new one: Cluster({self.world_size})"
            )
        check_importable(fn)
        limit = self.timeout if timeout is None else check_positive("timeout", timeout)
        if self._state == "stopped":
            self.restarts += 1
            self._start()
        self._job_id += 1
        t0 = time.perf_counter()
        opts = {"t0": t0, "trace": bool(trace), "snapshot_limit": self.snapshot_limit}
        msg = pickle.dumps(
            ("job", self._job_id, fn, args, kwargs, opts), protocol=pickle.HIGHEST_PROTOCOL
        )
        for conn in self._conns:
            conn.send_bytes(msg)
        replies = self._collect(self._job_id, limit, f"job {fn.__qualname__}")
        meta = {"world_size": self.world_size, "backend": self.backend, "source": "cluster",
                "fn": f"{fn.__module__}.{fn.__qualname__}"}  # fmt: skip
        return RunResult.merge(replies, meta, time.perf_counter() - t0, self._job_id)

    def _collect(self, job_id: int, limit: float, what: str) -> list[Any]:
        """Wait for every rank's reply to ``job_id``; turn failures into errors naming ranks."""
        n = self.world_size
        replies: list[Any] = [None] * n
        pending = set(range(n))
        deadline = time.monotonic() + limit
        by_obj = {c: r for r, c in enumerate(self._conns)} | {
            p.sentinel: r for r, p in enumerate(self._procs)
        }
        try:
            while pending:
                left = deadline - time.monotonic()
                ready = wait(
                    [self._conns[r] for r in pending] + [self._procs[r].sentinel for r in pending],
                    timeout=max(left, 0),
                )
                if not ready:
                    stuck = sorted(pending)
                    where = {r: self.where(r) for r in stuck}
                    done = sorted(set(range(n)) - pending)
                    detail = "; ".join(f"rank {r} at: {w}" for r, w in where.items())
                    self._fail("timeout")
                    raise JobTimeoutError(
                        f"{what} timed out after {limit:g} s: ranks {stuck} did not finish ({detail}); "
                        f"ranks {done} finished. A rank that skips a collective leaves the others waiting. "
                        "The workers were stopped; the next run starts fresh ones.", stuck, where)  # fmt: skip
                for obj in ready:
                    r = by_obj[obj]
                    if r not in pending:
                        continue
                    conn = self._conns[r]
                    if obj is conn or conn.poll():
                        try:
                            reply = pickle.loads(conn.recv_bytes())
                        except (EOFError, OSError):
                            reply = None
                        if reply is not None:
                            self._accept(r, reply, job_id, replies, pending, what)
                            continue
                    self._dead(r, what)
        except KeyboardInterrupt:
            self._fail("interrupted")
            raise
        return replies

    def _accept(
        self, r: int, reply: tuple, job_id: int, replies: list, pending: set, what: str
    ) -> None:
        if reply[0] == "ready" and job_id == -1 or reply[0] == "ok" and reply[1] == job_id:
            replies[r] = reply[2:] if reply[0] == "ok" else reply[1]
            pending.discard(r)
        elif reply[0] == "error":
            _, _, tb, where = reply
            last = tb.strip().splitlines()[-1] if tb.strip() else "error"
            self._fail(f"rank {r} raised")
            raise WorkerError(
                f"rank {r} raised during {what}, at: {where}: {last}. "
                "The workers were stopped; the next run starts fresh ones.", r, where, tb)  # fmt: skip

    def _dead(self, r: int, what: str) -> None:
        proc = self._procs[r]
        proc.join(1.0)
        code = proc.exitcode
        how = f"exit code {code}"
        if code is not None and code < 0:
            how = f"killed by {signal.Signals(-code).name}"
        where = self.where(r)
        self._fail(f"rank {r} died")
        raise WorkerError(
            f"rank {r} died ({how}) during {what}, at: {where}. "
            "The workers were stopped; the next run starts fresh ones.", r, where)  # fmt: skip


@atexit.register
def _close_all() -> None:
    for cluster in list(_LIVE):
        cluster.close()
