"""The failure lab's cases: each failure made to happen on real ranks, with a chosen culprit, and
the engine's :class:`~edu_parallel.core.diagnosis.Diagnosis` of it.

:func:`provoke` runs one case's job (``case_jobs.py``: the same four-step all-reduce loop, the
culprit misbehaving at step 2) on a :class:`~edu_parallel.engine.cluster.Cluster`, catches the
error the failure raises, and returns it as a :class:`Provoked`: the diagnosis, the message the
learner reads, how long it took. Each case and the kind the engine names (:data:`EXPECTED`):

* ``killed`` (SIGKILL): ``dead``; ``skips_collective``, ``sleeps``: ``missing``; ``stopped``
  (SIGSTOP): ``stopped``; ``mismatched_collectives`` (all-gather against all-reduce),
  ``mismatched_sizes`` (32 elements against 16): ``mismatch``, the culprit on the minority side;
* ``deadlock``: the culprit and the next rank (:func:`partner_of`) both receive first: a cycle;
* ``straggler``: slow, not stuck: the job finishes, so no error names it; the flight records
  still show who entered each collective last (:func:`last_to_enter`), read after the job;
* ``timeout_too_short``: the culprit still computes when the timeout ends: ``slow``.

References: PyTorch's flight recorder and its ``fr_trace`` analyser
(https://pytorch.org/docs/stable/torch_nccl_debugging.html), which names the rank that never
joined a collective; NCCL's watchdog, which stops a job whose collective takes longer than
``timeout``; Dean and Barroso, "The tail at scale", CACM 2013 (stragglers).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from ..core.diagnosis import Diagnosis, Op
from ..core.diagnosis_text import ranks_label
from ..core.errors import (
    CollectiveMismatchError,
    EngineError,
    JobTimeoutError,
    WorkerError,
    check_timeout,
)
from ..core.i18n import _
from ..engine.cluster import Cluster
from ..engine.torchrun import TorchrunExecutor
from .case_jobs import AT_STEP, JOBS, NUMEL, STEPS, normal, normal_result, partner_of
from .config import CASES, EXPECTED, LabCase, check_case

__all__ = [
    "AT_STEP",
    "CASES",
    "EXPECTED",
    "NUMEL",
    "STEPS",
    "CollectiveWait",
    "Provoked",
    "check_case",
    "collective_waits",
    "last_to_enter",
    "normal",
    "normal_result",
    "partner_of",
    "provoke",
    "provoke_case",
]

# the error each case raises (None: the straggler's job finishes)
_ERRORS: dict[str, type[EngineError] | None] = {
    "killed": WorkerError,
    "skips_collective": JobTimeoutError,
    "sleeps": JobTimeoutError,
    "stopped": JobTimeoutError,
    "mismatched_collectives": CollectiveMismatchError,
    "mismatched_sizes": CollectiveMismatchError,
    "deadlock": JobTimeoutError,
    "straggler": None,
    "timeout_too_short": JobTimeoutError,
}


@dataclass(frozen=True)
class Provoked:
    """One case made to happen: what the engine found, and what the learner read."""

    case: str
    culprit: int
    world_size: int
    diagnosis: Diagnosis
    message: str
    """The error's text as the learner sees it; for the straggler (no error) a summary."""
    failed: bool
    """False only for the straggler: its job finishes."""
    elapsed_s: float
    """Seconds from the job's start to the error (to the end, for the straggler)."""
    timeout_s: float
    restarts: int
    """The cluster's restarts after the call (its workers restart at the next run)."""


@dataclass(frozen=True)
class CollectiveWait:
    """One collective every rank entered: who entered it last, and how long the first waited."""

    op: Op
    """The last rank's entry."""
    last: int
    waited_s: float


def _seconds(case: str, limit: float) -> float:
    """How long the culprit sleeps or works: past the timeout, or (the straggler) a share of it
    small enough that the job still finishes."""
    if case in ("sleeps", "timeout_too_short"):
        return limit + 30.0
    if case == "straggler":
        return min(0.3, 0.4 * limit / STEPS)
    return 0.0


def provoke(
    cluster: Cluster | TorchrunExecutor,
    case: str,
    culprit: int | None = None,
    *,
    timeout: float | None = None,
) -> Provoked:
    """Run ``case`` on ``cluster`` with rank ``culprit`` at fault (default: the last rank) and
    return what the engine found. ``timeout``: the job's (default: the cluster's; under torchrun
    the process group's, fixed when it started). The expected error is returned, not raised; the
    next ``cluster.run`` restarts the workers. Under torchrun every rank returns the same finding,
    read from the records in the launcher's store. The arguments are checked here, once
    (:class:`~edu_parallel.debugging.config.LabCase`); :func:`provoke_case` trusts them."""
    spec = LabCase(case, culprit, cluster.world_size)
    return provoke_case(
        cluster, spec, None if timeout is None else check_timeout("timeout", timeout)
    )


def provoke_case(
    cluster: Cluster | TorchrunExecutor, spec: LabCase, timeout: float | None = None
) -> Provoked:
    """:func:`provoke` for a case checked already (``spec``; ``timeout``: seconds, or None for
    the cluster's)."""
    n, case = cluster.world_size, spec.case
    culprit: int = spec.culprit  # type: ignore[assignment]  # LabCase put the last rank for None
    limit = cluster.timeout if timeout is None else timeout
    job_timeout = {} if timeout is None else {"timeout": limit}
    before = cluster.restarts
    t0 = time.perf_counter()
    expected = _ERRORS[case]
    try:
        cluster.run(JOBS[case], culprit, _seconds(case, limit), trace=False, **job_timeout)
    except (WorkerError, JobTimeoutError) as err:
        elapsed = _elapsed(cluster, before, t0)
        if expected is None or not isinstance(err, expected) or err.diagnosis is None:
            raise EngineError(_unexpected(case, culprit, str(err))) from err
        return Provoked(
            case, culprit, n, err.diagnosis, str(err), True, elapsed, limit, cluster.restarts
        )
    elapsed = _elapsed(cluster, before, t0)
    if expected is not None:
        raise EngineError(_unexpected(case, culprit, _("the job finished")))
    found = cluster.diagnose(finished=range(n), timeout_s=limit)
    waits = collective_waits(found)
    slowest = last_to_enter(found)
    mine = [w for w in waits if w.last == slowest]
    op = max(mine, key=lambda w: w.waited_s).op
    found = dataclasses.replace(found, kind="slow", culprits=(slowest,), op=op)
    text = _(
        "{rank} entered {last} of the {total} collectives last: the others waited {seconds} s"
        " for it in all. Slow, not stuck: the job finished in {elapsed} s, within its timeout"
        " of {timeout} s."
    ).format(
        rank=ranks_label([slowest]),
        last=len(mine),
        total=len(waits),
        seconds=f"{sum(w.waited_s for w in mine):.1f}",
        elapsed=f"{elapsed:.1f}",
        timeout=f"{limit:g}",
    )
    return Provoked(case, culprit, n, found, text, False, elapsed, limit, cluster.restarts)


def _elapsed(cluster: Cluster, before: int, t0: float) -> float:
    """Seconds since ``t0``, less the workers' restart when this run restarted them."""
    spent = time.perf_counter() - t0
    return max(0.0, spent - cluster.startup_s) if cluster.restarts > before else spent


def _unexpected(case: str, culprit: int, what: str) -> str:
    return _(
        "case {case!r} with rank {culprit} at fault did not fail as it should ({kind}): {what}"
    ).format(case=case, culprit=culprit, kind=EXPECTED[case], what=what)


def collective_waits(d: Diagnosis) -> tuple[CollectiveWait, ...]:
    """Each collective that every rank of its group entered (as the flight records keep them),
    in order: the rank that entered it last, and how long the first rank waited for it."""
    by_key: dict[tuple[tuple[int, ...], int], dict[int, Op]] = {}
    for state in d.ranks:
        for op in state.ops:
            if op.kind == "collective" and op.entered:
                by_key.setdefault((op.group, op.seq), {})[state.rank] = op
    out = []
    for (group, _seq), ops in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if set(ops) != set(group):
            continue  # a rank's entry fell out of its ring, or it never entered
        last = max(ops, key=lambda r: (ops[r].entered, r))
        first = min(op.entered for op in ops.values())
        out.append(CollectiveWait(ops[last], last, ops[last].entered - first))
    return tuple(out)


def last_to_enter(d: Diagnosis) -> int:
    """The rank the others waited for longest: summed over the collectives it entered last."""
    blame: dict[int, float] = {}
    for w in collective_waits(d):
        blame[w.last] = blame.get(w.last, 0.0) + w.waited_s
    if not blame:
        raise ValueError(_("the diagnosis holds no collective that every rank entered"))
    return max(sorted(blame), key=lambda r: blame[r])
