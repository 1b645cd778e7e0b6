"""The measured crossover: where a data-parallel step stops being communication-bound, on the ranks.

:func:`run_sweep` checks a :class:`~edu_parallel.roofline.config.SweepConfig` once and runs
:func:`~edu_parallel.roofline.steps.sweep_job`; :func:`read_sweep` reads every number of the
:class:`SweepReport` off the trace's timestamps:

* measured, per point (``k`` microbatches, ``k T`` tokens per rank per step): the **compute**
  time, the slowest rank's matmuls (``matmul`` events), the **other** compute (the rest of
  forward and backward), and the **communication** time of the gradient all-reduce, from the
  moment the last rank entered it to the moment the first left it (the time it took once everyone
  was there, not a rank's wait for a slower one);
* the formula's constants, timed in the same rounds: ``F``, the matmul timings' FLOPs over their
  time, and ``α``, ``B`` fitted to the calibration all-reduces
  (:func:`~edu_parallel.comm.calibration.fit_alpha_beta` on ``t = 2(N-1) α + 2(N-1)/N S / B``, so
  ``B`` is the all-reduce's bus bandwidth, as nccl-tests reports busbw);
* the formula, ``W / F`` against ``2(N-1) α + 2(N-1)/N Ψ e / B``
  (:mod:`edu_parallel.roofline.formulas`), and both crossovers.

Each time is the fastest of the rounds after the first (a warm-up): on shared cores load only ever
adds time, so the minimum is the least disturbed measurement (``timeit``'s advice). Every point
all-reduces the same bucket and times the same matmuls, so the measured all-reduce
(``comm_level_s``; ``comm_s`` keeps each point's own), ``F`` and the bucket's calibration are each
the median over the points of their fastest rounds: estimated from as many rounds as a measured
point is. ``spread`` keeps the median over the minimum, to say how noisy the machine was.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..comm.bench import ProgressBar
from ..comm.calibration import fit_alpha_beta
from ..core.errors import check_bool
from ..core.i18n import N_, _
from ..core.schema import GRAD_SYNC
from ..core.trace import Event, Trace
from ..engine.executor import Executor
from ..models.links import Link
from ..strategy_map.formulas import ITEMSIZE
from ..strategy_map.table import measure
from .config import SweepConfig
from .formulas import allreduce_time, crossover, dp_step_flops, ring_factor
from .steps import CALIBRATE, MATMUL, sweep_job

FIT_NAME = "this machine's all-reduce"


@dataclass
class SweepReport:
    """One measured sweep (see the module doc): per point, measured and formula times."""

    config: SweepConfig
    params: int  # Ψ of the model (one gradient bucket)
    compute_s: list[float]  # measured: the matmuls of one optimizer step
    other_s: list[float]  # measured: the rest of forward and backward
    comm_s: list[float]  # measured: the gradient all-reduce, each point's fastest round
    comm_level_s: float  # ... the median of the points' fastest: each sends the same bucket
    flops_per_s: float  # F: the matmul timings' rate at the microbatch's shapes
    sizes: tuple[int, ...]  # calibration all-reduces
    allreduce_s: list[float]  # their fastest times
    link: Link  # α and B fitted to them
    sent_bytes: float  # per rank per step, from the trace
    messages: int  # collective calls per rank per step
    spread: dict[str, float]  # median / minimum over rounds, worst point
    trace: Trace = field(repr=False)

    @property
    def world_size(self) -> int:
        return self.config.world_size

    @property
    def accumulation(self) -> tuple[int, ...]:
        """Microbatches per optimizer step of each point: ``k``."""
        return self.config.accumulation

    @property
    def tokens(self) -> tuple[int, ...]:
        """Tokens per rank per optimizer step of each point: ``k T``."""
        return self.config.tokens

    @property
    def flops(self) -> list[float]:
        """Matmul FLOPs of one rank's step at each point."""
        c = self.config
        return [dp_step_flops(c.hidden, c.layers, t) for t in self.tokens]

    @property
    def transfers(self) -> int:
        """Ring messages behind the one all-reduce call: ``2(N-1)``."""
        return 2 * (self.world_size - 1)

    @property
    def formula_compute_s(self) -> list[float]:
        return [w / self.flops_per_s for w in self.flops]

    @property
    def formula_comm(self) -> float:
        """One all-reduce of the Ψ gradients: ``2(N-1) α + 2(N-1)/N Ψ e / B``."""
        link = self.link
        return allreduce_time(
            self.world_size, self.params * ITEMSIZE, link.alpha_s, link.bandwidth_Bps
        )

    @property
    def measured_crossover(self) -> float | None:
        """Tokens per rank per step where the measured matmuls start to outlast the measured
        all-reduce; None when they never do on the sweep (or already do at its first point)."""
        return crossover(self.tokens, [self.comm_level_s] * len(self.tokens), self.compute_s)

    @property
    def formula_crossover(self) -> float:
        """The same tokens by the formula: ``T* = F t_comm / (W per token)``."""
        c = self.config
        return self.formula_comm * self.flops_per_s / dp_step_flops(c.hidden, c.layers, 1)

    @property
    def ratio(self) -> float | None:
        """Formula's crossover over the measured one (1 is a perfect prediction)."""
        m = self.measured_crossover
        return None if m is None else self.formula_crossover / m


def run_sweep(cluster: Executor, progress: bool = False, **options: Any) -> SweepReport | None:
    """Check the options once (:meth:`SweepConfig.build` on the cluster's ranks), then run;
    ``progress``: a bar of the rounds (``tqdm.auto``: a widget in Jupyter)."""
    cfg = SweepConfig.build(cluster.world_size, **options)
    return execute_sweep(cluster, cfg, check_bool("progress", progress))


def execute_sweep(
    executor: Executor, cfg: SweepConfig, progress: bool = False
) -> SweepReport | None:
    """Run the checked ``cfg`` on ``executor``, a job per round, and read it (None on a non-zero
    torchrun rank)."""
    bar = ProgressBar(_("sweep rounds"), unit=N_("round")) if progress else None
    trace, params = None, 0
    for rnd in range(cfg.repeats):
        out = executor.run(sweep_job, cfg, rnd)
        if out is None:
            return None
        trace = out.trace if trace is None else trace.merged(out.trace)
        params = out.results[0]["params"]
        if bar is not None:
            bar(rnd + 1, cfg.repeats)
    assert trace is not None  # repeats >= 2, checked in the config
    trace.meta.update({"concept": "roofline", "world_size": cfg.world_size})
    return read_sweep(cfg, params, trace)


def _spans(events: list[Event], ranks: int) -> float:
    """A collective's time once every rank is in it: first end minus last start."""
    if len(events) != ranks:
        raise ValueError(f"expected one event per rank, got {len(events)}")
    return max(0.0, min(e.end for e in events) - max(e.start for e in events))


def _pair(events: list[Event], ranks: int) -> tuple[float, float]:
    """The spans of a step's two calibration all-reduces: each rank's first, each rank's second."""
    by_rank = [[e for e in events if e.rank == r] for r in range(ranks)]
    first, second = zip(*by_rank, strict=True)
    return _spans(list(first), ranks), _spans(list(second), ranks)


def _best(samples: list[float]) -> tuple[float, float]:
    """(minimum, median / minimum) of the rounds after the warm-up."""
    low = min(samples)
    return low, statistics.median(samples) / low if low > 0 else 1.0


def read_sweep(cfg: SweepConfig, params: int, trace: Trace) -> SweepReport:
    """Every number of the report from ``trace`` (see the module doc)."""
    n, points = cfg.world_size, len(cfg.accumulation)
    total: dict[Any, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    matmul: dict[Any, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    probe: dict[Any, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    flops: dict[Any, float] = defaultdict(float)
    colls: dict[tuple[Any, Any], list[Event]] = defaultdict(list)
    for e in trace.events:
        if e.kind == "compute" and e.phase == CALIBRATE:
            probe[e.step][e.rank] += e.duration
            if e.rank == 0:
                flops[e.step] += (e.attrs or {})["flops"]
        elif e.kind == "compute" and e.phase == MATMUL:
            matmul[e.step][e.rank] += e.duration
        elif e.kind == "compute":
            total[e.step][e.rank] += e.duration
        elif e.kind == "collective":
            colls[(e.phase, e.step)].append(e)
    sizes = list(cfg.calibration_sizes)
    samples: dict[str, list[list[float]]] = {k: [[] for _ in range(points)] for k in "cos"}
    calib: list[list[float]] = [[] for _ in sizes[:-1]]
    bucket: list[list[float]] = [[] for _ in range(points)]  # the bucket's size, per point
    rates: list[list[float]] = [[] for _ in range(points)]
    for s in range(points, cfg.repeats * points):  # round 0 warms up
        rnd, i = divmod(s, points)
        samples["c"][i].append(max(matmul[s].values()))
        samples["o"][i].append(max(total[s][r] - matmul[s][r] for r in total[s]))
        samples["s"][i].append(_spans(colls[(GRAD_SYNC, s)], n))
        rates[i].append(flops[s] / max(probe[s].values()))
        first_ar, other = _pair(colls[(CALIBRATE, s)], n)
        bucket[i].append(first_ar)
        calib[(rnd + i) % (len(sizes) - 1)].append(other)
    best = {k: [_best(v) for v in samples[k]] for k in "cos"}
    # Every point times the same bucket and the same matmuls: each point's fastest round, then
    # the median over points, so the formula's F and B and the measured all-reduce are each
    # estimated from as many rounds as each measured point is.
    allreduce = [min(v) for v in calib] + [statistics.median(min(v) for v in bucket)]
    alpha_all, bandwidth = fit_alpha_beta([ring_factor(n) * s for s in sizes], allreduce)
    source = f"fit_alpha_beta on {len(sizes)} all-reduce sizes on {n} ranks, in the sweep's rounds"
    link = Link(FIT_NAME, alpha_all / (2 * (n - 1)), bandwidth, source)
    first = Trace(
        dict(trace.meta), [e for e in trace.events if e.step == 0 and e.phase != CALIBRATE]
    )
    row = measure(first, n)[0]
    return SweepReport(
        cfg,
        params,
        [c for c, _ in best["c"]],
        [c for c, _ in best["o"]],
        [c for c, _ in best["s"]],
        statistics.median(c for c, _ in best["s"]),
        statistics.median(max(v) for v in rates),
        tuple(sizes),
        allreduce,
        link,
        row["sent_bytes"],
        row["messages"],
        {"compute": max(s for _, s in best["c"]), "communication": max(s for _, s in best["s"])},
        trace,
    )


def sweep_runner(cluster: Executor, **options: Any) -> Any:
    """``run(accumulation) -> SweepReport`` for predict-then-run quizzes: the sweep on
    ``cluster`` with those microbatch counts (``options``: the other fields of the sweep)."""

    def run(accumulation: tuple[int, ...]) -> SweepReport | None:
        return run_sweep(cluster, accumulation=tuple(accumulation), **options)

    return run
