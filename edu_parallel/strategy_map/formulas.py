"""The strategy map's configuration, names and formulas: pure Python, no torch.

* :class:`MapConfig`: sizes of the tiny transformer-like model and of the training step, shared by
  the runs (:mod:`edu_parallel.strategy_map.strategies`), the report and the lesson's quiz.
* :func:`formula_sent_bytes` / :func:`formula_param_bytes`: what each dense strategy sends and
  holds per rank, checked against the runs' traces by ``tests/test_strategy_map.py``;
  :func:`formula_messages`: how many messages it sends (``tests/test_strategy_crossover.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import bad_value, check_choice, check_int, check_positive
from ..core.schema import GRAD_SYNC
from ..expert_parallel.formulas import check_moe_args

STRATEGIES = ("dp", "tp", "tp-sp", "pp", "ep")
STRATEGY_NAMES = {"dp": "DP", "tp": "TP", "tp-sp": "TP+SP", "pp": "PP", "ep": "EP"}
PP_SCHEDULES = ("gpipe", "1f1b")
DTYPE = "float32"  # every tensor of the model and the data: 4 bytes per element
ITEMSIZE = 4
MAX_LAYERS, MAX_HIDDEN, MAX_BATCH = 64, 256, 1024
STEP = 0  # the one training step every event belongs to
SYNC = GRAD_SYNC  # phase of the gradient all-reduce (DP, TP+SP, EP)


@dataclass(frozen=True)
class MapConfig:
    """Sizes of the model and the step; validated by
    :func:`edu_parallel.strategy_map.report.check_map_args`.

    ``microbatches`` None: 2N for PP. ``capacity_factor`` 2.0 with ``top_k=2``, ``experts=4``
    gives a capacity of every token, so no token is dropped (``C >= E/k``).
    """

    layers: int = 4
    hidden: int = 16
    batch: int = 8
    seq: int = 4
    experts: int = 4
    top_k: int = 2
    capacity_factor: float = 2.0
    microbatches: int | None = None
    schedule: str = "1f1b"
    lr: float = 0.1
    seed: int = 0

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
    with ``k`` microbatches it is ``2Lk``, as lesson 10's TP ranks show). TP+SP: per block an
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


def check_map_args(
    world_size: int, strategies: Any = STRATEGIES, **sizes: Any
) -> tuple[tuple[str, ...], MapConfig]:
    """Validate before any process starts; a ValueError names the parameter, value and valid
    range."""
    if isinstance(strategies, str) or not strategies:
        raise bad_value("strategies", strategies, "a non-empty list of " + ", ".join(STRATEGIES))
    chosen = tuple(check_choice("strategies", s, STRATEGIES) for s in strategies)
    if len(set(chosen)) != len(chosen):
        raise bad_value("strategies", strategies, "each strategy at most once")
    cfg = MapConfig(**sizes)
    n = world_size
    layers = check_int("layers", cfg.layers, 1, MAX_LAYERS)
    if "pp" in chosen and layers < n:
        raise bad_value(
            "layers",
            layers,
            f"an integer in [{n}, {MAX_LAYERS}]: PP puts at least one block on each of the {n}"
            " ranks",
        )
    hidden = check_int("hidden", cfg.hidden, 1, MAX_HIDDEN)
    if {"tp", "tp-sp"} & set(chosen) and cfg.ffn % n:
        raise bad_value(
            "hidden",
            hidden,
            f"an integer with 4*hidden divisible by the TP degree {n} (W1 is split into {n} column"
            " blocks)",
        )
    batch = check_int("batch", cfg.batch, 1, MAX_BATCH)
    if {"dp", "ep"} & set(chosen) and batch % n:
        raise bad_value(
            "batch", batch, f"a multiple of world_size={n} (DP and EP give each rank batch/N rows)"
        )
    seq = check_int("seq", cfg.seq, 1, MAX_BATCH)
    if "tp-sp" in chosen and seq % n:
        raise bad_value(
            "seq",
            seq,
            f"a multiple of world_size={n} in [{n}, {MAX_BATCH}] (TP+SP gives each rank seq/N"
            " positions)",
        )
    if "pp" in chosen:
        m = check_int("microbatches", cfg.num_microbatches(n), 1, batch)
        if batch % m:
            raise bad_value(
                "microbatches",
                cfg.microbatches,
                f"a divisor of batch={batch} (default 2N = {2 * n})",
            )
        check_choice("schedule", cfg.schedule, PP_SCHEDULES)
    if "ep" in chosen:
        check_moe_args(
            n,
            cfg.experts,
            cfg.top_k,
            cfg.capacity_factor,
            0.0,
            batch // n * cfg.seq,
            hidden,
            cfg.seed,
        )
        if cfg.ffn % cfg.experts:
            raise bad_value(
                "experts",
                cfg.experts,
                f"a divisor of 4*hidden={cfg.ffn} (each expert is 4h/E wide)",
            )
    check_positive("lr", cfg.lr)
    check_int("seed", cfg.seed, 0)
    return chosen, cfg
