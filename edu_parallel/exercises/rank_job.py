"""The rank side of grading: :func:`run_exercise` runs the learner's function on one rank.

The learner's function was defined in a notebook after the workers were forked, so it is not in
their memory: it travels by value, pickled with cloudpickle (:func:`ship`), and is loaded here.
Around the call, what it prints is kept to the first :data:`PRINT_LIMIT` characters (with the line
that printed past the limit), and, on Linux, its address space may grow by at most the
exercise's ``memory_limit`` (``RLIMIT_AS``), so a runaway allocation fails as a ``MemoryError``
in that run instead of swapping the machine. Both are undone after the call.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any

import cloudpickle

from ..engine.context import RankContext, to_cpu
from .spec import RETURNED, Case, Exercise, RankOutcome
from .untraced import refused

PRINT_LIMIT = 4000  # characters of the learner's output kept per rank

try:
    import resource
except ImportError:  # pragma: no cover - not on Linux or macOS
    resource = None  # type: ignore[assignment]


def ship(fn: Any) -> bytes:
    """``fn`` pickled by value (its code, defaults and the globals it reads), so a worker forked
    before ``fn`` existed can run it."""
    module = sys.modules.get(getattr(fn, "__module__", ""), None)
    if module is not None and not module.__name__.startswith("edu_parallel"):
        with contextlib.suppress(ValueError):  # already registered, or a builtin module
            cloudpickle.register_pickle_by_value(module)
    return cloudpickle.dumps(fn)


class BoundedWriter(io.TextIOBase):
    """A text stream that keeps the first ``limit`` characters, counts the rest, and remembers
    which line of ``code_file`` wrote past the limit."""

    def __init__(self, limit: int, code_file: str):
        self.limit, self.code_file = limit, code_file
        self.kept: list[str] = []
        self.size = 0
        self.line = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.limit - self.size
        if room > 0:
            self.kept.append(text[:room])
        elif not self.line:
            self.line = _caller_line(self.code_file)
        self.size += len(text)
        return len(text)

    def text(self) -> str:
        return "".join(self.kept)


def _caller_line(code_file: str) -> int:
    """The line of ``code_file`` on the current stack (0 if none)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == code_file:
            return frame.f_lineno
        frame = frame.f_back
    return 0


@contextlib.contextmanager
def memory_cap(extra_bytes: int) -> Iterator[None]:
    """Let this process's address space grow by at most ``extra_bytes`` inside the block."""
    if resource is None or not os.path.exists("/proc/self/statm"):
        yield
        return
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = used + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def run_exercise(ctx: RankContext, exercise: Exercise, payload: bytes | None, case: Case) -> Any:
    """Run the learner's function (``payload``; the reference when None) on this rank for
    ``case`` and return a :class:`RankOutcome`. The function gets ``ctx`` first when the
    exercise's parameters start with it; a pure function (a schedule builder) gets only the
    arguments ``prepare`` made."""
    fn = exercise.reference if payload is None else cloudpickle.loads(payload)
    args, watch = exercise.prepare(ctx, case)
    if watch is not None:
        ctx.watch(watch)
    out = BoundedWriter(PRINT_LIMIT, fn.__code__.co_filename)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        with memory_cap(exercise.memory_limit), refused(ctx, exercise.point_to_point):
            ctx.tracer.where(f"running {exercise.function}")
            result = fn(ctx, *args) if exercise.params[:1] == ("ctx",) else fn(*args)
            facts = None if exercise.drive is None else exercise.drive(ctx, case, args, result)
    ctx.tracer.where(RETURNED + exercise.function)  # a hang after this is not the learner's code
    if exercise.finish is not None:
        with ctx.tracer.paused():
            facts = exercise.finish(ctx, case, args, result)
    return RankOutcome(to_cpu(result), facts, out.text(), out.size, out.line)
