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
import sys
from collections.abc import Sequence

from .. import comm, engine
from ..core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from ..core.errors import EngineError, bad_value, check_timeout
from ..core.units import check_dtype
from ..engine.executor import in_torchrun, partial_torchrun_vars, torchrun_dims
from ..plans.algorithms import build_plan
from ..plans.checker import explain, validate
from .concepts import CONCEPTS
from .exercise_command import add_exercise_arguments
from .export import add_export_arguments
from .lab import run_lab
from .memory_command import add_memory_arguments, run_memory
from .model_command import add_model_arguments, run_model
from .paths import PICTURE_SUFFIXES, check_output_file
from .planner_command import add_planner_arguments, run_planner
from .tour import run_tour, save_readme_figure


class CLIError(Exception):
    """A usage error, printed on one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise CLIError(f"{self.prog}: {message}")


def _run(a: argparse.Namespace) -> int:
    concept = CONCEPTS[a.concept]
    check_timeout("timeout", a.timeout)  # before torch loads: a bad value costs no time
    for option, path in (("--trace", a.trace), ("--chrome-trace", a.chrome_trace)):
        if path is not None:  # before the run: a bad path must not cost the run
            check_output_file(path, option)
    torchrun = in_torchrun()  # then the launcher's WORLD_SIZE, else --world-size local ranks
    leftover = partial_torchrun_vars()
    if leftover:
        print(
            f"note: {', '.join(leftover)} set without the other torchrun variables: running a"
            f" local cluster (unset {' '.join(leftover)} if left over from another job)",
            file=sys.stderr,
        )
    dims = torchrun_dims() if torchrun else ParallelDims.local(concept.world_size(a))
    spec = concept.check(a, dims)
    if torchrun:
        executor = engine.TorchrunExecutor(a.backend, a.timeout, dims)
    else:
        executor = engine.Cluster(dims, a.backend, timeout=a.timeout)
    with executor:
        report = concept.run(executor, spec)
    if report is None:  # a non-zero rank under torchrun
        return 0
    if a.trace:
        report.trace.save(a.trace)
    if a.chrome_trace:
        report.trace.save_chrome_trace(a.chrome_trace)
    if a.json:
        data = report.to_json_dict()
        data["backend"] = executor.backend
        print(json.dumps(data))
    else:
        print(concept.render(report))
        for label, path in (
            ("trace", a.trace),
            ("chrome trace (open in ui.perfetto.dev)", a.chrome_trace),
        ):
            if path:
                print(f"{label}: {path}")
    return 0 if getattr(report, "matches_builtin", True) else 1


def _bench(a: argparse.Namespace) -> int:
    names = comm.check_collectives(
        None if a.collective == "all" else [a.collective.replace("-", "_")]
    )
    sizes = comm.size_sweep(a.min_size, a.max_size, a.factor)
    check_dtype(a.dtype)
    with engine.Cluster(ParallelDims.local(a.world_size), a.backend, timeout=a.timeout) as cluster:
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
            f"an integer in [1, {PLAN_MAX_RANKS}] for `plan`, which lists every transfer (a ring"
            " holds 2(N-1) N of them); `edu-parallel model` predicts larger sizes",
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
    print(
        f"plan {plan.name} {plan.collective} n={plan.world_size} chunks={plan.num_chunks}:"
        f" {len(plan.steps)} steps, {transfers:,} transfers (rank 0 sends {busiest} per step at"
        f" most)\n(the transfers and the rank x step grid are printed up to {GRID_MAX_RANKS}"
        " ranks; above, they are unreadable)"
    )
    if problems:
        print(f"!! {len(problems)} problems, the first: {problems[0].message}")
        return 1
    print(f"plan {plan.name} is valid: it computes {plan.collective} in {len(plan.steps)} steps")
    return 0


def _lab(a: argparse.Namespace) -> int:
    return run_lab(a.dir, a.port, a.no_browser, a.reset)


def _tour(a: argparse.Namespace) -> int:
    return run_tour(world_size=a.world_size, interactive=False if a.no_input else None)


def _figure(a: argparse.Namespace) -> int:
    out = check_output_file(a.out, "--out", PICTURE_SUFFIXES)
    print(save_readme_figure(out, world_size=a.world_size))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="edu-parallel", description="Distributed training and communication, run for real."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser(
        "run", help="run a concept on a local cluster of worker processes (or under torchrun)"
    )
    concepts = run.add_subparsers(
        dest="concept", required=True, parser_class=_Parser, metavar="CONCEPT"
    )
    for name, concept in CONCEPTS.items():
        p = concepts.add_parser(name, help=concept.help)
        p.add_argument(
            "--world-size",
            type=int,
            default=4,
            help=f"ranks, 1..{MAX_LOCAL_WORLD_SIZE} (default 4); ignored under torchrun",
        )
        p.add_argument("--backend", default="auto", help="auto, gloo or nccl (default auto)")
        p.add_argument(
            "--timeout",
            type=float,
            default=30.0,
            help="seconds before a hung job is stopped (default 30)",
        )
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--trace", metavar="FILE", help="write the trace as JSON")
        p.add_argument("--chrome-trace", metavar="FILE", help="write a Chrome/Perfetto trace")
        concept.add_arguments(p)
        p.set_defaults(func=_run)
    plan = sub.add_parser("plan", help="print an algorithm's plan and its rank x step grid")
    plan.add_argument("algo", help="ring, naive, tree, double-tree, ps, ps-sharded, rabenseifner")
    plan.add_argument("--world-size", type=int, default=4)
    plan.add_argument("--servers", type=int, default=None, help="parameter servers (ps only)")
    plan.set_defaults(func=_plan)
    bench = sub.add_parser("bench", help="an nccl-tests-style table of the engine's collectives")
    bench.add_argument("what", choices=["collectives"], help="what to benchmark")
    bench.add_argument(
        "--world-size", type=int, default=4, help=f"ranks, 1..{MAX_LOCAL_WORLD_SIZE} (default 4)"
    )
    bench.add_argument(
        "--collective", default="all", help="all (default) or one of all_reduce, all_gather, ..."
    )
    bench.add_argument("--min-size", default="1KiB", help="smallest size (default 1KiB)")
    bench.add_argument("--max-size", default="4MiB", help="largest size (default 4MiB)")
    bench.add_argument(
        "--factor", type=int, default=4, help="size multiplier between rows (default 4)"
    )
    bench.add_argument("--dtype", default="float32")
    bench.add_argument("--backend", default="auto")
    bench.add_argument("--timeout", type=float, default=60.0)
    bench.add_argument("--json", action="store_true", help="print the rows as JSON")
    bench.set_defaults(func=_bench)

    model = sub.add_parser("model", help="predict a collective's time with the alpha-beta model")
    add_model_arguments(model)
    model.set_defaults(func=run_model)

    memory = sub.add_parser("memory", help="model-state bytes per GPU with ZeRO, offload, TP, PP")
    add_memory_arguments(memory)
    memory.set_defaults(func=run_memory)
    planner = sub.add_parser(
        "planner", help="rank every DP x TP x PP configuration of a model on a cluster"
    )
    add_planner_arguments(planner)
    planner.set_defaults(func=run_planner)
    exercise = sub.add_parser("exercise", help="the coding exercises: list, check, hint, solution")
    add_exercise_arguments(exercise, _Parser)
    lab = sub.add_parser("lab", help="open the course in JupyterLab")
    lab.add_argument(
        "--dir", default=None, help="your copy of the lessons (default ~/edu-parallel-course)"
    )
    lab.add_argument(
        "--reset",
        nargs="+",
        default=(),
        metavar="LESSON",
        help="replace your copy of these lessons (03, 03_ring_allreduce, all) with the course's",
    )
    lab.add_argument(
        "--port", type=int, default=None, help="port on 127.0.0.1 (default: Jupyter's choice)"
    )
    lab.add_argument(
        "--no-browser", action="store_true", help="print the URL instead of opening a browser"
    )
    lab.set_defaults(func=_lab)
    tour = sub.add_parser("tour", help="the first lesson in the terminal, no browser")
    tour.add_argument("--world-size", type=int, default=4)
    tour.add_argument(
        "--no-input", action="store_true", help="do not ask the quiz; print the answers"
    )
    tour.set_defaults(func=_tour)
    fig = sub.add_parser("figure", help="draw the README picture from a real run")
    fig.add_argument("--out", default="assets/ring_allreduce.png")
    fig.add_argument("--world-size", type=int, default=4)
    fig.set_defaults(func=_figure)
    add_export_arguments(sub.add_parser("export", help="the lessons, run, as an offline HTML site"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except (ValueError, CLIError, EngineError) as exc:
        message = str(exc.args[0]) if exc.args else str(exc)
        print(f"error: {' '.join(message.split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; the workers were stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
