"""The communication concepts of ``edu-parallel run``: all-reduce (``ring``) and the collectives.

Each checks its options once, against the run's dims, into a spec from ``plans/``
(:class:`~edu_parallel.plans.algorithms.AllReduceRun`,
:class:`~edu_parallel.plans.collectives.CollectiveRun`): the plan is built there, once, and the
ranks and the report use that plan. The world size is checked once, where the CLI builds the
dims; the plan builders and the cluster receive those dims and trust them. The runs load
``comm/`` (and torch) only when they start.
"""

from __future__ import annotations

import argparse
from typing import Any

from ... import comm
from ...comm.memory import check_fits
from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from ...core.inputs import PATTERNS
from ...core.units import DTYPES
from ...engine.executor import Executor, in_torchrun
from ...plans.algorithms import ALGOS, AllReduceRun, plan_allreduce
from ...plans.collectives import CLI_NAMES, CollectiveRun, plan_collective
from ...plans.plan import ROOTED
from .base import Concept

COLLECTIVE_HELP = {
    "all_gather": N_("ring all-gather: every rank ends with every rank's chunk"),
    "reduce_scatter": N_("ring reduce-scatter: rank r ends with chunk r summed over all ranks"),
    "broadcast": N_("pipelined chain broadcast of the root's buffer"),
    "reduce": N_("pipelined chain reduce: the root ends with the sum"),
    "all_to_all": N_("pairwise all-to-all: rank r's chunk k goes to rank k"),
    "gather": N_("direct gather: the root collects chunk r from every rank r"),
    "scatter": N_("direct scatter: the root sends chunk r to every rank r"),
}


def buffer_arguments(p: argparse.ArgumentParser) -> None:
    """``--size``, ``--dtype``, ``--pattern``, ``--seed``: each rank's input buffer."""
    p.add_argument(
        "--size", default="1MiB", help=_("bytes per rank: 4096, 64KiB, 1MiB (default 1MiB)")
    )
    p.add_argument(
        "--dtype",
        default="float32",
        help=_("one of {dtypes} (default float32)").format(dtypes=", ".join(DTYPES)),
    )
    p.add_argument(
        "--pattern",
        default="random",
        help=_("input values: {patterns} (default random)").format(patterns=", ".join(PATTERNS)),
    )
    p.add_argument("--seed", default=0, type=int, help=_("seed of the random input (default 0)"))


# ---------------------------------------------------------------- all-reduce
def _allreduce_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--algo",
        default="ring",
        help=_("all-reduce algorithm: {algos} (default ring)").format(algos=", ".join(ALGOS)),
    )
    buffer_arguments(p)
    p.add_argument(
        "--servers",
        default=None,
        type=int,
        help=_("parameter servers for --algo ps/ps-sharded, 1..world size (default 1 / 2)"),
    )


def _allreduce_check(a: argparse.Namespace, dims: ParallelDims) -> AllReduceRun:
    """Every option checked and the plan built, before any process starts; a ``--size`` whose
    ranks would not fit in this machine's free memory is refused then (under torchrun the
    launcher placed the ranks already)."""
    run = plan_allreduce(dims, a.size, a.dtype, a.algo, a.pattern, a.seed, servers=a.servers)
    if not in_torchrun():
        check_fits(run, dims.world_size, a.size)
    return run


def _allreduce_run(executor: Executor, run: AllReduceRun) -> Any:
    return comm.execute_allreduce(executor, run)


ALLREDUCE = Concept(
    "allreduce",
    N_("all-reduce with a chosen algorithm ({algos})"),
    _allreduce_args,
    _allreduce_check,
    _allreduce_run,
    lambda report: comm.format_report(report),
    aliases=("ring",),
    help_args={"algos": ", ".join(ALGOS)},
)


# ---------------------------------------------------------------- the other collectives
def _collective_concept(concept: str, collective: str) -> Concept:
    """The CLI concept ``concept`` (``allgather``, ...) that runs ``collective``."""

    def add(p: argparse.ArgumentParser) -> None:
        buffer_arguments(p)
        if collective in ROOTED:
            p.add_argument(
                "--root", default=0, type=int, help=_("root rank, 0..world size-1 (default 0)")
            )

    def check(a: argparse.Namespace, dims: ParallelDims) -> CollectiveRun:
        """Every option checked and the plan built; a ``--size`` whose ranks would not fit in
        this machine's free memory refused, as for the all-reduce."""
        root = getattr(a, "root", 0)
        run = plan_collective(dims, collective, a.size, a.dtype, a.pattern, a.seed, root)
        if not in_torchrun():
            check_fits(run, dims.world_size, a.size)
        return run

    def run(executor: Executor, spec: CollectiveRun) -> Any:
        return comm.execute_collective(executor, spec)

    render = lambda report: comm.format_collective(report)  # noqa: E731
    return Concept(concept, COLLECTIVE_HELP[collective], add, check, run, render)


COMM_CONCEPTS = [
    ALLREDUCE,
    *(_collective_concept(typed, name) for typed, name in CLI_NAMES.items()),
]
