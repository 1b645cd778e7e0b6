"""One configuration given by the learner, checked and estimated: :func:`estimate_config`.

The checks come before any work and name every bad input in one ValueError: the model, the
cluster, the batch and sequence (:class:`~edu_parallel.planner.inputs.PlannerInputs`, built once
here unless given, as :func:`~edu_parallel.planner.planning.plan` does), then the degrees against
the world size, the model and the node (through
:class:`~edu_parallel.core.dims.ParallelDims`; ``ep`` also against ``dp`` and the experts,
:func:`~edu_parallel.planner.experts.ep_problems`) and the batch against the degrees. The estimate
itself is :meth:`~edu_parallel.planner.estimate.Estimator.evaluate` (formulas there).
"""

from __future__ import annotations

from typing import Any

from ..core.dims import ParallelDims
from ..core.errors import Problems, bad_value, check_choice, check_int
from ..core.i18n import _
from ..memory.model_states import RECOMPUTE
from .estimate import ConfigEstimate, Estimator
from .experts import ep_problems
from .hardware import ClusterSpec
from .inputs import PlannerInputs, planner_inputs


def estimate_config(
    model: Any,
    cluster: ClusterSpec | None = None,
    global_batch: int | None = None,
    seq: int | None = None,
    *,
    dp: int = -1,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    chunks: int = 1,
    zero: int = 0,
    micro_batch: int = 1,
    recompute: str = "none",
    efficiency: float = 0.5,
    memory_budget: float | None = None,
) -> ConfigEstimate:
    """The estimate of one configuration given by its degrees (``dp=-1``: the rest), for
    ``model`` on ``cluster`` (or one :class:`PlannerInputs` in place of the first six arguments,
    trusted as built).

    Raises one ValueError naming every bad factor (the degrees against the world size, the model
    and the node, the batch against the degrees) before any work; a configuration that does not
    fit in memory is returned with ``feasible=False`` and the reason."""
    inputs = planner_inputs(model, cluster, global_batch, seq, efficiency, memory_budget)
    return _estimate(inputs, dp, tp, pp, ep, chunks, zero, micro_batch, recompute)


def _estimate(
    inputs: PlannerInputs,
    dp: int,
    tp: int,
    pp: int,
    ep: int,
    chunks: int,
    zero: int,
    micro_batch: int,
    recompute: str,
) -> ConfigEstimate:
    """:func:`estimate_config` of checked inputs: the degrees checked against them."""
    shape, cluster, batch = inputs.shape, inputs.cluster, inputs.global_batch
    p = Problems()
    p.check(check_int, "zero", zero, 0, 3)
    p.check(check_choice, "recompute", recompute, RECOMPUTE)
    p.check(check_int, "micro_batch", micro_batch, 1)
    try:
        dims = ParallelDims(
            cluster.world_size,
            dp=dp,
            tp=tp,
            pp=pp,
            ep=ep,
            layers=shape.layers,
            heads=shape.heads,
            hidden=shape.hidden,
            chunks=chunks,
        )
    except ValueError as exc:
        p.add(exc)
        dims = None
    g = cluster.gpus_per_node
    if isinstance(tp, int) and tp >= 1 and g % tp:
        valid = _("a divisor of gpus_per_node={g} (TP in a node)").format(g=g)
        p.add(bad_value("tp", tp, valid))
    if dims is not None:
        p.extend(ep_problems(shape, dims.dp, dims.tp, dims.ep))
    elif ep != 1 and not shape.experts and isinstance(ep, int):
        p.extend(ep_problems(shape, 1, 1, ep))
    m = 0
    if dims is not None and not p:
        m, rest = divmod(batch, dims.dp * micro_batch)
        if rest:
            valid = _("a multiple of dp * micro_batch = {dp} * {mb}").format(
                dp=dims.dp, mb=micro_batch
            )
            p.add(bad_value("global_batch", batch, valid))
        elif chunks > 1 and m % dims.pp:
            valid = _(
                "a multiple of pp={pp} (the interleaved schedule sends microbatches round in"
                " groups of pp)"
            ).format(pp=dims.pp)
            p.add(bad_value("microbatches", m, valid))
    p.raise_any()
    est = Estimator(shape, cluster, batch, inputs.seq, inputs.efficiency, inputs.budget)
    return est.evaluate(dims.dp, dims.tp, dims.pp, chunks, zero, micro_batch, m, recompute, dims.ep)
