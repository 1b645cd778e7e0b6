"""engine.autograd: backward from a given gradient equals torch's bit for bit, refuses a gradient of
another shape, and no process of a training run (the calling one or a rank) imports sympy."""

from __future__ import annotations

import sys

import pytest
import torch
from helpers import fresh_python

from edu_parallel.engine.autograd import backward_from, grads_from


def graph(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A weight, an output of a few ops on it, and a gradient of the output's shape."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(32, 32, generator=g).to(dtype).requires_grad_()
    x, dy = torch.randn(8, 32, generator=g).to(dtype), torch.randn(8, 32, generator=g).to(dtype)
    return w, torch.tanh(x @ w) * 3 + w.sum(0), dy


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_the_gradients_are_torchs_bit_for_bit(dtype):
    w, y, dy = graph(dtype)
    backward_from(y, dy)
    w2, y2, _ = graph(dtype)
    y2.backward(dy)
    assert torch.equal(w.grad, w2.grad)

    w3, y3, _ = graph(dtype)  # Zero Bubble's two passes over one graph: I retains it, W frees it
    (first,) = grads_from(y3, [w3], dy, retain_graph=True)
    (second,) = grads_from(y3, [w3], dy)
    assert torch.equal(first, w2.grad) and torch.equal(second, w2.grad)


def test_a_scalar_output_needs_no_gradient():
    w, y, _ = graph(torch.float64)
    backward_from(y.sum())
    w2, y2, _ = graph(torch.float64)
    (g,) = grads_from(y2.sum(), [w2], None)
    w3, y3, _ = graph(torch.float64)
    y3.sum().backward()
    assert torch.equal(w.grad, w3.grad) and torch.equal(g, w3.grad)


def test_a_gradient_of_another_shape_is_refused_in_one_line():
    _, y, _ = graph(torch.float32)
    with pytest.raises(ValueError) as err:  # (1, 32) would broadcast against (8, 32)
        backward_from(y, torch.ones(1, 32))
    assert str(err.value) == "grad=(1, 32) is not valid: expected the output's shape (8, 32)"


def has_sympy(ctx) -> bool:
    return "sympy" in sys.modules


def test_no_process_of_a_tp_pp_3d_or_moe_run_imports_sympy():
    fresh_python(
        "import sys\n"
        "sys.path.insert(0, 'tests')\n"
        "from test_autograd import has_sympy\n"
        "from edu_parallel import Cluster\n"
        "from edu_parallel.expert_parallel import run_moe\n"
        "from edu_parallel.parallel_3d import run_3d\n"
        "from edu_parallel.pipeline_parallel import run_pipeline\n"
        "from edu_parallel.tensor_parallel import run_tp, run_tp_attention\n"
        "with Cluster(4) as c:\n"
        "    assert run_tp(c, 'mlp').matches_dense and run_tp(c, 'mlp-sp').matches_dense\n"
        "    assert run_tp_attention(c, 2, 8, 16, heads=4, causal=True).matches_dense\n"
        "    assert run_pipeline(c, 'zb-h1', stages=4, microbatches=8).matches_reference\n"
        "    assert run_3d(c, dp=1, tp=2, pp=2).matches_reference\n"
        "    assert run_moe(c, experts=4).gradients_match\n"
        "    assert c.run(has_sympy).results == [False] * 4\n",
        absent=("sympy",),
        timeout=300,
    )
