"""The concepts the CLI can run: ``edu-parallel run NAME ...``.

Each :class:`Concept` adds its own arguments, runs on an executor (a :class:`Cluster` or, under
``torchrun``, a :class:`~edu_parallel.launch.TorchrunExecutor`) and returns a report with
``to_json_dict()``, ``trace`` and a text rendering. Later lessons register theirs here.
"""

from __future__ import annotations

import argparse
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


def _allreduce_check(a: argparse.Namespace) -> None:
    """Validate before any process starts, so a typo costs nothing."""
    parse_size(a.size)
    check_dtype(a.dtype)
    check_choice("algo", a.algo, allreduce.ALGOS)
    check_choice("pattern", a.pattern, PATTERNS)
    check_int("seed", a.seed, 0)


def _allreduce_run(executor: Any, a: argparse.Namespace) -> Any:
    return allreduce.run_allreduce(executor, a.size, a.dtype, a.algo, a.pattern, a.seed)


CONCEPTS: dict[str, Concept] = {}


def register(concept: Concept) -> None:
    for name in (concept.name, *concept.aliases):
        CONCEPTS[name] = concept


register(Concept("allreduce", "all-reduce with a chosen algorithm (ring, naive)", _allreduce_args,
                 _allreduce_run, allreduce.format_report, _allreduce_check, aliases=("ring",)))  # fmt: skip
