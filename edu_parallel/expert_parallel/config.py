"""One validated description of an expert-parallel MoE run: :class:`MoEConfig`. Pure Python, no
torch.

Built once where a run starts (:func:`~edu_parallel.expert_parallel.report.run_moe`, the command
line, the strategy map's EP run) and passed down unchanged to every rank's job and to the
one-process reference; the constructor checks every field and raises one ValueError that names
each bad one (torchtitan's ``ParallelismConfig`` style). Nothing below checks the same values
again.

Rank r of N owns experts ``[r E/N, (r+1) E/N)``, so N divides E; each token picks k distinct
experts (Shazeer et al. 2017, arXiv 1701.06538); an expert accepts ``ceil(C T k / E)``
assignments from each source rank (GShard, Lepikhin et al. 2020, arXiv 2006.16668, §2.2; Switch,
Fedus et al. 2021, arXiv 2101.03961, §2.2). The defaults
(:data:`~edu_parallel.expert_parallel.formulas.DEFAULTS`) and the limits (``MAX_EXPERTS``...) are
the formulas module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..core.errors import (
    Checked,
    Problems,
    bad_value,
    check_bool,
    check_choice,
    check_int,
    check_positive,
    check_seed,
    spelling,
)
from ..core.i18n import _
from ..core.units import format_bytes
from .formulas import (
    DEFAULTS,
    ITEMSIZE,
    MAX_EXPERTS,
    MAX_HIDDEN,
    MAX_SKEW,
    MAX_TOKENS,
    expert_capacity,
    smallest_capacity_factor,
)

# how tokens travel: the kept rows with variable splits (after an exchange of the counts), or
# GShard's fixed (E, C, h) buffer with equal splits
Dispatch = Literal["variable", "padded"]
DISPATCHES: tuple[Dispatch, ...] = get_args(Dispatch)
# N E C h: the padded (E, C, h) buffers of a whole job (every rank holds its own, the one-process
# reference all), 128 MiB per copy in float32 at the limit; a capacity factor of 100 peaked at
# 18 GiB on 16 ranks
MAX_DISPATCHED = 1 << 25
# N T E h: the one-process reference runs every expert on every token (the naive dense way) and
# keeps each expert's 2h-wide activations for the backward, about 6x this in float32 at the limit
# (400 MiB); the largest of each option together (2^28) peaked at 8.4 GiB even with k = 1
MAX_DENSE = 1 << 24


def check_skew(name: str, value: Any) -> float:
    """``value`` as a router bias toward expert 0 in [0, :data:`MAX_SKEW`], or the error."""
    valid = _("a number in [0, {high}]").format(high=f"{MAX_SKEW:g}")
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise bad_value(name, value, valid) from None
    if isinstance(value, bool) or not 0.0 <= as_float <= MAX_SKEW:
        raise bad_value(name, value, valid)
    return as_float


@dataclass(frozen=True)
class MoEConfig(Checked):
    """One top-k MoE layer on the ranks, forward and (optionally) backward; see the module doc."""

    world_size: int
    """Ranks N; each holds E/N experts and T tokens."""
    experts: int = DEFAULTS["experts"]
    """Experts E, a multiple of N, at most :data:`MAX_EXPERTS`."""
    top_k: int = DEFAULTS["top_k"]
    """Experts per token k, 1 to E."""
    capacity_factor: float = DEFAULTS["capacity_factor"]
    """C > 0: each expert accepts ``ceil(C T k / E)`` assignments per source rank."""
    skew: float = DEFAULTS["skew"]
    """Router bias toward expert 0, in [0, :data:`MAX_SKEW`] (0: no preference)."""
    tokens: int = DEFAULTS["tokens"]
    """Tokens per rank T, 1 to :data:`MAX_TOKENS`."""
    hidden: int = DEFAULTS["hidden"]
    """Hidden size h, 1 to :data:`MAX_HIDDEN`."""
    seed: int = DEFAULTS["seed"]
    """Seed of the router, the experts and the tokens, >= 0."""
    dispatch: Dispatch = "variable"
    """``variable`` (counts, then the kept rows) or ``padded`` (GShard's (E, C, h) buffer)."""
    backward: bool = True
    """Also run backward with a seeded upstream gradient dy, and check the gradients."""

    def _check(self) -> list[str]:
        p = Problems()
        n = self._field(p, "world_size", check_int, 1)
        experts = self._field(p, "experts", check_int, 1, MAX_EXPERTS)
        if n is not None and experts is not None and experts % n:
            valid = _("a multiple of the world size {n} (E/N experts per rank)").format(n=n)
            p.add(bad_value("experts", experts, valid))
        top_k = self._field(p, "top_k", check_int, 1)
        if experts is not None and top_k is not None and top_k > experts:
            valid = _("an integer in [1, experts={experts}] (k distinct experts per token)")
            p.add(bad_value("top_k", top_k, valid.format(experts=experts)))
        factor = self._field(p, "capacity_factor", check_positive)
        self._field(p, "skew", check_skew)
        tokens = self._field(p, "tokens", check_int, 1, MAX_TOKENS)
        known = (factor, tokens, experts, top_k)
        if None not in known and not 1 <= top_k <= experts:
            known = (None,)  # top_k was named above
        if None not in known and expert_capacity(tokens, experts, top_k, factor) < 1:
            smallest = smallest_capacity_factor(tokens, experts, top_k)
            valid = _(
                "a factor >= {smallest:g}: capacity = ceil(C*T*k/E) rounds to 0 with T={tokens},"
                " k={top_k}, E={experts}, and every token would be dropped"
            )
            p.add(
                bad_value(
                    "capacity_factor",
                    factor,
                    valid.format(smallest=smallest, tokens=tokens, top_k=top_k, experts=experts),
                )
            )
        hidden = self._field(p, "hidden", check_int, 1, MAX_HIDDEN)
        self._field(p, "seed", check_seed)
        dispatch = self._field(p, "dispatch", check_choice, DISPATCHES)
        self._field(p, "backward", check_bool)
        if not p:
            self._check_dispatched(p, dispatch, hidden)  # type: ignore[arg-type]
        return p.lines

    def _check_dispatched(self, p: Problems, dispatch: str, hidden: int) -> None:
        """What the one-process reference computes, N T E h within :data:`MAX_DENSE`, and, for
        the padded dispatch, the (E, C, h) buffers of every rank, N E C h within
        :data:`MAX_DISPATCHED`."""
        dense = self.world_size * self.tokens * self.experts * hidden
        if dense > MAX_DENSE:
            names = ("world_size", "tokens", "experts", "hidden")
            valid = _(
                "at most {limit:,}: the one-process reference runs every expert on every token"
                " (N T E h outputs, and twice as wide inside each expert, kept for the"
                " backward), {need} of outputs alone in float32"
            ).format(limit=MAX_DENSE, need=format_bytes(dense * ITEMSIZE))
            p.add(bad_value(" x ".join(spelling(n) for n in names), dense, valid))
            return
        if dispatch != "padded":  # the kept rows, N T k h, are within N T E h above
            return
        moved = self.world_size * self.experts * self.capacity * hidden
        if moved > MAX_DISPATCHED:
            names = ("world_size", "experts", "capacity_factor", "hidden")
            valid = _(
                "at most {limit:,}: the padded buffers of the whole job, N E C h with capacity"
                " C = {capacity} (every rank holds its own, the one-process reference all), {need}"
                " per copy in float32"
            ).format(
                limit=MAX_DISPATCHED, capacity=self.capacity, need=format_bytes(moved * ITEMSIZE)
            )
            p.add(bad_value(" x ".join(spelling(n) for n in names), moved, valid))

    @property
    def experts_per_rank(self) -> int:
        """E/N experts on every rank."""
        return self.experts // self.world_size

    @property
    def capacity(self) -> int:
        """Assignments one expert accepts from one source rank: ``ceil(C T k / E)``."""
        return expert_capacity(self.tokens, self.experts, self.top_k, self.capacity_factor)
