"""One configuration given by the learner, checked and estimated: :func:`estimate_config`.

The checks come before any work and name every bad input in one ValueError: the model, the
cluster, the batch and sequence (:func:`check_inputs`, shared with
:func:`~edu_parallel.planner.planning.plan`), then the degrees against the world size, the
model and the node (through
:class:`~edu_parallel.core.dims.ParallelDims`; ``ep`` also against ``dp`` and the experts,
:func:`~edu_parallel.planner.experts.ep_problems`) and the batch against the degrees. The estimate
itself is :meth:`~edu_parallel.planner.estimate.Estimator.evaluate` (formulas there).
"""

from __future__ import annotations

from typing import Any

from ..core.dims import ParallelDims
from ..core.errors import bad_value, check_choice, check_int
from ..memory.model_states import RECOMPUTE
from ..memory.presets import ModelShape
from .estimate import ConfigEstimate, Estimator, resolve_model
from .experts import ep_problems
from .hardware import ClusterSpec


def check_inputs(
    model: Any,
    cluster: Any,
    global_batch: Any,
    seq: Any,
    efficiency: Any,
    memory_budget: Any,
) -> tuple[ModelShape, ClusterSpec, int, int, float, float]:
    """Every input checked; one ValueError naming every bad one."""
    problems: list[str] = []

    def attempt(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except ValueError as exc:
            problems.append(str(exc))
            return None

    shape = attempt(resolve_model, model)
    if not isinstance(cluster, ClusterSpec):
        problems.append(str(bad_value("cluster", cluster, "a ClusterSpec")))
    batch = attempt(check_int, "global_batch", global_batch, 1)
    seq = attempt(check_int, "seq", seq, 1)
    if isinstance(efficiency, bool) or not isinstance(efficiency, int | float):
        problems.append(str(bad_value("efficiency", efficiency, "a number in (0, 1]")))
    elif not 0 < efficiency <= 1:
        problems.append(str(bad_value("efficiency", efficiency, "a number in (0, 1]")))
    budget = None
    if memory_budget is not None:
        ok = isinstance(memory_budget, int | float) and not isinstance(memory_budget, bool)
        if not ok or not 0 < memory_budget < float("inf"):
            problems.append(str(bad_value("memory_budget", memory_budget, "bytes > 0, or None")))
        else:
            budget = float(memory_budget)
    if problems:
        raise ValueError("; ".join(problems))
    if budget is None:
        budget = cluster.gpu.memory_bytes
    return shape, cluster, batch, seq, float(efficiency), budget


def estimate_config(
    model: Any,
    cluster: ClusterSpec,
    global_batch: int,
    seq: int,
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
    """The estimate of one configuration given by its degrees (``dp=-1``: the rest).

    Raises one ValueError naming every bad factor (the degrees against the world size, the model
    and the node, the batch against the degrees) before any work; a configuration that does not
    fit in memory is returned with ``feasible=False`` and the reason."""
    shape, cluster, batch, seq, efficiency, budget = check_inputs(
        model, cluster, global_batch, seq, efficiency, memory_budget
    )
    problems: list[str] = []
    try:
        check_int("zero", zero, 0, 3)
        check_choice("recompute", recompute, RECOMPUTE)
        check_int("micro_batch", micro_batch, 1)
    except ValueError as exc:
        problems.append(str(exc))
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
        problems.append(str(exc))
        dims = None
    g = cluster.gpus_per_node
    if isinstance(tp, int) and tp >= 1 and g % tp:
        problems.append(str(bad_value("tp", tp, f"a divisor of gpus_per_node={g} (TP in a node)")))
    if dims is not None:
        problems += ep_problems(shape, dims.dp, dims.tp, dims.ep)
    elif ep != 1 and not shape.experts and isinstance(ep, int):
        problems += ep_problems(shape, 1, 1, ep)
    m = 0
    if dims is not None and not problems:
        per_replica, rest = divmod(batch, dims.dp * micro_batch)
        if rest:
            problems.append(
                str(
                    bad_value(
                        "global_batch",
                        batch,
                        f"a multiple of dp * micro_batch = {dims.dp} * {micro_batch}",
                    )
                )
            )
        else:
            m = per_replica
            if chunks > 1 and m % dims.pp:
                problems.append(
                    f"microbatches={m} is not valid: expected a multiple of pp={dims.pp} (the"
                    " interleaved schedule sends microbatches round in groups of pp)"
                )
    if problems:
        raise ValueError("; ".join(problems))
    est = Estimator(shape, cluster, batch, seq, efficiency, budget)
    return est.evaluate(dims.dp, dims.tp, dims.pp, chunks, zero, micro_batch, m, recompute, dims.ep)
