"""Bytes each rank sends per group type (TP, PP, DP) in one training step: exact ring volumes.

This is what :mod:`edu_parallel.parallel_3d` counts from the traces of its 8-rank run (a test
compares the two), and what the planner's communication times are built on. Symbols: ``L``
layers, ``h`` hidden size, ``s`` sequence length, ``b`` micro-batch size, ``M`` microbatches,
``t``, ``p``, ``d`` the TP, PP and DP degrees, ``v`` model chunks per pipeline rank, ``e`` bytes
per element (``itemsize``), ``A = b*s*h*e`` the bytes of one activation tensor.

* **TP** (Megatron-LM, Shoeybi et al. 2019, §3): per layer of the rank's stage (``L/p``), per
  microbatch, four all-reduces of (b, s, h): in the forward after attention's output projection
  and after the MLP's down projection (``g``), in the backward before QKV and before the MLP's up
  projection (``f``). A ring all-reduce sends ``2(t-1)/t`` of its buffer from every rank:

      tp = 4 * (L/p) * M * 2(t-1)/t * A          (0 when t = 1)

  Except on the first stage of a ``"bare"`` model (no embedding): its input is data, which needs no
  gradient, so autograd never runs the first layer's ``f`` backward and that stage makes
  ``4 (L/p) M - M`` all-reduces. With an embedding the input needs its gradient and all run.

* **PP**: every rank of stage ``k < p-1`` sends ``M`` activations forward, every rank of stage
  ``k > 0`` sends ``M`` gradients backward, ``A`` bytes each (each TP rank sends its full
  replicated tensor to the same-TP-rank peer). With ``v > 1`` chunks (interleaving, Narayanan
  et al. 2021 §2.2) every chunk boundary sends: ``M * (v - [k = p-1])`` forward and
  ``M * (v - [k = 0])`` backward.

* **DP**: the rank's parameters ``P_rank = P_stage / t`` (its ``L/p`` layers, plus the embedding
  on the first stage and the output layer on the last for non-bare archs, see
  :func:`~edu_parallel.memory.presets.edge_params`; norms counted as split by ``t`` too). A
  ring all-reduce of the gradients sends ``2(d-1)/d * P_rank * e``; ZeRO-1/2 send the same
  in a reduce-scatter of gradients plus an all-gather of parameters; ZeRO-3 adds one more
  all-gather of the parameters (Rajbhandari et al. 2019, §7.2): ``3(d-1)/d * P_rank * e``.

* **EP** (mixture-of-experts shapes only: the rows gain an ``"ep"`` key; dense rows keep the
  three keys above): per layer of the stage, per microbatch, four all-to-alls (dispatch and
  combine, forward and backward) of the rank's ``k`` copies of its tokens, of which ``(x-1)/x``
  leave the rank (``x`` the EP degree): ``ep = 4 * (L/p) * M * (x-1)/x * k * A``. The DP bytes
  split: the non-expert parameters over ``d`` as above, the stage's expert parameters
  ``P_exp / (t x)`` over the expert-DP group of ``d/x`` ranks (see
  :mod:`edu_parallel.planner.experts`).
"""

from __future__ import annotations

from ..core.dims import ParallelDims
from ..core.errors import bad_value, check_int
from ..memory.presets import ModelShape, edge_params, expert_params, layer_params

GROUPS = ("tp", "pp", "dp")


def stage_params(shape: ModelShape, pp: int, stage: int) -> int:
    """Parameters held by pipeline stage ``stage`` of ``pp`` (all its TP ranks together): ``L/p``
    layers, the embedding on stage 0, the output layer on stage ``p-1``."""
    first, last = edge_params(shape)
    n = shape.layers // pp * layer_params(shape)
    return n + (first if stage == 0 else 0) + (last if stage == pp - 1 else 0)


def dp_volume_factor(zero: int, d: int) -> float:
    """Bytes sent per parameter byte in the DP group: 2(d-1)/d, or 3(d-1)/d under ZeRO-3."""
    return (3 if zero == 3 else 2) * (d - 1) / d


def group_bytes_per_rank(
    shape: ModelShape,
    dims: ParallelDims,
    micro_batch: int,
    microbatches: int,
    seq: int,
    zero: int = 0,
    itemsize: int = 2,
) -> list[dict[str, float]]:
    """Bytes each rank sends per group type in one step: ``[{"tp", "pp", "dp"}]`` by rank
    (and ``"ep"`` for a mixture-of-experts shape).

    See the module docstring for the formulas; ranks are placed by ``dims.coords``. Checks its
    arguments, then :func:`mesh_group_bytes`."""
    if not isinstance(dims, ParallelDims):
        raise bad_value("dims", dims, "a ParallelDims")
    b = check_int("micro_batch", micro_batch, 1)
    M = check_int("microbatches", microbatches, 1)
    s = check_int("seq", seq, 1)
    zero = check_int("zero", zero, 0, 3)
    e = check_int("itemsize", itemsize, 1)
    p, v = dims.pp, dims.chunks
    if shape.layers % (p * v):
        raise bad_value("pp", p, f"a divisor of layers={shape.layers} (with chunks={v})")
    x = dims.ep
    if shape.experts and (dims.dp % x or shape.experts % x):
        raise bad_value("ep", x, f"a divisor of dp={dims.dp} and of experts={shape.experts}")
    return mesh_group_bytes(shape, dims, b, M, s, zero, e)


def mesh_group_bytes(
    shape: ModelShape,
    dims: ParallelDims,
    micro_batch: int,
    microbatches: int,
    seq: int,
    zero: int,
    itemsize: int,
) -> list[dict[str, float]]:
    """:func:`group_bytes_per_rank` of a run checked already (a 3D run's
    :class:`~edu_parallel.parallel_3d.config.Run3D`: degrees validated with the model's shape):
    the formulas, nothing checked again."""
    b, M, s, e = micro_batch, microbatches, seq, itemsize
    t, p, d, v, x = dims.tp, dims.pp, dims.dp, dims.chunks, dims.ep
    A = b * s * shape.hidden * e
    experts = shape.layers // p * expert_params(shape)  # per stage, 0 for a dense shape
    per_allreduce = 2 * (t - 1) / t * A
    per_stage = []
    for k in range(p):
        # a bare model's input is data: the first layer's f never runs backward (one fewer)
        skipped = M if k == 0 and shape.arch == "bare" else 0
        tp_bytes = (4 * (shape.layers // p) * M - skipped) * per_allreduce
        fwd = M * (v - (k == p - 1)) if p > 1 else 0
        bwd = M * (v - (k == 0)) if p > 1 else 0
        dense = stage_params(shape, p, k) - experts
        dp_bytes = dp_volume_factor(zero, d) * dense / t * e
        row = {"tp": float(tp_bytes), "pp": float((fwd + bwd) * A), "dp": dp_bytes}
        if shape.experts:
            row["dp"] += dp_volume_factor(zero, d // x) * experts / (t * x) * e
            row["ep"] = 4 * (shape.layers // p) * M * (x - 1) / x * shape.top_k * A
        per_stage.append(row)
    return [dict(per_stage[dims.coords(r)["pp"]]) for r in range(dims.world_size)]
