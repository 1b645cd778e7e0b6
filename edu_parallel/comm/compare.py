"""All-reduce traffic counted on real ranks: the runner behind ``traffic_table(..., runner=...)``.

:func:`edu_parallel.models.traffic.traffic_table` counts bytes, steps and messages from traces;
by default from simulated ones. :func:`cluster_traffic_runner` gives it traces of real runs on a
cluster, each checked against ``dist.all_reduce``, so the table is measured, not derived.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ..core.errors import check_bool
from ..core.i18n import _
from ..core.trace import Trace
from ..engine.executor import Executor
from ..models.traffic import Runner
from .allreduce import run_allreduce
from .bench import ProgressBar


class ClusterTrafficRunner:
    """``runner(algo, world_size, nbytes)``: the trace of one all-reduce on real ranks, checked
    against ``dist.all_reduce`` (a mismatch raises). It runs on ``cluster`` when the world size
    matches, else on a short-lived cluster of that size
    (:meth:`~edu_parallel.engine.executor.Executor.sized`). ``sized(world_size)`` gives a runner
    on one cluster of that size for a block: :func:`~edu_parallel.models.traffic.traffic_table`
    runs all the algorithms of a world size in it, so a table starts one cluster per world size
    instead of one per run. ``progress``: None, or the ``(done, total, label)`` bar a table
    draws over its runs."""

    def __init__(
        self,
        cluster: Executor,
        dtype: str = "float32",
        pattern: str = "random",
        progress: Callable[[int, int, str], None] | None = None,
    ):
        self.cluster, self.dtype, self.pattern = cluster, dtype, pattern
        self.progress = progress

    def __call__(self, algo: str, world_size: int, nbytes: int) -> Trace:
        with self.sized(world_size) as run:
            return run.run(algo, nbytes)

    @contextlib.contextmanager
    def sized(self, world_size: int) -> Iterator[ClusterTrafficRunner]:
        with self.cluster.sized(world_size) as ranks:
            yield ClusterTrafficRunner(ranks, self.dtype, self.pattern)

    def run(self, algo: str, nbytes: int) -> Trace:
        """One all-reduce of ``nbytes`` per rank on this runner's own cluster."""
        report = run_allreduce(self.cluster, nbytes, self.dtype, algo, self.pattern)
        if not report.matches_builtin:
            raise AssertionError(
                _("{algo} on {n} ranks differs from dist.all_reduce").format(
                    algo=algo, n=self.cluster.world_size
                )
            )
        return report.trace


def cluster_traffic_runner(
    cluster: Executor, dtype: str = "float32", pattern: str = "random", progress: bool = True
) -> Runner:
    """Run on real ranks: ``cluster`` when the world size matches, else one of that size
    (:class:`ClusterTrafficRunner`). Every run is checked against ``dist.all_reduce``; a mismatch
    raises. ``progress``: a table over the runner shows a progress bar (``tqdm.auto``: a widget
    in Jupyter)."""
    bar = ProgressBar(_("all-reduce runs")) if check_bool("progress", progress) else None
    return ClusterTrafficRunner(cluster, dtype, pattern, bar)
