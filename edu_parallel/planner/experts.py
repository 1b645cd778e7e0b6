"""Expert parallelism (EP) in the planner: what a mixture-of-experts model adds to an estimate.

For a model with ``E`` experts per layer, ``k`` of them per token (``ModelShape.experts``,
``top_k``; :func:`~edu_parallel.memory.presets.expert_params`), the planner adds an EP degree
``e`` and places it as Megatron-LM does (Megatron Core's MoE guide, "expert parallelism"; the
convention of :meth:`~edu_parallel.core.dims.ParallelDims.groups` and of
:mod:`edu_parallel.parallel_3d`): EP is carved out of data parallelism, so ``e`` divides ``dp``
(and ``E``, every EP rank holding ``E/e`` whole experts). Each DP group is cut into ``dp/e``
blocks of ``e`` consecutive DP ranks: a block is an EP group (tokens travel between its ranks by
all-to-all), the ranks at the same place of the blocks form an expert-DP group of ``dp/e`` ranks
(they hold the same experts and all-reduce their gradients).

Our choice: **experts are TP-split like the dense MLP** (Megatron Core's default,
``expert_tensor_parallel_size`` = ``tensor_model_parallel_size``), so a rank holds
``E/e`` experts' ``1/t`` column/row shards; the expert MLP's TP all-reduces are the dense MLP's
(already in the TP term). :mod:`edu_parallel.parallel_3d`'s small run replicates its experts
across the TP ranks instead; at planner scale that would repeat every expert's FLOPs ``t`` times.

* **Memory**: the non-expert parameters (attention, norms, router, embeddings) as for a dense
  model, ZeRO over ``dp``; the expert parameters of the stage split ``t·e`` ways, their
  gradients and Adam states partitioned by ZeRO over the expert-DP group ``dp/e``.
  Activations: the dense formula plus the MLP block's share
  (:func:`~edu_parallel.memory.activations.mlp_activation_sbh`: GPT's 19·s·b·h bytes per layer,
  Korthikanti §4.1, or SwiGLU's (2 + 6f/h)·s·b·h for Llama-style experts; /t with sequence
  parallelism) ``k - 1`` more times: every token's MLP
  activations are stored once per expert it is routed to (none more under full recomputation,
  which keeps only each layer's input). The router's logits (``s·b·E`` values) and the
  dispatch buffers are left out.
* **EP time**: per MoE layer of the stage and microbatch, two all-to-alls forward (dispatch,
  combine) and two backward (three forward passes' worth, six in all, with full recomputation),
  each rank's buffer ``k·b·s·h`` 16-bit elements (its tokens, ``k`` copies; with TP every TP
  rank exchanges the full tokens with the same-TP-rank peers of its EP group), of which
  ``(e-1)/e`` leaves the rank: :func:`~edu_parallel.models.cost.predict` ``"all_to_all"``,
  ``(e-1)·α + (e-1)/e·S/B``. Exposed (the experts wait for their tokens). Link
  (:func:`ep_link`): an EP group is ``e`` ranks ``t`` apart, i.e. it lies in an aligned block of
  ``e·t`` consecutive ranks (``(pp·dp + j·e)·t`` onward, ``dp`` a multiple of ``e``); such
  blocks stay inside nodes of ``g`` GPUs iff ``e·t`` divides ``g``, else some group crosses a
  node boundary and the step waits for it: the inter-node link.
* **DP time**: non-expert gradients ring-all-reduced over ``dp``, expert gradients over the
  expert-DP group ``dp/e`` (``E/e`` experts' ``1/t`` shards), both on the DP group's link.
* **Compute** uses the *active* parameters (``6 · active_params · tokens``), and so does the
  MFU (:func:`~edu_parallel.memory.presets.active_params`).

Megatron-LM with sequence parallelism sends each TP rank's ``s/t`` tokens through the
all-to-all and all-gathers them in the TP group after; we count the simpler exchange above (the
same bytes per EP group as ``t`` TP ranks together, an upper bound on the all-to-all).
"""

from __future__ import annotations

from ..core.errors import bad_value
from ..core.i18n import _
from ..memory.activations import mlp_activation_sbh
from ..memory.model_states import model_state_bytes
from ..memory.presets import ModelShape, expert_params
from ..models.cost import predict
from ..models.topology import Link


def ep_problems(shape: ModelShape, dp: int, tp: int, ep: int) -> list[str]:
    """Why ``ep`` does not split ``shape`` with these degrees ([] when it does). ParallelDims
    already checks ``ep`` against the world size and ``dp * tp``."""
    if ep == 1:
        return []
    if not shape.experts:
        return [
            str(
                bad_value(
                    "ep",
                    ep,
                    _("1 for {model}, a dense model (no experts)").format(model=shape.name),
                )
            )
        ]
    out = []
    if (dp * tp) % ep == 0 and dp % ep:
        out.append(
            str(
                bad_value(
                    "ep",
                    ep,
                    _("a divisor of dp={dp} (EP groups are blocks of a DP group)").format(dp=dp),
                )
            )
        )
    if shape.experts % ep:
        out.append(
            str(
                bad_value(
                    "ep", ep, _("a divisor of experts={experts}").format(experts=shape.experts)
                )
            )
        )
    return out


def stage_expert_params(shape: ModelShape, pp: int) -> int:
    """Expert parameters of one pipeline stage (all its ranks): ``L/p`` layers' ``E`` experts."""
    return shape.layers // pp * expert_params(shape)


def moe_state_bytes(
    stage: int, experts: int, world: int, zero: int, tp: int, pp: int, ep: int
) -> float:
    """Model-state bytes per GPU of a stage of ``stage`` parameters, ``experts`` of them in
    experts: the rest split ``t`` ways with ZeRO over ``dp``, the experts ``t·e`` ways with
    ZeRO over ``dp/e`` (the module docstring)."""
    dense = model_state_bytes((stage - experts) * pp, world, zero, tp=tp, pp=pp).bytes_per_gpu
    # Psi = experts / (t e) per GPU and N = (world / e) / (t p) = dp / e
    moe = model_state_bytes(experts * pp / ep, world // ep, zero, tp=tp, pp=pp).bytes_per_gpu
    return dense + moe


def moe_extra_activation_bytes(
    shape: ModelShape, seq: int, micro_batch: int, layers: int, tp: int, recompute: str
) -> float:
    """Activation bytes the ``k - 1`` extra expert copies of every token add over ``layers``
    layers (0 for a dense model or with full recomputation)."""
    if not shape.experts or recompute == "full":
        return 0.0
    per_layer = mlp_activation_sbh(shape) * seq * micro_batch * shape.hidden / tp
    return (shape.top_k - 1) * per_layer * layers


def ep_link(gpus_per_node: int, tp: int, ep: int, intra: Link, inter: Link) -> Link:
    """The link EP groups of ``ep`` ranks ``tp`` apart use: ``intra`` iff ``ep * tp`` divides the
    GPUs per node (the module docstring)."""
    return intra if gpus_per_node % (ep * tp) == 0 else inter


def alltoall_bytes(shape: ModelShape, micro_batch: int, seq: int, itemsize: int) -> float:
    """One rank's all-to-all buffer: its ``b·s`` tokens, ``top_k`` copies of ``h`` elements."""
    return shape.top_k * micro_batch * seq * shape.hidden * itemsize


def alltoall_s(
    shape: ModelShape, micro_batch: int, seq: int, ep: int, link: Link, itemsize: int
) -> float:
    """Time of one all-to-all of the EP group (pairwise exchange)."""
    nbytes = alltoall_bytes(shape, micro_batch, seq, itemsize)
    return predict("all_to_all", ep, nbytes, link).time_s


def moe_grad_sync_s(
    stage: int, experts: int, dp: int, tp: int, ep: int, zero: int, link: Link, itemsize: int
) -> float:
    """DP time of a MoE stage of ``stage`` parameters: the non-expert ones' gradients over
    ``dp``, the ``experts`` ones' over ``dp/ep``; ZeRO-3 adds an all-gather of each."""
    t = 0.0
    for n, ranks, split in ((stage - experts, dp, tp), (experts, dp // ep, tp * ep)):
        nbytes = n / split * itemsize
        t += predict("ring", ranks, nbytes, link).time_s
        if zero == 3:
            t += predict("all_gather", ranks, nbytes, link).time_s
    return t
