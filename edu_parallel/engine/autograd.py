"""Backward from a given output gradient, as ``out.backward(grad)`` computes it, in any process.

torch checks a given gradient's shape with its symbolic-shape helpers, imported on the first call
of a process: sympy, about 0.3 s on its own and 1.5 s when four ranks import it at once on two
cores. The ranks of a pipeline stage, a tensor-parallel layer or a 3D step all start from a
received gradient. Here the same gradient reaches ``out`` as the derivative of the scalar
``sum(out * grad)``, and that path imports nothing. Every value downstream is bit for bit
``out.backward(grad)``'s: the product's backward multiplies ``grad`` by ones. So no process,
kernel or rank, pays for sympy, and a cluster does not import it before its ranks fork.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..core.errors import bad_value
from ..core.i18n import _


def _seed(out: torch.Tensor, grad: torch.Tensor | None) -> torch.Tensor:
    """The scalar whose derivative with respect to ``out`` is ``grad``: ``out`` itself for
    ``grad=None`` (``out`` is a scalar, a loss)."""
    if grad is None:
        return out
    if grad.shape != out.shape:  # torch's own check, which broadcasting would skip
        shape = _("the output's shape {shape}").format(shape=tuple(out.shape))
        raise bad_value("grad", tuple(grad.shape), shape)
    return (out * grad).sum()


def backward_from(out: torch.Tensor, grad: torch.Tensor | None = None) -> None:
    """``out.backward(grad)``; ``grad=None`` for a scalar ``out`` (a loss)."""
    _seed(out, grad).backward()


def grads_from(
    out: torch.Tensor,
    inputs: Sequence[torch.Tensor],
    grad: torch.Tensor | None,
    retain_graph: bool = False,
) -> tuple[torch.Tensor, ...]:
    """``torch.autograd.grad(out, inputs, grad, retain_graph=retain_graph)``."""
    return torch.autograd.grad(_seed(out, grad), inputs, retain_graph=retain_graph)
