"""One validated description of a tensor-parallel run: :class:`TPConfig` (a layer of Megatron's MLP,
or the whole block, with or without sequence parallelism) and :class:`AttentionConfig` (the
attention block, heads split). Pure Python, no torch.

Built once where a run starts (:func:`~edu_parallel.tensor_parallel.report.run_tp`,
:func:`~edu_parallel.tensor_parallel.attention_run.run_tp_attention`, the command line) and passed
down unchanged to every rank's job and to the dense reference; the constructor checks every field
and raises one ValueError that names each bad one (torchtitan's ``ParallelismConfig`` style).
Nothing below checks the same values again.

The rules are Megatron-LM's (Shoeybi et al. 2019, arXiv 1909.08053, §3): each rank holds whole
heads and whole columns, so the TP degree ``t`` (the world size) divides ``h`` and ``ffn`` (and
the heads); sequence parallelism splits the sequence, so ``t`` divides ``s`` (Korthikanti et al.
2022, arXiv 2205.05198, §4.2.2). The world size is the executor's: a local cluster is bounded by
:data:`~edu_parallel.core.dims.MAX_LOCAL_WORLD_SIZE` when it is built, torchrun by nothing, and
``t`` dividing ``h <= MAX_HIDDEN`` bounds it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..core.errors import (
    Checked,
    Problems,
    bad_value,
    check_bool,
    check_choice,
    check_int,
    check_seed,
)
from ..core.i18n import _
from ..core.units import DTYPES

# the layer run: column- or row-parallel nn.Linear, Megatron's MLP, the MLP with sequence parallel
Mode = Literal["column", "row", "mlp", "mlp-sp"]
MODES: tuple[Mode, ...] = get_args(Mode)
# which collectives: Megatron's f and g, or the ones the course outline names (errata E4)
Rule = Literal["megatron", "syllabus"]
RULES: tuple[Rule, ...] = get_args(Rule)
# the layers run in double (exact checks) or single precision
Dtype = Literal["float64", "float32"]
ITEMSIZE: dict[str, int] = {dtype: DTYPES[dtype] for dtype in get_args(Dtype)}  # bytes / element
TOLERANCES = {"float64": (1e-10, 1e-12), "float32": (1e-4, 1e-5)}  # (rtol, atol) of allclose
MAX_BATCH, MAX_SEQ, MAX_HIDDEN, MAX_FFN = 1024, 4096, 8192, 32768
DRAW_COPIES = 2  # a weight drawn in float64 and scaled: two float64 copies of it at once
MAX_ELEMENTS = 2**22  # b * s * max(h, ffn) (attention: max(h, s * heads)): a teaching run on CPU


@dataclass(frozen=True)
class TPConfig(Checked):
    """One tensor-parallel run of a layer (or the MLP block); see the module doc."""

    world_size: int
    """The TP degree t: every rank of the executor holds 1/t of each weight."""
    mode: Mode = "mlp"
    """``column``: ``nn.Linear(h, ffn)`` column-parallel; ``row``: ``nn.Linear(ffn, h)``
    row-parallel; ``mlp``: both with GeLU between; ``mlp-sp``: the MLP, sequence parallel."""
    batch: int = 2
    """Batch size b, 1 to :data:`MAX_BATCH`."""
    seq: int = 4
    """Sequence length s, 1 to :data:`MAX_SEQ`; a multiple of t for ``mlp-sp``."""
    hidden: int = 8
    """Hidden size h, a multiple of t, at most :data:`MAX_HIDDEN`."""
    ffn: int | None = None
    """The MLP's inner size, a multiple of t, at most :data:`MAX_FFN`; None: 4h (the check sets
    it)."""
    seed: int = 0
    """Seed of the weights, the input X and the upstream gradient dY, >= 0."""
    dtype: Dtype = "float64"
    """``float64`` (exact checks) or ``float32``."""
    rule: Rule = "megatron"
    """``megatron`` (f and g), or ``syllabus``: the outline's collectives (column and row only,
    forward only; errata E4)."""
    gather_output: bool = False
    """The column layer all-gathers the full Y (Megatron's rule only)."""

    def _check(self) -> list[str]:
        p = Problems()
        mode = self._field(p, "mode", check_choice, MODES)
        rule = self._field(p, "rule", check_choice, RULES)
        self._field(p, "dtype", check_choice, ITEMSIZE)
        t = self._field(p, "world_size", check_int, 1)
        batch = self._field(p, "batch", check_int, 1, MAX_BATCH)
        seq = self._field(p, "seq", check_int, 1, MAX_SEQ)
        hidden = self._field(p, "hidden", check_int, 1, MAX_HIDDEN)
        if self.ffn is None and hidden is not None:
            object.__setattr__(self, "ffn", 4 * hidden)
        ffn = self._field(p, "ffn", check_int, 1, MAX_FFN) if self.ffn is not None else None
        self._field(p, "seed", check_seed)
        gather = self._field(p, "gather_output", check_bool)
        if rule == "syllabus" and mode is not None and mode not in ("column", "row"):
            valid = _(
                "'megatron' with mode={mode!r} (the syllabus rule is run for 'column' and 'row')"
            )
            p.add(bad_value("rule", rule, valid.format(mode=mode)))
        if gather and not (mode == "column" and rule == "megatron"):
            valid = _("False unless mode='column' with rule='megatron'")
            p.add(bad_value("gather_output", gather, valid))
        if t is None:
            return p.lines
        if hidden is not None and hidden % t:
            valid = _(
                "a multiple of the TP degree world_size={t} (Megatron splits the attention heads,"
                " hence h, over the ranks)"
            )
            p.add(bad_value("hidden", hidden, valid.format(t=t)))
        if ffn is not None and ffn % t:
            valid = _("a multiple of the TP degree world_size={t} (A and B are split along ffn)")
            p.add(bad_value("ffn", ffn, valid.format(t=t)))
        if mode == "mlp-sp" and seq is not None and seq % t:
            valid = _("a multiple of world_size={t} (sequence parallelism splits s)")
            p.add(bad_value("seq", seq, valid.format(t=t)))
        if None not in (batch, seq, hidden, ffn) and batch * seq * max(hidden, ffn) > MAX_ELEMENTS:
            valid = _("at most {limit}").format(limit=MAX_ELEMENTS)
            p.add(bad_value("batch*seq*max(hidden, ffn)", batch * seq * max(hidden, ffn), valid))
        return p.lines

    @property
    def itemsize(self) -> int:
        """Bytes per element of :attr:`dtype`."""
        return ITEMSIZE[self.dtype]

    @property
    def tolerances(self) -> tuple[float, float]:
        """``(rtol, atol)`` of the check against the dense layer."""
        return TOLERANCES[self.dtype]

    # ---------------------------------------------------------------- memory (a bound)
    def _weight_bytes(self) -> tuple[int, int]:
        """(every weight's bytes ``W``, one weight's ``h ffn`` elements)."""
        layers = 1 if self.mode in ("column", "row") else 2
        return layers * self.hidden * self.ffn * self.itemsize, self.hidden * self.ffn

    def _drawing_bytes(self) -> int:
        """While the last weight is drawn (``job.make_problem``): the weights before it, and two
        float64 copies of it at once (``randn``, then scaled)."""
        weights, one = self._weight_bytes()
        return weights - one * self.itemsize + DRAW_COPIES * one * ITEMSIZE["float64"]

    def _activation_bytes(self) -> int:
        """X, dY, the layer's output and their gradients: within 4 ``b s max(h, ffn)``."""
        return 4 * self.batch * self.seq * max(self.hidden, self.ffn) * self.itemsize

    def bytes_per_rank(self) -> int:
        """A bound on one rank's peak (measured in ``tests/test_tp_memory.py``): the whole
        problem it draws, its shards (a row shard is a copy), their gradients and the copies it
        returns, ``W (1 + 4/t)``,
        or, while it draws, :meth:`_drawing_bytes`; and the activations."""
        weights, _one = self._weight_bytes()
        held = weights * (1 + 4 / self.world_size)
        return int(max(held, self._drawing_bytes()) + self._activation_bytes())

    def reference_bytes(self) -> int:
        """A bound on the dense reference the calling process computes (``report.run_tp_config``):
        the problem, ``nn.Linear``'s own weights (made and initialised before the copy) and their
        gradients, within ``4 W``, or while it draws; and the activations."""
        weights, _one = self._weight_bytes()
        return int(max(4 * weights, self._drawing_bytes()) + self._activation_bytes())


@dataclass(frozen=True)
class AttentionConfig(Checked):
    """One tensor-parallel self-attention run, its heads split over the ranks (Megatron §3,
    Fig. 3b)."""

    world_size: int
    """The TP degree t: rank r keeps heads ``[r a/t, (r+1) a/t)``."""
    batch: int = 2
    """Batch size b, 1 to :data:`MAX_BATCH`."""
    seq: int = 4
    """Sequence length s, 1 to :data:`MAX_SEQ`."""
    hidden: int = 16
    """Hidden size h, 1 to :data:`MAX_HIDDEN`; the heads divide it (head size h/a)."""
    heads: int = 4
    """Attention heads a, a multiple of t (whole heads per rank) dividing h."""
    causal: bool = True
    """Causal (decoder) attention mask."""
    seed: int = 0
    """Seed of the weights, X and dY, >= 0."""
    dtype: Dtype = "float64"
    """``float64`` or ``float32``."""

    def _check(self) -> list[str]:
        p = Problems()
        t = self._field(p, "world_size", check_int, 1)
        batch = self._field(p, "batch", check_int, 1, MAX_BATCH)
        seq = self._field(p, "seq", check_int, 1, MAX_SEQ)
        hidden = self._field(p, "hidden", check_int, 1, MAX_HIDDEN)
        heads = self._field(p, "heads", check_int, 1, MAX_HIDDEN)
        self._field(p, "causal", check_bool)
        self._field(p, "seed", check_seed)
        self._field(p, "dtype", check_choice, ITEMSIZE)
        if hidden is not None and heads is not None and hidden % heads:
            valid = _("a divisor of hidden={hidden} (head size h/a)").format(hidden=hidden)
            p.add(bad_value("heads", heads, valid))
        elif t is not None and heads is not None and heads % t:
            valid = _("a multiple of the TP degree world_size={t} (whole heads per rank)")
            p.add(bad_value("heads", heads, valid.format(t=t)))
        if None not in (batch, seq, hidden, heads):
            size = batch * seq * max(hidden, seq * heads)
            if size > MAX_ELEMENTS:
                valid = _("at most {limit}").format(limit=MAX_ELEMENTS)
                p.add(bad_value("batch*seq*max(hidden, seq*heads)", size, valid))
        return p.lines

    @property
    def heads_per_rank(self) -> int:
        """a/t heads on every rank."""
        return self.heads // self.world_size

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def tolerances(self) -> tuple[float, float]:
        return TOLERANCES[self.dtype]
