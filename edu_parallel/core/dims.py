"""The parallel degrees of one run, validated once: :class:`ParallelDims`.

After torchtitan's ``ParallelDims`` (torchtitan/distributed/parallel_dims.py): one frozen object
holds the world size and how it factors into data (``dp``), tensor (``tp``), pipeline (``pp``) and
expert (``ep``) parallel degrees. Its constructor checks every factor and, when some are wrong,
raises one ValueError that names each of them. It is built where a run starts (the CLI, a
:class:`~edu_parallel.engine.cluster.Cluster`, the memory calculator) and passed down; nothing
below checks the same numbers again.

``dp=-1`` takes whatever is left: ``world_size / (tp * pp)``. Experts are placed inside the data
and tensor parallel ranks of one pipeline stage, so ``ep`` divides ``dp * tp``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import bad_value, check_int

# Ranks of a local cluster: processes on one machine, where more only makes a 2-core laptop crawl.
# Under torchrun the ranks are the launcher's and there is no such limit.
MAX_LOCAL_WORLD_SIZE = 16


@dataclass(frozen=True)
class ParallelDims:
    """``world_size = dp * tp * pp`` ranks, ``ep`` of them sharing experts; ``max_world_size``
    (None: no limit) bounds the world size where the ranks are processes on one machine."""

    world_size: int
    dp: int = -1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    max_world_size: int | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        problems = self._check()
        if problems:
            raise ValueError("; ".join(problems))

    def _check(self) -> list[str]:
        """Set each factor to its int value; return every problem found."""
        out = []
        try:
            n = check_int("world_size", self.world_size, 1, self.max_world_size)
        except ValueError as exc:
            return [str(exc)]
        object.__setattr__(self, "world_size", n)
        for name in ("tp", "pp", "ep"):
            try:
                value = check_int(name, getattr(self, name), 1, n)
                if n % value:
                    raise bad_value(name, value, f"a divisor of world_size={n}")
                object.__setattr__(self, name, value)
            except ValueError as exc:
                out.append(str(exc))
        if out:
            return out
        if n % (self.tp * self.pp):
            return [
                f"tp * pp = {self.tp} * {self.pp} is not valid: expected a divisor of"
                f" world_size={n}"
            ]
        rest = n // (self.tp * self.pp)
        if self.dp != -1 and (isinstance(self.dp, bool) or self.dp != rest):
            return [f"dp={self.dp!r} is not valid: expected -1 or world_size / (tp * pp) = {rest}"]
        object.__setattr__(self, "dp", rest)
        if (rest * self.tp) % self.ep:
            return [f"ep={self.ep} is not valid: expected a divisor of dp * tp = {rest * self.tp}"]
        return []

    @classmethod
    def local(cls, world_size: int, **degrees: int) -> ParallelDims:
        """The degrees of a run on this machine: at most :data:`MAX_LOCAL_WORLD_SIZE` ranks."""
        return cls(world_size, **degrees, max_world_size=MAX_LOCAL_WORLD_SIZE)

    @property
    def degrees(self) -> dict[str, int]:
        """The degrees above 1, by name: what this run actually splits."""
        return {k: v for k, v in (("dp", self.dp), ("tp", self.tp), ("pp", self.pp)) if v > 1}
