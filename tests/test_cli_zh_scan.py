"""Every command of ``edu-parallel`` in Chinese, scanned for English (issue 31: "0 English phrases
in every CLI subcommand's output and errors in zh mode").

The commands come from the parser: every leaf sub-command (``run ring``, ``exercise hint``, ...),
each value of a positional with ``choices`` and of the open positionals listed in
:data:`OPEN_VALUES` (``plan ALGO``, ``model COLLECTIVE``). Each needs an invocation below, run
in-process under ``language("zh")`` (one interpreter: torch loads once), whose stdout and stderr
hold no run of three English words (``helpers.english_phrases``) beyond :data:`ALLOWED`.
``lab`` and ``export`` are run for their help and errors only: no JupyterLab, no lesson runs.
"""

from __future__ import annotations

import inspect
import re

import pytest
from helpers import SHOWN_NAMES, cli, english_phrases, every_parser

from edu_parallel.app.cli import GRID_MAX_RANKS, argparse_in_language, build_parser, main
from edu_parallel.app.concepts.registry import CONCEPTS
from edu_parallel.app.model_command import WHAT
from edu_parallel.core.dims import MAX_LOCAL_WORLD_SIZE
from edu_parallel.core.i18n import LANG_VAR, language
from edu_parallel.core.width import width
from edu_parallel.core.workspace import WORKSPACE_VAR
from edu_parallel.exercises import EXERCISES, get_exercise
from edu_parallel.memory.model_states import ZERO_STAGES
from edu_parallel.plans.algorithms import ALGOS

# Runs of "English" words that are not English prose, each for its reason; nothing else passes.
ALLOWED = {
    *SHOWN_NAMES,
    "dp tp pp v zero mb M",  # planner: its columns, named as its options and JSON keys
    "GLOSSARY, errata, index,",  # lab --reset: the course's file names, as --reset takes them
    "(E, C, h)",  # run moe --help: GShard's buffer shape, in the lesson's symbols
}
# what is not prose, replaced before the scan: a list of valid identifiers after 以下之一：
# ("one of"), and a citation's "Name et al." (the prose around both is still scanned)
CHOICES = re.compile(r"以下之一：'?[\w./-]+'?(?:, '?[\w./-]+'?)*")
CITATION = re.compile(r"\(?\b[A-Z][a-z]+ et al\.")
# the positionals without ``choices`` whose every value is a command of its own
OPEN_VALUES = {("plan", "algo"): tuple(ALGOS), ("model", "what"): WHAT}

# commands that print a result (exit 0, or 1 for a graded failure), two ranks, small sizes;
# "{tmp}" is the test's folder
SMALL = {"compress": ("--steps", "3"), "async": ("--steps", "5"), "3d": ("--dp", "1", "--tp", "1")}
OUTPUTS = [
    *(("run", c, "--world-size", "2", *SMALL.get(c, ())) for c in CONCEPTS),
    *(("run", "allreduce", "--world-size", "2", "--algo", a) for a in ("naive", "ps")),
    *(("plan", a, "--world-size", "2") for a in ALGOS),
    ("plan", "ring", "--world-size", str(GRID_MAX_RANKS + 1)),  # the summary, without the grid
    ("bench", "collectives", "--world-size", "2", "--max-size", "4KiB"),
    *(("model", w) for w in WHAT),
    *(("model", "allreduce", "--world-size", "16", "--nodes", "2", "--algo", a)
      for a in ("ring", "double-tree", "hierarchical")),  # the formulas across nodes
    ("model", "allreduce", "--world-size", "16", "--nodes", "2", "--algo", "hierarchical",
     "--reduce-gbps", "100"),
    ("model", "allreduce", "--world-size", "1"),
    ("memory", "--params", "7e9", "--gpus", "8", "--zero", "2"),
    ("planner", "--model", "llama3-8b", "--nodes", "1", "--gpus-per-node", "8",
     "--global-batch", "64", "--seq", "2048", "--all"),
    ("exercise", "list"),
    ("exercise", "hint", "03"),
    ("exercise", "solution", "03"),
    ("exercise", "check", "03", "{tmp}/passes.py"),
    ("exercise", "check", "03", "{tmp}/fails.py"),
    ("tour", "--world-size", "2", "--no-input"),
    ("figure", "--out", "{tmp}/ring.png", "--world-size", "2"),
    ("lab", "--help"),
    ("export", "--help"),
]  # fmt: skip
# one-line errors (exit 2) of every command, each naming its option, value and range
ERRORS = [
    ("run", "ring", "--world-size", str(MAX_LOCAL_WORLD_SIZE + 1)),
    ("plan", "nosuch"),
    ("bench", "collectives", "--collective", "nosuch"),
    ("model", "nosuch"),
    ("model", "allreduce", "--algo", "hierarchical"),  # without --nodes
    ("memory", "--params", "7e9", "--gpus", "8", "--zero", str(max(ZERO_STAGES) + 1)),
    ("planner", "--model", "llama3-70b", "--nodes", "1", "--gpus-per-node", "8",
     "--global-batch", "64", "--seq", "2048"),  # no configuration fits an H100's memory
    ("exercise", "hint", "03", "--tier", str(len(get_exercise("03").hints) + 1)),
    ("exercise", "solution", "nosuch"),
    ("exercise", "check", "03", "{tmp}/missing.py"),
    ("exercise", "list", "--nosuch"),
    ("tour", "--world-size", "1"),
    ("figure", "--out", "{tmp}/ring.txt"),
    ("export",),
    ("export", "--html", "{tmp}/site", "--lessons", "nosuch"),
    ("export", "--html", "{tmp}/site", "--timeout", "0"),
    ("lab", "--port", "1"),
    ("lab", "--dir", "{tmp}/course", "--reset", "nosuch"),
]  # fmt: skip


def english_in(text: str, code: tuple[str, ...] = ()) -> list[str]:
    """The English phrases of ``text`` once ``code`` (source and signatures it prints), lists of
    valid values and citations are taken out."""
    for snippet in code:
        text = text.replace(snippet, " ")
    text = CITATION.sub("…", CHOICES.sub("以下之一：…", text))
    return english_phrases(text, allow=ALLOWED)


def printed_code(args: tuple[str, ...]) -> tuple[str, ...]:
    """The Python a command prints as it is: ``exercise list``'s signatures, a solution."""
    if args[:2] == ("exercise", "list"):
        return tuple(f"{e.function}({', '.join(e.params)})" for e in EXERCISES.values())
    if args[:2] == ("exercise", "solution") and args[2] in EXERCISES:
        return (inspect.getsource(get_exercise(args[2]).reference),)
    return ()


def required_commands(parser) -> set[str]:
    """Every command the parser knows, as typed: each leaf sub-command, times the values of its
    positional with choices or of :data:`OPEN_VALUES`."""
    out = set()
    for p in every_parser(parser):
        actions = p._actions
        if any(a.__class__.__name__ == "_SubParsersAction" for a in actions):
            continue
        name = p.prog.removeprefix("edu-parallel ")
        values = [
            a.choices or OPEN_VALUES.get((name, a.dest), ())
            for a in actions
            if not a.option_strings
        ]
        found = [v for vs in values for v in vs]
        out |= {f"{name} {v}" for v in found} if found else {name}
    return out


def unscanned(required: set[str], invocations: list[tuple[str, ...]]) -> list[str]:
    typed = [" ".join(args) + " " for args in invocations]
    return sorted(c for c in required if not any(t.startswith(c + " ") for t in typed))


@pytest.fixture
def zh(monkeypatch, tmp_path, capsys):
    """``run(args)``: ``edu-parallel *args`` in this process in Chinese (its ranks too), in a
    workspace of its own; the exit status and stdout + stderr."""
    monkeypatch.setenv(LANG_VAR, "zh")
    monkeypatch.setenv(WORKSPACE_VAR, str(tmp_path))
    (tmp_path / "passes.py").write_text(
        "from edu_parallel.exercises.problems.ring_allreduce import ring_allreduce"
        " as my_ring_allreduce\n"
    )
    (tmp_path / "fails.py").write_text("def my_ring_allreduce(ctx, tensor):\n    return tensor\n")

    def run(args: tuple[str, ...]) -> tuple[int, str]:
        capsys.readouterr()
        with language("zh"):
            try:
                code = main([a.replace("{tmp}", str(tmp_path)) for a in args])
            except SystemExit as exc:  # --help
                code = exc.code
        out = capsys.readouterr()
        return code, out.out + out.err

    return run


@pytest.mark.parametrize("args", OUTPUTS, ids=" ".join)
def test_every_command_prints_chinese(zh, args):
    code, text = zh(args)
    assert code in (0, 1) and "Traceback" not in text and text.strip(), text
    if args[:2] == ("exercise", "check"):
        assert code == (0 if "passes" in args[-1] else 1), text
    assert not english_in(text, printed_code(args)), text


@pytest.mark.parametrize("args", ERRORS, ids=" ".join)
def test_every_commands_errors_are_chinese_lines(zh, args):
    code, text = zh(args)
    assert code == 2 and text.startswith("错误：") and "\n" not in text.strip(), text
    assert not english_in(text), text


def test_every_command_has_a_scanned_invocation():
    """A new sub-command, concept, algorithm or collective fails here until it is scanned."""
    with language("zh"), argparse_in_language():
        required = required_commands(build_parser())
    assert {"run ring", "run 3d", "plan ring", "model nccl", "bench collectives"} <= required
    assert {"exercise check", "lab", "export", "tour", "figure"} <= required
    assert not unscanned(required, OUTPUTS + ERRORS)
    # planted: a command nobody runs is named
    assert unscanned(required | {"run nosuch"}, OUTPUTS + ERRORS) == ["run nosuch"]


def test_every_commands_help_has_no_english():
    with language("zh"), argparse_in_language():
        helps = {p.prog: p.format_help() for p in every_parser(build_parser())}
    found = {prog: english_in(text) for prog, text in helps.items()}
    assert not any(found.values()), {k: v for k, v in found.items() if v}


def test_the_scan_catches_english():
    """Planted: prose in a Chinese line, prose after a list of values, after a citation."""
    assert english_in("错误：--size=0 无效 expected a size") == ["expected a size"]
    assert english_in("以下之一：mlp (the lesson's small model)") == ["(the lesson's small model)"]
    assert english_in("公式 [Qi et al. 2023, as the paper says]") == ["as the paper"]
    assert english_in("rank ReduceScatter AllGather 发送合计") == []
    assert english_in("rank ReduceScatter AllGather sent") != []  # an entry is a whole run


def test_run_ring_in_a_chinese_terminal_names_its_phases_in_chinese():
    """The environment's language reaches the report (a subprocess, as a learner types it):
    its phases read as the glossary names them, and its table still lines up."""
    out = cli("run", "ring", "--world-size", "2", "--size", "4KiB", lang="zh")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "reduce-scatter" not in out.stdout and "all-gather" not in out.stdout
    steps = [ln for ln in lines if re.match(r"\s+\d+\s+(ReduceScatter|AllGather)\s", ln)]
    assert len(steps) == 2 and len({ln.index(":c") for ln in steps}) == 1, out.stdout
    assert not english_in(out.stdout + out.stderr), out.stdout


def test_chinese_tables_line_up(zh):
    """exercise list's columns and model's row labels, padded by display width."""
    _code, text = zh(("exercise", "list"))
    assert len({width(line) for line in text.splitlines() if line}) == 1, text
    _code, text = zh(("model", "allreduce"))
    rows = [ln for ln in text.splitlines()[1:] if ln and not ln.startswith(" ")]  # the summary
    labels = [m for ln in rows if (m := re.match(r"\S+ +(?=\S)", ln))]
    assert len(labels) >= 6 and {width(m.group()) for m in labels} == {11}, text
