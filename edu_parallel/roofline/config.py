"""The measured sweep's options, checked once where the sweep starts: :class:`SweepConfig`.

One frozen config says what :func:`~edu_parallel.roofline.sweep.run_sweep` runs on the ranks: the
strategy map's residual MLP (``L`` blocks of hidden size ``h``, :mod:`edu_parallel.strategy_map`)
trained by data parallelism with ``k`` microbatches of ``T`` tokens per rank per optimizer step
(gradient accumulation: ``k T`` tokens per step, one all-reduce), for every ``k`` of
``accumulation``, ``repeats`` times, interleaved with the matmul and all-reduce timings that give
the formula its constants. The ranks, the parent's reader and the lesson's figures receive it as
it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import Checked, Problems, bad_value, check_int, check_seed
from ..core.i18n import _
from ..core.units import parse_size
from ..strategy_map.formulas import (
    ITEMSIZE,
    MAX_BATCH,
    MAX_HIDDEN,
    MAX_LAYERS,
    MapConfig,
    block_params,
)

MAX_REPEATS = 50  # timed rounds of the sweep; the first is a warm-up
MAX_SWEEP_TOKENS = 1024  # tokens per rank of the largest step: about 0.1 s of compute at h = 256
MAX_ACCUMULATION = 64  # microbatches of one step
MIN_SIZE = 4 << 10  # the smallest all-reduce of the calibration: it fixes alpha


def _check_accumulation(name: str, value: Any) -> tuple[int, ...]:
    valid = _("at least two increasing microbatch counts, each in [1, {most}]").format(
        most=MAX_ACCUMULATION
    )
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise bad_value(name, value, valid)
    ks = tuple(value)
    whole = all(isinstance(k, int) and not isinstance(k, bool) for k in ks)
    if not whole or len(ks) < 2 or list(ks) != sorted(set(ks)):
        raise bad_value(name, value, valid)
    if ks[0] < 1 or ks[-1] > MAX_ACCUMULATION:
        raise bad_value(name, value, valid)
    return ks


def _check_sizes(name: str, value: Any) -> tuple[int, ...]:
    valid = _("at least two different all-reduce sizes, such as (4096, '1MiB')")
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise bad_value(name, value, valid)
    sizes = tuple(sorted({parse_size(s, name) for s in value}))
    if len(sizes) < 2:
        raise bad_value(name, value, valid)
    return sizes


@dataclass(frozen=True)
class SweepConfig(Checked):
    """A data-parallel step swept over the tokens per rank, timed on the ranks; see the module
    doc. Built by :meth:`build` on an executor's ranks, checked once, trusted below."""

    world_size: int
    """Ranks N: DP's degree (the executor's, checked with it), at least 2."""
    hidden: int = 128
    """Hidden size h of the strategy map's blocks, in [1, MAX_HIDDEN]; the MLP is 4h wide."""
    layers: int = 1
    """Residual MLP blocks L, in [1, MAX_LAYERS]: one keeps the weights (0.5 MiB at h = 128) in a
    core's cache, so every microbatch of a step finds them there alike."""
    microbatch: int = 4
    """Tokens T of one rank's microbatch, in [1, MAX_SWEEP_TOKENS]."""
    accumulation: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16)
    """Microbatches k per optimizer step of the sweep, increasing: ``k T`` tokens per step."""
    repeats: int = 8
    """Timed rounds, in [2, MAX_REPEATS]; each times every T once (the first round warms up)."""
    sizes: tuple[int, ...] | None = None
    """All-reduce sizes in bytes timed for the alpha-beta fit; None: 4 KiB, Ψe/16, Ψe/4 and the
    gradient bucket Ψe itself, the message the steps send."""
    seed: int = 0
    """Seed of the weights and the data, >= 0."""

    def _check(self) -> list[str]:
        p = Problems()
        n = self._field(p, "world_size", check_int, 2)
        self._field(p, "hidden", check_int, 1, MAX_HIDDEN)
        self._field(p, "layers", check_int, 1, MAX_LAYERS)
        t = self._field(p, "microbatch", check_int, 1, MAX_SWEEP_TOKENS)
        ks = self._field(p, "accumulation", _check_accumulation)
        if n is not None and t is not None and ks is not None and n * t * ks[-1] > MAX_BATCH:
            valid = _("at most {most} tokens in all (world_size * microbatch * the largest k)")
            p.add(bad_value("accumulation", self.accumulation, valid.format(most=MAX_BATCH)))
        self._field(p, "repeats", check_int, 2, MAX_REPEATS)
        if self.sizes is not None:
            self._field(p, "sizes", _check_sizes)
        self._field(p, "seed", check_seed)
        return p.lines

    @classmethod
    def build(cls, world_size: int, **options: Any) -> SweepConfig:
        """The config of a sweep on ``world_size`` ranks (``options``: the fields above)."""
        return cls(world_size, **options)

    @property
    def params(self) -> int:
        """Ψ: the model's parameters, one gradient bucket."""
        return self.layers * block_params(self.hidden)

    @property
    def calibration_sizes(self) -> tuple[int, ...]:
        """The all-reduce sizes timed for the fit (see ``sizes``)."""
        if self.sizes is not None:
            return self.sizes
        bucket = self.params * ITEMSIZE
        return tuple(sorted({MIN_SIZE, bucket // 16, bucket // 4, bucket}))

    @property
    def tokens(self) -> tuple[int, ...]:
        """Tokens per rank per optimizer step of each point: ``k T``."""
        return tuple(k * self.microbatch for k in self.accumulation)

    @property
    def model(self) -> MapConfig:
        """The strategy map's model with room for the largest step on every rank (one token per
        sequence: a rank's tokens are rows)."""
        batch = self.world_size * self.tokens[-1]
        return MapConfig(layers=self.layers, hidden=self.hidden, batch=batch, seq=1, seed=self.seed)
