"""The worker side of a :class:`~edu_parallel.engine.cluster.Cluster`: one process per rank.

A worker joins the ``torch.distributed`` group once, then loops: receive a job (an importable
function and its arguments), run it with a :class:`~edu_parallel.engine.context.RankContext`, send
back the result and the recorded events. It publishes its current step, and how far its job is,
in shared memory (``status.py``) so the parent can say where a hung or dead rank was and draw
progress. It ignores SIGINT (the parent handles Ctrl-C) and dies
with its parent, and so does what its jobs started (its own process group: PR_SET_PDEATHSIG and a
watching thread, :func:`~edu_parallel.engine.lifetime.end_group_with_parent`; end-of-file on its
pipe everywhere).
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import sys
import traceback
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..core.i18n import _, language
from .context import RankContext, Tracer, rank_output
from .failures import joining_label
from .flight import FlightRecorder
from .lifetime import end_group_with_parent
from .messages import Close, Done, Failed, Init, Job, Ready
from .status import read_status, write_progress, write_status


def loopback_interface() -> str:
    """Name of the loopback interface, for GLOO_SOCKET_IFNAME (gloo then binds 127.0.0.1 only)."""
    return "lo0" if sys.platform == "darwin" else "lo"


def _send(conn: Any, msg: Ready | Done | Failed) -> None:
    conn.send_bytes(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))


def worker_main(
    rank: int,
    world_size: int,
    backend: str,
    conn: Any,
    status: Any,
    parent_pid: int,
    flight: Any = None,
) -> None:
    """Entry point of a worker process (fork or spawn)."""
    # What the rank inherited from the parent (a notebook kernel's whole heap) is never garbage
    # for it: frozen, the rank's collections skip it and leave its pages shared with the parent
    # (the first FSDP job: 0.41 -> 0.25 CPU-s a rank, 27k -> 10k page faults).
    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A process group of its own: whatever a job starts (a subprocess, a pool) joins it, and the
    # cluster ends the whole group with the rank (Cluster._kill), so nothing outlives the cluster.
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    end_group_with_parent(parent_pid)  # the rank and what its jobs started end with the parent
    if os.getppid() != parent_pid:  # the parent died before we set the death signal
        os._exit(1)
    os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()
    code = 0
    try:
        code = _serve(rank, world_size, backend, conn, status, flight)
    finally:
        conn.close()
        os._exit(code)  # skip atexit and destructors inherited from the parent


def _serve(rank: int, world_size: int, backend: str, conn: Any, status: Any, flight: Any) -> int:
    torch.set_num_threads(1)  # N ranks share the machine's cores
    try:
        init = pickle.loads(conn.recv_bytes())
        if not isinstance(init, Init):
            raise TypeError(f"expected Init first, got {init!r}")
        write_status(status, rank, joining_label())
        timeout = timedelta(seconds=init.timeout_s)
        store = dist.FileStore(init.store_path, world_size)  # no listener: a private file
        device = torch.device("cpu")
        if backend == "nccl":
            device = torch.device("cuda", rank)
            torch.cuda.set_device(device)
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, timeout=timeout
        )
        _send(conn, Ready(os.getpid()))
    except (EOFError, OSError):
        return 1
    except BaseException:  # report and stop: the parent raises WorkerError
        _send(conn, Failed(-1, traceback.format_exc(), joining_label()))
        return 1
    write_status(status, rank, "idle")
    recorder = FlightRecorder(flight, rank, world_size) if flight is not None else None
    if recorder is not None:
        recorder.start_heartbeat()
    while True:
        try:
            msg = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return 0
        if isinstance(msg, Close):
            dist.destroy_process_group()
            return 0
        if recorder is not None:
            recorder.reset(msg.job_id)
        ctx = RankContext(rank, world_size, backend, device, _tracer(rank, status, msg, recorder))
        _send_result(conn, status, msg, ctx)


def _tracer(rank: int, status: Any, job: Job, recorder: FlightRecorder | None) -> Tracer:
    publish = lambda text: write_status(status, rank, text)  # noqa: E731
    progress = lambda done, total: write_progress(status, rank, done, total)  # noqa: E731
    tracer = Tracer(rank, job.t0, job.trace, job.snapshot_limit, publish, progress)
    tracer.flight, tracer.check = recorder, job.check
    return tracer


def _send_result(conn: Any, status: Any, job: Job, ctx: RankContext) -> None:
    """Run ``job`` on this rank and send :class:`Done` or, if it raised, :class:`Failed`."""
    try:
        with language(job.language):
            name = getattr(job.fn, "__qualname__", job.fn)
            ctx.tracer.where(_("starting {name}").format(name=name))
            output = rank_output(ctx, job.fn(ctx, *job.args, **job.kwargs))
        data = pickle.dumps(Done(job.job_id, output), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:
        where = read_status(status, ctx.rank)
        _send(conn, Failed(job.job_id, traceback.format_exc(), where))
        return
    conn.send_bytes(data)
    write_status(status, ctx.rank, "idle")
