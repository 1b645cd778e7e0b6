"""``edu-parallel exercise``: the lessons' coding exercises outside Jupyter.

    edu-parallel exercise list                     # every exercise, this workspace's progress
    edu-parallel exercise check 03 my_solution.py    # grade it on real ranks: exit 0 pass, 1 fail
    edu-parallel exercise check 03 my_solution.py --figure feedback.png
    edu-parallel exercise hint 03 --tier 2
    edu-parallel exercise solution 03                # the reference, for instructors

``check`` loads the file as a module, finds the exercise's function in it (``--function`` names
another), and runs the same grader as the notebook, with a one-screen report. A file that does not
parse, raises on import or lacks the function is a failed try with its line named, not a traceback.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib.util
import inspect
import json
import os
import re
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import exercises  # torch-backed names load on first use: `list --help` stays quick
from ..core.errors import bad_value, check_int
from ..core.i18n import _
from ..exercises.diagnose import learner_line, loop_line, source_line
from ..exercises.progress import record_try
from ..exercises.spec import Exercise
from .paths import check_output_file, writing

LEARNER_MODULE = "edu_parallel_learner_solution"


class LearnerFileError(Exception):
    """The learner's file cannot give the function: it does not parse, raises, or lacks it."""


def add_exercise_arguments(parser: argparse.ArgumentParser, parser_class: Any) -> None:
    sub = parser.add_subparsers(dest="action", required=True, parser_class=parser_class)
    ls = sub.add_parser("list", help=_("every exercise and this workspace's progress"))
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=run_list)
    chk = sub.add_parser("check", help=_("grade a solution file on real ranks (exit 0: pass)"))
    chk.add_argument("exercise", help=_("the lesson number, e.g. 03"))
    chk.add_argument("path", help=_("a .py file that defines the exercise's function"))
    chk.add_argument("--function", default=None, help=_("its name, if not the exercise's"))
    chk.add_argument("--json", action="store_true", help=_("print one JSON object"))
    chk.add_argument(
        "--figure",
        metavar="FILE",
        help=_("write the feedback picture (your run, the reference) as PNG"),
    )
    chk.set_defaults(func=run_check)
    hnt = sub.add_parser("hint", help=_("a hint: 1 a nudge, 2 the idea, 3 the key line"))
    hnt.add_argument("exercise")
    hnt.add_argument("--tier", type=int, default=1)
    hnt.set_defaults(func=run_hint)
    sol = sub.add_parser("solution", help=_("print the reference solution (for instructors)"))
    sol.add_argument("exercise")
    sol.set_defaults(func=run_solution)


def run_list(a: argparse.Namespace) -> int:
    table = exercises.progress_table(translate=not a.json)
    if a.json:
        print(json.dumps(table.to_dict(orient="records"), indent=1))
        return 0
    import pandas as pd  # the table's own library, loaded with it

    # columns padded by display width: a Chinese header or title takes two columns a character
    with pd.option_context("display.unicode.east_asian_width", True):
        print(table.to_string(index=False))
    return 0


def load_function(path: str, exercise: Exercise, name: str | None = None) -> Any:
    """The function ``name`` (default: the exercise's) defined by the file at ``path``."""
    file = Path(path).resolve()
    if file.suffix != ".py" or not file.is_file():
        raise bad_value("path", path, _("an existing .py file that defines the function"))
    name = name or exercise.function
    try:  # bytes, as Python reads a file: its BOM and coding line decide, not this process
        compile(file.read_bytes(), str(file), "exec")
    except SyntaxError as err:
        where = _("{file} line {line}: {message}").format(
            file=file.name, line=err.lineno, message=err.msg
        )
        raise LearnerFileError(where) from None
    stuck = trial_load(file, exercise.timeout_s)
    if stuck:
        raise LearnerFileError(stuck)
    spec = importlib.util.spec_from_file_location(LEARNER_MODULE, file)
    module: ModuleType = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[LEARNER_MODULE] = module
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except BaseException as err:  # SystemExit too: the file's own code ran
        line = learner_line(traceback.format_exc(), str(file))
        raised = (
            _("{file} raised while loading at {line}: {error}")
            if line
            else _("{file} raised while loading: {error}")
        )
        error = f"{type(err).__name__}: {err}"
        raise LearnerFileError(raised.format(file=file.name, line=line, error=error)) from None
    fn = getattr(module, name, None)
    if fn is None:
        defined = [n for n, v in vars(module).items() if inspect.isfunction(v)]
        missing = (
            _("{file} defines no function `{name}` (it defines: {defined})")
            if defined
            else _("{file} defines no function `{name}` (it defines no function)")
        )
        raise LearnerFileError(
            missing.format(file=file.name, name=name, defined=", ".join(defined))
        )
    return fn


OUT_OF_MEMORY = 86  # the trial child's exit status after a MemoryError
FAULT_HEADER = "Timeout ("  # how faulthandler.dump_traceback_later starts its dump
_DUMP_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+) in ')


def trial_load(file: Path, limit_s: float) -> str:
    """Load ``file`` once in a forked child, its output discarded, within ``limit_s`` seconds:
    "" when it loads (or raises: the real load names the line), else what stopped it, in one
    line: a loop at import named by its line (faulthandler's dump of the child), an ``os._exit``,
    or a signal. The child inherits torch from this process, so an ``import torch`` is free."""
    if not hasattr(os, "fork"):
        return ""
    import torch  # noqa: F401 - imported before the fork: the file's own import of it is free

    with tempfile.TemporaryFile() as dump:
        pid = os.fork()
        if pid == 0:  # the child: load, say nothing, leave without running any cleanup
            code = 0
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                faulthandler.dump_traceback_later(limit_s, exit=True, file=dump)
                spec = importlib.util.spec_from_file_location(LEARNER_MODULE, file)
                spec.loader.exec_module(importlib.util.module_from_spec(spec))  # type: ignore
            except MemoryError:
                code = OUT_OF_MEMORY
            except BaseException:  # noqa: BLE001 - the parent's own load names its line
                code = 0
            os._exit(code)
        _pid, status = os.waitpid(pid, 0)
        dump.seek(0)
        text = dump.read().decode(errors="replace")
    if text.startswith(FAULT_HEADER):
        lines = [int(m["line"]) for m in _DUMP_FRAME.finditer(text) if m["file"] == str(file)]
        where = source_line(str(file), loop_line(str(file), lines[0])) if lines else ""
        msg = (
            _("{file} did not finish loading within {limit:g} s: it loops at {line}")
            if where
            else _("{file} did not finish loading within {limit:g} s")
        )
        return msg.format(file=file.name, limit=limit_s, line=where)
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        killed = (
            _("{file} was killed by {signal} while loading (out of memory?)")
            if sig == "SIGKILL"
            else _("{file} was killed by {signal} while loading")
        )
        return killed.format(file=file.name, signal=sig)
    if os.WEXITSTATUS(status) == OUT_OF_MEMORY:
        return _("{file} ran out of memory while loading (MemoryError)").format(file=file.name)
    if os.WEXITSTATUS(status) != 0:
        return _(
            "{file} ended the process while loading (exit status {code}): an exercise file "
            "defines its function; it does not exit"
        ).format(file=file.name, code=os.WEXITSTATUS(status))
    return ""


def run_check(a: argparse.Namespace) -> int:
    ex = exercises.get_exercise(a.exercise)
    picture = check_output_file(a.figure, "--figure", (".png",)) if a.figure else None
    try:
        fn = load_function(a.path, ex, a.function)
    except LearnerFileError as err:
        record_try(ex, False)
        fail = _("FAIL {error}").format(error=err)
        _print(a, {"exercise": ex.id, "passed": False, "error": str(err)}, fail)
        return 1
    result = exercises.grade(ex, fn)
    record_try(ex, result.passed)
    findings = [
        {"case": f.case.label() if f.case else None, "check": f.check, "ok": f.ok}
        | {"note": f.note, "message": f.message, "rank": f.rank, "step": f.step}
        for f in result.findings
    ]
    data = {"exercise": ex.id, "passed": result.passed, "wall_s": round(result.wall_s, 3)}
    _print(a, data | {"findings": findings}, result.report())  # before the picture can fail
    sys.stdout.flush()
    if picture is not None:
        with writing("--figure", picture):
            left_out = exercises.save_stacked(
                (ex.picture or exercises.default_picture)(result), picture
            )
        if left_out:
            note = _(
                "note: {n} interactive figure(s) of exercise {id} draw in the notebook only;"
                " {picture} holds the others"
            )
            print(note.format(n=left_out, id=ex.id, picture=picture), file=sys.stderr)
    return 0 if result.passed else 1


def _print(a: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    print(json.dumps(data, indent=1) if a.json else text)


def run_hint(a: argparse.Namespace) -> int:
    ex = exercises.get_exercise(a.exercise)
    tier = check_int("--tier", a.tier, 1, len(ex.hints))
    line = _("exercise {id}, hint {tier} of {n}: {hint}")
    print(line.format(id=ex.id, tier=tier, n=len(ex.hints), hint=exercises.hint(ex, tier)))
    return 0


def run_solution(a: argparse.Namespace) -> int:
    ex = exercises.get_exercise(a.exercise)
    print(
        _("# exercise {id}: {title} (the reference solution)").format(
            id=ex.id, title=ex.shown_title()
        )
    )
    print(inspect.getsource(ex.reference))
    return 0
