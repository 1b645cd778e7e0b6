"""The concepts the CLI can run: ``edu-parallel run NAME ...``.

Each :class:`Concept` adds its own arguments, runs on an executor (a :class:`Cluster` or, under
``torchrun``, a :class:`~edu_parallel.launch.TorchrunExecutor`) and returns a report with
``to_json_dict()``, ``trace`` and a text rendering. The communication concepts live here, the
training ones (pipeline, zero, fsdp, moe, tp, map) in :mod:`edu_parallel.concepts_training`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import allreduce
from .errors import check_choice, check_int
from .inputs import PATTERNS
from .units import DTYPES, check_dtype, parse_size


@dataclass(frozen=True)
class Concept:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[Any, argparse.Namespace], Any]
    render: Callable[[Any], str]
    check: Callable[[argparse.Namespace], None]
    aliases: tuple[str, ...] = ()


def _allreduce_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--algo",
        default="ring",
        help=f"all-reduce algorithm: {', '.join(allreduce.ALGOS)} (default ring)",
    )
    p.add_argument(
        "--size", default="1MiB", help="bytes per rank: 4096, 64KiB, 1MiB (default 1MiB)"
    )
    p.add_argument(
        "--dtype", default="float32", help=f"one of {', '.join(DTYPES)} (default float32)"
    )
    p.add_argument(
        "--pattern", default="random", help=f"input values: {', '.join(PATTERNS)} (default random)"
    )
    p.add_argument("--seed", default=0, type=int, help="seed of the random input (default 0)")
    p.add_argument(
        "--servers",
        default=None,
        type=int,
        help="parameter servers for --algo ps/ps-sharded, 1..world size (default 1 / 2)",
    )


def _allreduce_check(a: argparse.Namespace) -> None:
    """Validate before any process starts, so a typo costs nothing."""
    parse_size(a.size)
    check_dtype(a.dtype)
    check_choice("algo", a.algo, allreduce.ALGOS)
    check_choice("pattern", a.pattern, PATTERNS)
    check_int("seed", a.seed, 0)
    allreduce.check_servers(a.algo, a.servers)
    n = world_size_of(a)
    if isinstance(n, int) and n >= 1:  # the executor checks the world size itself
        allreduce.build_plan(a.algo, n, a.servers)  # rabenseifner: 2^k ranks; servers <= n


def _allreduce_run(executor: Any, a: argparse.Namespace) -> Any:
    return allreduce.run_allreduce(
        executor, a.size, a.dtype, a.algo, a.pattern, a.seed, servers=a.servers
    )


CONCEPTS: dict[str, Concept] = {}


def world_size_of(a: argparse.Namespace) -> Any:
    """The world size the concept will run on: torchrun's ``WORLD_SIZE``, else ``--world-size``
    (unchecked: the executor validates it, a check only uses it when it is a positive int)."""
    from .launch import in_torchrun

    return int(os.environ["WORLD_SIZE"]) if in_torchrun() else a.world_size


def register(concept: Concept) -> None:
    for name in (concept.name, *concept.aliases):
        CONCEPTS[name] = concept


_ALLREDUCE_HELP = f"all-reduce with a chosen algorithm ({', '.join(allreduce.ALGOS)})"
register(Concept("allreduce", _ALLREDUCE_HELP, _allreduce_args, _allreduce_run,
                 allreduce.format_report, _allreduce_check, aliases=("ring",)))  # fmt: skip


# ---------------------------------------------------------------- collectives (issue 3)
from . import collective_run  # noqa: E402

_COLLECTIVE_HELP = {
    "all_gather": "ring all-gather: every rank ends with every rank's chunk",
    "reduce_scatter": "ring reduce-scatter: rank r ends with chunk r summed over all ranks",
    "broadcast": "pipelined chain broadcast of the root's buffer",
    "reduce": "pipelined chain reduce: the root ends with the sum",
    "all_to_all": "pairwise all-to-all: rank r's chunk k goes to rank k",
    "gather": "direct gather: the root collects chunk r from every rank r",
    "scatter": "direct scatter: the root sends chunk r to every rank r",
}


def _collective_concept(concept: str, collective: str) -> Concept:
    """The CLI concept ``concept`` that runs :func:`collective_run.run_collective`."""
    rooted = collective in ("broadcast", "reduce", "gather", "scatter")

    def add(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--size", default="1MiB", help="bytes per rank: 4096, 64KiB, 1MiB (default 1MiB)"
        )
        p.add_argument(
            "--dtype", default="float32", help=f"one of {', '.join(DTYPES)} (default float32)"
        )
        p.add_argument(
            "--pattern",
            default="random",
            help=f"input values: {', '.join(PATTERNS)} (default random)",
        )
        p.add_argument("--seed", default=0, type=int, help="seed of the random input (default 0)")
        if rooted:
            p.add_argument("--root", default=0, type=int, help="root rank, 0..world size-1 (default 0)")  # fmt: skip

    def check(a: argparse.Namespace) -> None:
        nbytes = parse_size(a.size)
        check_dtype(a.dtype)
        check_choice("pattern", a.pattern, PATTERNS)
        check_int("seed", a.seed, 0)
        n = world_size_of(a)
        if isinstance(n, int) and n >= 1:  # the executor checks the world size itself
            check_int("root", getattr(a, "root", 0), 0, n - 1)
            collective_run.check_size(collective, n, nbytes, a.dtype, a.size)

    def run(executor: Any, a: argparse.Namespace) -> Any:
        return collective_run.run_collective(executor, collective, a.size, a.dtype, a.pattern,
                                             a.seed, root=getattr(a, "root", 0))  # fmt: skip

    return Concept(concept, _COLLECTIVE_HELP[collective], add, run,
                   collective_run.format_collective, check)  # fmt: skip


for _concept, _collective in collective_run.CONCEPT_NAMES.items():
    register(_collective_concept(_concept, _collective))


# The training concepts (issues 4-6) register themselves from their own module.
from . import concepts_training  # noqa: E402, F401
