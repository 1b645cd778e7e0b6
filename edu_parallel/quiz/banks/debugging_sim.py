"""The failure lab's cases as flight records, without processes (:func:`simulated_diagnosis`),
and any finding's records as the learner reads them (:func:`evidence`, :func:`finding`).

Each case of lesson 16's lab (``edu_parallel/debugging/cases.py`` makes them happen on real ranks)
is written here as the records its ranks would leave when the job's timeout hits, and handed to
:func:`~edu_parallel.core.diagnosis.diagnose`, so that the quiz of lesson 16 works, and is tested,
without a cluster. Every rank completed ``all_reduce #1`` and ``#2`` of the world group; then:

* ``killed``: the culprit's process was killed (SIGKILL) before ``#3``; the others wait in it;
* ``skips_collective``: the culprit skipped ``#3`` and returned from the job;
* ``sleeps``: the culprit sleeps (``time.sleep``, idle) instead of entering ``#3``;
* ``stopped``: the culprit's process is stopped (SIGSTOP): no heartbeat for 3 s;
* ``mismatched_collectives``: the culprit called ``all_gather_single #3``, the others
  ``all_reduce #3``; ``mismatched_sizes``: the culprit's ``#3`` has 32 elements, the others' 16;
* ``deadlock``: the culprit and its partner (:func:`partner`, the next rank) each wait in
  ``recv`` from the other before sending; the other ranks wait in ``#3`` for them;
* ``timeout_too_short``: the culprit still computes, busy on a core, when the 1 s timeout ends;
  the others wait in ``#3``;
* ``straggler``: the job finishes within its timeout, but the culprit entered each of the
  :data:`STEPS` all-reduces last; as the lab does, the finding of the finished job is then named
  ``slow`` with the straggler as its culprit.

The kinds they give are :data:`EXPECTED`, the lab's on real ranks (``debugging/config.py``, the
cases as data, the one home of the cases, their kinds and the deadlock's partner). Pure: imports
``core/`` and that module, never the ranks. Reference: PyTorch's flight recorder
(``torch.distributed.flight_recorder``).
"""

from __future__ import annotations

import dataclasses
import signal
from typing import Any

from ...core.diagnosis import Diagnosis, Op, RankRecord, RankState, diagnose
from ...core.diagnosis_text import explain, op_label, ranks_label
from ...core.errors import bad_value, check_int, one_of
from ...core.i18n import N_, _
from ...debugging.config import AT_STEP, CASES, EXPECTED, NUMEL, STEPS, partner_of

NOW = 1000.0  # the wall time of the reading
HUNG_AT = AT_STEP + 1  # the collective number the job stops at
TIMEOUT_S = {"timeout_too_short": 1.0}  # every other case: DEFAULT_TIMEOUT_S
DEFAULT_TIMEOUT_S = 5.0
LAG_S = 0.4  # how late a straggler enters each collective
SILENT_S = 3.0  # a stopped rank's heartbeat age
JOB = "job.py:{line} in train_step"  # the function the ranks run; the case stays unnamed
WAIT_SOURCE = "ctx.all_reduce(x)"
CULPRIT_SOURCE = {  # the culprit's line, where it is not in an operation
    "sleeps": "time.sleep(60)",
    "stopped": "y = x * 2",
    "timeout_too_short": "y = heavy_compute(x)",
}


partner = partner_of  # the rank a deadlocked culprit exchanges with, and waits for


def _collective(seq: int, world: tuple[int, ...], entered: float, done: float, **kw: Any) -> Op:
    name, numel = kw.get("name", "all_reduce"), kw.get("numel", NUMEL)
    return Op("collective", name, seq, "float32", numel, world, entered=entered, done=done)


def _record(
    r: int, ops: list[Op], blocked: Op | None, world: tuple[int, ...], **kw: Any
) -> RankRecord:
    if blocked is not None:
        ops = [*ops, blocked]
    entered = {world: sum(1 for op in ops if op.kind == "collective")}
    fields = dict(sends=(0,) * len(world), recvs=(0,) * len(world), line=JOB.format(line=30))
    fields |= dict(source=WAIT_SOURCE, beat=NOW, busy=0.02) | kw
    return RankRecord(r, tuple(ops), blocked, entered, **fields)


def _straggler(culprit: int, world: tuple[int, ...], now: float, timeout: float) -> Diagnosis:
    """Every all-reduce done, the culprit's entry :data:`LAG_S` after the others'."""
    start = now - STEPS * (LAG_S + 0.3) - 0.5  # the job ended half a second before the reading
    records = []
    for r in world:
        late = LAG_S if r == culprit else 0.0
        ops = [
            _collective(k, world, start + k * 0.3 + (k - 1) * LAG_S + late, 0.0)
            for k in range(1, STEPS + 1)
        ]
        ops = [dataclasses.replace(op, done=op.entered - late + LAG_S + 0.02) for op in ops]
        records.append(_record(r, ops, None, world, beat=now - 0.1, line="", source=""))
    found = diagnose(records, now, finished=frozenset(world), timeout_s=timeout)
    first = next(op for op in found.ranks[culprit].ops if op.kind == "collective")
    return dataclasses.replace(found, kind="slow", culprits=(culprit,), op=first)


def simulated_diagnosis(
    case: str, culprit: int, world_size: int = 4, now: float = NOW
) -> Diagnosis:
    """The :class:`~edu_parallel.core.diagnosis.Diagnosis` of ``case`` on ``world_size`` ranks
    with the fault at rank ``culprit``, from records built as the module doc says; ``now``: the
    wall time of the reading."""
    if case not in EXPECTED:
        raise bad_value("case", case, one_of(map(repr, CASES)))
    world_size = check_int("world_size", world_size, 3, 64)  # a mismatch needs a majority
    culprit = check_int("culprit", culprit, 0, world_size - 1)
    timeout = TIMEOUT_S.get(case, DEFAULT_TIMEOUT_S)
    world = tuple(range(world_size))
    if case == "straggler":
        return _straggler(culprit, world, now, timeout)
    hung = now - timeout  # when the first ranks entered collective #HUNG_AT
    pair = (culprit, partner(culprit, world_size)) if case == "deadlock" else ()
    records = []
    for r in world:
        ops = [  # every rank completed these
            _collective(k, world, hung - (HUNG_AT - k) * 0.5, hung - (HUNG_AT - k) * 0.5 + 0.05)
            for k in range(1, HUNG_AT)
        ]
        fresh = now - 0.1
        if r in pair:
            other = pair[1] if r == pair[0] else pair[0]
            recv = Op("recv", "recv", 1, "float32", NUMEL, (), other, entered=hung)
            recvs = tuple(int(q == other) for q in world)
            where = dict(line=JOB.format(line=24), source="ctx.recv(buf, src=peer)")
            records.append(_record(r, ops, recv, world, recvs=recvs, beat=fresh, **where))
        elif r != culprit or case.startswith("mismatched"):
            odd = r == culprit
            name = "all_gather_single" if odd and case == "mismatched_collectives" else "all_reduce"
            numel = 2 * NUMEL if odd and case == "mismatched_sizes" else NUMEL
            op = _collective(HUNG_AT, world, hung, 0.0, name=name, numel=numel)
            records.append(_record(r, ops, op, world, beat=fresh))
        else:
            where = dict(line=JOB.format(line=12), source=CULPRIT_SOURCE.get(case, "return y"))
            beat = now - SILENT_S if case == "stopped" else fresh
            busy = 0.97 if case == "timeout_too_short" else 0.01
            records.append(_record(r, ops, None, world, beat=beat, busy=busy, **where))
    return diagnose(
        records,
        now,
        finished=frozenset({culprit}) if case == "skips_collective" else frozenset(),
        dead={culprit: -9} if case == "killed" else None,
        stopped=frozenset({culprit}) if case == "stopped" else frozenset(),
        timeout_s=timeout,
    )


def simulated_runner(case: str, culprit: int) -> Diagnosis:
    """The bank's default runner: ``case`` with its fault at ``culprit`` on the lesson's 4 ranks,
    simulated (:func:`simulated_diagnosis`), in the signature of the lab's
    ``lambda case, culprit: provoke(cluster, case, culprit).diagnosis``."""
    return simulated_diagnosis(case, culprit)


# ---------------------------------------------------------- the records as the learner reads them
STATE_WORDS = {
    "finished": N_("returned"),
    "waiting": N_("waiting"),
    "working": N_("working"),
    "idle": N_("idle"),
    "stopped": N_("stopped"),
    "dead": N_("dead"),
}


def late_entries(d: Diagnosis) -> tuple[dict[int, tuple[int, float]], int]:
    """For each rank, how many of the collectives that every rank of their group entered (as the
    records keep them) it entered last, and the seconds the first rank waited for it there; and
    how many such collectives there are (``debugging/cases.py``'s ``collective_waits``)."""
    by_key: dict[tuple[tuple[int, ...], int], dict[int, Op]] = {}
    for state in d.ranks:
        for op in state.ops:
            if op.kind == "collective" and op.entered:
                by_key.setdefault((op.group, op.seq), {})[state.rank] = op
    out: dict[int, tuple[int, float]] = {}
    total = 0
    for (group, _seq), ops in by_key.items():
        if set(ops) != set(group):
            continue
        total += 1
        last = max(ops, key=lambda r: (ops[r].entered, r))
        waited = ops[last].entered - min(op.entered for op in ops.values())
        count, seconds = out.get(last, (0, 0.0))
        out[last] = (count + 1, seconds + waited)
    return out, total


def _finished(d: Diagnosis) -> bool:
    return bool(d.ranks) and all(s.state == "finished" for s in d.ranks)


def _process_end(code: int | None) -> str:
    if code is not None and code < 0:
        return _("its process was killed by {signal}").format(signal=signal.Signals(-code).name)
    return _("its process ended with exit code {code}").format(code=code)


def _rank_evidence(
    s: RankState, world: int, late: tuple[int, float] | None, total: int, sized: bool
) -> str:
    parts = []
    if s.state == "dead":
        parts.append(_process_end(s.exitcode))
    elif s.state == "finished":
        parts.append(_("returned from the job"))
    if s.op is not None:
        op = op_label(s.op, world, sized=sized and s.op.kind == "collective")
        parts.append(_("in {op} for {seconds} s").format(op=op, seconds=f"{s.waited_s:.1f}"))
    elif s.state not in ("dead", "finished"):
        after = op_label(s.last, world) if s.last is not None else _("nothing yet")
        parts.append(_("in no operation (the last one done: {op})").format(op=after))
    if s.state not in ("dead", "finished"):
        parts.append(_("heartbeat {seconds} s ago").format(seconds=f"{s.silent_s:.1f}"))
    if s.op is None and s.state not in ("dead", "finished"):
        parts.append(_("{busy:.0%} of a core").format(busy=s.busy))
        if s.line:
            line = f"{s.line}: {s.source}" if s.source else s.line
            parts.append(_("at {line}").format(line=line))
    if late is not None and late[0]:
        said = _(
            "entered {last} of the {total} collectives last: the first rank waited {seconds} s"
            " in all"
        )
        parts.append(said.format(last=late[0], total=total, seconds=f"{late[1]:.1f}"))
    elif late is not None:
        parts.append(_("entered none of the {total} collectives last").format(total=total))
    return _(", ").join(parts)


def evidence(d: Diagnosis, verdict: bool = False) -> list[str]:
    """One line per rank: ``rank 0: in all_reduce #3 (group world) for 5.0 s, heartbeat 0.1 s
    ago`` (with the dtype and element count where the ranks wait in collectives that differ).
    ``verdict``: each rank's state and whether it is at fault, as the engine found them (left out
    where the learner is to find them)."""
    world = len(d.ranks)
    late, total = late_entries(d) if _finished(d) else ({}, 0)
    waits = {s.op.signature() for s in d.ranks if s.op is not None and s.op.kind == "collective"}
    out = []
    for s in d.ranks:
        head = _("rank {rank}").format(rank=s.rank)
        if verdict:
            state = _(STATE_WORDS[s.state])
            said = _("rank {rank} ({state}, at fault)") if s.rank in d.culprits else None
            head = (said or _("rank {rank} ({state})")).format(rank=s.rank, state=state)
        mine = late.get(s.rank, (0, 0.0)) if _finished(d) else None
        text = _rank_evidence(s, world, mine, total, sized=len(waits) > 1)
        out.append(_("{rank}: {evidence}").format(rank=head, evidence=text))
    return out


def finding(d: Diagnosis) -> str:
    """The engine's finding as a paragraph (:func:`~edu_parallel.core.diagnosis_text.explain`);
    for a straggler whose job finished, the collectives it entered last."""
    if not (d.kind == "slow" and _finished(d) and d.culprits):
        return explain(d)
    late, total = late_entries(d)
    r = d.culprits[0]
    last, seconds = late.get(r, (0, 0.0))
    return _(
        "{rank} entered {last} of the {total} collectives last, and the others waited {seconds} s"
        " for it in all: slow, not stuck. The job finished within its timeout of {timeout} s."
    ).format(
        rank=ranks_label([r]),
        last=last,
        total=total,
        seconds=f"{seconds:.1f}",
        timeout=f"{d.timeout_s:g}",
    )
