"""Published 3D-parallel training layouts, with citations, and how the planner ranks each.

The numbers of :data:`PUBLISHED` are facts from the papers (cited in ``source``); what the planner
assumes differently is in each entry's ``differences``. :func:`compare_published` plans the same
model, cluster, batch and sequence, and reports where the published degrees (dp, tp, pp) rank
among the planner's feasible configurations and the planner's predicted throughput for them.

* Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM", arXiv 2104.04473, Table 1 (weak scaling on Selene: DGX A100 80 GB nodes, 8 GPUs
  on NVLink/NVSwitch, 8 HDR 200 Gb/s InfiniBand HCAs per node; GPT models, vocabulary 51,200,
  sequence 2048). Their teraFLOP/s count the recomputation forward (§5.1,
  ``96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))`` FLOPs per iteration, with activation
  recomputation), so we predict the same quantity from the planner's step time.
* Dubey et al. 2024, "The Llama 3 Herd of Models", arXiv 2407.21783, Table 4: Llama 3 405B on
  16,384 H100 GPUs, TP 8, CP 1, PP 16, DP 128, sequence 8,192, 16 sequences per DP group (16M
  tokens per batch), 400 TFLOPs/GPU, BF16 MFU 41% (38-43% over the three stages of Table 4).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..memory.presets import ModelShape, get_preset
from ..models.topology import Link
from .hardware import ClusterSpec
from .planning import PlannerResult, plan

# Selene's inter-node link (Narayanan et al. 2021 §5: 8 Mellanox HDR 200 Gb/s HCAs per node);
# latency as assumed for the other InfiniBand presets.
IB_HDR_200 = Link("ib-hdr-200", 5e-6, 200e9 / 8, "Mellanox HDR InfiniBand 200 Gb/s per port")
MEGATRON_SOURCE = (
    "Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training on GPU Clusters Using"
    " Megatron-LM', arXiv 2104.04473, Table 1"
)
MEGATRON_DIFFERENCES = (
    "Megatron-LM uses full activation recomputation and counts its FLOPs in the teraFLOP/s (we"
    " predict the same quantity: the paper's FLOP formula over the planner's step time);"
    " its weak-scaling runs pick the micro-batch size and the (interleaved) schedule per row,"
    " while the planner searches them; our compute efficiency is one constant for every"
    " configuration, where real GEMM efficiency depends on the matrix shapes; the scatter/gather"
    " optimisation of PP messages (§4.1) and DP/compute overlap differ from our rules; the"
    " vocabulary is padded to 51,200 as in the paper."
)


def _megatron_gpt(name: str, layers: int, hidden: int, heads: int, nominal: float) -> ModelShape:
    return ModelShape(
        name,
        "gpt2",
        layers=layers,
        hidden=hidden,
        heads=heads,
        vocab=51200,
        seq=2048,
        nominal_params=nominal,
        source=MEGATRON_SOURCE,
    )


def _llama3_405b_slots() -> ModelShape:
    """Llama 3 405B as its pipeline holds it: 128 slots of 16 stages (126 layers, the first
    stage's first slot the embedding, the last stage's last slot the output layer; Dubey et al.
    2024 §3.3.2), each slot counted as one layer and no separate embedding (+0.5% parameters)."""
    base = get_preset("llama3-405b")
    return replace(base, name="llama3-405b (128 pipeline slots)", layers=128, vocab=0)


@dataclass(frozen=True)
class PublishedRun:
    """One published layout: model, cluster, batch, degrees and the reported throughput."""

    name: str
    model: ModelShape
    cluster: ClusterSpec
    global_batch: int  # sequences
    seq: int
    dp: int
    tp: int
    pp: int
    zero: int  # the nearest ZeRO stage to what the paper describes
    recompute: str  # the nearest recomputation setting
    tflops_per_gpu: float  # as the paper reports it
    mfu: float | None  # BF16 MFU as reported (None: the paper reports a % of peak with recompute)
    percent_of_peak: float | None
    source: str
    differences: str

    def published_flops_per_step(self) -> float:
        """FLOPs of one step as the paper counts them."""
        s, m = self.seq, self.model
        if self.mfu is None:  # Megatron-LM §5.1, with recomputation
            B, L, h, V = self.global_batch, m.layers, m.hidden, m.vocab
            return 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
        return 6.0 * m.params * self.global_batch * s


PUBLISHED: tuple[PublishedRun, ...] = (
    PublishedRun(
        "Megatron-LM 145.6B, 1536 A100",
        _megatron_gpt("megatron-145.6b", 80, 12288, 96, 145.6e9),
        ClusterSpec(192, 8, "a100-80g", "nvlink3-a100", IB_HDR_200),
        global_batch=2304,
        seq=2048,
        dp=24,
        tp=8,
        pp=8,
        zero=0,
        recompute="full",
        tflops_per_gpu=148,
        mfu=None,
        percent_of_peak=0.47,
        source=MEGATRON_SOURCE + ": 145.6B, 96 heads, hidden 12288, 80 layers, t=8, p=8, 1536"
        " GPUs, batch 2304, 148 teraFLOP/s per GPU, 47% of peak",
        differences=MEGATRON_DIFFERENCES,
    ),
    PublishedRun(
        "Megatron-LM 1T, 3072 A100",
        _megatron_gpt("megatron-1t", 128, 25600, 160, 1008.0e9),
        ClusterSpec(384, 8, "a100-80g", "nvlink3-a100", IB_HDR_200),
        global_batch=3072,
        seq=2048,
        dp=6,
        tp=8,
        pp=64,
        zero=0,
        recompute="full",
        tflops_per_gpu=163,
        mfu=None,
        percent_of_peak=0.52,
        source=MEGATRON_SOURCE + ": 1008.0B, 160 heads, hidden 25600, 128 layers, t=8, p=64,"
        " 3072 GPUs, batch 3072, 163 teraFLOP/s per GPU, 52% of peak, 502 petaFLOP/s aggregate",
        differences=MEGATRON_DIFFERENCES,
    ),
    PublishedRun(
        "Llama 3 405B, 16384 H100",
        _llama3_405b_slots(),
        ClusterSpec(2048, 8, "h100", "nvlink4-h100", "ib-ndr-400"),
        global_batch=2048,
        seq=8192,
        dp=128,
        tp=8,
        pp=16,
        zero=2,
        recompute="selective",
        tflops_per_gpu=400,
        mfu=0.41,
        percent_of_peak=None,
        source=(
            "Dubey et al. 2024, 'The Llama 3 Herd of Models', arXiv 2407.21783, Table 4: 16,384"
            " GPUs, TP 8, CP 1, PP 16, DP 128, seq. len. 8,192, batch size/DP 16, 16M tokens per"
            " batch, 400 TFLOPs/GPU, BF16 MFU 41%; §3.3.2: FSDP sharding optimizer states and"
            " gradients (ZeRO-2's memory), no activation checkpointing at 8K, an interleaved"
            " schedule with a tunable number of contiguous microbatches"
        ),
        differences=(
            "CP is 1 in this row, and the planner has no context parallelism; the pipeline is"
            " modelled as 128 equal slots (126 layers + the embedding and output"
            " slots, each counted as a layer: +0.5% parameters) so that PP 16 divides it; no"
            " activation checkpointing with FlashAttention is modelled as 'selective' (the"
            " attention core is not stored); the activation bytes are Llama's per-layer terms"
            " (SwiGLU, grouped-query attention, RMSNorm, no dropout; edu_parallel.memory"
            ".activations) and count p microbatches in flight on the first stage, where Llama 3"
            " tunes its schedule"
            " and frees pipeline tensors early; the RoCE fabric (400 Gb/s per GPU, 1:7"
            " oversubscribed above a pod) is modelled as a non-blocking IB NDR 400 network; the"
            " efficiency is one constant; the MFU of the paper counts attention FLOPs, ours 6ΨT"
            " only."
        ),
    ),
)


def compare_published(
    run: PublishedRun, efficiency: float = 0.5, planned: PlannerResult | None = None
) -> dict[str, Any]:
    """The planner against one published layout: the rank (1 = best) of the best feasible
    configuration with the published dp, tp, pp, and its predicted throughput next to the paper's.
    """
    result = planned or plan(
        run.model, run.cluster, run.global_batch, run.seq, efficiency=efficiency
    )
    degrees = {"dp": run.dp, "tp": run.tp, "pp": run.pp}
    rank = result.rank_of(**degrees)
    match = result.feasible[rank - 1] if rank else None
    exact = result.rank_of(**degrees, zero=run.zero, recompute=run.recompute)
    as_published = result.feasible[exact - 1] if exact else None
    flops = run.published_flops_per_step()
    world = run.cluster.world_size
    peak = run.cluster.gpu.peak_flops
    predicted_tflops = None if match is None else flops / (match.step_time_s * world) / 1e12
    settings_tflops = (
        None if as_published is None else flops / (as_published.step_time_s * world) / 1e12
    )
    return {
        "name": run.name,
        "model": run.model.name,
        "gpus": world,
        "dp": run.dp,
        "tp": run.tp,
        "pp": run.pp,
        "feasible": match is not None,
        "rank": rank,
        "feasible_count": len(result.feasible),
        "rank_with_published_zero_and_recompute": exact,
        "planner_choice": None if match is None else match.to_json_dict(),
        "best": result.best.to_json_dict(),
        "published_tflops_per_gpu": run.tflops_per_gpu,
        "predicted_tflops_per_gpu": predicted_tflops,
        "predicted_tflops_per_gpu_published_settings": settings_tflops,
        "published_fraction_of_peak": run.mfu if run.mfu is not None else run.percent_of_peak,
        "predicted_fraction_of_peak": None if match is None else predicted_tflops * 1e12 / peak,
        "predicted_mfu": None if match is None else match.mfu,
        "efficiency": efficiency,
        "source": run.source,
        "differences": run.differences,
    }


def compare_all(efficiency: float = 0.5) -> list[dict[str, Any]]:
    """:func:`compare_published` for every entry of :data:`PUBLISHED`."""
    return [compare_published(run, efficiency) for run in PUBLISHED]
