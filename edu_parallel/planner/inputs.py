"""What the planner is asked, checked once: :class:`PlannerInputs`.

A model (a preset name or a :class:`~edu_parallel.memory.presets.ModelShape`), a
:class:`~edu_parallel.planner.hardware.ClusterSpec`, the global batch, the sequence length, the
compute efficiency and the memory budget per GPU. The constructor names every bad one in one
ValueError (torchtitan's ``ParallelismConfig`` style) and resolves the model's shape and the
budget once; :func:`~edu_parallel.planner.planning.plan`,
:func:`~edu_parallel.planner.evaluate.estimate_config`, the command line and the explorer widget
build one at their entry and everything below trusts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.errors import Checked, Problems, bad_value, check_int
from ..core.i18n import _
from ..memory.presets import ModelShape
from .estimate import resolve_model
from .hardware import ClusterSpec


def check_efficiency(name: str, value: Any) -> float:
    """``value`` as the fraction of peak FLOP/s reached, in (0, 1], or a ValueError."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 < value <= 1:
        raise bad_value(name, value, _("a number in (0, 1]"))
    return float(value)


def check_budget(name: str, value: Any) -> float:
    """``value`` as a finite number of bytes per GPU > 0, or a ValueError."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 < value < float("inf"):
        raise bad_value(name, value, _("bytes > 0, or None"))
    return float(value)


@dataclass(frozen=True)
class PlannerInputs(Checked):
    """The planner's inputs, checked once: the constructor raises one ValueError naming every bad
    field; :attr:`shape` and :attr:`budget` are resolved by the check."""

    model: Any
    """A preset name of :data:`~edu_parallel.memory.presets.PRESETS`, or a ModelShape."""
    cluster: ClusterSpec
    """The GPUs and links planned for (a checked :class:`ClusterSpec`)."""
    global_batch: int
    """Sequences per optimizer step (>= 1), over every data-parallel replica."""
    seq: int
    """Tokens per sequence (>= 1)."""
    efficiency: float = 0.5
    """The fraction of peak FLOP/s the matmuls reach, in (0, 1]."""
    memory_budget: float | None = None
    """Bytes per GPU a configuration may use (> 0), or None for the GPU's memory."""
    shape: ModelShape = field(init=False, repr=False, compare=False)
    """The model's shape (``model`` resolved), set by the check."""
    budget: float = field(init=False, repr=False, compare=False)
    """``memory_budget``, or the GPU's memory when it is None, set by the check."""

    def _check(self) -> list[str]:
        p = Problems()
        try:
            object.__setattr__(self, "shape", resolve_model(self.model))
        except ValueError as exc:
            p.add(exc)
        cluster_ok = isinstance(self.cluster, ClusterSpec)
        if not cluster_ok:
            p.add(bad_value("cluster", self.cluster, _("a ClusterSpec")))
        self._field(p, "global_batch", check_int, 1)
        self._field(p, "seq", check_int, 1)
        self._field(p, "efficiency", check_efficiency)
        budget = None
        if self.memory_budget is not None:
            budget = self._field(p, "memory_budget", check_budget)
        elif cluster_ok:
            budget = self.cluster.gpu.memory_bytes
        if budget is not None:
            object.__setattr__(self, "budget", budget)
        return p.lines


def planner_inputs(
    model: Any,
    cluster: ClusterSpec | None,
    global_batch: int | None,
    seq: int | None,
    efficiency: float,
    memory_budget: float | None,
) -> PlannerInputs:
    """``model`` itself when it is a :class:`PlannerInputs` (already checked, trusted), else the
    inputs built (and checked) from the arguments: the one entry of the public functions."""
    if isinstance(model, PlannerInputs):
        if (cluster, global_batch, seq) != (None, None, None):
            raise TypeError(
                _("give a PlannerInputs alone, or model, cluster, global_batch and seq")
            )
        return model
    return PlannerInputs(model, cluster, global_batch, seq, efficiency, memory_budget)
