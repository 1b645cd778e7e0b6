"""What one 3D-parallel training step runs, checked once: :class:`Config3D` and :class:`Run3D`.

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

Check once, pass down (torchtitan's ``ParallelismConfig`` and ``ParallelDims``): a
:class:`Config3D` checks the sizes when it is built; :meth:`Config3D.dims` checks the degrees
against this model once, in :class:`~edu_parallel.core.dims.ParallelDims` (TP divides the heads
and the hidden size, PP the layers); a :class:`Run3D` holds both with the checks between them (the
batch splits, the experts fit the EP degree). The mesh, the rank's step, the measures, the report
and the planner tie take the ``Run3D`` and trust it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from ..core.errors import (
    Checked,
    Problems,
    bad_value,
    check_choice,
    check_int,
    check_positive,
    check_seed,
    spelling,
)
from ..core.i18n import _
from ..expert_parallel.formulas import MAX_EXPERTS
from ..memory.presets import ModelShape

DTYPE = "float32"
ITEMSIZE = 4
ZeroStage = Literal[0, 1]  # DP all-reduce, or ZeRO-1 (reduce-scatter, sharded Adam, all-gather)
ZERO_STAGES_RUN: tuple[int, ...] = get_args(ZeroStage)
# What a step on a few CPU ranks runs in seconds: layers, hidden size (and heads), sequences
# per batch, tokens per sequence.
MAX_LAYERS, MAX_HIDDEN, MAX_BATCH, MAX_SEQ = 32, 128, 256, 256
# b s L (4h + a s): a step's work (its MLP and attention, token by token and layer by layer),
# bounded so that the largest accepted step runs in seconds (about 22 s on 16 ranks of 2 cores);
# the largest of each option together were 3.2e9. What a step holds is estimated apart, from
# what a layer saves (parallel_3d/memory.py: about 16 h elements a token and layer), and checked
# against this machine's free memory.
MAX_SAVED_ELEMENTS = 1 << 27
STEP = 0
# The layouts the issue asks for, as (dp, tp, pp, ep) on 8 ranks.
# The MoE layout (4, 2, 1, 2) is the DP2 x EP2 x TP2: attention is data parallel over 4
# ranks, each expert lives on one rank of 2 (EP) and is replicated on 2 (expert DP).
LAYOUTS = ((2, 2, 2, 1), (2, 4, 1, 1), (1, 2, 4, 1), (4, 1, 2, 1), (4, 2, 1, 2))


def model_shape(layers: int, hidden: int, heads: int, seq: int) -> ModelShape:
    """The planner's view of the lesson's model (arch ``"bare"``: 12 h^2 parameters per layer),
    at any size: the quiz prices a real model's traffic with it."""
    return ModelShape(
        "3d-toy",
        "bare",
        layers=layers,
        hidden=hidden,
        heads=heads,
        vocab=0,
        seq=seq,
        source="edu_parallel.parallel_3d: the lesson 12 model",
    )


@dataclass(frozen=True)
class Config3D(Checked):
    """Sizes of the model and of the step, checked when built (one ValueError names each bad
    size)."""

    layers: int = 4
    """Transformer layers L, in [1, MAX_LAYERS]; the pipeline stages split them evenly."""
    hidden: int = 16
    """Hidden size h, in [1, MAX_HIDDEN]; the MLP is 4h wide."""
    heads: int = 4
    """Attention heads a, a divisor of ``hidden``; TP gives each rank a/tp whole heads."""
    batch: int = 16
    """Global batch in sequences, in [1, MAX_BATCH]: dp replicas x microbatches x micro_batch."""
    seq: int = 4
    """Tokens per sequence s, in [1, MAX_SEQ]."""
    microbatches: int | None = None
    """Microbatches per replica, in [1, MAX_BATCH]; None: 2 * pp."""
    zero: ZeroStage = 0
    """0: the DP gradient all-reduce; 1: ZeRO-1 (reduce-scatter, Adam on 1/dp, all-gather)."""
    experts: int = 0
    """0: a dense MLP; E in [1, MAX_EXPERTS] dividing 4h: a MoE layer spread over the ep ranks."""
    top_k: int = 2
    """Experts per token, in [1, experts] (MoE only)."""
    capacity_factor: float = 2.0
    """Slots per expert relative to an even split, > 0 (MoE only; 2.0 drops no token here)."""
    lr: float = 1e-2
    """Adam's learning rate, > 0."""
    seed: int = 0
    """Seed of the weights and the data, >= 0."""

    def _check(self) -> list[str]:
        p = Problems()
        self._field(p, "layers", check_int, 1, MAX_LAYERS)
        hidden = self._field(p, "hidden", check_int, 1, MAX_HIDDEN)
        heads = self._field(p, "heads", check_int, 1, MAX_HIDDEN)
        if hidden is not None and heads is not None and hidden % heads:
            p.add(
                bad_value("heads", heads, _("a divisor of hidden={hidden}").format(hidden=hidden))
            )
        batch = self._field(p, "batch", check_int, 1, MAX_BATCH)
        seq = self._field(p, "seq", check_int, 1, MAX_SEQ)
        layers = self.layers if isinstance(self.layers, int) else None
        if None not in (batch, seq, hidden, heads, layers) and not p:
            saved = batch * seq * layers * (4 * hidden + heads * seq)  # type: ignore[operator]
            if saved > MAX_SAVED_ELEMENTS:
                names = ("batch", "seq", "layers")
                named = " x ".join(spelling(n) for n in names) + " x (4 hidden + heads seq)"
                valid = _(
                    "at most {limit:,}: tokens x layers x (4h + a s), the work of a step that a"
                    " few CPU ranks and its one-process reference finish in seconds (what it"
                    " would hold is checked against this machine's memory apart)"
                ).format(limit=MAX_SAVED_ELEMENTS)
                p.add(bad_value(named, saved, valid))
        if self.microbatches is not None:
            self._field(p, "microbatches", check_int, 1, MAX_BATCH)
        self._field(p, "zero", check_choice, ZERO_STAGES_RUN)
        experts = self._field(p, "experts", check_int, 0, MAX_EXPERTS)
        if experts:
            if hidden is not None and 4 * hidden % experts:
                valid = _("a divisor of 4*hidden={ffn} (each expert is 4h/E wide)")
                p.add(bad_value("experts", experts, valid.format(ffn=4 * hidden)))
            self._field(p, "top_k", check_int, 1, experts)
            self._field(p, "capacity_factor", check_positive)
        self._field(p, "lr", check_positive)
        self._field(p, "seed", check_seed)
        return p.lines

    @property
    def ffn(self) -> int:
        return 4 * self.hidden

    def num_microbatches(self, pp: int) -> int:
        return 2 * pp if self.microbatches is None else self.microbatches

    def micro_batch(self, dims: ParallelDims) -> int:
        return self.batch // (dims.dp * self.num_microbatches(dims.pp))

    def shape(self) -> ModelShape:
        """The planner's view of this model (arch ``"bare"``: 12 h^2 parameters per layer)."""
        return model_shape(self.layers, self.hidden, self.heads, self.seq)

    def dims(
        self,
        world_size: Any,
        dp: Any = -1,
        tp: Any = 1,
        pp: Any = 1,
        ep: Any = 1,
        max_world_size: int | None = MAX_LOCAL_WORLD_SIZE,
    ) -> ParallelDims:
        """The degrees, checked once against the world and this model's shape: one ValueError
        names every bad factor (``max_world_size`` None: a launcher's ranks, no local limit)."""
        stages = pp if isinstance(pp, int) and not isinstance(pp, bool) and pp >= 1 else 1
        return ParallelDims(
            world_size,
            dp=dp,
            tp=tp,
            pp=pp,
            ep=ep,
            max_world_size=max_world_size,
            layers=self.layers,
            heads=self.heads,
            hidden=self.hidden,
            microbatches=self.num_microbatches(stages),
        )


@dataclass(frozen=True)
class Run3D(Checked):
    """One 3D step to run, checked once: what the CLI's ``run 3d`` and :func:`run_3d` build
    (:meth:`build`) and everything below receives and trusts."""

    dims: ParallelDims
    """The degrees ``world_size = dp * tp * pp`` (``ep`` carved out of ``dp``), validated with
    the model's shape by :meth:`Config3D.dims`."""
    config: Config3D
    """The model and the step, validated when built."""

    def _check(self) -> list[str]:
        """The checks between the two: the batch splits, the experts fit the EP degree."""
        p = Problems()
        d, c = self.dims, self.config
        if (d.layers, d.heads, d.hidden) != (c.layers, c.heads, c.hidden):
            valid = _(
                "degrees checked against this model's layers, heads and hidden {shape} (build"
                " them with Config3D.dims)"
            )
            p.add(bad_value("dims", d, valid.format(shape=(c.layers, c.heads, c.hidden))))
            return p.lines
        m = c.num_microbatches(d.pp)
        if c.batch % (d.dp * m):
            valid = _(
                "a multiple of dp * microbatches = {dp} * {m} = {product} (each replica's share"
                " splits into equal microbatches)"
            )
            p.add(bad_value("batch", c.batch, valid.format(dp=d.dp, m=m, product=d.dp * m)))
        if c.experts:
            if d.pp != 1:
                p.add(bad_value("pp", d.pp, _("1 with experts (the MoE run is DP x EP x TP)")))
            if d.dp % d.ep:
                valid = _("a divisor of dp={dp} (expert parallelism is carved from DP)")
                p.add(bad_value("ep", d.ep, valid.format(dp=d.dp)))
            elif c.experts % d.ep:
                p.add(bad_value("experts", c.experts, _("a multiple of ep={ep}").format(ep=d.ep)))
        elif d.ep != 1:
            valid = _("1 without experts (give experts=E for the MoE layer)")
            p.add(bad_value("ep", d.ep, valid))
        return p.lines

    @classmethod
    def build(
        cls,
        world_size: Any,
        dp: Any = -1,
        tp: Any = 1,
        pp: Any = 1,
        ep: Any = 1,
        *,
        max_world_size: int | None = MAX_LOCAL_WORLD_SIZE,
        **sizes: Any,
    ) -> Run3D:
        """The sizes (fields of :class:`Config3D`), then the degrees against them, then the two
        together, each checked once; the first of the three with a problem raises, naming each."""
        config = Config3D(**sizes)
        return cls(config.dims(world_size, dp, tp, pp, ep, max_world_size), config)
