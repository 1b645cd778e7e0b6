"""A persistent pool of ranks: :class:`Cluster`.

``Cluster(4)`` forks four workers (spawns them where fork is unsafe: CUDA, macOS), joins them in a
``torch.distributed`` group (gloo on CPU, NCCL with one GPU per rank) through a ``FileStore`` in
a private temporary folder (mode 0700, removed at close), so the rendezvous opens no network
listener at all (torch's ``TCPStore`` binds every interface whatever host it is given); gloo's own
connections stay on the loopback interface (``GLOO_SOCKET_IFNAME``). It keeps the ranks alive across
many jobs and notebook cells.
``cluster.run(fn, *args)`` runs an importable ``fn(ctx, *args)`` on every rank and returns a
:class:`RunResult`: the per-rank results and the merged :class:`~edu_parallel.core.trace.Trace`.

Failures become errors that name the rank and its step: a rank that raises (:class:`WorkerError`,
with the remote traceback), a rank that dies, a job that hangs (:class:`JobTimeoutError` naming the
ranks that did not finish). After a failure the workers are stopped and the next ``run`` starts
fresh ones, so the caller can go on. Ctrl-C stops the workers too.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing as mp
import os
import pickle
import re
import shutil
import signal
import time
import weakref
from collections.abc import Iterator
from multiprocessing.connection import wait
from typing import Any

from ..core.diagnosis import Diagnosis, diagnose
from ..core.diagnosis_text import explain, wait_clause
from ..core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from ..core.errors import (
    ClusterClosedError,
    CollectiveMismatchError,
    EngineError,
    JobTimeoutError,
    WorkerError,
    bad_value,
    check_bool,
    check_int,
    check_timeout,
)
from ..core.i18n import _, get_language
from ..core.trace import SNAPSHOT_LIMIT
from .executor import RunResult, check_importable, job_meta
from .failures import (
    closed_message,
    died_message,
    job_label,
    joining_label,
    mismatch_message,
    raised_message,
    timeout_message,
)
from .flight import FLIGHT_BYTES, read_record
from .messages import Close, Done, Failed, Init, Job, Ready
from .platform import process_stopped, resolve_backend, resolve_start_method
from .progress import Progress, ProgressWatch, watch_progress
from .status import STATUS_BYTES, read_pulse, read_status
from .store import make_store_dir, sweep_stale
from .worker import worker_main

PULSE_S = 0.25  # how often the watchdog and the progress read the ranks' counters while they wait
MAX_WORLD_SIZE = MAX_LOCAL_WORLD_SIZE  # the engine's name for core/dims.py's limit (public API)
_LIVE: weakref.WeakSet[Cluster] = weakref.WeakSet()


# gloo's words on a rank whose peer's process ended mid-operation
_PEER_GONE = re.compile(r"Connection (closed|reset) by peer|Broken pipe|Connection refused")
PEER_GONE_S = 0.5  # how long a rank's "peer gone" error waits for the parent to see the death


class Cluster:
    """``world_size`` live ranks in a ``torch.distributed`` group, reused across jobs.

    Args:
        world_size: ranks, 1..MAX_LOCAL_WORLD_SIZE (gloo) or 1..number of GPUs (nccl), or the
            run's :class:`~edu_parallel.core.dims.ParallelDims` (validated already: trusted).
        backend: "auto", "gloo" or "nccl".
        timeout: seconds a job may take before :class:`JobTimeoutError` (default 30); with
            ``watchdog``, seconds a job may go without any rank making progress.
        start_method: "auto" (fork on Linux CPU, spawn for CUDA/macOS), "fork" or "spawn".
        snapshot_limit: buffers up to this many bytes per rank are copied into traces
            (default :data:`~edu_parallel.core.trace.SNAPSHOT_LIMIT`).
        watchdog: the timeout counts from the last progress of any rank (a published step, a
            send, a receive, a collective), as NCCL's watchdog counts per operation, not from
            the job's start: a long run that keeps stepping finishes, and a stalled one is
            stopped ``timeout`` seconds after its last step. The command line's runs use it; a
            job that must end in a bounded time (an exercise's case) does not.
        progress: ``progress(done, total)``, called while a job runs with the slowest rank's
            ``ctx.progress`` counters when they change, and with ``(total, total)`` when it
            ends (``progress.py``); the command line draws a bar with it. None: nothing.
        check_collectives: before each blocking collective issued through ``ctx``, the ranks
            of its group compare its operation, dtype and element count in shared memory, and
            a mismatch raises :class:`CollectiveMismatchError` naming every side, before gloo
            aborts a rank or returns a wrong answer (``flight.py``; its cost:
            ``benchmarks/bench_collective_check.py``). False: no comparison, for speed.

    Every failure carries a :class:`~edu_parallel.core.diagnosis.Diagnosis` (``err.diagnosis``)
    read from the ranks' flight records: which rank is at fault, and why.
    """

    def __init__(
        self,
        world_size: int | ParallelDims = 4,
        backend: str = "auto",
        *,
        timeout: float = 30.0,
        start_method: str = "auto",
        snapshot_limit: int = SNAPSHOT_LIMIT,
        watchdog: bool = False,
        progress: Progress | None = None,
        check_collectives: bool = True,
    ):
        if mp.current_process().daemon:  # a rank: multiprocessing refuses it children
            raise EngineError(
                _(
                    "a Cluster cannot start inside a job: the job runs on a rank, and a rank"
                    " cannot start ranks of its own; create the Cluster in the notebook or"
                    " script, and pass the job what it needs"
                )
            )
        self.dims = local_dims(world_size)
        self.world_size = self.dims.world_size
        self.backend = resolve_backend(backend, self.world_size)
        self.start_method = resolve_start_method(start_method, self.backend)
        self.timeout = check_timeout("timeout", timeout)
        self.snapshot_limit = check_int("snapshot_limit", snapshot_limit, 0)
        self.watchdog = check_bool("watchdog", watchdog)
        self.check_collectives = check_bool("check_collectives", check_collectives)
        if progress is not None and not callable(progress):
            raise bad_value("progress", progress, _("a function progress(done, total), or None"))
        self.progress = progress
        self.restarts = 0
        self.startup_s = 0.0
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._store_dir: str | None = None
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
    def closed(self) -> bool:
        """True after :meth:`close`: the cluster cannot run jobs any more."""
        return self._state == "closed"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def __repr__(self) -> str:
        return (
            f"Cluster(world_size={self.world_size}, backend={self.backend!r}, "
            f"start_method={self.start_method!r}, state={self._state!r})"
        )

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _start(self) -> None:
        t0 = time.perf_counter()
        ctx = mp.get_context(self.start_method)
        self._status = ctx.RawArray("c", STATUS_BYTES * self.world_size)
        self._flight = ctx.RawArray("c", FLIGHT_BYTES * self.world_size)  # flight.py
        sweep_stale()  # the stores of clusters whose parent was killed before it could close
        self._store_dir = make_store_dir()  # per start: a FileStore must not outlive its group
        init = pickle.dumps(Init(os.path.join(self._store_dir, "store"), self.timeout + 30.0))
        for rank in range(self.world_size):
            parent_end, child_end = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=worker_main,
                args=(
                    rank,
                    self.world_size,
                    self.backend,
                    child_end,
                    self._status,
                    os.getpid(),
                    self._flight,
                ),
                name=f"edu-parallel-rank{rank}",
                daemon=True,
            )
            proc.start()
            child_end.close()
            self._procs.append(proc)
            self._conns.append(parent_end)
        for conn in self._conns:
            conn.send_bytes(init)
        self._state = "running"
        startup_timeout = max(self.timeout, 60.0 if self.start_method != "fork" else 20.0)
        self._collect(-1, startup_timeout, joining_label())
        self.startup_s = time.perf_counter() - t0

    def close(self) -> None:
        """Stop the workers. A closed cluster cannot run jobs; create a new one."""
        if self._state == "closed":
            return
        if self._state == "running":
            for conn in self._conns:
                try:
                    conn.send_bytes(pickle.dumps(Close()))
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
            if p.pid is not None:  # the rank's own group: what its jobs started (worker.py)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, signal.SIGKILL)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []
        if self._store_dir is not None:
            shutil.rmtree(self._store_dir, ignore_errors=True)
            self._store_dir = None

    def _fail(self, reason: str) -> None:
        """Stop every worker after a failure; the next ``run`` starts fresh ones."""
        self._kill()
        self._state = "stopped"
        self._last_failure = reason

    def where(self, rank: int) -> str:
        """What ``rank`` was last doing (its published step)."""
        return read_status(self._status, rank) or _("not started")

    def probe(self, ranks: list[int]) -> dict[int, str]:
        """The Python line (``file:line in function`` of the caller's own code) each of ``ranks``
        runs now, from its heartbeat (``flight.py``), for the ranks that are not waiting in a
        send, a receive or a collective issued through ``ctx``."""
        records = [read_record(self._flight, r, self.world_size) for r in ranks]
        return {
            rec.rank: rec.line
            for rec in records
            if rec.line and (rec.blocked is None or rec.blocked.done)
        }

    def diagnose(
        self,
        finished: list[int] | set[int] = (),  # type: ignore[assignment]
        dead: dict[int, int | None] | None = None,
        timeout_s: float = 0.0,
    ) -> Diagnosis:
        """Which rank is at fault in the job now running or just failed, and why, from every
        rank's flight record (:func:`~edu_parallel.core.diagnosis.diagnose`)."""
        n = self.world_size
        records = [read_record(self._flight, r, n) for r in range(n)]
        stopped = frozenset(
            r for r, p in enumerate(self._procs) if r not in (dead or {}) and process_stopped(p.pid)
        )
        return diagnose(
            records,
            time.time(),
            finished=frozenset(finished),
            dead=dead,
            stopped=stopped,
            timeout_s=timeout_s,
        )

    # ------------------------------------------------------------------ jobs
    def sized(self, world_size: int) -> contextlib.AbstractContextManager[Cluster]:
        """This cluster when it has ``world_size`` ranks, else a short-lived one of that size
        (same backend and timeout; about 0.1 s to start with fork), closed after the block."""
        return self._sized(world_size)

    @contextlib.contextmanager
    def _sized(self, world_size: int) -> Iterator[Cluster]:
        if world_size == self.world_size:
            yield self
            return
        with Cluster(
            world_size,
            self.backend,
            timeout=self.timeout,
            watchdog=self.watchdog,
            progress=self.progress,
        ) as other:
            yield other

    def run(
        self, fn: Any, *args: Any, timeout: float | None = None, trace: bool = True, **kwargs: Any
    ) -> RunResult:
        """Run ``fn(ctx, *args, **kwargs)`` on every rank; return results and the merged trace."""
        if self._state == "closed":
            raise ClusterClosedError(closed_message(self.world_size))
        check_importable(fn)
        limit = self.timeout if timeout is None else check_timeout("timeout", timeout)
        if self._state == "stopped":
            self.restarts += 1
            self._start()
        self._job_id += 1
        t0 = time.perf_counter()
        job = Job(
            self._job_id,
            fn,
            args,
            kwargs,
            t0,
            bool(trace),
            self.snapshot_limit,
            get_language(),
            self.check_collectives,
        )
        msg = job_bytes(job, args, kwargs)
        shown = watch_progress(self._status, self.world_size, self.progress)
        for conn in self._conns:
            conn.send_bytes(msg)
        outputs = self._collect(self._job_id, limit, job_label(fn.__qualname__), shown)
        if shown is not None:
            shown.finish()
        meta = job_meta(self, fn, "cluster")
        return RunResult.merge(outputs, meta, time.perf_counter() - t0, self._job_id)

    def _collect(
        self, job_id: int, limit: float, what: str, shown: ProgressWatch | None = None
    ) -> list[Any]:
        """Wait for every rank's reply to ``job_id``; turn failures into errors naming ranks;
        ``shown``: the job's progress, polled while it waits."""
        n = self.world_size
        replies: list[Any] = [None] * n
        pending = set(range(n))
        deadline = time.monotonic() + limit
        # the watchdog: every pulse of a pending rank (a step, a message, a collective) moves
        # the deadline; a job stops only after `limit` seconds in which no rank moved
        watch = self.watchdog and job_id >= 0
        beats = [read_pulse(self._status, r) for r in range(n)] if watch else []
        pulse = watch or shown is not None  # wake every PULSE_S to read the ranks' counters
        by_obj = {c: r for r, c in enumerate(self._conns)} | {
            p.sentinel: r for r, p in enumerate(self._procs)
        }
        try:
            while pending:
                left = deadline - time.monotonic()
                ready = wait(
                    [self._conns[r] for r in pending] + [self._procs[r].sentinel for r in pending],
                    timeout=min(max(left, 0), PULSE_S) if pulse else max(left, 0),
                )
                if shown is not None:
                    shown.poll()
                if not ready:
                    now = [read_pulse(self._status, r) for r in range(n)] if watch else beats
                    if now != beats:
                        beats, deadline = now, time.monotonic() + limit
                    if time.monotonic() < deadline:
                        continue
                    stuck = sorted(pending)
                    where = {r: self.where(r) for r in stuck}
                    lines = self.probe(stuck) if job_id >= 0 else {}
                    done = sorted(set(range(n)) - pending)
                    found = self.diagnose(done, timeout_s=limit) if job_id >= 0 else None
                    self._fail("timeout")
                    said = explain(found) if found is not None else ""
                    raise JobTimeoutError(
                        timeout_message(what, limit, watch, where, lines, done, said),
                        stuck,
                        where,
                        lines,
                        found,
                    )
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
                    self._dead(r, what, set(range(n)) - pending)
        except KeyboardInterrupt:
            self._fail("interrupted")
            raise
        return replies

    def _accept(
        self, r: int, reply: Any, job_id: int, replies: list, pending: set, what: str
    ) -> None:
        """Take rank ``r``'s reply: :class:`Ready` while joining (``job_id == -1``), then
        :class:`Done` for this job; :class:`Failed` becomes a :class:`WorkerError`."""
        if isinstance(reply, Ready) and job_id == -1:
            replies[r] = reply.pid
            pending.discard(r)
        elif isinstance(reply, Done) and reply.job_id == job_id:
            replies[r] = reply.output
            pending.discard(r)
        elif isinstance(reply, Failed):
            tb = reply.traceback
            last = tb.strip().splitlines()[-1] if tb.strip() else _("error")
            if "CollectiveMismatch" in last and job_id >= 0:
                self._mismatch(r, reply.where, set(range(self.world_size)) - pending)
            if _PEER_GONE.search(last):  # a peer's death reached rank r first: name the dead one
                gone = self._first_dead(pending - {r})
                if gone is not None:
                    self._dead(gone, what, set(range(self.world_size)) - pending)
            self._fail(f"rank {r} raised")
            raise WorkerError(
                raised_message(r, what, reply.where, last),
                r,
                reply.where,
                tb,
            )

    def _mismatch(self, r: int, where: str, finished: set[int]) -> None:
        """Rank ``r`` found that its group disagrees on a collective: name every side."""
        found = self.diagnose(finished)
        for _try in range(10):  # the group's other ranks find it within microseconds: name them all
            seen = {q for ranks, _op in found.sides for q in ranks}
            if found.kind != "mismatch" or found.op is None or seen >= set(found.op.group):
                break
            time.sleep(0.02)
            found = self.diagnose(finished)
        if found.kind != "mismatch":
            return
        self._fail("collective mismatch")
        raise CollectiveMismatchError(mismatch_message(explain(found)), r, where, None, found)

    def _first_dead(self, ranks: set[int]) -> int | None:
        """The first of ``ranks`` whose process has ended, waiting up to :data:`PEER_GONE_S` for
        one (a rank killed mid-collective closes its sockets as it dies: its peers' gloo sees it
        a moment before the parent does)."""
        deadline = time.monotonic() + PEER_GONE_S
        while True:
            gone = [q for q in sorted(ranks) if not self._procs[q].is_alive()]
            if gone or time.monotonic() > deadline:
                return gone[0] if gone else None
            time.sleep(0.01)

    def _dead(self, r: int, what: str, finished: set[int]) -> None:
        proc = self._procs[r]
        proc.join(1.0)
        where = self.where(r)
        found = self.diagnose(finished, {r: proc.exitcode})
        if found.kind == "mismatch":  # gloo aborted a rank that met a mismatched collective
            self._fail("collective mismatch")
            said = mismatch_message(explain(found), aborted=r)
            raise CollectiveMismatchError(said, r, where, None, found)
        self._fail(f"rank {r} died")
        said = died_message(r, proc.exitcode, what, where, wait_clause(found, self.world_size))
        raise WorkerError(said, r, where, None, found)


@atexit.register
def _close_all() -> None:
    for cluster in list(_LIVE):
        cluster.close()


def job_bytes(job: Job, args: tuple, kwargs: dict[str, Any]) -> bytes:
    """``job`` pickled for the ranks; an argument that cannot be sent is named, with why."""
    try:
        return pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
    except (TypeError, AttributeError, pickle.PicklingError) as err:
        named = [(_("argument {n}").format(n=i + 1), v) for i, v in enumerate(args)]
        named += [(_("argument {name}=").format(name=k), v) for k, v in kwargs.items()]
        for label, value in named:
            try:
                pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as why:  # noqa: BLE001 - the first one that fails is the culprit
                raise TypeError(
                    _(
                        "{label} of the job ({kind}) cannot be sent to the ranks: {why}. A job's"
                        " arguments travel to other processes by pickle: pass data (numbers,"
                        " lists, tensors) and create locks, files or sockets inside the job"
                    ).format(label=label, kind=type(value).__name__, why=why)
                ) from None
        raise TypeError(_("the job cannot be sent to the ranks: {why}").format(why=err)) from None


def local_dims(world_size: int | ParallelDims) -> ParallelDims:
    """The degrees of a run on this machine: at most :data:`MAX_LOCAL_WORLD_SIZE` ranks.

    A :class:`ParallelDims` validated against that limit (``ParallelDims.local``: the CLI builds
    one) is trusted and taken as it is. One built without the limit (a planner's, torchrun's)
    keeps its degrees and has its world size checked against the limit only, the one thing not
    yet checked. A plain int is checked once, here."""
    if not isinstance(world_size, ParallelDims):
        return ParallelDims.local(world_size)
    top = world_size.max_world_size
    if top is None or top > MAX_LOCAL_WORLD_SIZE:
        check_int("world_size", world_size.world_size, 1, MAX_LOCAL_WORLD_SIZE)
    return world_size
