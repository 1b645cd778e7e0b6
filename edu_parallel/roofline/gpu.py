"""The same roofline for a GPU cluster: H100s on NVLink 4 in a node, one NDR 400 NIC per GPU across.

Every figure here is **modelled**: the strategies' bytes and messages come from the formulas the
strategy map's traces check (:mod:`edu_parallel.strategy_map.formulas`,
:mod:`edu_parallel.strategy_map.crossover`), timed with published rates where they exist:

* ``F``: 400 TFLOP/s per H100, what Llama 3 405B trained at (Dubey et al. 2024, arXiv
  2407.21783, Table 4: BF16 MFU 41 % of the datasheet's 989 TFLOP/s,
  :data:`edu_parallel.planner.hardware.GPUS`);
* in a node: NCCL's measured ring all-reduce bus bandwidth on 8 x H100, about 370 GB/s
  (nccl-tests, :data:`edu_parallel.models.published.PUBLISHED_BUSBW`), not NVLink 4's 450 GB/s
  line rate;
* across nodes: one ConnectX-7 NDR port per GPU, 50 GB/s, the datasheet's line rate (no published
  busbw is kept in the package for it: an upper bound);
* ``α``: the presets' per-message latencies (:data:`edu_parallel.models.links.LINKS`).

The layout: ``N = 8`` GPUs train ``L = 8`` transformer layers of width ``h`` on ``B`` tokens per
step, so every strategy computes ``72 h² B`` FLOPs per GPU (``6 · 12h² · B`` per layer over 8
GPUs) and only its communication differs (:func:`gpu_rows`): DP all-reduces ``12 h² L``
gradients once per step; TP (Megatron) all-reduces a ``(B, h)`` activation 4 times per layer;
ZeRO-3 all-gathers the parameters twice and reduce-scatters the gradients; PP sends a stage's
activations forward and their gradients back; EP sends each token to ``k = 2`` experts and back,
twice (forward, backward). Narayanan et al. 2021 (arXiv 2104.04473, takeaway #1) put TP inside a
node for exactly the reason :func:`gpu_rows` shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import check_int
from ..core.i18n import N_
from ..models.links import LINKS, Link
from ..models.published import PUBLISHED_BUSBW
from ..planner.hardware import GPUS
from ..planner.published import PUBLISHED
from .formulas import StepTime, ring_factor, step_time

GPU_N, GPU_LAYERS, GPU_ITEMSIZE, EP_TOP_K = 8, 8, 2, 2
LLAMA3 = next(run for run in PUBLISHED if run.name.startswith("Llama 3"))
H100_FLOPS = LLAMA3.tflops_per_gpu * 1e12  # achieved, 41 % of the datasheet's peak
H100_PEAK = GPUS["h100"].peak_flops
NVLINK_BUSBW = PUBLISHED_BUSBW["h100x8-ring"].busbw_gbps * 1e9  # measured, nccl-tests
IN_NODE = Link(
    "nvlink4-h100 (nccl-tests busbw)",
    LINKS["nvlink4-h100"].alpha_s,
    NVLINK_BUSBW,
    PUBLISHED_BUSBW["h100x8-ring"].source,
    "intra-node",
)
ACROSS = LINKS["ib-ndr-400"]  # one NIC per GPU: 50 GB/s each way, datasheet
PLACES = {"in a node": IN_NODE, "across nodes": ACROSS}
PLACE_NAMES = {"in a node": N_("in a node"), "across nodes": N_("across nodes")}
GPU_STRATEGIES = ("dp", "zero3", "tp", "pp", "ep")


@dataclass(frozen=True)
class GpuRow:
    """One strategy placed in a node or across nodes, modelled."""

    strategy: str
    place: str
    flops: float  # per GPU per step
    sent_bytes: float
    messages: int
    link: Link
    time: StepTime

    @property
    def intensity(self) -> float:
        """FLOPs per byte sent."""
        return self.flops / self.sent_bytes if self.sent_bytes else float("inf")

    @property
    def critical(self) -> float:
        """The link's ``F / B``."""
        return H100_FLOPS / self.link.bandwidth_Bps


def traffic(strategy: str, hidden: int, tokens: int) -> tuple[float, int]:
    """(bytes, messages) one GPU sends per step under ``strategy`` (see the module doc)."""
    n, layers, e = GPU_N, GPU_LAYERS, GPU_ITEMSIZE
    h, b = check_int("hidden", hidden, 1), check_int("tokens", tokens, 1)
    psi = 12 * h * h * layers
    one = (n - 1) / n
    if strategy == "dp":
        return ring_factor(n) * psi * e, 2 * (n - 1)
    if strategy == "zero3":
        return 3 * one * psi * e, 3 * (n - 1)
    if strategy == "tp":
        return 4 * layers * ring_factor(n) * b * h * e, 4 * layers * 2 * (n - 1)
    if strategy == "pp":
        return 2 * b * h * e, 2 * n  # a middle stage; n microbatches each way
    # EP: tokens B/N per GPU, each to k experts and back, in forward and in backward
    return 4 * layers * one * b / n * EP_TOP_K * h * e, 4 * layers * (n - 1)


def gpu_rows(hidden: int = 8192, tokens: int = 65536) -> list[GpuRow]:
    """Every strategy in a node and across nodes, ``tokens`` per group of 8 GPUs per step."""
    flops = 6 * 12 * hidden * hidden * GPU_LAYERS * tokens / GPU_N
    rows = []
    for s in GPU_STRATEGIES:
        sent, messages = traffic(s, hidden, tokens)
        for place, link in PLACES.items():
            t = step_time(flops, sent, messages, H100_FLOPS, link.alpha_s, link.bandwidth_Bps)
            rows.append(GpuRow(s, place, flops, sent, messages, link, t))
    return rows


def dp_tokens(hidden: int = 8192, place: str = "across nodes", share: float = 1.0) -> float:
    """Tokens per group of 8 GPUs per step at which DP's all-reduce takes ``share`` of the
    compute: 1 is the crossover, 2/3 the point from which backward hides it completely. DP's
    communication does not grow with the tokens; its compute does."""
    row = next(r for r in gpu_rows(hidden, 1) if r.strategy == "dp" and r.place == place)
    return row.time.comm_s / (share * row.time.compute_s)
