"""Bytes become time: the roofline of a training step, pure Python (no torch).

A step computes ``W`` FLOPs and sends ``D`` bytes in ``m`` messages. With a chip that does ``F``
FLOP/s and a link of latency ``α`` and bandwidth ``B`` (Hockney's α-β model):

* ``t_compute = W / F``; ``t_comm = m α + D / B`` (:func:`step_time`);
* without overlap the step takes ``t_compute + t_comm``, with perfect overlap
  ``max(t_compute, t_comm)``; it is *communication-bound* when ``t_comm > t_compute``;
* in the bandwidth term alone, that is when the step's **arithmetic intensity** ``W / D`` (FLOPs
  per byte sent) is below the hardware's ``F / B`` (:func:`critical_intensity`): the JAX Scaling
  Book's roofline (Austin et al. 2025, "How to Scale Your Model", chapter "All About Rooflines",
  https://jax-ml.github.io/scaling-book/roofline/).

Data parallelism on ``N`` ranks, a model of ``Ψ`` parameters, ``T`` tokens per rank per step and
``e`` bytes per gradient element: ``W ≈ 6 Ψ T`` (forward ``2ΨT``, backward ``4ΨT``; Kaplan et al.
2020, arXiv 2001.08361 §2.1), ``D = 2(N-1)/N Ψ e`` (one ring all-reduce), so
``W / D = 3 N T / ((N-1) e)``: DP's intensity is its **tokens per rank**, the model's size cancels.
Equal to ``F / B`` at ``T* = (F / B) (N-1) e / (3N)``, plus ``α``'s share
(:func:`dp_crossover_tokens`). Tensor parallelism (Megatron, Shoeybi et al. 2019, arXiv
1909.08053) sends ``2(N-1)/N T h e`` per all-reduce, two per block, while a block computes
``6 · 8h²/N · T``: ``W / D = 12 h / ((N-1) e)``, the **width**, whatever the batch, which is why
it stays inside a node (Narayanan et al. 2021, arXiv
2104.04473, takeaway #1: tensor parallelism up to the GPUs of a server).

:func:`crossover` finds where two measured or modelled curves cross on a sweep.
``tests/test_roofline.py`` checks the formulas' crossover against the ranks' measured one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.errors import bad_value, check_int, check_non_negative, check_positive
from ..core.i18n import _
from ..strategy_map.crossover import layer_param_count, tp_allreduces


@dataclass(frozen=True)
class StepTime:
    """One step's two roofline terms in seconds, and what bounds it."""

    compute_s: float
    comm_s: float

    @property
    def serial_s(self) -> float:
        """No overlap: compute, then communication."""
        return self.compute_s + self.comm_s

    @property
    def overlapped_s(self) -> float:
        """Perfect overlap: the longer of the two."""
        return max(self.compute_s, self.comm_s)

    @property
    def comm_share(self) -> float:
        """Communication's share of the serial step."""
        return self.comm_s / self.serial_s if self.serial_s else 0.0

    @property
    def bound(self) -> str:
        """``"communication"`` or ``"compute"``."""
        return "communication" if self.comm_s > self.compute_s else "compute"


def step_time(
    flops: float,
    sent_bytes: float,
    messages: float,
    flops_per_s: float,
    alpha_s: float,
    bandwidth_Bps: float,
) -> StepTime:
    """``W / F`` and ``m α + D / B``: the roofline of one step (see the module doc)."""
    w = check_non_negative("flops", flops)
    d = check_non_negative("sent_bytes", sent_bytes)
    m = check_non_negative("messages", messages)
    f = check_positive("flops_per_s", flops_per_s)
    a = check_non_negative("alpha_s", alpha_s)
    b = check_positive("bandwidth_Bps", bandwidth_Bps)
    return StepTime(w / f, m * a + d / b)


def critical_intensity(flops_per_s: float, bandwidth_Bps: float) -> float:
    """``F / B``: FLOPs per byte sent below which the bandwidth term exceeds the compute."""
    return check_positive("flops_per_s", flops_per_s) / check_positive(
        "bandwidth_Bps", bandwidth_Bps
    )


def ring_factor(world_size: int) -> float:
    """``2(N-1)/N``: what a ring all-reduce sends per byte of its buffer, per rank."""
    n = check_int("world_size", world_size, 1)
    return 2 * (n - 1) / n


def dp_step_flops(hidden: int, layers: int, tokens: int, input_grad: bool = False) -> float:
    """Matmul FLOPs of one rank's step of the strategy map's model on ``tokens`` tokens.

    Per block the two ``nn.Linear`` (h → 4h → h) cost ``2 · 4h² T`` each forward and twice that
    backward (dX and dW): ``6 · 8h² T``. Without ``input_grad`` (the input is data) autograd skips
    the first block's dX, ``2 · 4h² T`` fewer. Biases, GeLU and the residual are left out (under
    1 % at h = 256)."""
    h = check_int("hidden", hidden, 1)
    t = check_int("tokens", tokens, 0)
    per_block = 6 * 8 * h * h * t
    return check_int("layers", layers, 1) * per_block - (0 if input_grad else 2 * 4 * h * h * t)


def allreduce_time(world_size: int, nbytes: float, alpha_s: float, bandwidth_Bps: float) -> float:
    """Ring all-reduce: ``2(N-1) α + 2(N-1)/N S / B`` (Thakur, Rabenseifner & Gropp 2005)."""
    n = check_int("world_size", world_size, 1)
    messages = 2 * (n - 1)
    return (
        messages * alpha_s + ring_factor(n) * check_non_negative("nbytes", nbytes) / bandwidth_Bps
    )


def dp_crossover_tokens(
    params: int,
    world_size: int,
    flops_per_s: float,
    alpha_s: float,
    bandwidth_Bps: float,
    itemsize: int = 4,
) -> float:
    """Tokens per rank at which DP's ``6ΨT / F`` equals its all-reduce time: ``T* = F (2(N-1) α
    + 2(N-1)/N Ψ e / B) / (6Ψ)``. Without ``α`` it is ``(F/B) (N-1) e / (3N)``."""
    psi = check_int("params", params, 1)
    comm = allreduce_time(world_size, psi * itemsize, alpha_s, bandwidth_Bps)
    return check_positive("flops_per_s", flops_per_s) * comm / (6 * psi)


def crossover(xs: Sequence[float], above: Sequence[float], below: Sequence[float]) -> float | None:
    """The first ``x`` where ``above`` stops exceeding ``below`` on a sweep, interpolated in
    log-log between the two points around it; None if it never does (or starts below)."""
    if not (len(xs) == len(above) == len(below)) or len(xs) < 2:
        raise bad_value("xs", list(xs), _("a sweep of at least two points, one value of each"))
    for x0, x1, a0, a1, b0, b1 in zip(xs, xs[1:], above, above[1:], below, below[1:], strict=False):
        if min(x0, x1, a0, a1, b0, b1) <= 0:
            raise bad_value("xs", list(xs), _("positive sizes and times"))
        r0, r1 = math.log(a0 / b0), math.log(a1 / b1)
        if r0 >= 0 > r1:
            f = r0 / (r0 - r1)
            return math.exp(math.log(x0) + f * (math.log(x1) - math.log(x0)))
    return None


def tp_dp_time_crossover(
    hidden: int,
    world_size: int,
    alpha_s: float,
    bandwidth_Bps: float,
    kind: str = "mlp",
    layers: int = 1,
    accumulation: int = 1,
    itemsize: int = 4,
) -> float:
    """Tokens per microbatch at which TP's all-reduces take as long as DP's one, per step.

    DP: ``2(N-1) α + 2(N-1)/N L P e / B``; TP: ``a L k (2(N-1) α + 2(N-1)/N T h e / B)``
    (:mod:`edu_parallel.strategy_map.crossover`'s counts). Without ``α`` this is the bytes'
    ``T* = P / (a k h)``; each of TP's ``a L k`` messages pays ``α`` where DP pays it once, so in
    time TP loses earlier. Negative when TP's latency alone exceeds DP's whole all-reduce."""
    n, h = check_int("world_size", world_size, 2), check_int("hidden", hidden, 1)
    calls = tp_allreduces(kind, layers, accumulation)
    dp = allreduce_time(n, layers * layer_param_count(kind, h) * itemsize, alpha_s, bandwidth_Bps)
    per_call = dp / calls - 2 * (n - 1) * alpha_s
    return per_call * bandwidth_Bps / (ring_factor(n) * h * itemsize)
