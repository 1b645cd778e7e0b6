"""``edu-parallel``: run a concept, open the course, take the terminal tour.

    edu-parallel run ring --world-size 4 --size 1MiB [--dtype float32] [--json] [--trace FILE]
    edu-parallel run allreduce --algo naive --world-size 4 --size 64KiB
    edu-parallel run allreduce --algo ps --servers 2 --world-size 4 --json
    edu-parallel run 3d --dp 2 --tp 2 --pp 2 [--ep 1] [--zero 1] [--json]
    edu-parallel plan ring --world-size 4
    edu-parallel model allreduce --algo ring --world-size 64 --size 1GiB --link nvlink4 [--json]
    edu-parallel memory --params 7.5e9 --gpus 64 --zero 3 [--offload optimizer] [--json]
    edu-parallel planner --model llama3-70b --nodes 16 --gpus-per-node 8 --gpu h100 \\
        --global-batch 1024 --seq 8192 [--memory-gb 80] [--top 10] [--all] [--json]
    edu-parallel exercise check 03 my_ring.py   # grade your own algorithm on real ranks
    edu-parallel lab [--dir DIR] [--reset 03]  # the lessons in JupyterLab, in your own copy
    edu-parallel tour           # the same first steps in the terminal, no browser
    edu-parallel export --html site [--lessons 03]  # the lessons, run, as offline HTML
    torchrun --standalone --nproc-per-node 2 -m edu_parallel run ring --size 1MiB

Errors print on one line (parameter, value, valid range) and exit with status 2, no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .. import comm, engine
from ..core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from ..core.errors import EngineError, bad_value, check_timeout, spelled_as
from ..core.i18n import LANGUAGES, N_, _, get_language, set_language
from ..core.units import check_dtype
from ..engine.executor import in_torchrun, partial_torchrun_vars
from ..plans.algorithms import build_plan
from ..plans.checker import explain, validate
from .concepts.registry import CONCEPTS
from .exercise_command import add_exercise_arguments
from .export.site import add_export_arguments
from .help_width import DisplayWidthHelpFormatter
from .lab import run_lab
from .memory_command import add_memory_arguments, run_memory
from .model_command import add_model_arguments, run_model
from .paths import PICTURE_SUFFIXES, check_output_file, same_file, writing
from .planner_command import add_planner_arguments, run_planner
from .tour import run_tour, save_readme_figure


class CLIError(Exception):
    """A usage error, printed on one line."""


# argparse's own words that a learner meets (usage, help headings, usage errors). argparse looks
# them up through its module-level ``_`` (``from gettext import gettext as _``) at run time; while
# ``main`` parses, that name is ours, so they read in the learner's language. Python 3.10-3.13.
ARGPARSE_MESSAGES = (
    N_("usage: "),
    N_("positional arguments"),
    N_("options"),
    N_("optional arguments"),
    N_("show this help message and exit"),
    N_("argument %(argument_name)s: %(message)s"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"),
    N_("invalid %(type)s value: %(value)r"),
    N_("the following arguments are required: %s"),
    N_("unrecognized arguments: %s"),
    N_("expected one argument"),
    N_("expected at least one argument"),
    N_("expected at most one argument"),
    N_("ambiguous option: %(option)s could match %(matches)s"),
    N_("one of the arguments %s is required"),
    N_("not allowed with argument %s"),
    N_("ignored explicit argument %r"),
)


@contextmanager
def argparse_in_language() -> Iterator[None]:
    """argparse's messages in the learner's language, inside the block only."""
    saved = argparse._  # type: ignore[attr-defined]
    argparse._ = _  # type: ignore[attr-defined]
    try:
        yield
    finally:
        argparse._ = saved  # type: ignore[attr-defined]


class _Parser(argparse.ArgumentParser):
    """Every parser of the command line (sub-commands' too): help wrapped by display width, and an
    error raised as one line (:class:`CLIError`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DisplayWidthHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CLIError(f"{self.prog}: {message}")


def _run(a: argparse.Namespace) -> int:
    concept = CONCEPTS[a.concept]
    check_timeout("timeout", a.timeout)  # before torch loads: a bad value costs no time
    for option, path in (("--trace", a.trace), ("--chrome-trace", a.chrome_trace)):
        if path is not None:  # before the run: a bad path must not cost the run
            check_output_file(path, option)
    if a.trace and a.chrome_trace and same_file(a.trace, a.chrome_trace):
        raise bad_value(
            "--chrome-trace", a.chrome_trace, _("a file other than --trace's (both would write it)")
        )
    torchrun = in_torchrun()  # then the launcher's WORLD_SIZE, else --world-size local ranks
    leftover = partial_torchrun_vars()
    if leftover:
        note = _(
            "note: {names} set without the other torchrun variables: running a local cluster"
            " (unset {unset} if left over from another job)"
        )
        print(note.format(names=", ".join(leftover), unset=" ".join(leftover)), file=sys.stderr)
    # The run's dims and spec, each checked once here (the world size, the degrees, every
    # option); the executor, the runner and the ranks receive them and trust them.
    launched = int(os.environ["WORLD_SIZE"]) if torchrun else None
    dims, spec = concept.prepare(a, launched)
    bar = None if torchrun else run_bar()
    if torchrun:
        executor = engine.TorchrunExecutor(a.backend, a.timeout, dims)
    else:
        executor = engine.Cluster(dims, a.backend, timeout=a.timeout, watchdog=True, progress=bar)
    try:
        with executor:
            report = concept.run(executor, spec)
    finally:
        if bar is not None:  # a run that failed: its bar ends where it stood, before the error
            bar.close()
    if report is None:  # a non-zero rank under torchrun
        return 0
    if a.json:  # the result first: a file that fails to write below does not lose it
        data = report.to_json_dict()
        data["backend"] = executor.backend
        print(json.dumps(data), flush=True)
    else:
        print(concept.render(report), flush=True)
    if a.trace:
        with writing("--trace", a.trace):
            report.trace.save(a.trace)
    if a.chrome_trace:
        with writing("--chrome-trace", a.chrome_trace):
            report.trace.save_chrome_trace(a.chrome_trace)
    if not a.json:
        for label, path in (
            (_("trace"), a.trace),
            (_("chrome trace (open in ui.perfetto.dev)"), a.chrome_trace),
        ):
            if path:
                print(f"{label}: {path}")
    return 0 if getattr(report, "matches_builtin", True) else 1


def run_bar() -> comm.ProgressBar:
    """The bar a local run draws on stderr while its ranks step: the slowest rank's
    ``ctx.progress``; nothing where stderr is not a terminal (a pipe, a log, a test)."""
    return comm.ProgressBar(_("steps (slowest rank)"), unit=_("step"), disable=None)


def _bench(a: argparse.Namespace) -> int:
    names = comm.check_collectives(
        None if a.collective == "all" else [a.collective.replace("-", "_")]
    )
    sizes = comm.size_sweep(a.min_size, a.max_size, a.factor)
    check_dtype(a.dtype)
    dims = ParallelDims.local(a.world_size)
    comm.check_sweep_fits(names, sizes, a.dtype, dims.world_size, a.max_size)
    with engine.Cluster(dims, a.backend, timeout=a.timeout, watchdog=True) as cluster:
        progress = None if a.json else comm.progress_bar
        rows = comm.bench_collectives(cluster, names, sizes, a.dtype, progress)
    print(json.dumps(rows) if a.json else comm.format_bench(rows))
    return 0 if all(r["verified"] for r in rows) else 1


# ``plan`` prints every transfer and the rank x step grid up to GRID_MAX_RANKS ranks, a summary
# above; a ring plan holds 2(N-1) N transfers, so building one for more than PLAN_MAX_RANKS ranks
# would take minutes and gigabytes (``edu-parallel model`` predicts any size without a plan).
# At 256 ranks every algorithm builds, validates and prints its summary in about 3 s and 0.6 GB.
GRID_MAX_RANKS = 32
PLAN_MAX_RANKS = 256


def _plan(a: argparse.Namespace) -> int:
    if not isinstance(a.world_size, int) or not 1 <= a.world_size <= PLAN_MAX_RANKS:
        raise bad_value(
            "world_size",
            a.world_size,
            _(
                "an integer in [1, {plan_max_ranks}] for `plan`, which lists every transfer (a"
                " ring holds 2(N-1) N of them); `edu-parallel model` predicts larger sizes"
            ).format(plan_max_ranks=PLAN_MAX_RANKS),
        )
    plan = build_plan(a.algo, a.world_size, a.servers)
    if a.world_size <= GRID_MAX_RANKS:
        print(plan.to_text())
        print()
        print(explain(plan))
        return 0
    problems = validate(plan)
    transfers = sum(len(s.transfers) for s in plan.steps)
    busiest = max(
        (sum(t.src == r for t in s.transfers) for s in plan.steps for r in (0,)), default=0
    )
    head = f"plan {plan.name} {plan.collective} n={plan.world_size} chunks={plan.num_chunks}:"
    summary = _(
        "{head} {steps} steps, {transfers} transfers (rank 0 sends {busiest} per step at most)\n"
        "(the transfers and the rank x step grid are printed up to {limit} ranks; above, they"
        " are unreadable)"
    )
    print(
        summary.format(
            head=head,
            steps=len(plan.steps),
            transfers=f"{transfers:,}",
            busiest=busiest,
            limit=GRID_MAX_RANKS,
        )
    )
    if problems:
        first = _("!! {n} problems, the first: {message}")
        print(first.format(n=len(problems), message=problems[0].message))
        return 1
    valid = _("plan {name} is valid: it computes {collective} in {steps} steps")
    print(valid.format(name=plan.name, collective=plan.collective, steps=len(plan.steps)))
    return 0


def _lab(a: argparse.Namespace) -> int:
    return run_lab(a.dir, a.port, a.no_browser, a.reset, a.lang)


def _tour(a: argparse.Namespace) -> int:
    if a.lang is not None:
        set_language(a.lang)
    return run_tour(world_size=a.world_size, interactive=False if a.no_input else None)


def _figure(a: argparse.Namespace) -> int:
    out = check_output_file(a.out, "--out", PICTURE_SUFFIXES)
    with writing("--out", out):
        print(save_readme_figure(out, world_size=a.world_size))
    return 0


def package_version() -> str:
    """The installed distribution's version (pyproject.toml's), as pip reports it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("edu-parallel")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="edu-parallel", description=_("Distributed training and communication, run for real.")
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"edu-parallel {package_version()}",
        help=_("show program's version number and exit"),
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser(
        "run", help=_("run a concept on a local cluster of worker processes (or under torchrun)")
    )
    concepts = run.add_subparsers(
        dest="concept", required=True, parser_class=_Parser, metavar="CONCEPT"
    )
    for name, concept in CONCEPTS.items():
        p = concepts.add_parser(name, help=concept.describe())
        p.add_argument(
            "--world-size",
            type=int,
            default=4,
            help=_("ranks, 1..{max_local_world_size} (default 4); ignored under torchrun").format(
                max_local_world_size=MAX_LOCAL_WORLD_SIZE
            ),
        )
        p.add_argument("--backend", default="auto", help=_("auto, gloo or nccl (default auto)"))
        p.add_argument(
            "--timeout",
            type=float,
            default=30.0,
            help=_(
                "seconds a job may go without progress (no rank takes a step, sends or receives)"
                " before it is stopped as hung (default 30)"
            ),
        )
        p.add_argument("--json", action="store_true", help=_("print one JSON object"))
        p.add_argument("--trace", metavar="FILE", help=_("write the trace as JSON"))
        p.add_argument("--chrome-trace", metavar="FILE", help=_("write a Chrome/Perfetto trace"))
        concept.add_arguments(p)
        p.set_defaults(func=_run)
    plan = sub.add_parser("plan", help=_("print an algorithm's plan and its rank x step grid"))
    plan.add_argument(
        "algo", help=_("ring, naive, tree, double-tree, ps, ps-sharded, rabenseifner")
    )
    plan.add_argument("--world-size", type=int, default=4)
    plan.add_argument("--servers", type=int, default=None, help=_("parameter servers (ps only)"))
    plan.set_defaults(func=_plan)
    bench = sub.add_parser("bench", help=_("an nccl-tests-style table of the engine's collectives"))
    bench.add_argument("what", choices=["collectives"], help=_("what to benchmark"))
    bench.add_argument(
        "--world-size",
        type=int,
        default=4,
        help=_("ranks, 1..{max_local_world_size} (default 4)").format(
            max_local_world_size=MAX_LOCAL_WORLD_SIZE
        ),
    )
    bench.add_argument(
        "--collective", default="all", help=_("all (default) or one of all_reduce, all_gather, ...")
    )
    bench.add_argument("--min-size", default="1KiB", help=_("smallest size (default 1KiB)"))
    bench.add_argument("--max-size", default="4MiB", help=_("largest size (default 4MiB)"))
    bench.add_argument(
        "--factor", type=int, default=4, help=_("size multiplier between rows (default 4)")
    )
    bench.add_argument("--dtype", default="float32")
    bench.add_argument("--backend", default="auto")
    bench.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help=_(
            "seconds a job may go without progress (no rank takes a step, sends or receives)"
            " before it is stopped as hung (default 60)"
        ),
    )
    bench.add_argument("--json", action="store_true", help=_("print the rows as JSON"))
    bench.set_defaults(func=_bench)

    model = sub.add_parser("model", help=_("predict a collective's time with the alpha-beta model"))
    add_model_arguments(model)
    model.set_defaults(func=run_model)

    memory = sub.add_parser(
        "memory", help=_("model-state bytes per GPU with ZeRO, offload, TP, PP")
    )
    add_memory_arguments(memory)
    memory.set_defaults(func=run_memory)
    planner = sub.add_parser(
        "planner", help=_("rank every DP x TP x PP configuration of a model on a cluster")
    )
    add_planner_arguments(planner)
    planner.set_defaults(func=run_planner)
    exercise = sub.add_parser(
        "exercise", help=_("the coding exercises: list, check, hint, solution")
    )
    add_exercise_arguments(exercise, _Parser)
    lab = sub.add_parser("lab", help=_("open the course in JupyterLab"))
    lab.add_argument(
        "--dir", default=None, help=_("your copy of the lessons (default ~/edu-parallel-course)")
    )
    lab.add_argument(
        "--reset",
        nargs="+",
        default=(),
        metavar="LESSON",
        help=_("replace your copy of these lessons (03, 03_ring_allreduce, all) with the course's"),
    )
    lab.add_argument(
        "--port", type=int, default=None, help=_("port on 127.0.0.1 (default: Jupyter's choice)")
    )
    lab.add_argument(
        "--no-browser", action="store_true", help=_("print the URL instead of opening a browser")
    )
    lab.add_argument(
        "--lang",
        choices=sorted(LANGUAGES),
        default=None,
        help=_(
            "the course's language, en or zh (简体中文); default: EDU_PARALLEL_LANG, the locale"
        ),
    )
    lab.set_defaults(func=_lab)
    tour = sub.add_parser("tour", help=_("the first lesson in the terminal, no browser"))
    tour.add_argument("--world-size", type=int, default=4)
    tour.add_argument(
        "--no-input", action="store_true", help=_("do not ask the quiz; print the answers")
    )
    tour.add_argument(
        "--lang",
        choices=sorted(LANGUAGES),
        default=None,
        help=_("the tour's language, en or zh (简体中文); default: EDU_PARALLEL_LANG, the locale"),
    )
    tour.set_defaults(func=_tour)
    fig = sub.add_parser("figure", help=_("draw the README picture from a real run"))
    fig.add_argument("--out", default="assets/ring_allreduce.png")
    fig.add_argument("--world-size", type=int, default=4)
    fig.set_defaults(func=_figure)
    add_export_arguments(
        sub.add_parser("export", help=_("the lessons, run, as an offline HTML site"))
    )
    return parser


def option_spellings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """``{dest: "--option"}`` for every option of the command ``args`` chose (its parser and the
    subcommands on its path): an error about ``dir`` then names ``--dir``, as the user typed it."""
    names: dict[str, str] = {}
    found: argparse.ArgumentParser | None = parser
    while found is not None:
        current, found = found, None
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                found = action.choices.get(getattr(args, action.dest, None) or "")
            elif action.option_strings and action.dest != argparse.SUPPRESS:
                names[action.dest] = max(action.option_strings, key=len)
    return names


def entry() -> None:
    """The ``edu-parallel`` program (console script and ``python -m edu_parallel``): :func:`main`,
    then the process ends with its status; a torchrun rank ends through ``engine.leave``, without
    Python's finalization. :func:`main` itself only returns, so it can be called in a process
    that goes on (a test, a notebook)."""
    try:
        code = main()
        sys.stdout.flush()  # a closed pipe is found here, not at exit
    except BrokenPipeError:  # `edu-parallel memory | head -1`: the reader left; so do we
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        code = 141  # 128 + SIGPIPE, as a shell reports a writer the pipe stopped
    if in_torchrun():
        engine.leave(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        get_language()  # a bad EDU_PARALLEL_LANG is named here, before any work
        with argparse_in_language():
            parser = build_parser()
            args = parser.parse_args(argv)
        with spelled_as(option_spellings(parser, args)):
            return args.func(args)
    except (ValueError, CLIError, EngineError) as exc:
        message = str(exc.args[0]) if exc.args else str(exc)
        print(_("error: {message}").format(message=" ".join(message.split())), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(_("error: interrupted; the workers were stopped"), file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
