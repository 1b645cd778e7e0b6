"""Formulas of the MoE layer: pure Python, no torch.

Imported by :mod:`edu_parallel.expert_parallel.config` (where a run's options are checked), the
report, the quiz bank and the exercises.

* Capacity (GShard, Lepikhin et al. 2020 §2.2; Switch, Fedus et al. 2021 §2.2):
  ``capacity = ceil(C * T * k / E)`` assignments per expert per source rank (T tokens per rank).
* Variable splits (:func:`balanced_dispatch_bytes`): bytes follow the kept assignments.
* Padded (GShard's fixed (E, C, h) dispatch, :func:`padded_dispatch_bytes`): bytes follow the
  capacity, ``(N-1)/N * E * C * h * itemsize`` per rank per exchange, whatever the routing.
"""

from __future__ import annotations

import math

MAX_EXPERTS, MAX_TOKENS, MAX_HIDDEN, MAX_SKEW = 64, 1024, 256, 100.0  # limits of a run
DEFAULTS = {  # of a run: MoEConfig's fields, the command line's options
    "experts": 8,
    "top_k": 2,
    "capacity_factor": 1.25,
    "skew": 0.0,
    "tokens": 16,
    "hidden": 8,
    "seed": 0,
}
ITEMSIZE = 4  # float32 token rows
ATOL, RTOL = 1e-5, 1e-4  # float32: the dense reference sums in another order


CAPACITY_SLACK = 1e-9  # C*T*k/E within this of an integer is that integer (float rounding)


def expert_capacity(tokens: int, experts: int, top_k: int, capacity_factor: float) -> int:
    """Assignments one expert accepts from one source rank: ``ceil(C * T * k / E)``."""
    return math.ceil(capacity_factor * tokens * top_k / experts - CAPACITY_SLACK)


def smallest_capacity_factor(tokens: int, experts: int, top_k: int) -> float:
    """The smallest capacity factor, to three significant digits, whose capacity keeps one
    assignment per expert per source rank: below it ``C*T*k/E`` is within the rounding slack of
    0 and :func:`expert_capacity` is 0 (every token dropped)."""
    c = float(f"{CAPACITY_SLACK * experts / (tokens * top_k):.3g}")
    while expert_capacity(tokens, experts, top_k, c) < 1:  # rounded down: one digit up
        c = float(f"{c + 10 ** (math.floor(math.log10(c)) - 2):.3g}")
    return c


def balanced_dispatch_bytes(
    tokens: int, top_k: int, hidden: int, world_size: int, itemsize: int = ITEMSIZE
) -> float:
    """Bytes one rank sends over the wire in the dispatch when its T k assignments spread evenly
    over the N ranks and none is dropped: ``(N-1)/N * T k h * itemsize`` (1/N stays local)."""
    return (world_size - 1) / world_size * tokens * top_k * hidden * itemsize


def padded_dispatch_bytes(
    experts: int, capacity: int, hidden: int, world_size: int, itemsize: int = ITEMSIZE
) -> float:
    """Bytes one rank sends over the wire in one padded exchange (GShard §2.2, Switch §2.2): its
    (E, C, h) buffer, C = ``capacity`` slots per expert, filled or not; the E/N experts' slots of
    its own rank stay local: ``(N-1)/N * E * C * h * itemsize``."""
    return (world_size - 1) * experts * capacity * hidden * itemsize / world_size


def all_to_one_dropped(world_size: int, tokens: int, capacity: int) -> int:
    """Top-1 routing where every token picks the same expert: each rank drops T - capacity."""
    return world_size * max(tokens - capacity, 0)
