"""Data-parallel / ZeRO communication per training step (ZeRO paper §7.2, exact ring volumes).

Part of the memory calculator (:mod:`edu_parallel.memory`). Pure
arithmetic, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import bad_value, check_choice, check_int, check_positive
from ..core.i18n import _
from .conventions import CONVENTIONS
from .model_states import COMM_BYTES_PER_ELEMENT, GB, PRECISIONS, _check_parallel

# Megatron-LM megatron/training/arguments.py (validate_args): with --bf16 and the default fp32
# main grads, "bfloat16 requires gradient accumulation and all-reduce to be done in fp32", so
# accumulate_allreduce_grads_in_fp32 is set and the gradients travel in 4 bytes.
MEGATRON_GRAD_BYTES = 4


@dataclass(frozen=True)
class CommEstimate:
    """Bytes each GPU sends per training step for data parallelism / ZeRO."""

    bytes_per_gpu: float
    breakdown: dict[str, float]
    formula: str

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "bytes_per_gpu": self.bytes_per_gpu,
            "breakdown": dict(self.breakdown),
            "formula": self.formula,
        }


def comm_estimate(
    params: float,
    gpus: int,
    zero: int = 0,
    precision: str = "mixed",
    tp: int = 1,
    pp: int = 1,
    convention: str = "zero-paper",
) -> CommEstimate:
    """Data-parallel bytes sent per GPU per step (ZeRO paper §7.2), with exact ring volumes.

    A ring reduce-scatter or all-gather of ``G`` bytes sends ``(N-1)/N·G`` bytes from each rank;
    an all-reduce is one of each, ``2·(N-1)/N·G`` (Patarasuk & Yuan 2009). With ``G = 2Ψ`` bytes
    of 16-bit gradients:

    * DP: all-reduce of the gradients, 2·(N-1)/N·2Ψ (the paper's "2Ψ" elements, §7.2.1)
    * ZeRO-1 and ZeRO-2: reduce-scatter the gradients + all-gather the updated parameters, the
      same 2·(N-1)/N·2Ψ (§7.2.2)
    * ZeRO-3: reduce-scatter + all-gather the parameters in forward *and* in backward,
      3·(N-1)/N·2Ψ = 1.5x DP (§7.2.3)

    ``convention="megatron"`` with mixed precision sends the gradients as Megatron-LM does, in
    fp32 (:data:`MEGATRON_GRAD_BYTES`): DP all-reduces 2·(N-1)/N·4Ψ, and its distributed optimizer
    (ZeRO-1) reduce-scatters (N-1)/N·4Ψ and all-gathers the 16-bit parameters, (N-1)/N·2Ψ.
    ``"deepspeed"`` keeps the paper's 16-bit gradients (DeepSpeed reduces in the model's dtype
    unless ``communication_data_type`` says otherwise).
    """
    params = check_positive("params", params)
    gpus, tp, pp = _check_parallel(gpus, tp, pp)
    zero = check_int("zero", zero, 0, 3)
    precision = check_choice("precision", precision, PRECISIONS)
    convention = check_choice("convention", convention, CONVENTIONS)
    if convention == "megatron" and zero > 1:
        raise bad_value(
            "zero", zero, "0 or 1 with convention='megatron' (its distributed optimizer: 1)"
        )
    Psi = params / (tp * pp)
    N = gpus // (tp * pp)
    e = COMM_BYTES_PER_ELEMENT[precision]
    grad_bytes = e * Psi  # G: one copy of the gradients (or parameters) in 16-bit
    ring = (N - 1) / N  # fraction of G each rank sends in a ring reduce-scatter or all-gather
    one_pass = ring * grad_bytes
    g = e  # bytes per gradient element on the wire
    if convention == "megatron" and precision == "mixed":
        g = MEGATRON_GRAD_BYTES
    grads_pass = ring * g * Psi
    if zero == 0:
        breakdown = {"all_reduce_grads": 2 * grads_pass}
        text = (
            _("2·(N-1)/N·eΨ (all-reduce)") if g == e else _("2·(N-1)/N·4Ψ (all-reduce, fp32 grads)")
        )
    elif zero in (1, 2):
        breakdown = {"reduce_scatter_grads": grads_pass, "all_gather_params": one_pass}
        text = (
            _("(N-1)/N·eΨ (reduce-scatter) + (N-1)/N·eΨ (all-gather) = 2·(N-1)/N·eΨ")
            if g == e
            else _("(N-1)/N·4Ψ (reduce-scatter, fp32 grads) + (N-1)/N·eΨ (all-gather)")
        )
    else:
        breakdown = {
            "all_gather_params_forward": one_pass,
            "all_gather_params_backward": one_pass,
            "reduce_scatter_grads": one_pass,
        }
        text = _("3·(N-1)/N·eΨ (all-gather fwd + all-gather bwd + reduce-scatter) = 1.5x DP")
    total = sum(breakdown.values())
    stage = "DP" if zero == 0 else f"ZeRO-{zero}"
    source = "Rajbhandari et al. 2019, §7.2"
    if g != e:
        source += _("; Megatron-LM arguments.py: bf16 all-reduces gradients in fp32")
    formula = _(
        "{stage}: {text}; e={e} B, Ψ={psi}, N={n}: {gb} GB per GPU per step [{source}]"
    ).format(
        stage=stage, text=text, e=e, psi=f"{Psi:.4g}", n=N, gb=f"{total / GB:.4g}", source=source
    )
    return CommEstimate(bytes_per_gpu=total, breakdown=breakdown, formula=formula)


def comm_bytes_per_step(
    params: float,
    gpus: int,
    zero: int = 0,
    precision: str = "mixed",
    tp: int = 1,
    pp: int = 1,
    convention: str = "zero-paper",
) -> float:
    """Bytes each GPU sends per step; the number from :func:`comm_estimate` (see there)."""
    return comm_estimate(params, gpus, zero, precision, tp, pp, convention).bytes_per_gpu


def fsdp_collectives_per_step(units: int, reshard_after_forward: bool = True) -> int:
    """Collectives FSDP issues per training step for ``units`` units that hold parameters.

    Per unit (PyTorch FSDP2 ``fully_shard`` docs; the unit design of FSDP1, Zhao et al. 2023,
    arXiv 2304.11277 §3): an all-gather before its forward, another before its backward if it
    was resharded after forward, and a reduce-scatter of its gradients: ``3 units`` or
    ``2 units``. The bytes do not depend on the cut (each parameter travels the same way in any
    unit); the count, and so the latency term ``count·α``, does, and so does the peak of gathered
    parameters (one unit, plus a prefetched one).
    """
    units = check_int("units", units, 1)
    if not isinstance(reshard_after_forward, bool):
        raise bad_value("reshard_after_forward", reshard_after_forward, "True or False")
    return (3 if reshard_after_forward else 2) * units
