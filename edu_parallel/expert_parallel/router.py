"""The MoE router: top-k gating and expert capacity (GShard, Switch Transformer).

:func:`route`: ``logits = x W_r + b_r``, ``p = softmax(logits)``, the k experts with the largest
logits. Combine weights: for k > 1 the k probabilities renormalised to sum to 1 (GShard top-2,
Mixtral's softmax over the top-k logits: the same numbers); for k = 1 the raw probability (Switch:
renormalising one weight gives 1 and the router would get no gradient).

:func:`capacity_positions`: each source rank is one GShard "group": expert e accepts at most
``capacity = ceil(C * T * k / E)`` of that rank's T tokens' k assignments
(:func:`~edu_parallel.expert_parallel.formulas.expert_capacity`). Queue order as in GShard
Algorithm 1: all first choices in token order, then all second choices, and so on.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .formulas import expert_capacity


@dataclass
class DispatchStats:
    """Measured on one rank: slots it dispatched (sender side) and rows its experts computed."""

    slots_sent: int  # rows in this rank's dispatch buffer (all destinations, own rank included)
    slots_filled: int  # of those, rows holding a kept token assignment
    rows_computed: int  # rows this rank's local experts ran on (padding included)


@dataclass
class Routing:
    """One group's routing decisions. Shapes: T tokens, k choices, E experts."""

    probs: torch.Tensor  # (T, E) softmax of the router logits
    experts: torch.Tensor  # (T, k) int64, best first
    gates: torch.Tensor  # (T, k) combine weights (differentiable)
    positions: torch.Tensor  # (T, k) place in the expert's queue
    kept: torch.Tensor  # (T, k) bool: positions < capacity
    capacity: int
    stats: DispatchStats | None = None  # set by moe_layer: slots sent and filled, rows computed


def capacity_positions(choices: torch.Tensor, experts: int) -> torch.Tensor:
    """Each assignment's place in its expert's queue: all first choices in token order, then all
    second choices, ... (GShard Algorithm 1). (T, k) expert ids -> (T, k) positions."""
    t, k = choices.shape
    flat = choices.t().reshape(-1)  # (k T,) choice-major: first choices of every token come first
    onehot = F.one_hot(flat, experts)  # (k T, E)
    pos = ((onehot.cumsum(0) - 1) * onehot).sum(1)  # (k T,) assignments ahead in the same expert
    return pos.view(k, t).t()


def route(x: torch.Tensor, router: nn.Module, top_k: int, capacity_factor: float) -> Routing:
    """Softmax gate, top-k, renormalised weights (k > 1), capacity. (T, h) -> :class:`Routing`."""
    logits = router(x)  # (T, h) -> (T, E)
    t, e = logits.shape
    probs = logits.softmax(-1)  # (T, E)
    choices = logits.detach().topk(top_k, dim=-1).indices  # (T, k); on logits: no 0-prob ties
    gates = probs.gather(1, choices)  # (T, k)
    if top_k > 1:
        gates = gates / gates.sum(-1, keepdim=True)
    cap = expert_capacity(t, e, top_k, capacity_factor)
    pos = capacity_positions(choices, e)
    return Routing(probs, choices, gates, pos, pos < cap, cap)
