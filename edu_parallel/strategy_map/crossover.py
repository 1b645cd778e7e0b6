"""When does tensor parallelism send more bytes than data parallelism? Pure Python, no torch.

Per rank and optimizer step, ring volumes (:func:`edu_parallel.core.metrics.ring_sent_bytes`), with
``L`` layers of ``P`` parameters, hidden size ``h``, ``T`` tokens per microbatch, ``k``
microbatches accumulated per step (gradient accumulation), ``e`` bytes per element, ``N`` ranks:

* DP all-reduces the gradients ONCE per step, whatever ``k``: ``2(N-1)/N * L P e``;
* TP (Megatron-LM, Shoeybi et al. 2019, arXiv 1909.08053 §3) all-reduces a (T, h) activation
  ``a`` times per layer and microbatch: ``2(N-1)/N * a L k T h e``.

Equal when ``T* = P / (a k h)`` tokens per microbatch (``k T* = P / (a h)`` tokens per step):

* ``"mlp"``: lesson 01's residual MLP block, ``P = 8h^2 + 5h``, ``a = 2`` (``g`` forward, ``f``
  backward): ``T* = 4h + 2.5``;
* ``"bare"``: lesson 12's transformer layer (:mod:`edu_parallel.parallel_3d`), attention and MLP
  without biases or norms, ``P = 12h^2``, ``a = 4`` (``g`` after attention's output projection and
  after the MLP forward, ``f`` before both backward): ``T* = 3h``;
* ``"gpt2"``: a GPT-2 layer, ``P = 12h^2 + 13h`` (QKV and output biases, MLP biases, two
  LayerNorms), ``a = 4``: ``T* = 3h + 3.25``.

Layer parameters come from :func:`edu_parallel.memory.presets.layer_params` (``bare``, ``gpt2``)
and :func:`edu_parallel.strategy_map.formulas.block_params` (``mlp``). With ``input_grad=False``
the model's input is data (no embedding below the first layer, as in lesson 12's model): autograd
never runs the first layer's ``f`` backward, one all-reduce fewer per microbatch,
``T* = L P / ((a L - 1) k h)``. ``tests/test_strategy_crossover.py`` checks these bytes against
real runs of both models.
"""

from __future__ import annotations

from ..core.errors import bad_value, check_choice, check_int
from ..memory.presets import ModelShape, layer_params
from .formulas import ITEMSIZE, block_params

LAYER_KINDS = ("mlp", "bare", "gpt2")
ALLREDUCES_PER_LAYER = {"mlp": 2, "bare": 4, "gpt2": 4}  # per microbatch, forward + backward


def layer_param_count(kind: str, hidden: int) -> int:
    """Parameters of one layer of ``kind``: ``8h^2 + 5h``, ``12h^2`` or ``12h^2 + 13h``."""
    check_choice("kind", kind, LAYER_KINDS)
    h = check_int("hidden", hidden, 1)
    if kind == "mlp":
        return block_params(h)
    return layer_params(ModelShape(kind, kind, layers=1, hidden=h, heads=1, vocab=0, seq=1))


def tp_allreduces(kind: str, layers: int, accumulation: int = 1, input_grad: bool = True) -> int:
    """All-reduces one TP rank runs per optimizer step: ``(a L - [no input grad]) k``."""
    check_choice("kind", kind, LAYER_KINDS)
    per_microbatch = ALLREDUCES_PER_LAYER[kind] * check_int("layers", layers, 1)
    return (per_microbatch - (not input_grad)) * check_int("accumulation", accumulation, 1)


def step_sent_bytes(
    strategy: str,
    world_size: int,
    *,
    kind: str,
    layers: int,
    hidden: int,
    tokens: int,
    accumulation: int = 1,
    itemsize: int = ITEMSIZE,
    input_grad: bool = True,
) -> float:
    """Bytes one rank sends per optimizer step under ``"dp"`` or ``"tp"`` (see the module
    docstring); ``tokens`` per microbatch, all of them on every TP rank, 1/N on each DP rank."""
    check_choice("strategy", strategy, ("dp", "tp"))
    n = check_int("world_size", world_size, 1)
    ring = 2 * (n - 1) / n
    if strategy == "dp":
        return ring * check_int("layers", layers, 1) * layer_param_count(kind, hidden) * itemsize
    calls = tp_allreduces(kind, layers, accumulation, input_grad)
    return ring * calls * check_int("tokens", tokens, 1) * hidden * itemsize


def crossover_tokens(
    hidden: int,
    kind: str = "mlp",
    accumulation: int = 1,
    layers: int | None = None,
    input_grad: bool = True,
) -> float:
    """``T*``: tokens per microbatch at which TP and DP send the same bytes per step.

    ``P / (a k h)``; with ``input_grad=False`` (give ``layers``) ``L P / ((a L - 1) k h)``.
    """
    p = layer_param_count(kind, hidden)
    k = check_int("accumulation", accumulation, 1)
    if input_grad:
        return p / (ALLREDUCES_PER_LAYER[kind] * k * hidden)
    if layers is None:
        raise bad_value("layers", layers, "the number of layers when input_grad=False")
    return layers * p / (tp_allreduces(kind, layers, k, input_grad=False) * hidden)
