"""One validated description of a lesson-12 run: :class:`AsyncConfig` (torch-free).

Four regimes train the classifier of :mod:`edu_parallel.task.classifier` on real ranks:

* ``sync``: synchronous all-reduce SGD; every rank is a worker;
* ``async-ps``: asynchronous parameter-server SGD (Dean et al. 2012, DistBelief's Downpour SGD;
  Recht et al. 2011, Hogwild!): rank 0 is a dedicated server, ranks ``1..N-1`` are workers that
  push gradients and pull parameters with no barrier, so the server applies stale gradients;
* ``local-sgd``: every rank takes ``H`` local SGD steps, then the parameters are averaged (Lin et
  al. 2018 "Don't Use Large Mini-Batches, Use Local SGD"; Stich 2019 "Local SGD Converges Fast and
  Communicates Little"; the DiLoCo family, Douillard et al. 2023, adds an outer optimizer);
* ``backup``: synchronous with ``b`` backup workers (Chen et al. 2016, "Revisiting Distributed
  Synchronous SGD"): rank 0 is the server, it steps with the first ``W - b`` gradients that arrive
  and drops the late ones.

**The worker convention.** ``W`` is the number of workers: ``N`` in ``sync`` and ``local-sgd``,
``N - 1`` in ``async-ps`` and ``backup`` (rank 0 only serves). A fair comparison gives every
regime the same ``W`` (so the server regimes use one rank more); :func:`workers_of` and
:func:`world_size_for` convert. Every gradient is the mean over :attr:`AsyncConfig.rows` samples,
and worker ``w``'s ``t``-th gradient (``t = 1, 2, ...``) always uses the batch of seed
:func:`batch_seed` ``(seed, w, t)``, whatever the regime. One *step* is ``W`` gradients' worth of
samples (``W * rows``): sync applies their mean with ``lr``; async-ps applies each gradient alone
with ``lr / W`` (so ``W`` fresh pushes move the model as one synchronous step would); local SGD
applies each worker's gradient to its own replica with ``lr``; backup applies the mean of the
``W - b`` it kept with ``lr``. ``steps`` is the sample budget: ``S`` steps are ``S * W * rows``
samples for sync, local SGD and async-ps (``S * W`` server updates); backup runs ``S`` server
steps.

**Stragglers** (:func:`delay_s`): worker ``w``'s ``t``-th gradient computation sleeps for a delay
drawn from a generator seeded by ``(seed, w, t)``, so a run's delays do not depend on timing:

* ``straggler="rank"``: the rank ``straggler_rank`` is slow on every gradient;
* ``straggler="random"``: for each ``t`` one worker, drawn from ``(seed, t)``, is slow;
* distributions of the delay, mean ``delay_ms``: ``fixed``; ``exponential``; ``pareto`` (shape
  1.5, heavy-tailed: infinite variance), truncated at :data:`PARETO_CAP` times the mean so that no
  single draw can stall a lesson.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..core.errors import Checked, bad_value, check_int, check_non_negative, check_positive
from ..data_parallel.config import DdpConfig
from ..task.targets import TARGET_ACCURACY, TASK_LR

MODES = ("sync", "async-ps", "local-sgd", "backup")
SERVER_MODES = ("async-ps", "backup")  # rank 0 is a dedicated server
STRAGGLERS = ("none", "rank", "random")
DISTRIBUTIONS = ("fixed", "exponential", "pareto")
PARETO_SHAPE = 1.5  # mean = shape * x_m / (shape - 1) = 3 x_m; variance infinite
PARETO_CAP = 50.0  # a pareto draw is at most 50 x the mean delay
MAX_STEPS = 2000
MAX_WORLD = 16
MAX_ROWS = 512
MAX_DELAY_MS = 1000.0
# W gradients of 64 samples per step: twice the task's lr (TASK_LR = 0.2, for steps of 64
# samples), reaching the target in about 60 synchronous steps with 3 workers (linear scaling,
# Goyal et al. 2017, would allow 3x). ddp_config holds the task's constants torch-free.
LESSON_LR = 2 * TASK_LR
PSI = DdpConfig(1, model="classifier").psi  # the classifier's 22,026 parameters
BATCH_SEED_BASE = 2_000_003  # above the held-out set's seed: a training batch is never held out


@dataclass(frozen=True)
class AsyncConfig(Checked):
    """What every rank runs (see the module doc); the constructor names every bad field."""

    world_size: int
    mode: str = "sync"
    steps: int = 100
    straggler: str = "none"
    straggler_rank: int | None = None  # None: the last rank
    distribution: str = "fixed"
    delay_ms: float = 10.0
    local_steps: int = 4  # H of local SGD
    backup: int = 1  # b of backup workers
    rows: int = 64  # samples per gradient: the task's global batch
    lr: float = LESSON_LR
    seed: int = 0
    target: float = TARGET_ACCURACY

    def _check(self) -> list[str]:
        out: list[str] = []

        def attempt(name: str, fn, *args) -> bool:  # noqa: ANN001 - a check_* function
            try:
                object.__setattr__(self, name, fn(name, getattr(self, name), *args))
                return True
            except ValueError as exc:
                out.append(str(exc))
                return False

        def choice(name: str, options: tuple[str, ...]) -> bool:
            if getattr(self, name) in options:
                return True
            out.append(str(bad_value(name, getattr(self, name), "one of " + ", ".join(options))))
            return False

        mode_ok = choice("mode", MODES)
        low = 2 if self.mode in SERVER_MODES else 1
        world_ok = attempt("world_size", check_int, low, MAX_WORLD)
        if not world_ok and self.mode in SERVER_MODES:
            out[-1] += f" (mode {self.mode!r}: rank 0 serves, so at least one worker more)"
        attempt("steps", check_int, 1, MAX_STEPS)
        choice("straggler", STRAGGLERS)
        choice("distribution", DISTRIBUTIONS)
        attempt(
            "delay_ms", check_non_negative, f"a number of milliseconds in [0, {MAX_DELAY_MS:g}]"
        )
        if isinstance(self.delay_ms, float) and self.delay_ms > MAX_DELAY_MS:
            valid = f"a number of milliseconds in [0, {MAX_DELAY_MS:g}]"
            out.append(str(bad_value("delay_ms", self.delay_ms, valid)))
        attempt("local_steps", check_int, 1, MAX_STEPS)
        attempt("rows", check_int, 1, MAX_ROWS)
        attempt("lr", lambda n, v: check_positive(n, v))
        attempt("seed", check_int, 0, 2**31 - 1)
        try:
            target = check_positive("target", self.target)
            if target > 1:
                raise bad_value("target", self.target, "a held-out accuracy in (0, 1]")
            object.__setattr__(self, "target", target)
        except ValueError:
            out.append(str(bad_value("target", self.target, "a held-out accuracy in (0, 1]")))
        if not (mode_ok and world_ok):
            return out
        first = 1 if self.mode in SERVER_MODES else 0
        if self.straggler_rank is None:
            object.__setattr__(self, "straggler_rank", self.world_size - 1)
        else:
            attempt("straggler_rank", check_int, first, self.world_size - 1)
            if out and out[-1].startswith("straggler_rank="):
                out[-1] += f" (the worker ranks of {self.mode!r} on {self.world_size} ranks)"
        workers = workers_of(self.mode, self.world_size)
        if self.mode == "backup":
            if attempt("backup", check_int, 1, workers - 1) is False:
                out[-1] += (
                    f" (backup workers b < W = {workers} workers: the server steps with the"
                    f" first W - b gradients; {self.world_size} ranks = 1 server + {workers})"
                )
        else:
            attempt("backup", check_int, 0, MAX_WORLD)
        return out

    # ---------------------------------------------------------------- derived
    @property
    def workers(self) -> int:
        """``W``: ranks that compute gradients."""
        return workers_of(self.mode, self.world_size)

    @property
    def first_worker(self) -> int:
        """The rank of worker 0: 1 when rank 0 is a server, else 0."""
        return 1 if self.mode in SERVER_MODES else 0

    @property
    def samples_per_step(self) -> int:
        """``W * rows``: the samples of one step."""
        return self.workers * self.rows

    @property
    def kept_per_step(self) -> int:
        """Gradients a step applies: ``W``, or ``W - b`` with backup workers."""
        return self.workers - self.backup if self.mode == "backup" else self.workers

    @property
    def averages(self) -> int:
        """Local SGD's parameter averages: one every ``H`` steps and one after the last step."""
        return -(-self.steps // self.local_steps)

    def straggler_label(self) -> str:
        """A short name of the straggler setting, the same in every regime: the slow one is named
        by its worker index (``worker 2, pareto 10 ms``: rank 2 of sync, rank 3 of async-ps)."""
        if self.straggler == "none" or self.delay_ms == 0:
            return "none"
        slow = self.straggler_rank - self.first_worker
        who = f"worker {slow}" if self.straggler == "rank" else "random worker"
        return f"{who}, {self.distribution} {self.delay_ms:g} ms"


def workers_of(mode: str, world_size: int) -> int:
    """``W`` workers on ``world_size`` ranks: one fewer where rank 0 is a server."""
    return world_size - 1 if mode in SERVER_MODES else world_size


def world_size_for(mode: str, workers: int) -> int:
    """Ranks that give ``mode`` ``workers`` workers."""
    return workers + 1 if mode in SERVER_MODES else workers


def batch_seed(seed: int, worker: int, t: int) -> int:
    """The seed of worker ``worker``'s ``t``-th batch (``t >= 1``): unique per (seed, w, t)."""
    return BATCH_SEED_BASE + ((seed * (MAX_STEPS * 64 + 1) + t) * (MAX_WORLD + 1) + worker) * 13


def delay_s(config: AsyncConfig, worker: int, t: int) -> float:
    """Seconds worker ``worker`` (0-based) sleeps in its ``t``-th gradient (see module doc)."""
    if config.straggler == "none" or config.delay_ms == 0:
        return 0.0
    if config.straggler == "rank":
        if worker != config.straggler_rank - config.first_worker:
            return 0.0
    elif random.Random(f"{config.seed}:who:{t}").randrange(config.workers) != worker:
        return 0.0
    mean = config.delay_ms / 1e3
    rng = random.Random(f"{config.seed}:delay:{worker}:{t}")
    if config.distribution == "fixed":
        return mean
    if config.distribution == "exponential":
        return rng.expovariate(1.0 / mean)
    scale = mean * (PARETO_SHAPE - 1) / PARETO_SHAPE  # x_m, so that the mean is ``mean``
    return min(scale * rng.paretovariate(PARETO_SHAPE), PARETO_CAP * mean)


def ring_bytes_per_rank(config: AsyncConfig, numel: int, itemsize: int = 4) -> float:
    """Bytes each rank sends for the run's all-reduces: ``2(W-1)/W * numel * itemsize`` per
    all-reduce; ``S`` of them in sync, ``ceil(S / H)`` in local SGD, none in the server modes."""
    w = config.workers
    per = 2 * (w - 1) / w * numel * itemsize
    count = {"sync": config.steps, "local-sgd": config.averages}.get(config.mode, 0)
    return per * count
