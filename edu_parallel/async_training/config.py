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
from dataclasses import dataclass, field
from typing import Literal, get_args

from ..core.dims import MAX_LOCAL_WORLD_SIZE
from ..core.errors import (
    Checked,
    Problems,
    bad_value,
    check_choice,
    check_int,
    check_non_negative,
    check_positive,
    check_seed,
    conflicts,
    spelling,
)
from ..core.i18n import _
from ..data_parallel.config import DDP_MODELS, DdpConfig
from ..task.targets import TARGET_ACCURACY, TASK_LR

Mode = Literal["sync", "async-ps", "local-sgd", "backup"]
MODES: tuple[Mode, ...] = get_args(Mode)
SERVER_MODES: tuple[Mode, ...] = ("async-ps", "backup")  # rank 0 is a dedicated server
Straggler = Literal["none", "rank", "random"]
STRAGGLERS: tuple[Straggler, ...] = get_args(Straggler)
Distribution = Literal["fixed", "exponential", "pareto"]
DISTRIBUTIONS: tuple[Distribution, ...] = get_args(Distribution)
PARETO_SHAPE = 1.5  # mean = shape * x_m / (shape - 1) = 3 x_m; variance infinite
PARETO_CAP = 50.0  # a pareto draw is at most 50 x the mean delay
MAX_STEPS = 2000
MAX_ROWS = 512
MAX_DELAY_MS = 1000.0
MODEL = "classifier"
# W gradients of 64 samples per step: twice the task's lr (TASK_LR = 0.2, for steps of 64
# samples), reaching the target in about 60 synchronous steps with 3 workers (linear scaling,
# Goyal et al. 2017, would allow 3x). task/targets.py holds the task's constants torch-free.
LESSON_LR = 2 * TASK_LR
PSI = DdpConfig(1, model=MODEL).psi  # the classifier's 22,026 parameters
DEFAULT_DISTRIBUTION: Distribution = "fixed"  # a straggler's delay, where not given
DEFAULT_DELAY_MS = 10.0  # a straggler's mean delay in ms, where not given
DEFAULT_LOCAL_STEPS = 4  # H of mode "local-sgd" where not given (it means nothing elsewhere)
DEFAULT_BACKUP = 1  # backup workers b of mode "backup" (the option means nothing elsewhere)
BATCH_SEED_BASE = 2_000_003  # above the held-out set's seed: a training batch is never held out


def check_delay_ms(name: str, value: object) -> float:
    """``value`` as milliseconds in [0, :data:`MAX_DELAY_MS`], or a ValueError."""
    valid = _("a number of milliseconds in [0, {limit}]").format(limit=f"{MAX_DELAY_MS:g}")
    ms = check_non_negative(name, value, valid)
    if ms > MAX_DELAY_MS:
        raise bad_value(name, value, valid)
    return ms


def check_accuracy(name: str, value: object) -> float:
    """``value`` as a held-out accuracy in (0, 1], or a ValueError."""
    valid = _("a held-out accuracy in (0, 1]")
    try:
        accuracy = check_positive(name, value)
    except ValueError:
        raise bad_value(name, value, valid) from None
    if accuracy > 1:
        raise bad_value(name, value, valid)
    return accuracy


@dataclass(frozen=True)
class AsyncConfig(Checked):
    """What every rank runs (see the module doc), checked once: the constructor names every bad
    field in one ValueError, and the runner, the rank jobs and the replay trust it."""

    world_size: int
    """Ranks, at most :data:`~edu_parallel.core.dims.MAX_LOCAL_WORLD_SIZE`; at least 2 where
    rank 0 serves (:data:`SERVER_MODES`)."""
    mode: Mode = "sync"
    """The regime: one of :data:`MODES` (the module doc)."""
    steps: int = 100
    """The sample budget in steps of ``W * rows`` samples, at most :data:`MAX_STEPS`."""
    straggler: Straggler = "none"
    """Who is slow: nobody, the rank ``straggler_rank``, or a random worker per gradient."""
    straggler_rank: int | None = None
    """The slow rank of ``straggler="rank"``, a worker's rank; None there: the last rank (set by
    the check). With another straggler it stays None (giving it is refused)."""
    distribution: Distribution | None = None
    """How a slow gradient's delay is drawn: one of :data:`DISTRIBUTIONS`; None: ``fixed``
    (:data:`DEFAULT_DISTRIBUTION`) with a straggler, and it stays None without one (giving it
    is refused)."""
    delay_ms: float | None = None
    """The mean delay of a slow gradient, in [0, :data:`MAX_DELAY_MS`] milliseconds; None:
    :data:`DEFAULT_DELAY_MS` with a straggler, None without one (giving it is refused)."""
    local_steps: int | None = None
    """``H`` of local SGD: local steps between two parameter averages; None:
    :data:`DEFAULT_LOCAL_STEPS` in mode ``local-sgd``, None in the others (giving it is
    refused)."""
    backup: int | None = None
    """``b`` of backup workers: a step keeps the first ``W - b`` gradients (1 <= b < W); only in
    mode ``backup`` (None there: :data:`DEFAULT_BACKUP`, set by the check; in the other modes
    it stays None, and giving it is refused)."""
    rows: int = DDP_MODELS[MODEL].batch
    """Samples per gradient, at most :data:`MAX_ROWS`: by default the task's global batch."""
    lr: float = LESSON_LR
    """SGD's learning rate (async-ps applies each gradient with ``lr / W``)."""
    seed: int = 0
    """Seed of the weights, the batches and the delays, at most ``core.errors.MAX_SEED``."""
    target: float = TARGET_ACCURACY
    """The held-out accuracy whose time and steps to reach the report reads off."""
    classifier: DdpConfig = field(init=False, repr=False, compare=False)
    """The seeded classifier every replica is built from, made once by the check."""

    def _check(self) -> list[str]:
        p = Problems()
        mode = self._field(p, "mode", check_choice, MODES)
        server = mode in SERVER_MODES
        n = self._field(p, "world_size", check_int, 2 if server else 1, MAX_LOCAL_WORLD_SIZE)
        if n is None and server:
            p.amend(
                _(" (mode {mode!r}: rank 0 serves, so at least one worker more)").format(mode=mode)
            )
        self._field(p, "steps", check_int, 1, MAX_STEPS)
        straggler = self._field(p, "straggler", check_choice, STRAGGLERS)
        if straggler not in (None, "rank") and self.straggler_rank is not None:
            why = _("only {straggler}='rank' has a slow rank").format(
                straggler=spelling("straggler")
            )
            p.add(conflicts("straggler_rank", self.straggler_rank, "straggler", straggler, why))
        self._check_delays(p, straggler)
        self._check_local_steps(p, mode)
        self._field(p, "rows", check_int, 1, MAX_ROWS)
        self._field(p, "lr", check_positive)
        seed = self._field(p, "seed", check_seed)
        self._field(p, "target", check_accuracy)
        if mode is None or n is None:
            return p.lines  # the ranks, the workers and the server depend on both
        self._check_ranks(p, mode, n)
        if seed is not None:
            object.__setattr__(self, "classifier", DdpConfig(1, model=MODEL, seed=seed))
        return p.lines

    def _check_delays(self, p: Problems, straggler: str | None) -> None:
        """The delay's distribution and mean, with a straggler (their defaults where None);
        without one they mean nothing and are refused."""
        if straggler == "none":
            why = _("with no straggler no gradient is delayed")
            for name in ("distribution", "delay_ms"):
                if getattr(self, name) is not None:
                    p.add(conflicts(name, getattr(self, name), "straggler", straggler, why))
            return
        if self.distribution is None:
            object.__setattr__(self, "distribution", DEFAULT_DISTRIBUTION)
        if self.delay_ms is None:
            object.__setattr__(self, "delay_ms", DEFAULT_DELAY_MS)
        self._field(p, "distribution", check_choice, DISTRIBUTIONS)
        self._field(p, "delay_ms", check_delay_ms)

    def _check_local_steps(self, p: Problems, mode: Mode | None) -> None:
        """Local SGD's H, in mode ``local-sgd`` (its default where None); refused elsewhere."""
        if mode != "local-sgd":
            if self.local_steps is not None and mode is not None:
                why = _("only {mode}='local-sgd' averages every H steps").format(
                    mode=spelling("mode")
                )
                p.add(conflicts("local_steps", self.local_steps, "mode", mode, why))
            return
        if self.local_steps is None:
            object.__setattr__(self, "local_steps", DEFAULT_LOCAL_STEPS)
        self._field(p, "local_steps", check_int, 1, MAX_STEPS)

    def _check_ranks(self, p: Problems, mode: Mode, n: int) -> None:
        """The straggler's rank and the backup workers, against the ranks of ``mode``."""
        if self.straggler == "rank":  # with another straggler, a slow rank is refused above
            if self.straggler_rank is None:
                object.__setattr__(self, "straggler_rank", n - 1)
            elif self._field(p, "straggler_rank", check_int, self.first_worker, n - 1) is None:
                p.amend(_(" (the worker ranks of {mode!r} on {n} ranks)").format(mode=mode, n=n))
        workers = workers_of(mode, n)
        if mode != "backup":
            if self.backup is not None:
                why = _("only {mode}='backup' has backup workers").format(mode=spelling("mode"))
                p.add(conflicts("backup", self.backup, "mode", mode, why))
            return
        if self.backup is None:
            object.__setattr__(self, "backup", DEFAULT_BACKUP)
        if self._field(p, "backup", check_int, 1, workers - 1) is None:
            p.amend(
                _(
                    " (backup workers b < W = {workers} workers: the server steps with the first"
                    " W - b gradients; {n} ranks = 1 server + {workers})"
                ).format(workers=workers, n=n)
            )

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
        return -(-self.steps // self.local_steps) if self.local_steps else 0

    def straggler_label(self) -> str:
        """A short name of the straggler setting, the same in every regime: the slow one is named
        by its worker index (``worker 2, pareto 10 ms``: rank 2 of sync, rank 3 of async-ps)."""
        if self.straggler == "none" or self.delay_ms == 0:
            return "none"
        if self.straggler == "rank":
            who = f"worker {self.straggler_rank - self.first_worker}"
        else:
            who = "random worker"
        return f"{who}, {self.distribution} {self.delay_ms:g} ms"


def workers_of(mode: str, world_size: int) -> int:
    """``W`` workers on ``world_size`` ranks: one fewer where rank 0 is a server."""
    return world_size - 1 if mode in SERVER_MODES else world_size


def world_size_for(mode: str, workers: int) -> int:
    """Ranks that give ``mode`` ``workers`` workers."""
    return workers + 1 if mode in SERVER_MODES else workers


def batch_seed(seed: int, worker: int, t: int) -> int:
    """The seed of worker ``worker``'s ``t``-th batch (``t >= 1``): unique per (seed, w, t)."""
    # strides that keep (seed, w, t) apart and every seed of the lessons' replays unchanged:
    per_seed = MAX_STEPS * 64 + 1  # above any t (a worker computes at most MAX_STEPS * W)
    per_t = MAX_LOCAL_WORLD_SIZE + 1  # above any worker index (the world size's limit)
    return BATCH_SEED_BASE + ((seed * per_seed + t) * per_t + worker) * 13


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
