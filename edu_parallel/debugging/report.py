"""The lab's tables: every rank's evidence in one diagnosis, and every case of the lab in one run.

* :func:`evidence_table`: one row per rank of a :class:`~edu_parallel.core.diagnosis.Diagnosis`,
  what the parent read from its flight record: its state, the operation it waits in and for how
  long, the ranks it waits for (the wait-for graph's edges), its heartbeat's age, how busy it was
  and the line it runs. The verdict (``kind``, ``culprits``) is read from these columns by the rule
  of ``core/diagnosis.py``; a learner can apply the same rule by hand.
* :func:`run_case`: one :class:`~edu_parallel.debugging.config.LabCase`, checked already, on a
  cluster or a torchrun job (``edu-parallel run failure``), as a :class:`CaseReport`;
* :func:`run_lab`: each case of :data:`~edu_parallel.debugging.cases.CASES` provoked on the
  cluster, with its culprit; :func:`lab_table`: one row per case, the kind and culprit the engine
  named beside the ones the case planted, and how long the diagnosis took.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..comm.bench import ProgressBar
from ..core.diagnosis import Diagnosis
from ..core.diagnosis_text import op_label, ranks_label
from ..core.errors import bad_value, spelled_as
from ..core.i18n import N_, _
from ..core.shown import ShownFrame, shown
from ..core.trace import Trace
from ..core.width import fitted
from ..engine.cluster import Cluster
from ..engine.torchrun import TorchrunExecutor
from .cases import CASES, EXPECTED, Provoked, provoke_case
from .config import LabCase

# the states a rank can be in (core/diagnosis.py's ``State``), as the table shows them
STATES = {
    "finished": N_("finished"),
    "waiting": N_("waiting"),
    "working": N_("working"),
    "idle": N_("idle"),
    "stopped": N_("stopped"),
    "dead": N_("dead"),
}


def short_line(line: str) -> str:
    """``case_jobs.py:54 in _all_reduce`` for ``edu_parallel/debugging/case_jobs.py:54 in
    _all_reduce``: the file's name, not its folders (a table column stays narrow)."""
    return os.path.basename(line)


def evidence_table(d: Diagnosis) -> ShownFrame:
    """One row per rank: the evidence the diagnosis was read from."""
    world = len(d.ranks)
    rows = []
    for s in d.ranks:
        rows.append(
            {
                N_("rank"): s.rank,
                N_("state"): _(STATES[s.state]),
                N_("waits in"): op_label(s.op, world) if s.op is not None else "",
                N_("waited (s)"): round(s.waited_s, 2),
                N_("waits for"): ranks_label(list(s.waits_for)) if s.waits_for else "",
                N_("heartbeat age (s)"): round(s.silent_s, 2),
                N_("busy (cores)"): round(s.busy, 2),
                N_("line"): short_line(s.line),
                N_("at fault"): _("yes") if s.rank in d.culprits else "",
            }
        )
    return shown(pd.DataFrame(rows).set_index(N_("rank")))


def run_lab(
    cluster: Cluster,
    culprits: Mapping[str, int] | None = None,
    *,
    progress: bool = True,
) -> dict[str, Provoked]:
    """Every case of the lab, in order, on ``cluster``; ``culprits``: the rank each case makes
    fail (default: the last rank). Every culprit is checked before the first case runs.
    ``progress``: a bar over the cases (``tqdm.auto``: a widget in Jupyter)."""
    chosen = dict(culprits or {})
    unknown = sorted(set(chosen) - set(CASES))
    if unknown:
        raise bad_value(
            "culprits", unknown[0], _("a case of {cases}").format(cases=", ".join(CASES))
        )
    plan = {}
    for case in CASES:  # each case checked once, here, before the first runs
        with spelled_as({"culprit": f"culprits[{case!r}]"}):
            plan[case] = LabCase(case, chosen.get(case), cluster.world_size)
    bar = ProgressBar(_("provoking each failure"), unit=N_("case")) if progress else None
    out: dict[str, Provoked] = {}
    for case, spec in plan.items():
        if bar is not None:
            bar(len(out), len(plan), case)
        out[case] = provoke_case(cluster, spec)
    if bar is not None:
        bar(len(out), len(plan), "")
    return out


def lab_table(lab: Mapping[str, Provoked]) -> ShownFrame:
    """One row per case: what it planted, what the engine named, and how long it took."""
    rows = []
    for case, p in lab.items():
        d = p.diagnosis
        rows.append(
            {
                N_("case"): case,
                N_("planted"): EXPECTED[case],
                N_("culprit planted"): p.culprit,
                N_("diagnosis"): d.kind,
                N_("named"): ranks_label(list(d.culprits)),
                N_("right"): _("yes")
                if d.kind == EXPECTED[case] and p.culprit in d.culprits
                else _("no"),
                N_("job failed"): _("yes") if p.failed else _("no"),
                N_("seconds"): round(p.elapsed_s, 2),
                N_("timeout (s)"): p.timeout_s,
                N_("restarts"): p.restarts,
            }
        )
    return shown(pd.DataFrame(rows).set_index(N_("case")))


@dataclass(frozen=True)
class CaseReport:
    """One case provoked (``edu-parallel run failure``): the case as checked, what the engine
    found, and whether that is what the case planted."""

    spec: LabCase
    provoked: Provoked
    trace: Trace = field(default_factory=Trace)
    """Empty: a failed job leaves no trace of its own (its evidence is the diagnosis)."""

    @property
    def diagnosed(self) -> bool:
        """The engine named the kind the case planted, and the culprit among its culprits."""
        d = self.provoked.diagnosis
        return d.kind == self.spec.expected and self.spec.culprit in d.culprits

    @property
    def matches_builtin(self) -> bool:  # the command line's exit status reads this name
        return self.diagnosed

    def to_json_dict(self) -> dict[str, Any]:
        p, d = self.provoked, self.provoked.diagnosis
        world = len(d.ranks)
        return {
            "case": p.case,
            "culprit": p.culprit,
            "world_size": p.world_size,
            "expected": self.spec.expected,
            "kind": d.kind,
            "culprits": list(d.culprits),
            "cycles": [list(c) for c in d.cycles],
            "diagnosed": self.diagnosed,
            "job_failed": p.failed,
            "elapsed_s": round(p.elapsed_s, 3),
            "timeout_s": p.timeout_s,
            "message": p.message,
            "ranks": [
                {
                    "rank": s.rank,
                    "state": s.state,
                    "op": op_label(s.op, world, sized=True) if s.op is not None else None,
                    "waited_s": round(s.waited_s, 3),
                    "waits_for": list(s.waits_for),
                    "heartbeat_age_s": round(s.silent_s, 3),
                    "busy": round(s.busy, 3),
                    "line": s.line,
                }
                for s in d.ranks
            ],
        }


def run_case(executor: Cluster | TorchrunExecutor, spec: LabCase) -> CaseReport | None:
    """``spec`` provoked on ``executor``; None on the ranks of a torchrun job other than 0 (each
    names the culprit; rank 0 reports)."""
    provoked = provoke_case(executor, spec)
    if isinstance(executor, TorchrunExecutor) and executor.rank != 0:
        return None
    return CaseReport(spec, provoked)


@fitted
def format_case(report: CaseReport) -> str:
    """The report as the command line prints it: the engine's paragraph, one line of evidence
    per rank, and the verdict against what the case planted."""
    p, d = report.provoked, report.provoked.diagnosis
    world = len(d.ranks)
    verdict = (
        _("diagnosed as planted: {kind}, {rank}")
        if report.diagnosed
        else _("NOT diagnosed as planted ({kind}, {rank})")
    ).format(kind=report.spec.expected, rank=ranks_label([p.culprit]))
    head = _("case {case} on {n} ranks, {rank} at fault:").format(
        case=p.case, n=p.world_size, rank=ranks_label([p.culprit])
    )
    lines = [head, p.message, ""]
    for s in d.ranks:
        waits = (
            _("in {op} for {seconds} s, waiting for {ranks}").format(
                op=op_label(s.op, world),
                seconds=f"{s.waited_s:.2f}",
                ranks=ranks_label(list(s.waits_for)) if s.waits_for else _("nobody"),
            )
            if s.op is not None
            else short_line(s.line)
        )
        mark = "*" if s.rank in d.culprits else " "  # the legend below says what * means
        said = (_("{rank}: {state}, {waits}") if waits else _("{rank}: {state}")).format(
            rank=ranks_label([s.rank]), state=_(STATES[s.state]), waits=waits
        )
        lines.append(f"{mark} {said}")
        beat = _("heartbeat {age} s ago, {busy:.0%} of a core").format(
            age=f"{s.silent_s:.2f}", busy=s.busy
        )
        lines.append(f"    {beat}")
    lines.append(_("* at fault"))
    return "\n".join([*lines, "", verdict])
