"""Run the same concept functions under ``torchrun``, on an existing ``env://`` group.

``torchrun --standalone --nproc-per-node 2 -m edu_parallel run ring --size 1MiB`` starts two
processes; each builds a :class:`TorchrunExecutor`, which joins the group torchrun describes
(``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), runs the function on its rank and
gathers results and events on rank 0. Rank 0 prints and writes the trace; the others return None.
This is the path from a laptop to a real multi-GPU cluster: the concept code does not change.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import Any, NoReturn

import torch
import torch.distributed as dist

from ..core.diagnosis import Diagnosis, diagnose
from ..core.diagnosis_text import explain
from ..core.dims import ParallelDims
from ..core.errors import EngineError, JobTimeoutError, bad_value, check_timeout
from ..core.i18n import _
from .context import RankContext, Tracer, rank_output
from .executor import TORCHRUN_VARS, RunResult, check_importable, job_meta, torchrun_dims
from .failures import job_label, timeout_message, torchrun_ending
from .flight import FLIGHT_BYTES, MAX_RANKS, FlightRecorder, read_slots
from .platform import resolve_backend

_POLL_S = 0.05  # how often a rank that returned looks in the store for the others, or a failure
_KEY = "edu_parallel/flight"  # the store's keys: {_KEY}/{job}/{rank} (slot), .../done/{rank}


@contextmanager
def _cpp_stderr_held() -> Iterator[None]:
    """Hold what C++ code writes to file descriptor 2 during the block (c10d logs a failed
    connect with a C++ stack trace); replay it if the block succeeds, drop it if it raises,
    since the error that follows says what happened in one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            raise
        else:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
        finally:
            os.close(saved)


class TorchrunExecutor:
    """The :class:`~edu_parallel.engine.executor.Executor` of a process that is one rank of a
    torchrun job. ``dims`` (default: from ``WORLD_SIZE``) are the run's validated degrees.

    Up to :data:`~edu_parallel.engine.flight.MAX_RANKS` ranks, each keeps a flight record
    (``flight.py``) and its heartbeat sends it to the launcher's store every half second; a rank
    whose collective or receive times out (gloo's ``timeout``) reads every rank's record there and
    raises :class:`JobTimeoutError` with the :class:`~edu_parallel.core.diagnosis.Diagnosis`, as a
    :class:`~edu_parallel.engine.cluster.Cluster` does. A rank that returns says so in the store
    and waits there for the others before results are gathered, so a rank that skipped a
    collective is named rather than meeting the others' collective with the gather's."""

    def __init__(
        self, backend: str = "auto", timeout: float = 30.0, dims: ParallelDims | None = None
    ):
        self.dims = torchrun_dims() if dims is None else dims
        self.world_size = self.dims.world_size
        self.rank = int(os.environ["RANK"])
        self.timeout = check_timeout("timeout", timeout)
        self.restarts = 0  # as a Cluster counts them: a torchrun rank is never restarted
        self.startup_s = 0.0
        local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        # One GPU per local rank is what matters on a multi-node job.
        local = int(os.environ.get("LOCAL_WORLD_SIZE", self.world_size))
        self.backend = resolve_backend(backend, min(self.world_size, local))
        self.device = (
            torch.device("cuda", local_rank)
            if self.backend == "nccl" and gpus
            else torch.device("cpu")
        )
        if self.backend == "nccl":
            torch.cuda.set_device(self.device)
        if not dist.is_initialized():
            try:
                with _cpp_stderr_held():
                    dist.init_process_group(
                        self.backend, init_method="env://", timeout=timedelta(seconds=self.timeout)
                    )
            except (RuntimeError, TimeoutError) as exc:  # DistNetworkError, DistStoreError
                where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
                raise EngineError(
                    _(
                        "rank {rank} of {world_size} could not join the torchrun group at {where}"
                        " within {seconds} s ({error}). The variables {names} make edu-parallel"
                        " one rank of a torchrun job; if they are left over from another job, run"
                        " `{unset}` and try again"
                    ).format(
                        rank=self.rank,
                        world_size=self.world_size,
                        where=where,
                        seconds=f"{self.timeout:g}",
                        error=type(exc).__name__,
                        names=", ".join(TORCHRUN_VARS),
                        unset="unset " + " ".join(TORCHRUN_VARS),
                    )
                ) from None
        self._start_flight()

    def _start_flight(self) -> None:
        self._job = 0
        self.flight: FlightRecorder | None = None
        if self.world_size > MAX_RANKS:
            return
        self._store = dist.distributed_c10d._get_default_store()
        self.flight = FlightRecorder(
            bytearray(FLIGHT_BYTES * self.world_size), self.rank, self.world_size
        )
        self.flight.start_heartbeat(self._publish)

    def _publish(self, slot: bytes) -> None:
        self._store.set(f"{_KEY}/{self._job}/{self.rank}", slot)

    def run(self, fn: Any, *args: Any, trace: bool = True, **kwargs: Any) -> RunResult | None:
        """Run ``fn(ctx, *args)`` on this rank; rank 0 gets every rank's results and events."""
        check_importable(fn)
        dist.barrier()
        t0 = time.perf_counter()
        tracer = Tracer(self.rank, t0, trace)
        self._job += 1
        if self.flight is not None:
            self.flight.reset(self._job)
            tracer.flight = self.flight
        ctx = RankContext(self.rank, self.world_size, self.backend, self.device, tracer)
        try:
            output = rank_output(ctx, fn(ctx, *args, **kwargs))
        except RuntimeError as err:
            if self.flight is None or "timed out" not in str(err).lower():
                raise
            raise self._timed_out(fn) from None
        self._all_returned(fn)
        gathered: list[Any] | None = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object(output, gathered, dst=0)
        if self.rank != 0:
            return None
        meta = job_meta(self, fn, "torchrun")
        return RunResult.merge(gathered, meta, time.perf_counter() - t0)

    def _all_returned(self, fn: Any) -> None:
        """Say in the store that this rank returned, and wait there until every rank has; when
        another rank's operation timed out meanwhile (it says so in the store), raise the same
        :class:`JobTimeoutError`, read from the same records: every rank names the culprit."""
        if self.flight is None:
            return
        self._publish(self.flight.slot())
        self._store.set(f"{_KEY}/{self._job}/done/{self.rank}", b"1")
        keys = [f"{_KEY}/{self._job}/done/{r}" for r in range(self.world_size)]
        failed = [f"{_KEY}/{self._job}/failed"]
        deadline = time.monotonic() + self.timeout + 10
        while not self._store.check(keys):
            if self._store.check(failed):
                raise self._timed_out(fn)
            if time.monotonic() > deadline:
                raise self._timed_out(fn)
            time.sleep(_POLL_S)

    def _timed_out(self, fn: Any) -> JobTimeoutError:
        """The diagnosis of a job whose operation timed out on this rank, from every rank's
        record in the store (this rank's own read here, the freshest)."""
        assert self.flight is not None
        self._store.set(f"{_KEY}/{self._job}/failed", b"1")  # the ranks that returned: stop waiting
        finished = {
            r for r in range(self.world_size) if self._store.check([f"{_KEY}/{self._job}/done/{r}"])
        }
        found = self.diagnose(finished, timeout_s=self.timeout)
        stuck = sorted(set(range(self.world_size)) - finished)
        what = job_label(getattr(fn, "__qualname__", str(fn)))
        said = timeout_message(
            what, self.timeout, False, {}, {}, sorted(finished), explain(found), torchrun_ending()
        )
        return JobTimeoutError(said, stuck, {}, {}, found)

    def diagnose(
        self,
        finished: list[int] | set[int] | range = (),  # type: ignore[assignment]
        timeout_s: float = 0.0,
    ) -> Diagnosis:
        """Which rank is at fault in the job now running or just ended, and why, from every
        rank's record in the store (this rank's own read here, the freshest)."""
        assert self.flight is not None
        slots = {self.rank: self.flight.slot()}
        for r in range(self.world_size):
            key = f"{_KEY}/{self._job}/{r}"
            if r != self.rank and self._store.check([key]):
                slots[r] = self._store.get(key)
        records = read_slots(slots, self.world_size)
        return diagnose(records, time.time(), finished=frozenset(finished), timeout_s=timeout_s)

    def sized(self, world_size: int) -> AbstractContextManager[TorchrunExecutor]:
        """This executor: torchrun fixed the world size, so another one is an error."""
        if world_size != self.world_size:
            raise bad_value(
                "world_size",
                world_size,
                _("{n}, the world size torchrun started").format(n=self.world_size),
            )
        return self._same()

    @contextmanager
    def _same(self) -> Iterator[TorchrunExecutor]:
        yield self

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    def __enter__(self) -> TorchrunExecutor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def leave(code: int) -> NoReturn:
    """End this torchrun rank with ``code`` once its output is flushed, without Python's
    finalization. After ``destroy_process_group``, gloo's threads met at interpreter exit aborted
    a rank ("terminate called without an active exception", SIGABRT) in about one run in ten, and
    torchrun reported the job failed; the ranks of a :class:`~.cluster.Cluster` end the same way
    (``worker.py``)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
