"""Parent side of lesson 14: run a regime, replay it, measure it.

:func:`run_async_config` takes an :class:`~edu_parallel.async_training.config.AsyncConfig`
(:func:`run_async` builds it, once, from keyword options, before any process starts), trains on
the cluster, then reads everything off the trace:

* the order of updates (the ``apply`` events of rank 0) and its replay in one process
  (:func:`~edu_parallel.async_training.replay_run.replay`): ``replay_matches`` says the replay
  ends with the ranks' parameters bit for bit (for ``sync`` and ``local-sgd`` the replay is the
  one-process reference);
* the staleness of every applied gradient: the version it was applied to minus the version it was
  computed from, counted over the ``apply`` events (rank 0's; every rank's replica in local SGD),
  as a histogram;
* throughput: samples whose gradient was applied, per second of the run (from the ranks lining up
  to the last update);
* the held-out loss and accuracy at every checkpoint of the replay, against the wall-clock time at
  which the ranks reached that checkpoint, and the time and steps to the target accuracy.

Many runs side by side (:func:`~edu_parallel.async_training.tables.compare_regimes`) are in
``tables.py``.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from ..core.errors import bad_value
from ..core.i18n import _
from ..core.schema import STEP_START_MARK
from ..core.trace import Event, Trace
from ..core.width import fitted
from ..engine.executor import Executor
from .config import PSI, AsyncConfig, Mode, ring_bytes_per_rank
from .param_server import server_job
from .replay_run import Checkpoint, replay
from .sgd import AVERAGE, local_sgd, sync_sgd

JOBS = {"sync": sync_sgd, "local-sgd": local_sgd, "async-ps": server_job, "backup": server_job}


@dataclass
class AsyncReport:
    """What lesson 14 and ``edu-parallel run async`` show for one run."""

    config: AsyncConfig = field(repr=False)
    samples_per_s: float
    staleness_histogram: dict[int, int]  # staleness -> applied gradients
    time_to_target_s: float | None  # None: the target was not reached
    steps_to_target: float | None
    final_loss: float  # held-out, of the final parameters
    final_accuracy: float
    replay_matches: bool  # the one-process replay of the recorded order: the same bits
    wall_s: float  # from the ranks lining up to the last update
    applied: int  # gradients applied
    dropped: int  # backup: late gradients dropped
    discarded: int  # server modes: pushes after the last update, answered with stop
    pushes: list[int]  # gradients each worker computed
    wait_fraction: float  # workers' share of the run spent waiting (not computing, not delayed)
    sent_bytes: list[int]  # per rank, every send of the run
    allreduce_bytes_formula: float  # per rank, 2(W-1)/W Psi 4 per all-reduce
    order: list[list[int]]  # the server's apply order: [worker, t, pulled version] per gradient
    checkpoints: list[Checkpoint] = field(repr=False)
    trace: Trace = field(default_factory=Trace, repr=False)

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        return self.replay_matches

    def curve(self) -> pd.DataFrame:
        """One row per checkpoint: step, samples, time (s), held-out loss and accuracy."""
        return pd.DataFrame([c.__dict__ for c in self.checkpoints]).drop(columns="index")

    def to_json_dict(self) -> dict[str, Any]:
        c = self.config
        keep = ("samples_per_s", "time_to_target_s", "steps_to_target", "final_loss")
        data: dict[str, Any] = {k: getattr(self, k) for k in keep}
        data.update(
            staleness_histogram={str(k): v for k, v in self.staleness_histogram.items()},
            replay_matches=self.replay_matches,
            final_accuracy=self.final_accuracy,
            wall_s=self.wall_s,
            applied=self.applied,
            dropped=self.dropped,
            discarded=self.discarded,
            pushes=self.pushes,
            wait_fraction=self.wait_fraction,
            sent_bytes=self.sent_bytes,
            mode=c.mode,
            world_size=c.world_size,
            workers=c.workers,
            steps=c.steps,
            straggler=c.straggler_label(),
            local_steps=c.local_steps,
            backup=c.backup,
            target=c.target,
        )
        return {"concept": "async", **data}


def _start(trace: Trace) -> float:
    return min(e.start for e in trace.events if e.kind == "mark" and e.op == STEP_START_MARK)


def applies_of(trace: Trace, rank: int = 0) -> list[Event]:
    """``rank``'s ``apply`` events in the order they ran."""
    return sorted(
        (e for e in trace.events if e.op == "apply" and e.rank == rank), key=lambda e: e.start
    )


def staleness_histogram(trace: Trace, mode: str) -> dict[int, int]:
    """Staleness -> count over every applied gradient (rank 0, or every replica in local SGD)."""
    counts: collections.Counter[int] = collections.Counter()
    for e in trace.events:
        if e.op == "apply" and (mode == "local-sgd" or e.rank == 0):
            counts.update(e.attrs["version"] - pulled for _, _, pulled in e.attrs["grads"])
    return dict(sorted(counts.items()))


def wait_fraction(trace: Trace, config: AsyncConfig, start: float, end: float) -> float:
    """Mean over workers of the share of ``[start, end]`` not spent computing or delayed."""
    workers = range(config.first_worker, config.world_size)
    busy = collections.Counter()
    for e in trace.events:
        if e.kind == "compute" and e.rank in workers and e.start >= start:
            busy[e.rank] += min(e.end, end) - e.start
    span = max(end - start, 1e-9)
    return sum(max(0.0, 1 - busy[r] / span) for r in workers) / len(workers)


def run_async(cluster: Executor, mode: Mode = "sync", **options: Any) -> AsyncReport | None:
    """Train ``mode`` on every rank of ``cluster``, replay it, measure it (see module doc):
    ``mode`` and ``options`` become one :class:`AsyncConfig` on the cluster's ranks, checked here
    before any process starts, for :func:`run_async_config`."""
    return run_async_config(cluster, AsyncConfig(cluster.world_size, mode, **options))


def run_async_config(cluster: Executor, config: AsyncConfig) -> AsyncReport | None:
    """Run ``config`` on ``cluster`` (its world size), replay it, measure it; the config is
    trusted by the rank jobs and the replay."""
    if cluster.world_size != config.world_size:
        valid = _("{n}, the executor's ranks").format(n=cluster.world_size)
        raise bad_value("config.world_size", config.world_size, valid)
    mode = config.mode
    out = cluster.run(JOBS[mode], config)
    if out is None:  # a non-zero rank under torchrun
        return None
    trace, r0 = out.trace, out.results[0]
    meta = {"concept": "async", "regime": mode, "workers": config.workers, "steps": config.steps}
    meta.update(straggler=config.straggler_label(), local_steps=config.local_steps)
    meta.update(backup_workers=config.backup, rows=config.rows)
    trace.meta.update(meta)
    start = _start(trace)
    events = applies_of(trace)
    rep = replay(config, [e.attrs for e in events])
    if mode == "local-sgd":
        marks = sorted(
            (e for e in trace.events if e.rank == 0 and e.op == AVERAGE and e.kind == "collective"),
            key=lambda e: e.start,
        )
        times = [e.end - start for e in marks]
    else:
        times = [e.end - start for e in events]
    for k, c in enumerate(rep.checkpoints):  # local SGD: the k-th average; else apply event
        c.time_s = times[k if mode == "local-sgd" else c.index]
    end = start + max(times)
    reached = [c for c in rep.checkpoints if c.accuracy >= config.target]
    last = rep.checkpoints[-1]
    applied = sum(len(e.attrs["grads"]) for e in events)
    if mode == "local-sgd":
        applied *= config.workers
    sent = collections.Counter()
    for e in trace.events:
        if e.kind == "send":
            sent[e.rank] += e.nbytes
    return AsyncReport(
        config=config,
        samples_per_s=applied * config.rows / (end - start),
        staleness_histogram=staleness_histogram(trace, mode),
        time_to_target_s=reached[0].time_s if reached else None,
        steps_to_target=reached[0].step if reached else None,
        final_loss=last.loss,
        final_accuracy=last.accuracy,
        replay_matches=torch.equal(rep.params, r0["params"]),
        wall_s=end - start,
        applied=applied,
        dropped=r0.get("dropped", 0),
        discarded=r0.get("discarded", 0),
        pushes=r0.get("pushes", [config.steps] * config.workers),
        wait_fraction=wait_fraction(trace, config, start, end),
        sent_bytes=[sent[r] for r in range(config.world_size)],
        allreduce_bytes_formula=ring_bytes_per_rank(config, PSI),
        order=[g for e in events for g in e.attrs["grads"]],
        checkpoints=rep.checkpoints,
        trace=trace,
    )


@fitted
def format_async(report: AsyncReport) -> str:
    """Readable output: the regime, the measurements, the replay check."""
    r, c = report, report.config
    hist = ", ".join(f"{k}: {v}" for k, v in r.staleness_histogram.items())
    ttt = _("not reached") if r.time_to_target_s is None else f"{r.time_to_target_s:.2f} s"
    if r.steps_to_target is not None:
        ttt = _("{time} (step {step})").format(time=ttt, step=f"{r.steps_to_target:g}")
    extra = {
        "sync": _("all-reduce every step"),
        "local-sgd": _("average every H = {h} steps").format(h=c.local_steps),
        "async-ps": _("rank 0 serves, no barrier"),
        "backup": _("rank 0 serves, steps with the first {kept} of {workers}").format(
            kept=c.kept_per_step, workers=c.workers
        ),
    }[c.mode]
    return "\n".join(
        [
            _(
                "{mode} ({extra}): {n} ranks, W = {workers} workers, {steps} steps of {samples}"
                " samples, lr {lr}; stragglers: {stragglers}"
            ).format(
                mode=c.mode,
                extra=extra,
                n=c.world_size,
                workers=c.workers,
                steps=c.steps,
                samples=c.samples_per_step,
                lr=f"{c.lr:g}",
                stragglers=c.straggler_label(),
            ),
            _(
                "throughput: {rate} samples/s applied ({applied} gradients in {wall} s); workers"
                " waiting {waiting} of the time"
            ).format(
                rate=f"{r.samples_per_s:,.0f}",
                applied=r.applied,
                wall=f"{r.wall_s:.2f}",
                waiting=f"{r.wait_fraction:.0%}",
            ),
            _("staleness of the applied gradients (staleness: count): {hist}").format(hist=hist),
            _("dropped late gradients: {dropped}; pushes discarded at the end: {discarded}").format(
                dropped=r.dropped, discarded=r.discarded
            ),
            _("target {target} held-out accuracy: {reached}").format(
                target=f"{c.target:.0%}", reached=ttt
            ),
            _("final held-out loss {loss}, accuracy {accuracy}").format(
                loss=f"{r.final_loss:.4f}", accuracy=f"{r.final_accuracy:.1%}"
            ),
            _("replay of the recorded order in one process gives the same parameters: {ok}").format(
                ok=_("yes (bit for bit)") if r.replay_matches else _("NO")
            ),
        ]
    )


def async_runner(cluster: Executor, **fixed: Any) -> Any:
    """``run(world_size=None, **options) -> AsyncReport`` for predict-then-run quizzes."""

    def run(world_size: int | None = None, **options: Any) -> AsyncReport | None:
        with cluster.sized(world_size or cluster.world_size) as ranks:
            return run_async(ranks, **{**fixed, **options})

    return run
