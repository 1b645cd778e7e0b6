"""All-reduce traffic counted on real ranks: the runner behind ``traffic_table(..., runner=...)``.

:func:`edu_parallel.models.traffic.traffic_table` counts bytes, steps and messages from traces;
by default from simulated ones. :func:`cluster_traffic_runner` gives it traces of real runs on a
cluster, each checked against ``dist.all_reduce``, so the table is measured, not derived.
"""

from __future__ import annotations

from ..core.i18n import _
from ..core.trace import Trace
from ..engine.executor import Executor
from ..models.traffic import Runner
from .allreduce import run_allreduce


def cluster_traffic_runner(
    cluster: Executor, dtype: str = "float32", pattern: str = "random"
) -> Runner:
    """Run on real ranks: ``cluster`` when the world size matches, else a short-lived one of that
    size (:meth:`~edu_parallel.engine.executor.Executor.sized`). Every run is checked against
    ``dist.all_reduce``; a mismatch raises."""

    def runner(algo: str, world_size: int, nbytes: int) -> Trace:
        with cluster.sized(world_size) as ranks:
            report = run_allreduce(ranks, nbytes, dtype, algo, pattern)
        if not report.matches_builtin:
            raise AssertionError(
                _("{algo} on {n} ranks differs from dist.all_reduce").format(
                    algo=algo, n=world_size
                )
            )
        return report.trace

    return runner
