"""What a 3D step holds in memory, from its checked :class:`~edu_parallel.parallel_3d.config.Run3D`
before the ranks start, so that the command line refuses a step this machine cannot hold
(``comm.memory.check_need``).

What autograd saves per token and layer is counted, not guessed: :func:`saved_per_token` runs one
layer of the step's model on one sequence in this process, under the hook the ranks measure with
(:class:`~edu_parallel.strategy_map.model.SavedBytes`), with no tensor parallelism (a TP rank
saves its shard of the MLP and of the heads and the whole residual stream: no more). In float32 it
is about 15 h bytes' worth of elements a token for the dense layer, not the ``4h + a s`` that
``Config3D``'s time bound counts; the MoE reference computes every expert on every token.

Per rank (:func:`~edu_parallel.parallel_3d.step.step_job`):

* every layer's full weights, drawn on every rank, then cut (``W``); its own shards, their
  gradients, Adam's two moments, the flat gradient, the gradients and weights it returns:
  ``8 W / (tp pp)`` at most;
* the whole batch, inputs and targets of ``(b, s, h)`` each;
* the 1F1B stash: ``min(pp, M)`` microbatches in flight on stage 0, each ``mb s`` tokens through
  ``L / pp`` layers, plus its input and output; every send (an activation up, a gradient down),
  held until the end; and one layer's backward, :data:`BACKWARD` times what the layer saved.

The calling process (:func:`~edu_parallel.parallel_3d.report.execute_3d`) holds the ranks'
gradients and weights (``2 dp W``) and the one-process reference: ``6 W``, the batch, what
autograd saves for all ``b s`` tokens through ``L`` layers, and one layer's backward. The
activations are taken times :data:`~edu_parallel.comm.memory.HEAP_SLACK`. Measured in
``tests/test_3d_memory.py``.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from ..comm.memory import HEAP_SLACK
from ..expert_parallel.layer import moe_reference
from ..strategy_map.model import SavedBytes
from .config import ITEMSIZE, Config3D, Run3D
from .model import TensorParallel, layer, layer_weights, moe_weights

# A layer's backward holds gradients of about what the layer saved, twice over at its widest (the
# MoE reference: the (T, E, h) stack of every expert on every token, and its gradient)
BACKWARD = 2


@functools.lru_cache(maxsize=32)
def saved_per_token(cfg: Config3D) -> int:
    """Bytes autograd saves for one token through one layer of ``cfg``'s model, counted on one
    sequence of ``cfg.seq`` tokens."""
    one = dataclasses.replace(cfg, layers=1)
    w = layer_weights(one)[0]
    moe = None
    params = list(w.values())
    if cfg.experts:
        p = moe_weights(one)[0]
        params += list(p.router.parameters()) + list(p.experts.parameters())

        def moe(tok: torch.Tensor) -> torch.Tensor:
            kw = {"top_k": cfg.top_k, "capacity_factor": cfg.capacity_factor}
            return moe_reference(tok, p.router, p.experts, **kw)[0]

    for t in params:
        t.requires_grad_(True)
    x = torch.randn(1, cfg.seq, cfg.hidden, requires_grad=True)  # (1, s, h)
    saved = SavedBytes(params)
    with saved.counting():
        layer(x, w, cfg.heads, TensorParallel(None, None, 1), moe)
    return -(-saved.bytes // cfg.seq)


def _weights_bytes(cfg: Config3D) -> int:
    """Every layer's weights, as each rank and the reference draw them."""
    h, f = cfg.hidden, cfg.ffn
    dense = 4 * h * h + (0 if cfg.experts else 2 * h * f)
    moe = (h * cfg.experts + cfg.experts) + (2 * h * f + f + cfg.experts * h) if cfg.experts else 0
    return cfg.layers * (dense + moe) * ITEMSIZE


def bytes_per_rank(run: Run3D) -> int:
    """A bound on the peak of the rank that holds the most (stage 0 of the pipeline)."""
    d, cfg = run.dims, run.config
    weights = _weights_bytes(cfg)
    own = 8 * weights // (d.tp * d.pp)
    m, mb = cfg.num_microbatches(d.pp), cfg.micro_batch(d)
    row = mb * cfg.seq * cfg.hidden * ITEMSIZE  # one microbatch's (mb, s, h)
    batch = 2 * cfg.batch * cfg.seq * cfg.hidden * ITEMSIZE
    one_layer = mb * cfg.seq * saved_per_token(cfg)  # one layer on one microbatch
    per_microbatch = (cfg.layers // d.pp) * one_layer + 2 * row
    activations = batch + min(d.pp, m) * per_microbatch + 2 * m * row + BACKWARD * one_layer
    return int(weights + own + HEAP_SLACK * activations)


def reference_bytes(run: Run3D) -> int:
    """A bound on the calling process: the ranks' results and the one-process reference."""
    d, cfg = run.dims, run.config
    weights = _weights_bytes(cfg)
    tokens = cfg.batch * cfg.seq
    one_layer = tokens * saved_per_token(cfg)  # one layer on the whole batch
    activations = 2 * tokens * cfg.hidden * ITEMSIZE + (cfg.layers + BACKWARD) * one_layer
    return int((2 * d.dp + 6) * weights + HEAP_SLACK * activations)
