"""The parallel degrees of one run, validated once: :class:`ParallelDims`.

After torchtitan's ``ParallelDims`` (torchtitan/distributed/parallel_dims.py): one frozen object
holds the world size and how it factors into data (``dp``), tensor (``tp``), pipeline (``pp``) and
expert (``ep``) parallel degrees. Its constructor checks every factor and, when some are wrong,
raises one ValueError that names each of them. It is built where a run starts (the CLI, a
:class:`~edu_parallel.engine.cluster.Cluster`, the memory calculator, the planner) and passed
down; nothing below checks the same numbers again.

``dp=-1`` takes whatever is left: ``world_size / (tp * pp)``. Experts are placed inside the data
and tensor parallel ranks of one pipeline stage, so ``ep`` divides ``dp * tp``.

Given the model's shape (``layers``, ``heads``, ``hidden``) and the pipeline's microbatches and
chunks, it also checks that the model splits: TP divides the heads and the hidden size (each rank
holds whole heads and whole columns), PP times the chunks per rank divides the layers (every stage
the same number of layers), and with interleaved stages (``chunks > 1``) the microbatches are a
multiple of PP (Megatron-LM's rule for the interleaved schedule, Narayanan et al. 2021,
arXiv 2104.04473 §2.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import Checked, Problems, bad_combination, bad_value, check_int
from .i18n import _

# Ranks of a local cluster: processes on one machine, where more only makes a 2-core laptop crawl.
# Under torchrun the ranks are the launcher's and there is no such limit.
MAX_LOCAL_WORLD_SIZE = 16

SHAPE_FIELDS = ("layers", "heads", "hidden", "microbatches")  # None: not checked


@dataclass(frozen=True)
class ParallelDims(Checked):
    """``world_size = dp * tp * pp`` ranks, ``ep`` of them sharing experts; ``max_world_size``
    (None: no limit) bounds the world size where the ranks are processes on one machine.
    ``layers``, ``heads``, ``hidden``, ``microbatches`` (None: not checked) and ``chunks`` (model
    chunks per pipeline rank) are checked against the degrees."""

    world_size: int
    dp: int = -1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    max_world_size: int | None = field(default=None, compare=False, repr=False)
    layers: int | None = field(default=None, compare=False, repr=False)
    heads: int | None = field(default=None, compare=False, repr=False)
    hidden: int | None = field(default=None, compare=False, repr=False)
    microbatches: int | None = field(default=None, compare=False, repr=False)
    chunks: int = field(default=1, compare=False, repr=False)

    def _int(self, name: str, lo: int, hi: int | None, out: Problems) -> int | None:
        """Field ``name`` as an int in [lo, hi], set on self; None (and a problem) when not."""
        return self._field(out, name, check_int, lo, hi)

    def _check(self) -> list[str]:
        """Set each factor to its int value; return every problem found."""
        out = Problems()
        n = self._int("world_size", 1, self.max_world_size, out)
        if n is None:
            return out.lines
        deg = {k: self._int(k, 1, n, out) for k in ("tp", "pp", "ep")}
        for name, value in deg.items():
            if value is not None and n % value:
                out.add(
                    bad_value(name, value, _("a divisor of {what}").format(what=f"world_size={n}"))
                )
        tp, pp, ep = deg["tp"], deg["pp"], deg["ep"]
        dp = self.dp
        if tp is not None and pp is not None and not out:
            if dp == -1:
                if n % (tp * pp):
                    out.add(
                        bad_combination(
                            f"tp * pp = {tp} * {pp} = {tp * pp}",
                            _("a divisor of {what}").format(what=f"world_size={n}"),
                        )
                    )
                else:
                    dp = n // (tp * pp)
            elif isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
                out.add(bad_value("dp", dp, _("a positive integer, or -1 for the rest")))
            if isinstance(dp, int) and not isinstance(dp, bool) and dp >= 1:
                if dp * tp * pp != n:
                    out.add(
                        bad_combination(
                            f"dp * tp * pp = {dp} * {tp} * {pp} = {dp * tp * pp}",
                            f"world_size={n}",
                        )
                    )
                else:
                    object.__setattr__(self, "dp", dp)
                    if ep is not None and (dp * tp) % ep:
                        divides = _("a divisor of {what}").format(what=f"dp * tp = {dp * tp}")
                        out.add(bad_value("ep", ep, divides))
        out.extend(self._check_model(tp, pp))
        return out.lines

    def _check_model(self, tp: int | None, pp: int | None) -> list[str]:
        """The model's shape and the pipeline's microbatches against the degrees."""
        out = Problems()
        chunks = self._int("chunks", 1, None, out)
        shape = {
            k: self._int(k, 1, None, out) for k in SHAPE_FIELDS if getattr(self, k) is not None
        }
        heads, hidden, layers = shape.get("heads"), shape.get("hidden"), shape.get("layers")
        m = shape.get("microbatches")
        if tp is not None:
            if heads is not None and heads % tp:
                out.add(bad_value("tp", tp, _("a divisor of {what}").format(what=f"heads={heads}")))
            if hidden is not None and hidden % tp:
                divides = _("a divisor of {what}").format(what=f"hidden={hidden}")
                out.add(bad_value("tp", tp, divides))
        if pp is not None and chunks is not None and layers is not None:
            if pp * chunks > layers:
                top = f"layers={layers}" + (f" / chunks={chunks}" if chunks > 1 else "")
                valid = _("at most {top} (every stage holds at least one layer)").format(top=top)
                out.add(bad_value("pp", pp, valid))
            elif layers % (pp * chunks):
                divides = _("a divisor of {what}").format(what=f"layers={layers}")
                if chunks > 1:
                    out.add(bad_combination(f"pp * chunks = {pp * chunks}", divides))
                else:
                    out.add(bad_value("pp", pp, divides))
        if pp is not None and chunks is not None and chunks > 1 and m is not None and m % pp:
            valid = _(
                "a multiple of {what} (the interleaved schedule sends microbatches round in"
                " groups of pp)"
            ).format(what=f"pp={pp}")
            out.add(bad_value("microbatches", m, valid))
        return out.lines

    @classmethod
    def local(cls, world_size: int, **degrees: int) -> ParallelDims:
        """The degrees of a run on this machine: at most :data:`MAX_LOCAL_WORLD_SIZE` ranks."""
        return cls(world_size, **degrees, max_world_size=MAX_LOCAL_WORLD_SIZE)

    @property
    def degrees(self) -> dict[str, int]:
        """The degrees above 1, by name: what this run actually splits."""
        return {k: v for k, v in (("dp", self.dp), ("tp", self.tp), ("pp", self.pp)) if v > 1}

    def coords(self, rank: int) -> dict[str, int]:
        """``rank``'s place in the mesh ``(pp, dp, tp)``, TP fastest (Megatron-LM's default order,
        torchtitan's mesh): ``rank = (pp_rank * dp + dp_rank) * tp + tp_rank``. TP groups are
        consecutive ranks, so on a node of g GPUs a TP degree dividing g stays inside the node."""
        rank = check_int("rank", rank, 0, self.world_size - 1)
        return {
            "pp": rank // (self.dp * self.tp),
            "dp": rank // self.tp % self.dp,
            "tp": rank % self.tp,
        }

    def rank_of(self, pp: int = 0, dp: int = 0, tp: int = 0) -> int:
        """The inverse of :meth:`coords`."""
        return (pp * self.dp + dp) * self.tp + tp

    def groups(self, dim: str) -> list[list[int]]:
        """Every group of dimension ``dim``: "tp", "pp" or "dp" (the ranks that differ only in
        that coordinate, in its order), or "ep" / "edp" where ``ep`` divides ``dp``: expert
        parallelism carved out of DP as Megatron-LM does, each DP group cut into blocks of ``ep``
        consecutive ranks (EP groups) and the ranks at the same place of their blocks (expert-DP
        groups, which hold the same experts)."""
        if dim in ("ep", "edp"):
            if self.dp % self.ep:
                raise bad_value("ep", self.ep, f"a divisor of dp={self.dp} for EP groups")
            e = self.ep
            dp_groups = self.groups("dp")
            if dim == "ep":
                return [g[i : i + e] for g in dp_groups for i in range(0, len(g), e)]
            return [g[j::e] for g in dp_groups for j in range(e)]
        if dim not in ("tp", "pp", "dp"):
            raise bad_value("dim", dim, "'tp', 'pp', 'dp', 'ep' or 'edp'")
        size = getattr(self, dim)
        seen: dict[tuple[int, ...], list[int]] = {}
        for r in range(self.world_size):
            c = self.coords(r)
            key = tuple(v for k, v in sorted(c.items()) if k != dim)
            seen.setdefault(key, [-1] * size)[c[dim]] = r
        return list(seen.values())
