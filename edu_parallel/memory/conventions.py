"""Three ways to count model-state bytes: the ZeRO paper's, Megatron-LM's, DeepSpeed's estimators.

Pure arithmetic, no torch. :func:`~edu_parallel.memory.model_states.model_state_bytes` takes
``convention=`` one of :data:`CONVENTIONS` and uses the tables and functions here.

``"zero-paper"`` (the default): Rajbhandari et al. 2019, arXiv 1910.02054, §3.1: mixed-precision
Adam holds 2 + 2 + 12 = **16 bytes** per parameter (fp16 params and grads; fp32 master params,
momentum and variance); see :data:`edu_parallel.memory.model_states.PRECISIONS`.

``"megatron"``: NVIDIA Megatron-LM, ``docs/user-guide/features/dist_optimizer.md`` (Megatron-Core
0.20.0, commit d98e8a6), "theoretical number of bytes per parameter" (``d`` = data-parallel
size; the distributed optimizer is ZeRO-1: optimizer states sharded, gradient buffer whole):

=========================================  =====================  =================
                                           Non-distributed optim  Distributed optim
=========================================  =====================  =================
``fp16`` parameters, ``fp16`` gradients    20                     4 + 16/d
``bf16`` parameters, ``fp32`` gradients    18                     6 + 12/d
``fp32`` parameters, ``fp32`` gradients    16                     8 + 8/d
=========================================  =====================  =================

Megatron trains bf16 models with **fp32 main gradients** (the gradient buffer the reduce-scatter
works on), 4 bytes instead of the paper's 2: ``precision="mixed"`` is the 18-byte row (param16 2,
grad32 4, master32 4, adam_m 4, adam_v 4), ``"fp32"`` the 16-byte row. ``zero=0`` is the
non-distributed optimizer, ``zero=1`` the distributed one; the document has no other stage.

``"deepspeed"``: DeepSpeed 0.16.5 (``version.txt``, commit 38327e0, 2025-02-21),
``estimate_zero2_model_states_mem_needs`` (``deepspeed/runtime/zero/stage_1_and_2.py``) and
``estimate_zero3_model_states_mem_needs`` (``deepspeed/runtime/zero/stage3.py``), reproduced to
the byte by :func:`deepspeed_zero2` and :func:`deepspeed_zero3` (same arguments, same float
arithmetic, same ``int()`` truncations). Their GPU bytes are per GPU, their CPU bytes per node
(the host memory a node needs; DeepSpeed prints them as "per CPU"):

* ZeRO-2, no offload: GPU ``2Ψ + int(18Ψ/N)``, the comment in the code: 2 = params_16bit,
  18 = 2 grads_16bit + 4 grads_32bit + 4 params_32bit + 8 optimizer states (momentum and
  variance); CPU ``Ψ·4·gpus_per_node·1.5`` (``additional_buffer_factor`` 1.5; we read it as
  every process of the node holding the fp32 model on the host while it starts).
* ZeRO-2, ``cpu_offload``: GPU ``2Ψ``; CPU ``Ψ·max(4·N, 16)·1.5``.
* ZeRO-3: ``4 × largest_layer_params`` on the GPU in every case; no offload: GPU ``+ int(18Ψ/N)``;
  ``cpu_offload`` (optimizer): GPU ``+ int(2Ψ/N)`` (the 16-bit parameter shard), CPU
  ``Ψ·16/nodes·1.5``; ``cpu_offload_params`` as well: CPU ``Ψ·18/nodes·1.5``. ``zero_init=False``
  (the model built whole on each process before partitioning) raises the CPU term to
  ``Ψ·max(4·gpus_per_node, k/nodes)·1.5`` with offload (``k`` = 16 or 18 as above) and
  ``Ψ·4·gpus_per_node·1.5`` without (``largest_layer_params`` instead of ``Ψ`` with ``zero_init``).
  The ZeRO-3 GPU term of the largest layer has no comment in the code; we read it as the largest
  module's 16-bit parameters and gradients, gathered whole while it runs.

Why they differ: the paper counts 16-bit gradients, Megatron keeps fp32 main gradients (+2 bytes
whole), DeepSpeed counts both the 16-bit and the fp32 gradients in its sharded 18 (and for
ZeRO-2 a whole 16-bit copy of the parameters besides), adds the largest layer's working copy for
ZeRO-3, and under offload keeps on the GPU only the 16-bit parameters (ZeRO-2 whole, ZeRO-3 a
``2Ψ/N`` shard or none) and the largest layer, without the gradient partition that the ZeRO-paper
convention of this calculator keeps there; its CPU bytes are per node, with a 1.5 buffer factor.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value, check_int
from ..core.i18n import N_, _
from .estimate import GB, MemoryEstimate
from .presets import ModelShape, check_experts

CONVENTIONS = ("zero-paper", "megatron", "deepspeed")

MEGATRON_SOURCE = (
    "Megatron-LM docs/user-guide/features/dist_optimizer.md (Megatron-Core 0.20.0, commit d98e8a6)"
)
DEEPSPEED_SOURCE = "DeepSpeed 0.16.5 (commit 38327e0)"
DEEPSPEED_ZERO2 = "deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs"
DEEPSPEED_ZERO3 = "deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs"
DEEPSPEED_BUFFER_FACTOR = 1.5  # additional_buffer_factor, DeepSpeed's default

# Megatron's table as (category, bytes per parameter, kind), like model_states.PRECISIONS: kind
# "optim" is what the distributed optimizer shards over d; "param" and "grad" stay whole.
MEGATRON_PRECISIONS: dict[str, tuple[tuple[str, int, str], ...]] = {
    "mixed": (  # bf16 parameters, fp32 gradients: 18 = 6 + 12
        ("param16", 2, "param"),
        ("grad32", 4, "grad"),
        ("master32", 4, "optim"),
        ("adam_m", 4, "optim"),
        ("adam_v", 4, "optim"),
    ),
    "fp32": (  # fp32 parameters (the main copy) and gradients: 16 = 8 + 8
        ("param32", 4, "param"),
        ("grad32", 4, "grad"),
        ("adam_m", 4, "optim"),
        ("adam_v", 4, "optim"),
    ),
}
MEGATRON_STAGES = (0, 1)  # non-distributed, distributed optimizer
DEEPSPEED_STAGES = (2, 3)  # the stages DeepSpeed has an estimator for


def deepspeed_zero2(
    total_params: int,
    num_gpus_per_node: int = 1,
    num_nodes: int = 1,
    cpu_offload: bool = True,
    additional_buffer_factor: float = DEEPSPEED_BUFFER_FACTOR,
) -> tuple[int, int]:
    """``(cpu_mem, gpu_mem)`` of DeepSpeed's ``estimate_zero2_model_states_mem_needs``."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def deepspeed_zero3(
    total_params: int,
    largest_layer_params: int,
    num_gpus_per_node: int = 1,
    num_nodes: int = 1,
    cpu_offload: bool = True,
    cpu_offload_params: bool = True,
    zero_init: bool = True,
    additional_buffer_factor: float = DEEPSPEED_BUFFER_FACTOR,
) -> tuple[int, int, int]:
    """``(cpu_mem, gpu_mem, largest_layer_memory)`` of DeepSpeed's
    ``estimate_zero3_model_states_mem_needs``."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        per_param = 18 if cpu_offload_params else 16  # + the 16-bit params when they leave too
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
        if zero_init:
            cpu_mem = total_params * per_param * gpus_factor * additional_buffer_factor
        else:
            factor = max(4 * num_gpus_per_node, per_param * gpus_factor)
            cpu_mem = total_params * factor * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
        else:
            cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


def check_convention(
    convention: Any, zero: int, precision: str, offload: str, tp: int, pp: int
) -> str:
    """``convention`` if it is one of :data:`CONVENTIONS` and covers this setup, else a
    ValueError naming what the convention's source does not cover."""
    if convention not in CONVENTIONS:
        raise bad_value("convention", convention, ", ".join(map(repr, CONVENTIONS)))
    if convention == "megatron":
        if zero not in MEGATRON_STAGES:
            raise bad_value(
                "zero", zero, "0 or 1 with convention='megatron' (its distributed optimizer: 1)"
            )
        if precision not in MEGATRON_PRECISIONS:
            raise bad_value(
                "precision", precision, "'mixed' or 'fp32' with convention='megatron' (its table)"
            )
        if offload != "none":
            raise bad_value("offload", offload, "'none' with convention='megatron' (its table)")
    if convention == "deepspeed":
        if zero not in DEEPSPEED_STAGES:
            raise bad_value(
                "zero", zero, "2 or 3 with convention='deepspeed' (DeepSpeed's estimators)"
            )
        if precision != "mixed":
            raise bad_value("precision", precision, "'mixed' with convention='deepspeed'")
        if tp != 1 or pp != 1:
            raise bad_value(
                "tp*pp", tp * pp, "1 with convention='deepspeed' (its estimators count ZeRO-DP)"
            )
    return convention


def check_deepspeed_inputs(
    params: float, gpus: int, zero: int, gpus_per_node: Any, largest_layer_params: Any
) -> tuple[int, int, int, int]:
    """``(total_params, gpus_per_node, nodes, largest_layer_params)`` as DeepSpeed's estimators
    take them: whole numbers; ``gpus_per_node`` None means ``min(gpus, 8)``; ZeRO-3 needs the
    largest layer (0 is returned for ZeRO-2, which does not use it)."""
    if params != int(params):
        raise bad_value("params", params, "a whole number with convention='deepspeed'")
    if gpus_per_node is None:
        per_node = min(gpus, 8)
    else:
        per_node = check_int("gpus_per_node", gpus_per_node, 1)
    if gpus % per_node:
        raise bad_value("gpus_per_node", per_node, f"a divisor of gpus={gpus}")
    largest = 0
    if zero == 3:
        if largest_layer_params is None:
            raise bad_value(
                "largest_layer_params",
                None,
                "the parameters of the largest module (an int >= 1; --model computes it)",
            )
        largest = check_int("largest_layer_params", largest_layer_params, 1, int(params))
    return int(params), per_node, gpus // per_node, largest


def deepspeed_estimate(
    params: float,
    gpus: int,
    zero: int,
    offload: str,
    gpus_per_node: Any = None,
    largest_layer_params: Any = None,
    zero_init: bool = True,
) -> MemoryEstimate:
    """DeepSpeed's estimate for this setup (``zero`` 2 or 3, ``offload`` mapped to its flags:
    ``"optimizer"`` is ``cpu_offload``, ``"all"`` adds ``cpu_offload_params``)."""
    total, per_node, nodes, largest = check_deepspeed_inputs(
        params, gpus, zero, gpus_per_node, largest_layer_params
    )
    if not isinstance(zero_init, bool):
        raise bad_value("zero_init", zero_init, "True or False")
    cpu_offload = offload != "none"
    flags = f"gpus_per_node={per_node}, nodes={nodes}, cpu_offload={cpu_offload}"
    if zero == 2:
        cpu, gpu = deepspeed_zero2(total, per_node, nodes, cpu_offload)
        sharded = 0 if cpu_offload else int(18 * total / gpus)
        breakdown = {"param16": 2 * total} | ({N_("sharded 18Ψ/N"): sharded} if sharded else {})
        text = "2Ψ" if cpu_offload else "2Ψ + int(18Ψ/N)"
        cpu_text = "Ψ·max(4N, 16)·1.5" if cpu_offload else "Ψ·4·gpus_per_node·1.5"
        where = DEEPSPEED_ZERO2
    else:
        params_off = offload == "all"
        cpu, gpu, layer = deepspeed_zero3(
            total, largest, per_node, nodes, cpu_offload, params_off, zero_init
        )
        shard = 0 if params_off else int((2 if cpu_offload else 18) * total / gpus)
        name = N_("param16 2Ψ/N") if cpu_offload else N_("sharded 18Ψ/N")
        breakdown = {N_("largest layer 4·L"): layer} | ({name: shard} if not params_off else {})
        text = "4L" + ("" if params_off else " + int(2Ψ/N)" if cpu_offload else " + int(18Ψ/N)")
        k = 18 if params_off else 16
        if not cpu_offload:
            cpu_text = "L·4·gpus_per_node·1.5" if zero_init else "Ψ·4·gpus_per_node·1.5"
        else:
            cpu_text = f"Ψ·{k}/nodes·1.5" if zero_init else f"Ψ·max(4·gpus_per_node, {k}/nodes)·1.5"
        flags += f", cpu_offload_params={params_off}, zero_init={zero_init}, L={largest}"
        where = DEEPSPEED_ZERO3
    formula = _(
        "DeepSpeed ZeRO-{zero}, offload={offload}: GPU {text} = {gpu} GB; CPU per node {cpu_text}"
        " = {cpu} GB; Ψ = {total}, N = {gpus} ({flags})  [{source}, {where}]"
    ).format(
        zero=zero,
        offload=offload,
        text=text,
        gpu=f"{gpu / GB:.4g}",
        cpu_text=cpu_text,
        cpu=f"{cpu / GB:.4g}",
        total=total,
        gpus=gpus,
        flags=flags,
        source=DEEPSPEED_SOURCE,
        where=where,
    )
    return MemoryEstimate(
        params=params,
        gpus=gpus,
        zero=zero,
        precision="mixed",
        offload=offload,
        tp=1,
        pp=1,
        dp=gpus,
        params_per_gpu=params,
        bytes_per_gpu=gpu,
        cpu_bytes_per_gpu=cpu / per_node,
        breakdown=breakdown,
        cpu_breakdown={N_("host memory per node"): cpu},
        formula=formula,
        convention="deepspeed",
        cpu_bytes_per_node=cpu,
    )


def largest_module_params(shape: ModelShape) -> int:
    """The parameters of ``shape``'s largest module, as DeepSpeed's ``model_to_params``
    (``deepspeed/runtime/zero/stage3.py``) counts them on the real model: the most parameters any
    one module holds directly (``parameters(recurse=False)``). Modules as in the references of
    :mod:`~edu_parallel.memory.presets`: embeddings ``V·h`` (GPT-2 also ``s·h``), attention
    projections, the MLP's (or one expert's) linears, with biases for GPT-2; a router ``h·E``."""
    h, E = shape.hidden, check_experts(shape)[0]
    ffn = shape.ffn if shape.ffn is not None else 4 * h
    width = shape.expert_ffn if E and shape.expert_ffn is not None else ffn
    bias = shape.arch == "gpt2"
    sizes = [
        shape.vocab * h,  # token embedding (and Llama's untied output layer)
        h * h + (h if bias else 0),  # q_proj / o_proj (GPT-2: c_proj)
        h * width + (width if bias else 0),  # up / gate (GPT-2: c_fc)
        width * h + (h if bias else 0),  # down (GPT-2: mlp.c_proj)
        h * E,  # the router of a mixture of experts
    ]
    if bias:
        sizes += [3 * h * h + 3 * h, shape.seq * h]  # c_attn, position embedding
    return max(sizes)
