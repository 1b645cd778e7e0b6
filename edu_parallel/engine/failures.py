"""What a learner reads when a job fails: the messages of :class:`~edu_parallel.engine.cluster.
Cluster`'s errors, in the learner's language.

Each names the rank, the job and the rank's last step (``where``, published by the rank itself in
the job's language), and says what happens next: the workers were stopped and the next run starts
fresh ones. The numbers and identifiers (ranks, seconds, the job's function name, a signal name,
the exception's last line) are formatted outside the messages and passed in as placeholders.
"""

from __future__ import annotations

import signal

from ..core.diagnosis_text import sentence
from ..core.i18n import _


def job_label(name: str) -> str:
    """``job ring_allreduce``: what a failure names as the job that ran."""
    return _("job {name}").format(name=name)


def joining_label() -> str:
    """What a failure while the ranks start names as the job."""
    return _("joining the process group")


def restarted() -> str:
    """The sentence every failure of a job ends with."""
    return _("The workers were stopped; the next run starts fresh ones.")


def sentences(*parts: str) -> str:
    """``parts`` as one text: a space after an English sentence, none after a Chinese one."""
    out = parts[0]
    for part in parts[1:]:
        out += part if out.endswith(("。", "；", "：")) else " " + part
    return out


def closed_message(world_size: int) -> str:
    """:class:`ClusterClosedError`: a job sent to a closed cluster."""
    return _("this cluster is closed; create a new one: {call}").format(
        call=f"Cluster({world_size})"
    )


def raised_message(rank: int, what: str, where: str, last: str) -> str:
    """:class:`WorkerError` for a rank that raised: ``last`` is its traceback's last line."""
    return sentences(
        _("rank {rank} raised during {what}, at: {where}: {last}.").format(
            rank=rank, what=what, where=where, last=last
        ),
        restarted(),
    )


def died_message(rank: int, exitcode: int | None, what: str, where: str, waited: str = "") -> str:
    """:class:`WorkerError` for a rank whose process ended: by a signal, or with an exit code;
    ``waited``: the ranks left waiting for it (``ranks 1–3 have waited in all_reduce #2...``)."""
    how = _("exit code {code}").format(code=exitcode)
    if exitcode is not None and exitcode < 0:
        how = _("killed by {signal}").format(signal=signal.Signals(-exitcode).name)
    died = _("rank {rank} died ({how}) during {what}, at: {where}").format(
        rank=rank, how=how, what=what, where=where
    )
    return sentences(sentence(died + (_("; ") + waited if waited else "")), restarted())


def timeout_message(
    what: str,
    limit: float,
    watchdog: bool,
    where: dict[int, str],
    lines: dict[int, str],
    done: list[int],
    said: str = "",
    ending: str = "",
) -> str:
    """:class:`JobTimeoutError`: how long, then the diagnosis (``said``: which rank is at fault,
    and why, from the flight records); without one, the ranks that did not finish, each with its
    last step and the line it was running if it was not waiting. ``watchdog``: the limit counted
    from the last step any rank took, not from the start. ``ending``: what happens next, when
    not a cluster's restart (under torchrun: :func:`torchrun_ending`)."""
    timed_out = (
        _("{what} made no progress for {seconds} s (no rank took a step, sent or received)").format(
            what=what, seconds=f"{limit:g}"
        )
        if watchdog
        else _("{what} timed out after {seconds} s").format(what=what, seconds=f"{limit:g}")
    )
    if said:
        return sentences(timed_out + _(": ") + said, ending or restarted())
    detail = _("; ").join(
        _("rank {rank} at: {where}").format(rank=r, where=w)
        + (" " + _("(running {line})").format(line=lines[r]) if r in lines else "")
        for r, w in where.items()
    )
    return sentences(
        _("{timed_out}: ranks {stuck} did not finish ({detail}); ranks {done} finished.").format(
            timed_out=timed_out, stuck=sorted(where), detail=detail, done=done
        ),
        restarted(),
    )


def torchrun_ending() -> str:
    """What follows a failed rank under torchrun."""
    return _("This rank exits, and torchrun stops the job's other ranks.")


def mismatch_message(said: str, aborted: int | None = None) -> str:
    """:class:`CollectiveMismatchError`: the diagnosis, caught before gloo ran the collective,
    or after gloo aborted rank ``aborted`` on it."""
    if aborted is None:
        head = _("collective mismatch, caught before gloo ran it: {said}").format(said=said)
    else:
        head = _("collective mismatch (gloo aborted rank {rank} on it): {said}").format(
            rank=aborted, said=said
        )
    return sentences(head, restarted())
