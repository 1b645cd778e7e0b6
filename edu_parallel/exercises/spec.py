"""What an exercise is, as data: :class:`Exercise`, its :class:`Case` s and the grader's
:class:`Finding` s.

An exercise asks the learner for one function, e.g. ``my_ring_allreduce(ctx, tensor)``, that runs
on every rank with the same :class:`~edu_parallel.engine.context.RankContext` the package's own
algorithms use. Its parts, all importable functions so that a worker receives them by name:

* ``prepare(ctx, case) -> (args, watch)``: on each rank, the arguments after ``ctx`` and the buffer
  whose state the step grid shows (``None`` for none);
* ``finish(ctx, case, args, result) -> facts``: on each rank after the learner's function, untraced:
  what the judge needs besides the result (torch's builtin on the same input, a ledger);
* ``drive(ctx, case, args, result) -> facts`` (instead of ``finish``): the harness's own step that
  runs more of the learner's code, such as a backward pass through the learner's autograd
  Function; traced, and guarded like the learner's function (output kept, memory capped);
* ``judge(case, outputs, trace) -> [Finding]``: in the parent, from every rank's result and facts
  and the merged trace: the result, the bytes, the messages;
* ``reference``: the solution, run through the same path; its source is what ``solution`` prints;
* ``picture(grade) -> [figure]`` (optional): the feedback's figures, the learner's run beside the
  reference's; by default the step grid and the bytes each rank sent.

This module imports no torch: the command line lists exercises without loading it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.i18n import N_, _

RETURNED = "returned from "  # a rank's published step once the learner's function has returned
CHECKS = (
    "result",
    "bytes",
    "messages",
    "steps",
    "overlap",
    "memory",
    "deadlock",
    "error",
    "signature",
    "output",
)
CHECK_LABELS = {  # a check's name as a Chinese learner reads it (English shows the name itself)
    "result": N_("result (the check)"),
    "bytes": N_("bytes (the check)"),
    "messages": N_("messages (the check)"),
    "steps": N_("steps (the check)"),
    "overlap": N_("overlap (the check)"),
    "memory": N_("memory (the check)"),
    "deadlock": N_("deadlock (the check)"),
    "error": N_("error (the check)"),
    "signature": N_("signature (the check)"),
    "output": N_("output (the check)"),
}
NO_CASE = N_("before running")  # the label of findings made before any case ran


def check_label(check: str) -> str:
    """``check`` in the learner's language ("result" -> "结果" in Chinese). The names are short
    words other modules translate otherwise, so their messages carry "(the check)"; English shows
    the name itself."""
    if check not in CHECK_LABELS:
        return check
    shown = _(CHECK_LABELS[check])
    return check if shown == CHECK_LABELS[check] else shown


@dataclass(frozen=True)
class Case:
    """One run of the learner's function: ``world_size`` ranks, a buffer of ``numel`` elements
    of ``dtype``, and exercise-specific ``options`` (a tuple of pairs, so a case is hashable)."""

    world_size: int
    numel: int = 0
    dtype: str = "float32"
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)

    def label(self) -> str:
        """'N=4, 24 x float32, root=1'."""
        parts = [f"N={self.world_size}"]
        if self.numel:
            parts.append(f"{self.numel} \u00d7 {self.dtype}")
        parts += [f"{k}={v}" for k, v in self.options]
        return ", ".join(parts)


@dataclass(frozen=True)
class Finding:
    """One verdict of the grader. ``check`` is one of :data:`CHECKS`; ``rank``, ``step`` and
    ``chunk`` locate the first divergence for the picture; ``note`` marks advice that does not
    fail the exercise (output that was too long)."""

    check: str
    ok: bool
    message: str
    case: Case | None = None
    rank: int | None = None
    step: int | None = None
    chunk: int | None = None
    note: bool = False

    @property
    def failed(self) -> bool:
        return not self.ok and not self.note


@dataclass(frozen=True)
class RankOutcome:
    """What one rank sent back from an exercise run: the learner's result (tensors on the CPU),
    the exercise's ``facts``, and the first lines of what the learner printed."""

    result: Any
    facts: Any
    printed: str = ""
    printed_bytes: int = 0
    print_line: int = 0  # the learner's line that printed past the limit (0: unknown)


@dataclass(frozen=True)
class Exercise:
    """A coding exercise of one lesson (see the module docstring for the callables)."""

    lesson: str  # the notebook, "03_ring_allreduce"
    title: str  # English, marked N_(); shown_title() translates
    function: str  # the name the learner's function should have
    params: tuple[str, ...]  # its parameters, ctx first
    task: str  # what to write, in a few lines of markdown
    starter: str  # the code the learner starts from
    hints: tuple[str, ...]  # a nudge, the idea, the key line
    reference: Callable[..., Any]
    prepare: Callable[..., Any]
    judge: Callable[..., list[Finding]]
    cases: tuple[Case, ...]
    finish: Callable[..., Any] | None = None
    drive: Callable[..., Any] | None = None
    chunks: Callable[[Case], int] | None = None  # chunks of the watched buffer, for the grid
    timeout_s: float = 4.0  # per case; a hang is diagnosed after this
    memory_limit: int = 1 << 30  # bytes a rank may allocate on top of what it holds
    picture: Callable[..., list[Any]] | None = None  # figures from a Grade; None: grid + bytes
    powers_of_two: bool = False  # inputs are 2^rank: a chunk's value names its ranks
    point_to_point: bool = False  # built from ctx.send/recv: ctx.collective is refused (untraced)

    @property
    def id(self) -> str:
        """The lesson's number, ``"03"``: what ``check("03", ...)`` names."""
        return self.lesson.split("_", 1)[0]

    def shown_title(self) -> str:
        """The title in the learner's language (``title`` is the English, marked ``N_``)."""
        return _(self.title)

    def shown_task(self) -> str:
        """What to write, in the learner's language."""
        return _(self.task)

    def shown_hints(self) -> tuple[str, ...]:
        """The hint tiers in the learner's language."""
        return tuple(_(h) for h in self.hints)

    def world_sizes(self) -> list[int]:
        return sorted({c.world_size for c in self.cases})
