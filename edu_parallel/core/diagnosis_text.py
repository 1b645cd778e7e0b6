"""A :class:`~edu_parallel.core.diagnosis.Diagnosis` as one paragraph, in the learner's language.

The numbers and names (ranks, seconds, operation names, dtypes, the source line) are formatted
outside the messages and passed in as placeholders: ``all_reduce #7 (group world)``.
"""

from __future__ import annotations

import signal

from .diagnosis import Diagnosis, Op, RankState
from .i18n import _


def ranks_label(ranks: tuple[int, ...] | list[int]) -> str:
    """``rank 3``, ``ranks 0–2``, ``ranks 0, 2, 5–7``: consecutive ranks as a range."""
    ranks = sorted(ranks)
    if len(ranks) == 1:
        return _("rank {rank}").format(rank=ranks[0])
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{run[0]}–{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs]
    return _("ranks {ranks}").format(ranks=", ".join(parts))


def group_label(group: tuple[int, ...], world_size: int) -> str:
    """``group world`` for every rank, else ``group [0, 2]``."""
    if len(group) == world_size:
        return _("group world")
    return _("group {ranks}").format(ranks=list(group))


def op_label(op: Op, world_size: int, sized: bool = False) -> str:
    """``all_reduce #7 (group world)``, ``recv #1 from rank 1``, ``send #2 to rank 3``; ``sized``
    adds ``with 16 float32 elements``."""
    if op.kind == "collective":
        text = _("{name} #{seq} ({group})").format(
            name=op.name, seq=op.seq, group=group_label(op.group, world_size)
        )
    elif op.kind == "recv":
        text = _("recv #{seq} from rank {peer}").format(seq=op.seq, peer=op.peer)
    else:
        text = _("send #{seq} to rank {peer}").format(seq=op.seq, peer=op.peer)
    if sized:
        text += " " + _("with {n} {dtype} elements").format(n=op.numel, dtype=op.dtype)
    return text


def _seconds(s: float) -> str:
    return f"{s:.1f}"


def _where(state: RankState) -> str:
    """``job.py:12 in f: time.sleep(60)``."""
    if not state.line:
        return _("a line it did not publish")
    return f"{state.line}: {state.source}" if state.source else state.line


def _others(d: Diagnosis) -> tuple[list[int], float]:
    """The ranks that wait for a culprit, and the longest they have waited."""
    culprits = set(d.culprits)
    waiting = [s for s in d.ranks if set(s.waits_for) & culprits]
    return [s.rank for s in waiting], max((s.waited_s for s in waiting), default=0.0)


def wait_clause(d: Diagnosis, world: int) -> str:
    """``ranks 0–2 have waited in all_reduce #7 (group world) for 5.0 s``, or ""."""
    others, waited = _others(d)
    if not others or d.op is None:
        return ""
    said = (
        _("{ranks} has waited in {op} for {seconds} s")
        if len(others) == 1
        else _("{ranks} have waited in {op} for {seconds} s")
    )
    return said.format(
        ranks=ranks_label(others), op=op_label(d.op, world), seconds=_seconds(waited)
    )


def _exit(code: int | None) -> str:
    if code is not None and code < 0:
        return _("killed by {signal}").format(signal=signal.Signals(-code).name)
    return _("exit code {code}").format(code=code)


def _after(state: RankState, world: int) -> str:
    if state.last is None:
        return _("before its first operation")
    return _("after {op}").format(op=op_label(state.last, world))


def sentence(text: str) -> str:
    """``text`` ended as a sentence in the learner's language: a full stop, or 。 in Chinese."""
    return _("{text}.").format(text=text)


def explain(d: Diagnosis) -> str:
    """The finding, with its evidence, as one paragraph."""
    world = len(d.ranks)
    waited = wait_clause(d, world)
    tail = _("; ") + waited if waited else ""
    if d.kind == "dead":
        text = _("; ").join(
            _("{rank} died ({how}) {after}").format(
                rank=ranks_label([r]),
                how=_exit(d.ranks[r].exitcode),
                after=_after(d.ranks[r], world),
            )
            for r in d.culprits
        )
        return sentence(text + tail)
    if d.kind == "stopped":
        text = _("; ").join(
            _("{rank} is stopped (SIGSTOP or frozen): no heartbeat for {seconds} s").format(
                rank=ranks_label([r]), seconds=_seconds(d.ranks[r].silent_s)
            )
            for r in d.culprits
        )
        return sentence(text + tail)
    if d.kind == "mismatch":
        calls = _("; ").join(
            _("{ranks} called {op}").format(ranks=ranks_label(ranks), op=op_label(op, world, True))
            for ranks, op in d.sides
        )
        return calls + _(
            ". Every rank of a group must call the same collective, with the same dtype and"
            " element count, in the same order."
        )
    if d.kind == "deadlock":
        links = _("; ").join(
            _(", ").join(
                _("{rank} waits in {op}").format(rank=ranks_label([r]), op=op_label(op, world))
                for r in cycle
                if (op := d.ranks[r].op) is not None
            )
            for cycle in d.cycles
        )
        return _(
            "deadlock: {links}: each waits for the next, so none goes on. Let one side send first"
            " (even ranks send first), or post both with batch_isend_irecv."
        ).format(links=links)
    never = (
        _("{ranks} never entered {op}").format(
            ranks=ranks_label(list(d.culprits)), op=op_label(d.op, world)
        )
        if d.op is not None and d.culprits
        else ""
    )
    if d.kind == "slow":
        who = _("; ").join(
            _("{rank} is still working ({busy:.0%} of a core) at {line}").format(
                rank=ranks_label([r]), busy=d.ranks[r].busy, line=_where(d.ranks[r])
            )
            for r in d.culprits
        )
        limit = _(
            "the timeout ({seconds} s) is shorter than its work: raise it, or balance the work"
        ).format(seconds=f"{d.timeout_s:g}")
        return _("slow, not stuck: {who}{tail}; {limit}.").format(who=who, tail=tail, limit=limit)
    parts = []
    for r in d.culprits:
        s = d.ranks[r]
        if s.state == "working":
            parts.append(
                _("{rank} is working ({busy:.0%} of a core) at {line}").format(
                    rank=ranks_label([r]), busy=s.busy, line=_where(s)
                )
            )
        elif s.state == "finished":
            parts.append(
                _("{rank} finished the job {after}").format(
                    rank=ranks_label([r]), after=_after(s, world)
                )
            )
        else:
            parts.append(
                _("{rank} is idle ({busy:.0%} of a core) at {line}").format(
                    rank=ranks_label([r]), busy=s.busy, line=_where(s)
                )
            )
    head = never or _("{ranks} did not go on").format(ranks=ranks_label(list(d.culprits)))
    others, waited = _others(d)
    if never and others:
        said = (
            _(", in which {ranks} has waited for {seconds} s")
            if len(others) == 1
            else _(", in which {ranks} have waited for {seconds} s")
        )
        head += said.format(ranks=ranks_label(others), seconds=_seconds(waited))
    elif tail:
        head += tail
    return sentence(head + _("; ") + _("; ").join(parts))
