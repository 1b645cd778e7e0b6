"""The grader: run a learner's function on real ranks, case by case, and judge what happened.

:func:`grade` checks the signature before anything runs, ships the function by value
(cloudpickle), runs it on each case's world size with the exercise's timeout, and turns what went
wrong into :class:`~edu_parallel.exercises.spec.Finding` s in the learner's terms (see
``diagnose.py``). A case that raises or hangs costs that run only: the cluster stops its workers and
starts fresh ones for the next run, so the kernel and the lesson's cluster go on. The exercise's
reference solution then runs on the case the feedback shows, so the learner's trace is drawn
beside the reference's.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..comm.bench import ProgressBar
from ..core.errors import JobTimeoutError, WorkerError, bad_value
from ..core.i18n import N_, _
from ..core.inputs import chunk_bounds
from ..core.trace import Trace
from ..core.units import DTYPES, format_bytes
from ..engine.cluster import Cluster
from ..engine.executor import Executor
from .diagnose import error_finding, hang_finding, source_line
from .divergence import first_divergence
from .rank_job import PRINT_LIMIT, run_exercise, ship
from .spec import NO_CASE, Case, Exercise, Finding, RankOutcome, check_label

MARKS = {"note": N_("note"), "ok": N_("ok"), "FAIL": N_("FAIL")}  # a finding's mark in the report


@dataclass
class Grade:
    """What :func:`grade` found: ``passed``, every finding, and the traces of the case shown
    (the learner's and the reference's, on the same ranks and input)."""

    exercise: Exercise
    passed: bool
    findings: list[Finding]
    shown: Case | None = None
    trace: Trace | None = None
    reference_trace: Trace | None = None
    outputs: list[RankOutcome] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.failed]

    @property
    def first_failure(self) -> Finding | None:
        return next(iter(self.failures), None)

    @property
    def mark(self) -> Finding | None:
        """The failure the picture marks: the first that names a step, else the first that
        names a rank."""
        located = [f for f in self.failures if f.rank is not None]
        return next((f for f in located if f.step is not None), next(iter(located), None))

    def mark_divergence(self) -> None:
        """When the result is wrong, add where the learner's buffers first parted from the
        reference's (``divergence.py``), ahead of the other findings."""
        first, ex = self.first_failure, self.exercise
        if first is None or first.check != "result" or not ex.powers_of_two:
            return
        if self.trace is None or self.reference_trace is None or ex.chunks is None:
            return
        div = first_divergence(self.trace, self.reference_trace, ex.chunks(self.shown))
        if div is not None:
            found = Finding("result", False, div.text(), self.shown, div.rank, div.step, div.chunk)
            self.findings.insert(self.findings.index(first) + 1, found)

    def summary(self) -> str:
        """One line: PASS or FAIL, the exercise, and the first failure."""
        ex = self.exercise
        if self.passed:
            cases = len({f.case for f in self.findings if f.case is not None})
            return _("PASS exercise {id} ({function}): {cases} cases on real ranks, {s} s").format(
                id=ex.id, function=ex.function, cases=cases, s=f"{self.wall_s:.1f}"
            )
        first = self.first_failure
        message = first.message if first else _("no verdict")
        if first and first.case:
            return _("FAIL exercise {id} ({function}) [{case}]: {message}").format(
                id=ex.id, function=ex.function, case=first.case.label(), message=message
            )
        return _("FAIL exercise {id} ({function}): {message}").format(
            id=ex.id, function=ex.function, message=message
        )

    def report(self) -> str:
        """The one-screen text report (the CLI prints it)."""
        lines = [self.summary(), ""]
        by_case: dict[str, list[Finding]] = {}
        for f in self.findings:
            by_case.setdefault(f.case.label() if f.case else _(NO_CASE), []).append(f)
        for label, found in by_case.items():
            lines.append(f"  {label}")
            for f in found:
                mark = _(MARKS["note" if f.note else ("ok" if f.ok else "FAIL")]).ljust(4)
                lines.append(f"    {mark} {check_label(f.check):<9} {f.message}")
        printed = next((o for o in self.outputs if o.printed_bytes), None)
        if printed is not None:
            lines += ["", "  " + _("rank output (first lines):")]
            lines += [f"    | {t}" for t in printed.printed.splitlines()[:8]]
        return "\n".join(lines)


def check_signature(exercise: Exercise, fn: Any) -> Finding | None:
    """None when ``fn`` can be called as ``name(ctx, ...)``; else a finding naming its line."""
    call = f"{exercise.function}({', '.join(exercise.params)})"
    if not inspect.isfunction(fn):
        msg = _(
            "expected a function {call}, got {type}: define it with `def {call}:` and pass the "
            "function itself"
        )
        return Finding("signature", False, msg.format(call=call, type=type(fn).__name__))
    try:
        inspect.signature(fn).bind(*exercise.params)
    except TypeError as err:
        code = fn.__code__
        line = source_line(code.co_filename, code.co_firstlineno)
        msg = _("{name} cannot be called as {call} ({error}); it is defined at {line}")
        return Finding(
            "signature", False, msg.format(name=fn.__name__, call=call, error=err, line=line)
        )
    return None


def grade(
    exercise: Exercise,
    fn: Any,
    cluster: Executor | None = None,
    *,
    cases: Sequence[Case] | None = None,
    reference: bool = True,
) -> Grade:
    """Run ``fn`` on every case of ``exercise`` (on ``cluster``, or on clusters made for it when
    it is None or closed) and judge it; ``reference`` also runs the solution on the case shown,
    for the picture."""
    if cluster is not None and not isinstance(cluster, Executor):
        raise bad_value("cluster", cluster, "a Cluster (the lesson's), or None for a new one")
    t0 = time.perf_counter()
    bad = check_signature(exercise, fn)
    if bad is not None:
        return Grade(exercise, False, [bad], wall_s=time.perf_counter() - t0)
    try:
        payload = ship(fn)
    except Exception as err:  # an unpicklable global: a lock, an open file, a generator
        msg = _("{name} uses something that cannot be sent to the ranks: {error}").format(
            name=fn.__name__, error=err
        )
        return Grade(exercise, False, [Finding("signature", False, msg)])
    todo = list(cases if cases is not None else exercise.cases)
    own = cluster is None or getattr(cluster, "closed", False)  # a closed one: grade anyway
    if own:
        cluster = Cluster(max(c.world_size for c in todo), timeout=exercise.timeout_s + 5)
    bar = ProgressBar(_("checking cases"), unit=N_("case")) if exercise.progress else None
    try:
        grade_ = _run_cases(exercise, fn, payload, cluster, todo, bar)
        if reference and grade_.shown is not None:
            with cluster.sized(grade_.shown.world_size) as c:
                ref = c.run(run_exercise, exercise, None, grade_.shown, timeout=exercise.timeout_s)
            grade_.reference_trace = _tag(ref.trace, exercise, grade_.shown, "reference")
            grade_.mark_divergence()
    finally:
        if own:
            cluster.close()
    grade_.wall_s = time.perf_counter() - t0
    return grade_


def _run_cases(
    exercise: Exercise,
    fn: Callable,
    payload: bytes,
    cluster: Executor,
    todo: list[Case],
    bar: Callable[[int, int], Any] | None = None,
) -> Grade:
    findings: list[Finding] = []
    shown: tuple[Case, Trace, list[RankOutcome]] | None = None
    last: tuple[Case, Trace, list[RankOutcome]] | None = None
    drawn: tuple[Case, Trace, list[RankOutcome]] | None = None
    code_file = fn.__code__.co_filename
    done = 0
    for n in sorted({c.world_size for c in todo}):
        with cluster.sized(n) as c:
            for case in (k for k in todo if k.world_size == n):
                try:
                    run = c.run(run_exercise, exercise, payload, case, timeout=exercise.timeout_s)
                except WorkerError as err:
                    findings.append(error_finding(err, code_file, case))
                except JobTimeoutError as err:
                    findings.append(hang_finding(err, n, case, code_file))
                else:
                    outputs: list[RankOutcome] = run.results
                    trace = _tag(run.trace, exercise, case, "yours")
                    found = exercise.judge(case, outputs, trace)
                    findings += found + _output_notes(outputs, case, code_file)
                    if shown is None and any(f.failed for f in found):
                        shown = (case, trace, outputs)
                    last = (case, trace, outputs)
                    if any(s.step >= 0 for s in trace.snapshots):
                        drawn = last  # a pass shows the last run the step grid can draw
                    done += 1
                    if bar is not None:
                        bar(done, len(todo))
                    continue
                # a raise or a hang stops the grade; the picture is the earlier wrong run, if any
                if bar is not None:
                    bar(len(todo), len(todo))  # closes the bar
                case, trace, outputs = shown or (case, None, [])
                return Grade(exercise, False, findings, case, trace, None, outputs)
    case, trace, outputs = shown or drawn or last
    passed = not any(f.failed for f in findings)
    return Grade(exercise, passed, findings, case, trace, None, outputs)


def _tag(trace: Trace, exercise: Exercise, case: Case, who: str) -> Trace:
    """Label a run's trace for the renderers: what ran, on which input, cut into which chunks."""
    trace.meta.update(concept=f"exercise {exercise.id} ({who})", case=case.label())
    if exercise.powers_of_two and case.option("pattern", "powers_of_two") == "powers_of_two":
        trace.meta["input"] = "powers_of_two"
    if case.numel:
        item = DTYPES[case.dtype]
        trace.meta["nbytes"] = case.numel * item
        if exercise.chunks is not None:
            bounds = chunk_bounds(case.numel, exercise.chunks(case))
            trace.meta["chunk_bounds"] = bounds
            trace.meta["chunk_bytes"] = [
                (b - a) * item for a, b in zip(bounds, bounds[1:], strict=False)
            ]
    return trace


def _output_notes(outputs: list[RankOutcome], case: Case, code_file: str) -> list[Finding]:
    """Advice, not a failure: a rank that printed more than :data:`PRINT_LIMIT` characters."""
    for r, out in enumerate(outputs):
        if out.printed_bytes > PRINT_LIMIT:
            line = source_line(code_file, out.print_line) if out.print_line else ""
            size = format_bytes(out.printed_bytes)
            if line:
                msg = _(
                    "rank {r} printed {size} ({line} printed past the limit); only the first "
                    "{limit} characters are kept. Print a summary, not every element."
                ).format(r=r, size=size, line=line, limit=PRINT_LIMIT)
            else:
                msg = _(
                    "rank {r} printed {size}; only the first {limit} characters are kept. "
                    "Print a summary, not every element."
                ).format(r=r, size=size, limit=PRINT_LIMIT)
            return [Finding("output", False, msg, case, rank=r, note=True)]
    return []
