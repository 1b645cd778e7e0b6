"""A communication stream on a CPU rank: one thread that runs collectives in the order issued.

On a GPU, DDP issues each bucket's all-reduce on a separate CUDA stream and the compute stream
carries on with backward; the optimizer waits on the work handle. :class:`CommStream` gives a CPU
rank the same two streams: :meth:`CommStream.issue` queues a function and returns a
:class:`Handle` at once; the stream's thread runs queued functions one after another (FIFO, so
every rank runs its collectives in the same order, as NCCL requires of one stream); and
:meth:`Handle.wait` blocks until that function has run, re-raising what it raised. Each handle
remembers when it was issued, started, finished and waited on, which is what a trace needs to
show overlap. ``torch.distributed`` sends and receives release the GIL, so the compute thread runs
while a message is on the wire.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Handle:
    """One queued function; times are ``clock()`` readings (None until they happen)."""

    issued: float
    started: float | None = None
    finished: float | None = None
    waited: float | None = None
    released: float | None = None
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    _error: BaseException | None = field(default=None, repr=False)
    _clock: Callable[[], float] = field(default=time.perf_counter, repr=False)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the function has run; re-raise its exception on the waiting thread."""
        self.waited = self._clock()
        if not self._done.wait(timeout):
            raise TimeoutError(f"communication issued at {self.issued:.6f} did not finish")
        self.released = self._clock()
        if self._error is not None:
            raise self._error

    @property
    def done(self) -> bool:
        return self._done.is_set()


class CommStream:
    """A FIFO worker thread; use as a context manager so the thread always stops."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter, name: str = "comm"):
        self._clock = clock
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def issue(self, fn: Callable[..., Any], *args: Any) -> Handle:
        """Queue ``fn(*args)`` behind what was issued before; return its handle at once."""
        handle = Handle(self._clock(), _clock=self._clock)
        self._queue.put((handle, fn, args))
        return handle

    def _loop(self) -> None:
        failed: BaseException | None = None
        while True:
            item = self._queue.get()
            if item is None:
                return
            handle, fn, args = item
            handle.started = self._clock()
            if failed is None:  # after a failure nothing else runs: ranks would mismatch
                try:
                    fn(*args)
                except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                    failed = exc
            handle._error = failed
            handle.finished = self._clock()
            handle._done.set()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread after what is queued (a blocked collective ends with its job)."""
        self._queue.put(None)
        self._thread.join(timeout)

    def __enter__(self) -> CommStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
