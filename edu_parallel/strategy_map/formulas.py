"""The strategy map's configuration, names and formulas: pure Python, no torch.

* :class:`MapConfig`: sizes of the tiny transformer-like model and of the training step, shared by
  the runs (:mod:`edu_parallel.strategy_map.strategies`), the report and the lesson's quiz;
  :class:`MapRun`: the strategies to run on N ranks with that config. Each is checked once, when
  built (one ValueError names every bad value), and trusted below: the ranks, the one-process
  reference and the report take it as it is.
* :func:`formula_sent_bytes` / :func:`formula_param_bytes`: what each dense strategy sends and
  holds per rank, checked against the runs' traces by ``tests/test_strategy_map.py``;
  :func:`formula_messages`: how many messages it sends (``tests/test_strategy_crossover.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..core.errors import (
    Checked,
    Problems,
    bad_value,
    check_choice,
    check_int,
    check_positive,
    check_seed,
)
from ..core.i18n import _
from ..core.schema import GRAD_SYNC
from ..expert_parallel.formulas import MAX_EXPERTS, MAX_TOKENS

Strategy = Literal["dp", "tp", "tp-sp", "pp", "ep"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
STRATEGY_NAMES = {"dp": "DP", "tp": "TP", "tp-sp": "TP+SP", "pp": "PP", "ep": "EP"}
PPSchedule = Literal["gpipe", "1f1b"]
PP_SCHEDULES: tuple[str, ...] = get_args(PPSchedule)
DTYPE = "float32"  # every tensor of the model and the data: 4 bytes per element
ITEMSIZE = 4
# What one step of the tiny model runs in seconds on a few CPU ranks: blocks, hidden size,
# sequences per batch, tokens per sequence.
MAX_LAYERS, MAX_HIDDEN, MAX_BATCH, MAX_SEQ = 64, 256, 1024, 1024
STEP = 0  # the one training step every event belongs to
SYNC = GRAD_SYNC  # phase of the gradient all-reduce (DP, TP+SP, EP)


@dataclass(frozen=True)
class MapConfig(Checked):
    """Sizes of the model and the step, checked when built (one ValueError names each bad size).

    ``capacity_factor`` 2.0 with ``top_k=2``, ``experts=4`` gives a capacity of every token, so
    no token is dropped (``C >= E/k``).
    """

    layers: int = 4
    """Residual MLP blocks L, in [1, MAX_LAYERS]."""
    hidden: int = 16
    """Hidden size h, in [1, MAX_HIDDEN]; each block's MLP is 4h wide."""
    batch: int = 8
    """Sequences per step, in [1, MAX_BATCH]."""
    seq: int = 4
    """Tokens per sequence, in [1, MAX_SEQ]."""
    experts: int = 4
    """Experts per block of EP's MoE variant, in [1, MAX_EXPERTS], dividing 4h (each 4h/E wide)."""
    top_k: int = 2
    """Experts per token (EP), in [1, experts]."""
    capacity_factor: float = 2.0
    """Slots per expert relative to an even split (EP), > 0."""
    microbatches: int | None = None
    """PP's microbatches, in [1, batch] dividing it; None: 2N."""
    schedule: PPSchedule = "1f1b"
    """PP's schedule: one of PP_SCHEDULES."""
    lr: float = 0.1
    """SGD's learning rate, > 0."""
    seed: int = 0
    """Seed of the weights and the data, >= 0."""

    def _check(self) -> list[str]:
        p = Problems()
        self._field(p, "layers", check_int, 1, MAX_LAYERS)
        hidden = self._field(p, "hidden", check_int, 1, MAX_HIDDEN)
        batch = self._field(p, "batch", check_int, 1, MAX_BATCH)
        self._field(p, "seq", check_int, 1, MAX_SEQ)
        experts = self._field(p, "experts", check_int, 1, MAX_EXPERTS)
        if experts is not None and hidden is not None and 4 * hidden % experts:
            valid = _("a divisor of 4*hidden={ffn} (each expert is 4h/E wide)")
            p.add(bad_value("experts", experts, valid.format(ffn=4 * hidden)))
        if experts is not None:
            self._field(p, "top_k", check_int, 1, experts)
        self._field(p, "capacity_factor", check_positive)
        if self.microbatches is not None and batch is not None:
            self._field(p, "microbatches", check_int, 1, batch)
        self._field(p, "schedule", check_choice, PP_SCHEDULES)
        self._field(p, "lr", check_positive)
        self._field(p, "seed", check_seed)
        return p.lines

    @property
    def ffn(self) -> int:
        return 4 * self.hidden

    def num_microbatches(self, world_size: int) -> int:
        return 2 * world_size if self.microbatches is None else self.microbatches


def slice_index(shape: Sequence[int], rank: int, parts: int, dim: int = 0) -> list[tuple[int, int]]:
    """``[lo, hi)`` per dimension of block ``rank`` of ``parts`` equal blocks along ``dim``."""
    index = [(0, d) for d in shape]
    per = shape[dim] // parts
    index[dim] = (rank * per, (rank + 1) * per)
    return index


def block_params(hidden: int) -> int:
    """One dense block: W1 (4h, h) + b1 (4h) + W2 (h, 4h) + b2 (h) = 8h^2 + 5h."""
    return 8 * hidden * hidden + 5 * hidden


def formula_sent_bytes(
    strategy: str,
    world_size: int,
    rank: int,
    *,
    layers: int,
    hidden: int,
    tokens: int,
    itemsize: int = ITEMSIZE,
) -> float:
    """Bytes ``rank`` sends in one step of the dense strategies (ring volume for all-reduce).

    DP: ``2(N-1)/N * Psi`` (one gradient all-reduce); TP (Megatron MLP per block): one all-reduce of
    the (b, s, h) activations forward and one of their gradient backward per block,
    ``2L * 2(N-1)/N * T h``; PP: the stage's output activations forward (not the last stage) and
    its input gradient backward (not the first), ``T h`` each. ``T`` = tokens per step (b s).
    TP+SP (Korthikanti et al. 2022, arXiv 2205.05198, §4.2.2): per block and pass an all-gather and
    a reduce-scatter of (T, h), ``(N-1)/N T h`` each = TP's all-reduce; per block in backward one
    more all-gather of W1's input (only its sequence block was saved): ``+ L (N-1)/N T h``; and one
    all-reduce of the L replicated b2 gradients (each rank's covers only its tokens):
    ``+ 2(N-1)/N L h``.
    """
    n = world_size
    if strategy == "dp":
        return 2 * (n - 1) / n * layers * block_params(hidden) * itemsize
    if strategy in ("tp", "tp-sp"):
        tp = 2 * layers * 2 * (n - 1) / n * tokens * hidden * itemsize
        if strategy == "tp":
            return tp
        regather = layers * (n - 1) / n * tokens * hidden * itemsize
        return tp + regather + 2 * (n - 1) / n * layers * hidden * itemsize  # + the b2 sync
    if strategy == "pp":
        return ((rank < n - 1) + (rank > 0)) * tokens * hidden * itemsize
    raise bad_value(
        "strategy", strategy, "'dp', 'tp', 'tp-sp' or 'pp' (EP's bytes depend on the routing)"
    )


def formula_messages(
    strategy: str, world_size: int, rank: int, *, layers: int, microbatches: int
) -> int:
    """Messages ``rank`` sends in one step of a dense strategy: sends plus collective calls.

    DP: 1 (one bucket). TP: ``2L`` all-reduces (the map's TP runs the batch as one microbatch;
    with ``k`` microbatches it is ``2Lk``, as lesson 12's TP ranks show). TP+SP: per block an
    all-gather and a reduce-scatter forward, two all-gathers and a reduce-scatter backward, plus
    the one b2 all-reduce: ``5L + 1``. PP: ``M`` activations forward (not the last stage) and
    ``M`` gradients backward (not the first): ``2M`` on a middle stage, whatever ``L``.
    """
    n = world_size
    if strategy == "dp":
        return 1
    if strategy == "tp":
        return 2 * layers
    if strategy == "tp-sp":
        return 5 * layers + 1
    if strategy == "pp":
        return ((rank < n - 1) + (rank > 0)) * microbatches
    raise bad_value(
        "strategy", strategy, "'dp', 'tp', 'tp-sp' or 'pp' (EP's messages depend on the routing)"
    )


def formula_param_bytes(
    strategy: str, world_size: int, *, layers: int, hidden: int, itemsize: int = ITEMSIZE
) -> float:
    """Parameter bytes per rank: DP all; TP (and TP+SP) W1, b1, W2 split t ways, b2 replicated; PP
    L/N blocks."""
    n, h = world_size, hidden
    if strategy == "dp":
        return layers * block_params(h) * itemsize
    if strategy in ("tp", "tp-sp"):
        return layers * ((8 * h * h + 4 * h) / n + h) * itemsize
    if strategy == "pp":
        return layers / n * block_params(h) * itemsize
    raise bad_value(
        "strategy", strategy, "'dp', 'tp', 'tp-sp' or 'pp' (EP's bytes depend on the routing)"
    )


def check_strategies(name: str, strategies: Any) -> tuple[str, ...]:
    """A non-empty list of distinct names of STRATEGIES, as a tuple."""
    if isinstance(strategies, str) or not isinstance(strategies, Sequence) or not strategies:
        valid = _("a non-empty list of {strategies}").format(strategies=", ".join(STRATEGIES))
        raise bad_value(name, strategies, valid)
    chosen = tuple(check_choice(name, s, STRATEGIES) for s in strategies)
    if len(set(chosen)) != len(chosen):
        raise bad_value(name, strategies, _("each strategy at most once"))
    return chosen


@dataclass(frozen=True)
class MapRun(Checked):
    """The strategies to run on ``world_size`` ranks with ``config``, checked once when built
    (:meth:`build`): what the CLI's ``run map`` and :func:`run_strategy_map` build, and what the
    ranks and the report receive and trust."""

    world_size: int
    """N, every strategy's degree: the executor's ranks (validated with it, trusted here)."""
    strategies: tuple[Strategy, ...] = STRATEGIES  # type: ignore[assignment]
    """The strategies to run, in order, each at most once."""
    config: MapConfig = field(default_factory=MapConfig)
    """The model and the step, checked when built."""

    def _check(self) -> list[str]:
        """What each chosen strategy needs of the sizes on N ranks."""
        p = Problems()
        chosen = self._field(p, "strategies", check_strategies)
        if chosen is None:
            return p.lines
        n, c, want = self.world_size, self.config, set(chosen)
        if "pp" in want and c.layers < n:
            valid = _(
                "an integer in [{n}, {max_layers}]: PP puts at least one block on each of the"
                " {n} ranks"
            )
            p.add(bad_value("layers", c.layers, valid.format(n=n, max_layers=MAX_LAYERS)))
        if {"tp", "tp-sp"} & want and c.ffn % n:
            valid = _(
                "an integer with 4*hidden divisible by the TP degree {n} (W1 is split into {n}"
                " column blocks)"
            )
            p.add(bad_value("hidden", c.hidden, valid.format(n=n)))
        if {"dp", "ep"} & want and c.batch % n:
            valid = _("a multiple of world_size={n} (DP and EP give each rank batch/N rows)")
            p.add(bad_value("batch", c.batch, valid.format(n=n)))
        if "tp-sp" in want and c.seq % n:
            valid = _(
                "a multiple of world_size={n} in [{n}, {max_seq}] (TP+SP gives each rank seq/N"
                " positions)"
            )
            p.add(bad_value("seq", c.seq, valid.format(n=n, max_seq=MAX_SEQ)))
        if "pp" in want:
            m = p.check(check_int, "microbatches", c.num_microbatches(n), 1, c.batch)
            if m is not None and c.batch % m:
                valid = _("a divisor of batch={batch} (default 2N = {default})")
                p.add(bad_value("microbatches", m, valid.format(batch=c.batch, default=2 * n)))
        if "ep" in want:
            if c.experts % n:
                valid = _("a multiple of the world size {n} (E/N experts per rank)")
                p.add(bad_value("experts", c.experts, valid.format(n=n)))
            tokens = c.batch // n * c.seq
            if tokens > MAX_TOKENS:
                valid = _("at most {limit} tokens per rank for EP (batch/N * seq = {tokens})")
                p.add(bad_value("batch", c.batch, valid.format(limit=MAX_TOKENS, tokens=tokens)))
        return p.lines

    @classmethod
    def build(cls, world_size: int, strategies: Any = STRATEGIES, **sizes: Any) -> MapRun:
        """The sizes (fields of :class:`MapConfig`), then the strategies on ``world_size``
        ranks, each checked once."""
        return cls(world_size, strategies, MapConfig(**sizes))
