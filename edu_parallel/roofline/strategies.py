"""Each strategy's step in time on this machine: FLOPs over F, bytes and messages through α-β.

Pure Python. The bytes and collectives come from a run's trace (the strategy map's rows,
:func:`edu_parallel.strategy_map.table.measure`, and a ZeRO-3 run's sends); the FLOPs from the
model's sizes (:func:`strategy_flops`); the constants ``F``, ``α``, ``B`` from this machine
(:mod:`edu_parallel.roofline.sweep`). A collective call of ``N`` ranks is ``2(N-1)`` ring messages
for an all-reduce and ``N-1`` for an all-gather, a reduce-scatter or an all-to-all
(:func:`transfers`): Thakur, Rabenseifner & Gropp 2005.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value, check_int
from ..core.i18n import _
from ..pipeline_parallel.config import stage_bounds
from .formulas import StepTime, dp_step_flops, step_time

RING_STEPS = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1, "all_to_all": 1}


def transfers(ops: dict[str, int], world_size: int) -> int:
    """Ring messages per rank behind the collective calls ``ops`` (``{"all_reduce": 8}``); a
    point-to-point ``isend`` is one message."""
    n = check_int("world_size", world_size, 1)
    total = 0
    for op, count in ops.items():
        if op in ("isend", "send"):
            total += count
            continue
        base = next((k for k in RING_STEPS if op.startswith(k)), None)
        if base is None:
            raise bad_value("ops", ops, _("collectives among {names}").format(names=RING_STEPS))
        total += count * RING_STEPS[base] * (n - 1)
    return total


def strategy_flops(strategy: str, config: dict[str, Any], world_size: int, rank: int = 0) -> float:
    """Matmul FLOPs of ``rank``'s step of the strategy map's model (``config``: a
    :class:`~edu_parallel.strategy_map.formulas.MapConfig` as a dict), forward and backward.

    DP: the whole model on ``T/N`` tokens (the input is data: no first dX); TP and TP+SP: ``1/N``
    of every matrix on all ``T`` tokens (Megatron's ``f`` computes the first dX too); PP: the
    stage's ``L/N`` blocks on all ``T`` tokens; EP: ``T/N`` tokens, each through ``k`` of the ``E``
    experts of width ``4h/E`` (balanced routing, the router left out)."""
    n, h, layers = world_size, config["hidden"], config["layers"]
    tokens = config["batch"] * config["seq"]
    if strategy == "dp":
        return dp_step_flops(h, layers, tokens // n)
    if strategy in ("tp", "tp-sp"):
        return dp_step_flops(h, layers, tokens, input_grad=True) / n
    if strategy == "pp":
        lo, hi = stage_bounds(layers, n)[rank]
        return dp_step_flops(h, hi - lo, tokens, input_grad=rank > 0)
    if strategy == "ep":
        return dp_step_flops(h, layers, tokens // n) * config["top_k"] / config["experts"]
    raise bad_value("strategy", strategy, "'dp', 'tp', 'tp-sp', 'pp' or 'ep'")


def row_time(
    flops: float, sent_bytes: float, messages: int, flops_per_s: float, link: Any
) -> StepTime:
    """:func:`~edu_parallel.roofline.formulas.step_time` with a :class:`Link`'s α and B."""
    return step_time(flops, sent_bytes, messages, flops_per_s, link.alpha_s, link.bandwidth_Bps)
