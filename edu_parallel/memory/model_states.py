"""How much GPU memory does training a model need? Model states, activations, communication.

Pure arithmetic, no torch: every function returns bytes (decimal GB = 1e9 bytes in the text, as
in the ZeRO paper) and the formula it used, with its source.

**Model states** (:func:`model_state_bytes`), after Rajbhandari et al. 2019, "ZeRO: Memory
Optimizations Toward Training Trillion Parameter Models", §3.1 and Fig. 1. With ``Ψ`` parameters
and Adam, each parameter costs ``2 + 2 + K`` bytes:

=============  ==========================================  ====  ================
precision      per parameter                                 K    total
=============  ==========================================  ====  ================
``mixed``      param16 2, grad16 2, master32 4, adam_m 4,    12   16Ψ
               adam_v 4
``fp32``       param32 4, grad32 4, adam_m 4, adam_v 4        8   16Ψ
``bf16-pure``  param16 2, grad16 2, adam_m 2, adam_v 2        4    8Ψ
=============  ==========================================  ====  ================

Our accounting for ``fp32``: the fp32 parameters *are* the optimizer's master copy, so there is
no ``master32`` line; the paper's K (optimizer-only bytes) is then 8 and the total 4Ψ + 4Ψ + 8Ψ =
16Ψ, the same as mixed precision. ``bf16-pure`` keeps everything, Adam moments included, in
16-bit (no fp32 master: cheaper, less accurate updates).

ZeRO partitions across the data-parallel degree ``N``: stage 1 the optimizer states (master32,
adam_m, adam_v), stage 2 also the gradients, stage 3 also the parameters. For mixed precision this
gives the paper's four lines: DP 16Ψ, ZeRO-1 4Ψ + 12Ψ/N, ZeRO-2 2Ψ + 14Ψ/N, ZeRO-3 16Ψ/N.

Tensor parallelism (degree ``tp``) and pipeline parallelism (``pp``) split the model itself, so
each GPU holds ``Ψ/(tp·pp)`` parameters, and the data-parallel degree is ``N = gpus/(tp·pp)``.

**CPU offload** (DeepSpeed): ``offload="optimizer"`` is ZeRO-Offload (Ren et al. 2021,
"ZeRO-Offload: Democratizing Billion-Scale Model Training", §4): the optimizer states (master32,
adam_m, adam_v) live in CPU memory and Adam runs on the CPU; DeepSpeed allows it with ZeRO stages
1, 2 and 3. ``offload="all"`` also moves the parameters to CPU memory (ZeRO-Infinity, Rajbhandari
et al. 2021, §5; DeepSpeed's ``offload_param``), which needs stage 3. We count the gradient
partition on the GPU, where it is produced and reduce-scattered (DeepSpeed then streams it to the
CPU in buckets; the ZeRO-Offload paper's Fig. 2 places the fp16 gradients on the CPU, which would
move another ``2Ψ/N`` there). For ``fp32``, ``"optimizer"`` moves adam_m and adam_v (the params,
being the master copy, stay for the forward pass) and ``"all"`` moves param32 as well. CPU bytes
are reported per GPU (the share of host memory that one GPU's rank needs).

**Activations** (:func:`edu_parallel.memory.activations.activation_bytes`): Korthikanti
et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198, §4,
eqs. (1)-(3) and Table 2.

**Communication** (:func:`edu_parallel.memory.communication.comm_bytes_per_step`): ZeRO
paper §7 with the exact ring volumes.

**Conventions** (``convention=``, :mod:`edu_parallel.memory.conventions`): the above is the ZeRO
paper's accounting (``"zero-paper"``, the default). ``"megatron"`` is Megatron-LM's distributed
optimizer table (fp32 main gradients: 18 bytes, ``6 + 12/d`` sharded); ``"deepspeed"`` reproduces
DeepSpeed's ``estimate_zero2/3_model_states_mem_needs`` to the byte (18Ψ/N, 4 × the largest
layer for ZeRO-3, CPU bytes per node).
"""

from __future__ import annotations

import math
from typing import Any

from ..core.errors import bad_value, check_choice, check_int, check_positive
from ..core.i18n import _
from .conventions import MEGATRON_PRECISIONS, MEGATRON_SOURCE, check_convention, deepspeed_estimate
from .estimate import GB, MemoryEstimate

# (category, bytes per parameter, kind). kind decides the ZeRO stage that partitions it and
# where offload puts it; see the module docstring's table.
PRECISIONS: dict[str, tuple[tuple[str, int, str], ...]] = {
    "mixed": (
        ("param16", 2, "param"),
        ("grad16", 2, "grad"),
        ("master32", 4, "optim"),
        ("adam_m", 4, "optim"),
        ("adam_v", 4, "optim"),
    ),
    "fp32": (
        ("param32", 4, "param"),
        ("grad32", 4, "grad"),
        ("adam_m", 4, "optim"),
        ("adam_v", 4, "optim"),
    ),
    "bf16-pure": (
        ("param16", 2, "param"),
        ("grad16", 2, "grad"),
        ("adam_m", 2, "optim"),
        ("adam_v", 2, "optim"),
    ),
}
# ZeRO §5: stage 0 = plain data parallelism, 1 = P_os, 2 = P_os+g, 3 = P_os+g+p
ZERO_STAGES = (0, 1, 2, 3)
ZERO_STAGE_NAMES = {0: "DP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}
PARTITIONED_FROM_STAGE = {"optim": 1, "grad": 2, "param": 3}
OFFLOADS = ("none", "optimizer", "all")
OFFLOADED_KINDS = {"none": (), "optimizer": ("optim",), "all": ("optim", "param")}
OFFLOAD_STAGES = {"none": ZERO_STAGES, "optimizer": (1, 2, 3), "all": (3,)}
# bytes per gradient element on the wire (the gradients are communicated in their own dtype)
COMM_BYTES_PER_ELEMENT = {"mixed": 2, "fp32": 4, "bf16-pure": 2}
RECOMPUTE = ("none", "selective", "full")


def _check_parallel(gpus: Any, tp: Any, pp: Any) -> tuple[int, int, int]:
    """Return (gpus, tp, pp) as ints, with gpus divisible by tp·pp."""
    gpus = check_int("gpus", gpus, 1)
    tp = check_int("tp", tp, 1)
    pp = check_int("pp", pp, 1)
    if gpus % (tp * pp):
        raise bad_value("gpus", gpus, f"a multiple of tp*pp = {tp}*{pp} = {tp * pp}")
    return gpus, tp, pp


def _check_stage_and_offload(zero: Any, precision: Any, offload: Any) -> tuple[int, str, str]:
    zero = check_int("zero", zero, 0, 3)
    precision = check_choice("precision", precision, PRECISIONS)
    offload = check_choice("offload", offload, OFFLOADS)
    stages = OFFLOAD_STAGES[offload]
    if zero not in stages:
        raise bad_value(
            "offload",
            offload,
            f"'none' with zero={zero}: offload combined with a stage that does not support it "
            f"(offload={offload!r} needs zero in {', '.join(map(str, stages))})",
        )
    return zero, precision, offload


def _coefficient(x: float) -> str:
    return f"{x:g}"


def _categories(convention: str, precision: str) -> tuple[tuple[str, int, str], ...]:
    """(category, bytes per parameter, kind) of the ZeRO paper or of Megatron's table."""
    return (MEGATRON_PRECISIONS if convention == "megatron" else PRECISIONS)[precision]


def _state_coefficients(
    zero: int, precision: str, offload: str, convention: str = "zero-paper"
) -> dict[str, float]:
    """Bytes per parameter of Ψ/(tp·pp), split into (gpu|cpu) x (whole|partitioned over N)."""
    coefficients = {"gpu_whole": 0.0, "gpu_shard": 0.0, "cpu_whole": 0.0, "cpu_shard": 0.0}
    for _name, nbytes, kind in _categories(convention, precision):
        where = "cpu" if kind in OFFLOADED_KINDS[offload] else "gpu"
        how = "shard" if zero >= PARTITIONED_FROM_STAGE[kind] else "whole"
        coefficients[f"{where}_{how}"] += nbytes
    return coefficients


def model_state_bytes(
    params: float,
    gpus: int,
    zero: int = 0,
    precision: str = "mixed",
    offload: str = "none",
    tp: int = 1,
    pp: int = 1,
    convention: str = "zero-paper",
    *,
    gpus_per_node: int | None = None,
    largest_layer_params: int | None = None,
    zero_init: bool = True,
) -> MemoryEstimate:
    """Parameters, gradients and Adam states per GPU (ZeRO paper §3.1, Fig. 1; see module doc).

    ``convention`` (:mod:`~edu_parallel.memory.conventions`): ``"zero-paper"``, ``"megatron"``
    (zero 0 or 1) or ``"deepspeed"`` (zero 2 or 3, tp = pp = 1); only DeepSpeed's estimators use
    ``gpus_per_node`` (None: ``min(gpus, 8)``), ``largest_layer_params`` (ZeRO-3) and
    ``zero_init`` (ZeRO-3).

    >>> round(model_state_bytes(7.5e9, 64, zero=1).bytes_per_gpu / 1e9, 2)
    31.41
    >>> model_state_bytes(7.5e9, 64, zero=2, convention="deepspeed").bytes_per_gpu
    17109375000
    """
    params = check_positive("params", params)
    gpus, tp, pp = _check_parallel(gpus, tp, pp)
    zero, precision, offload = _check_stage_and_offload(zero, precision, offload)
    convention = check_convention(convention, zero, precision, offload, tp, pp)
    if convention == "deepspeed":
        return deepspeed_estimate(
            params, gpus, zero, offload, gpus_per_node, largest_layer_params, zero_init
        )
    model_parallel = tp * pp
    Psi = params / model_parallel  # Ψ per GPU: TP and PP split every weight matrix / layer
    N = gpus // model_parallel  # ZeRO's N: the data-parallel degree
    breakdown: dict[str, float] = {}
    cpu_breakdown: dict[str, float] = {}
    for name, nbytes, kind in _categories(convention, precision):
        # ZeRO §5.1-5.3: a partitioned state keeps 1/N of its bytes on each data-parallel rank
        partitioned = zero >= PARTITIONED_FROM_STAGE[kind]
        category_bytes = nbytes * Psi / (N if partitioned else 1)
        on_cpu = kind in OFFLOADED_KINDS[offload]  # ZeRO-Offload §4 / ZeRO-Infinity §5
        breakdown[name] = 0.0 if on_cpu else category_bytes
        cpu_breakdown[name] = category_bytes if on_cpu else 0.0
    gpu_total = sum(breakdown.values())
    cpu_total = sum(cpu_breakdown.values())

    c = _state_coefficients(zero, precision, offload, convention)

    def side(whole: float, shard: float, total: float) -> str:
        terms = [f"{_coefficient(whole)}Ψ"] if whole else []
        terms += [f"{_coefficient(shard)}Ψ/N"] if shard else []
        return (" + ".join(terms) or "0") + f" = {total / GB:.4g} GB"

    stage = _("DP (no ZeRO)") if zero == 0 else f"ZeRO-{zero}"
    K = sum(nbytes for _n, nbytes, kind in _categories(convention, precision) if kind == "optim")
    if convention == "megatron":
        optimizer = _("distributed optimizer") if zero else _("non-distributed optimizer")
        formula = _(
            "Megatron {optimizer}, {precision}: GPU {gpu} (d = N = {n}); Ψ = params/(tp·pp) ="
            " {params}/{mp} = {psi}  [{source}]"
        ).format(
            optimizer=optimizer,
            precision=precision,
            gpu=side(c["gpu_whole"], c["gpu_shard"], gpu_total),
            n=N,
            params=f"{params:.4g}",
            mp=model_parallel,
            psi=f"{Psi:.4g}",
            source=MEGATRON_SOURCE,
        )
    else:
        formula = ""
    cpu = side(c["cpu_whole"], c["cpu_shard"], cpu_total)
    formula = formula or _(
        "{stage}, {precision} Adam (K={k}), offload={offload}: GPU {gpu}{cpu}; Ψ = params/(tp·pp)"
        " = {params}/{mp} = {psi}, N = gpus/(tp·pp) = {n}  [{sources}]"
    ).format(
        stage=stage,
        precision=precision,
        k=K,
        offload=offload,
        gpu=side(c["gpu_whole"], c["gpu_shard"], gpu_total),
        cpu=f"; CPU {cpu}" if offload != "none" else "",
        params=f"{params:.4g}",
        mp=model_parallel,
        psi=f"{Psi:.4g}",
        n=N,
        sources="Rajbhandari et al. 2019, §3.1, Fig. 1"
        + ("; Ren et al. 2021, ZeRO-Offload" if offload != "none" else "")
        + ("; Rajbhandari et al. 2021, ZeRO-Infinity" if offload == "all" else ""),
    )
    return MemoryEstimate(
        params=params,
        gpus=gpus,
        zero=zero,
        precision=precision,
        offload=offload,
        tp=tp,
        pp=pp,
        dp=N,
        params_per_gpu=Psi,
        bytes_per_gpu=gpu_total,
        cpu_bytes_per_gpu=cpu_total,
        breakdown=breakdown,
        cpu_breakdown=cpu_breakdown,
        formula=formula,
        convention=convention,
    )


def largest_model_that_fits(
    gpu_bytes: float,
    gpus: int,
    zero: int = 0,
    precision: str = "mixed",
    offload: str = "none",
    tp: int = 1,
    pp: int = 1,
    convention: str = "zero-paper",
) -> int:
    """The most parameters whose model states fit in ``gpu_bytes`` per GPU (activations aside).

    Inverts :func:`model_state_bytes`, which is linear in Ψ: bytes = Ψ·(whole + shard/N)/(tp·pp)
    (the ZeRO paper's and Megatron's conventions; DeepSpeed's needs the largest layer too).
    """
    gpu_bytes = check_positive("gpu_bytes", gpu_bytes)
    gpus, tp, pp = _check_parallel(gpus, tp, pp)
    zero, precision, offload = _check_stage_and_offload(zero, precision, offload)
    convention = check_convention(convention, zero, precision, offload, tp, pp)
    if convention == "deepspeed":
        raise bad_value("convention", convention, "'zero-paper' or 'megatron' (linear in Ψ)")
    N = gpus // (tp * pp)
    c = _state_coefficients(zero, precision, offload, convention)
    bytes_per_param = (c["gpu_whole"] + c["gpu_shard"] / N) / (tp * pp)  # > 0: grads stay on GPU
    params = math.floor(gpu_bytes / bytes_per_param)

    def fits(n: int) -> bool:
        est = model_state_bytes(n, gpus, zero, precision, offload, tp, pp, convention)
        return est.bytes_per_gpu <= gpu_bytes

    # float rounding can put the floor one off either way; settle it with the forward formula
    while params > 0 and not fits(params):
        params -= 1
    while fits(params + 1):
        params += 1
    return params
