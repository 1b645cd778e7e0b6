"""What one 3D-parallel training step runs: :class:`Config3D`, checked once with the degrees.

Pure Python, no torch: the CLI, the lesson and the quiz read it without starting a process.

The model is the planner's ``"bare"`` transformer (:mod:`edu_parallel.memory.presets`): ``L``
layers of attention (``Wq``, ``Wk``, ``Wv``, ``Wo``, each (h, h), ``a`` heads) and an MLP
(``W1`` (4h, h), ``W2`` (h, 4h)), residual connections, no biases, norms or embeddings, so a layer
has exactly ``12 h^2`` parameters and TP splits every one of them. Inputs are activations
``x`` (b, s, h) and the loss is the global mean squared error to a seeded target. With
``experts > 0`` the MLP is a mixture of experts (``E`` experts of width 4h/E, top-k router), the
layout DP x EP x TP of the issue. As in Megatron-LM, expert parallelism is carved out of data
parallelism: the ``dp`` ranks of a stage form ``dp/ep`` blocks of ``ep`` consecutive ranks; the
experts are split over a block (EP group, tokens travel by all-to-all) and each expert is
replicated over the ``dp/ep`` blocks (expert-DP group, its gradient all-reduced there).

The global batch of ``batch`` sequences is split ``dp`` ways (data parallel), each replica's share
into ``microbatches`` of ``micro_batch`` sequences (pipeline), so
``batch = dp * microbatches * micro_batch``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from ..core.errors import bad_value, check_choice, check_int, check_positive
from ..memory.presets import ModelShape

DTYPE = "float32"
ITEMSIZE = 4
ZERO_STAGES_RUN = (0, 1)  # DP all-reduce, or ZeRO-1 (reduce-scatter, sharded Adam, all-gather)
MAX_LAYERS, MAX_HIDDEN, MAX_BATCH = 32, 128, 256
STEP = 0
# The layouts the issue asks for, as (dp, tp, pp, ep) on 8 ranks.
# The MoE layout (4, 2, 1, 2) is the DP2 x EP2 x TP2: attention is data parallel over 4
# ranks, each expert lives on one rank of 2 (EP) and is replicated on 2 (expert DP).
LAYOUTS = ((2, 2, 2, 1), (2, 4, 1, 1), (1, 2, 4, 1), (4, 1, 2, 1), (4, 2, 1, 2))


@dataclass(frozen=True)
class Config3D:
    """Sizes of the model and of the step. ``microbatches`` None: 2 * pp."""

    layers: int = 4
    hidden: int = 16
    heads: int = 4
    batch: int = 16
    seq: int = 4
    microbatches: int | None = None
    zero: int = 0
    experts: int = 0  # 0: dense MLP; > 0: a MoE layer, experts spread over the ep ranks
    top_k: int = 2
    capacity_factor: float = 2.0
    lr: float = 1e-2
    seed: int = 0

    @property
    def ffn(self) -> int:
        return 4 * self.hidden

    def num_microbatches(self, pp: int) -> int:
        return 2 * pp if self.microbatches is None else self.microbatches

    def micro_batch(self, dims: ParallelDims) -> int:
        return self.batch // (dims.dp * self.num_microbatches(dims.pp))

    def shape(self) -> ModelShape:
        """The planner's view of this model (arch ``"bare"``: 12 h^2 parameters per layer)."""
        return ModelShape(
            "3d-toy",
            "bare",
            layers=self.layers,
            hidden=self.hidden,
            heads=self.heads,
            vocab=0,
            seq=self.seq,
            source="edu_parallel.parallel_3d: the lesson 10 model",
        )


def check_3d_args(
    world_size: int, dp: Any = -1, tp: Any = 1, pp: Any = 1, ep: Any = 1, **sizes: Any
) -> tuple[ParallelDims, Config3D]:
    """The degrees and sizes of a 3D run, checked before any process starts: one ValueError that
    names every bad factor (the degrees against the world and the model, then the sizes)."""
    cfg = Config3D(**sizes)
    problems = []
    for name, hi in (("layers", MAX_LAYERS), ("hidden", MAX_HIDDEN), ("heads", MAX_HIDDEN)):
        try:
            check_int(name, getattr(cfg, name), 1, hi)
        except ValueError as exc:
            problems.append(str(exc))
    if not problems and cfg.hidden % cfg.heads:
        problems.append(str(bad_value("heads", cfg.heads, f"a divisor of hidden={cfg.hidden}")))
    if problems:
        raise ValueError("; ".join(problems))
    dims = ParallelDims(
        world_size,
        dp=dp,
        tp=tp,
        pp=pp,
        ep=ep,
        max_world_size=MAX_LOCAL_WORLD_SIZE,
        layers=cfg.layers,
        heads=cfg.heads,
        hidden=cfg.hidden,
        microbatches=cfg.num_microbatches(pp if isinstance(pp, int) else 1),
    )
    batch = check_int("batch", cfg.batch, 1, MAX_BATCH)
    check_int("seq", cfg.seq, 1, MAX_BATCH)
    m = cfg.num_microbatches(dims.pp)
    if batch % (dims.dp * m):
        raise bad_value(
            "batch",
            batch,
            f"a multiple of dp * microbatches = {dims.dp} * {m} = {dims.dp * m} (each replica's"
            " share splits into equal microbatches)",
        )
    check_choice("zero", cfg.zero, ZERO_STAGES_RUN)
    check_int("experts", cfg.experts, 0, 64)
    if cfg.experts:
        if dims.pp != 1:
            raise bad_value("pp", dims.pp, "1 with experts (the MoE run is DP x EP x TP)")
        if dims.dp % dims.ep:
            raise bad_value(
                "ep", dims.ep, f"a divisor of dp={dims.dp} (expert parallelism is carved from DP)"
            )
        if cfg.experts % dims.ep or cfg.ffn % cfg.experts:
            raise bad_value(
                "experts",
                cfg.experts,
                f"a multiple of ep={dims.ep} dividing 4*hidden={cfg.ffn}",
            )
        check_int("top_k", cfg.top_k, 1, cfg.experts)
        check_positive("capacity_factor", cfg.capacity_factor)
    elif dims.ep != 1:
        raise bad_value("ep", dims.ep, "1 without experts (give experts=E for the MoE layer)")
    check_positive("lr", cfg.lr)
    check_int("seed", cfg.seed, 0)
    return dims, cfg
