"""Failures of the learner's code, said in the learner's terms: which line, which rank, which step.

* :func:`error_finding`: a rank raised (the learner's line from the remote traceback, read back in
  this process, where the notebook cell's source is known), called ``exit()``, ran out of its
  memory allowance, or died.
* :func:`hang_finding`: the job timed out. Each stuck rank's last published step says what it
  waited for; a probe says which line a rank that was not waiting was running. Read together:
  "rank 2 waited at step 3 for a message from rank 1 that was never sent (rank 1 had returned)",
  or a cycle of ranks that all receive first, or a loop that does not end.
"""

from __future__ import annotations

import ast
import linecache
import re
import textwrap

from ..core.errors import JobTimeoutError, WorkerError
from ..core.i18n import N_, _
from ..engine.matching import MessageSizeError
from .spec import RETURNED, Case, Finding

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
# A rank's published step while it sends or receives (engine/context.py, engine/execute.py), in
# the learner's language: (kind, message), kind None where the message names it as {kind}.
_WAIT_MESSAGES = (
    ("send", N_("{phase} step {step}: send to rank {peer}")),
    ("recv", N_("{phase} step {step}: recv from rank {peer}")),
    (None, N_("{phase} step {step}: waiting on {kind} with rank {peer}")),
    ("recv", N_("{phase} step {step}: waiting on recv from rank {peer}")),
)
_WAIT_FIELDS = {
    "phase": r"(?:.*? )?",  # with the space after it: a step published without a phase
    "step": r"(?P<step>-?\d+|None)",
    "peer": r"(?P<peer>\d+)",
    "kind": r"(?P<kind>send|recv)",
}
_COLLECTIVE = re.compile(r"^(?P<name>\w+) \((?P<phase>[^,]*), step (?P<step>-?\d+|None)\)$")
_PROBED = re.compile(r":(?P<line>\d+) in ")
UNTRACED = "UntracedCall: "  # how the traceback's last line names untraced.UntracedCall
SHIPPED = "<dynamic-code>"  # cloudpickle's file name for code it sent by value


def source_line(code_file: str, line: int) -> str:
    """'line 7: `ctx.send(buf, right)`' (the text when this process can read it)."""
    text = linecache.getline(code_file, line).strip()
    if text:
        return _("line {line}: `{text}`").format(line=line, text=text)
    return _("line {line}").format(line=line)


def loop_line(code_file: str, line: int) -> int:
    """The line of the innermost ``while`` or ``for`` whose body holds ``line``, else ``line``.

    A program stopped in a loop is caught on whichever line of it was running (``while True:``
    or the ``pass`` under it); the loop's own line names it the same way every time."""
    source = "".join(linecache.getlines(code_file))
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError):  # a fragment of a file this process cannot parse
        return line
    loops = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, (ast.While, ast.For, ast.AsyncFor))
        and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    return max(loops, default=line)


def learner_line(traceback_text: str, code_file: str) -> str:
    """The innermost line of ``code_file`` in a worker's traceback, or ""."""
    files = (code_file, SHIPPED)
    lines = [int(m["line"]) for m in _FRAME.finditer(traceback_text) if m["file"] in files]
    return source_line(code_file, lines[-1]) if lines else ""


def error_finding(err: WorkerError, code_file: str, case: Case) -> Finding:
    """A rank raised or died while running the learner's function."""
    tb = err.remote_traceback or ""
    last = tb.strip().splitlines()[-1] if tb.strip() else ""
    where = learner_line(tb, code_file)
    r = err.rank
    if isinstance(err, MessageSizeError):  # the job ended; a receive had the wrong size
        return Finding("error", False, str(err), case, rank=r, step=err.step)
    if UNTRACED in last:  # the learner's own call that the grader cannot count (untraced.py)
        said = last.split(UNTRACED, 1)[1]
        msg = _("rank {r}, {line}: {said}") if where else _("rank {r}: {said}")
        return Finding("error", False, msg.format(r=r, line=where, said=said), case, rank=r)
    if tb and last.startswith("SystemExit"):
        msg = (
            _("rank {r} called exit() at {line}: an exercise function must return its result")
            if where
            else _("rank {r} called exit(): an exercise function must return its result")
        )
    elif "MemoryError" in last or "can't allocate memory" in last or "not enough memory" in last:
        msg = (
            _(
                "rank {r} ran out of its memory allowance at {line} ({error}): allocate buffers "
                "the size of the input, not more"
            )
            if where
            else _(
                "rank {r} ran out of its memory allowance ({error}): allocate buffers the size "
                "of the input, not more"
            )
        )
    elif not tb and "SIGABRT" in str(err) and _wait(err.where) is not None:
        kind, peer, step = _wait(err.where)  # type: ignore[misc]
        msg = (
            _(
                "rank {r} was stopped by the gloo backend{at} while it waited to recv from rank "
                "{peer}: the message and the buffer had different sizes (sender and receiver "
                "disagree on which chunk, or how big)"
            )
            if kind == "recv"
            else _(
                "rank {r} was stopped by the gloo backend{at} while it waited to send to rank "
                "{peer}: the message and the buffer had different sizes (sender and receiver "
                "disagree on which chunk, or how big)"
            )
        )
        return Finding("error", False, msg.format(r=r, at=_at(step), peer=peer), case, rank=r)
    elif not tb:
        msg = _(
            "rank {r} died ({error}) while running your function; the rank's process ended "
            "(os._exit, a crash): return your result instead"
        )
        return Finding("error", False, msg.format(r=r, error=err), case, rank=r)
    else:
        msg = _("rank {r} raised at {line}: {error}") if where else _("rank {r} raised: {error}")
    return Finding("error", False, msg.format(r=r, line=where, error=last), case, rank=r)


def _wait(where: str) -> tuple[str, int, int | None] | None:
    """('recv' | 'send', peer, step) of a rank blocked in point-to-point communication."""
    for kind, pattern in _wait_patterns():
        m = pattern.search(where)
        if m is not None:
            step = None if m["step"] == "None" else int(m["step"])
            return kind or m["kind"], int(m["peer"]), step
    return None


def _wait_patterns() -> list[tuple[str | None, re.Pattern]]:
    """:data:`_WAIT_MESSAGES` as patterns, in the language the ranks published their steps in
    (the learner's: a job runs in the language of the call that started it), then in English."""
    out = []
    for kind, message in _WAIT_MESSAGES:
        for text in dict.fromkeys((_(message), message)):  # and English, the messages' source
            pattern = re.escape(text).replace(re.escape("{phase} "), re.escape("{phase}"))
            for name, field in _WAIT_FIELDS.items():
                pattern = pattern.replace(re.escape("{" + name + "}"), field)
            out.append((kind, re.compile(pattern)))
    return out


def _at(step: int | None) -> str:
    """' at step 3' (the ``{at}`` of a message, after a space; "" when the step is unknown)."""
    return " " + _("at step {step}").format(step=step) if step is not None else ""


def hang_finding(err: JobTimeoutError, world_size: int, case: Case, code_file: str) -> Finding:
    """A timeout explained: who waited for whom, and why that message never came."""
    returned = {r for r in err.ranks if err.where.get(r, "").startswith(RETURNED)}
    stuck = set(err.ranks) - returned  # a returned rank waits only in the grader's own check
    done = sorted(set(range(world_size)) - stuck)
    waits = {r: w for r in stuck if (w := _wait(err.where.get(r, ""))) is not None}
    sentences: list[str] = []
    first_rank, first_step = None, None
    in_cycle: set[int] = set()
    for cycle in wait_cycles(waits):
        in_cycle.update(cycle)
        kinds = {waits[r][0] for r in cycle}
        step = waits[cycle[0]][2]
        how = (
            _("every one receives before it sends")
            if kinds == {"recv"}
            else _("each waits on a message the next is not posting")
        )
        chain = " \u2192 ".join(str(r) for r in [*cycle, cycle[0]])
        if len(cycle) > 2:
            said = _("ranks {chain} each waited for the next{at}: {how} (a deadlock)")
        else:
            said = _("ranks {a} and {b} each waited for the other{at}: {how}")
            how = _("both receive before they send") if kinds == {"recv"} else how
        sentences.append(said.format(chain=chain, a=cycle[0], b=cycle[-1], at=_at(step), how=how))
    for r in sorted(waits):
        kind, peer, step = waits[r]
        first_rank = r if first_rank is None else first_rank
        first_step = step if first_step is None else first_step
        if r in in_cycle:
            continue
        recv = kind == "recv"
        if peer in done:
            said = (
                _(
                    "rank {r} waited{at} for a message from rank {peer}, but rank {peer} had "
                    "returned without sending it"
                )
                if recv
                else _(
                    "rank {r} waited{at} to send to rank {peer}, but rank {peer} had returned "
                    "without receiving it"
                )
            )
            line = ""
        elif peer in err.lines and peer not in waits:
            said = (
                _(
                    "rank {r} waited{at} for a message from rank {peer}, which was still running "
                    "{line}: a loop that does not end?"
                )
                if recv
                else _(
                    "rank {r} waited{at} to send to rank {peer}, which was still running {line}: "
                    "a loop that does not end?"
                )
            )
            line = _probed(err.lines[peer], code_file)
        else:
            said = (
                _("rank {r} waited{at} for a message from rank {peer}, which was at: {line}")
                if recv
                else _("rank {r} waited{at} to send to rank {peer}, which was at: {line}")
            )
            line = err.where[peer] if peer in err.where else _("finished")
        sentences.append(said.format(r=r, at=_at(step), peer=peer, line=line))
    for r in sorted(stuck - set(waits)):
        where = err.where.get(r, "")
        m = _COLLECTIVE.match(where)
        if m is not None:
            step = None if m["step"] == "None" else int(m["step"])
            if first_rank is None:
                first_rank, first_step = r, step
            said = _("rank {r} waited in {name}{at}; ranks {done} had returned without calling it")
            sentences.append(said.format(r=r, name=m["name"], at=_at(step), done=done))
        elif r in err.lines:
            first_rank = r if first_rank is None else first_rank
            if any(w[1] == r for w in waits.values()):
                continue  # said already, by the rank that waited for it
            said = _(
                "rank {r} was still running {line} when the time ran out: a loop that does not end?"
            )
            sentences.append(said.format(r=r, line=_probed(err.lines[r], code_file)))
        else:
            said = _("rank {r} did not finish (at: {where})")
            sentences.append(said.format(r=r, where=where or _("no step")))
    text = "; ".join(sentences) or str(err).splitlines()[0]
    return Finding("deadlock", False, text, case, rank=first_rank, step=first_step)


def wait_cycles(waits: dict[int, tuple[str, int, int | None]]) -> list[list[int]]:
    """Cycles in "rank r waits for rank p" (each once, from its smallest rank): a deadlock."""
    cycles: list[list[int]] = []
    seen: set[int] = set()
    for start in sorted(waits):
        path, r = [], start
        while r in waits and r not in path and r not in seen:
            path.append(r)
            r = waits[r][1]
        if r in path:
            cycle = path[path.index(r) :]
            low = cycle.index(min(cycle))
            cycles.append(cycle[low:] + cycle[:low])
        seen.update(path)
    return cycles


def _probed(text: str, code_file: str) -> str:
    """'<dynamic-code>:7 in f' as 'line 7: `while True:`' (the source read from ``code_file``)."""
    file, _sep, rest = text.rpartition(":")
    m = _PROBED.match(":" + rest)
    if not file or m is None:
        return text
    source = code_file if file == SHIPPED else file
    return source_line(source, loop_line(source, int(m["line"])))
