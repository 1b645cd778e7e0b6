"""The trace's vocabulary: event kinds, mark names, memory categories, and the ``meta`` schema.

A writer (a rank's job, a runner, a simulation) and a reader (a report, a renderer, a quiz) of a
trace agree on these names by importing them from here; nobody spells one twice.

``meta`` is a flat dict. :data:`META` lists every key a runner of this package writes, its JSON
type and who writes it; :func:`meta_problems` checks a dict against it, and
:class:`~edu_parallel.core.trace.Trace` runs that check when a trace is saved or loaded, so a
renderer reading ``meta["chunk_bounds"]`` knows it is a list of element offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# ----------------------------------------------------------------------------- events
KINDS = ("send", "recv", "collective", "compute", "memory", "mark")

# ``mark`` events: ``op`` is the mark's name, ``attrs`` its data
SPLITS_MARK = "all_to_all_splits"  # after every MoE all-to-all: send_bytes / recv_bytes per peer
# ``attrs["exchange"]`` of a splits mark: the MoE layer's all-to-alls, forward then backward
EXCHANGES = ("counts", "dispatch", "combine", "combine_grad", "dispatch_grad")
HOLDS_MARK = "holds"  # strategy map: one parameter tensor (or slice of one) a rank holds
# strategy map: the input a rank computes on: batch ``rows`` and sequence positions ``seq``
# ([lo, hi) each), in ``microbatches`` one after another; EP: ``routed_to``, the ranks whose
# experts each of its tokens visits in the first block
DATA_MARK = "data"
STEP_END_MARK = "step_end"  # a training job finished step ``attrs["step"]``
STEP_START_MARK = "step_start"  # a training job starts step ``attrs["step"]`` (ranks lined up)
BUCKET_READY_MARK = "bucket_ready"  # data parallel: every gradient of ``attrs["bucket"]`` is in
GRAD_READY_MARK = "grad_ready"  # data parallel: ``attrs["param"]``'s gradient is accumulated
# gradient compression: a bucket was exchanged; attrs step, bucket, residual_norm, fed_back
COMPRESS_MARK = "compress"
DROPPED_MARK = "dropped"  # lesson 14's backup server dropped a late gradient (attrs: worker, t)
MARKS = (
    SPLITS_MARK,
    HOLDS_MARK,
    DATA_MARK,
    STEP_END_MARK,
    STEP_START_MARK,
    BUCKET_READY_MARK,
    GRAD_READY_MARK,
    COMPRESS_MARK,
    DROPPED_MARK,
)
# ``phase`` of the gradient all-reduce of data parallelism (DDP's buckets, the strategy map)
GRAD_SYNC = "grad_sync"
# ``phase`` of a compressor's own compute: compressing a bucket and decompressing the result
COMPRESS_PHASE = "compress"

# ``memory`` events: ``attrs["category"]``. ZeRO §3.1's model states, in 16-bit/32-bit mixed
# precision with Adam, then the buffers that come and go around a collective.
PARAM16, GRAD16, MASTER32, ADAM_M, ADAM_V = "param16", "grad16", "master32", "adam_m", "adam_v"
MODEL_STATE = (PARAM16, GRAD16, MASTER32, ADAM_M, ADAM_V)
GATHERED_PARAMS = "gathered_params"  # ZeRO-3 / FSDP: a unit's parameters, gathered for a pass
COMM_BUFFER = "comm_buffer"  # a bucket or a shard on its way through a collective
ZERO_CATEGORIES = (*MODEL_STATE, GATHERED_PARAMS, COMM_BUFFER)
ACTIVATION = "activation"  # pipeline: one microbatch's stashed activations on a stage
PARAMS = "params"  # strategy map: parameter bytes a rank holds
ACTIVATIONS = "activations"  # strategy map: activation bytes a rank saved for backward
GRADS = "grads"  # 3D run: gradient bytes a rank holds
OPTIMIZER = "optimizer"  # 3D run: optimizer-state bytes (Adam's m and v) a rank holds
CATEGORIES = (*ZERO_CATEGORIES, ACTIVATION, PARAMS, ACTIVATIONS, GRADS, OPTIMIZER)


# ----------------------------------------------------------------------------- meta
@dataclass(frozen=True)
class MetaKey:
    """One ``meta`` key: the JSON types its value may have, who writes it, what it means."""

    types: tuple[type, ...]
    writers: str
    doc: str


_INT, _NUM, _STR, _LIST = (int,), (int, float), (str,), (list, tuple)

META: dict[str, MetaKey] = {
    # every run
    "world_size": MetaKey(_INT, "Cluster, TorchrunExecutor, every runner", "ranks of the run"),
    "concept": MetaKey(_STR, "every runner", "what ran: a plan's name, 'zero', 'moe', ..."),
    "source": MetaKey(
        _STR,
        "Cluster, TorchrunExecutor, simulate, retime",
        "'cluster', 'torchrun', 'simulation' or 'retime'",
    ),
    "backend": MetaKey(_STR, "Cluster, TorchrunExecutor", "'gloo' or 'nccl'"),
    "fn": MetaKey(_STR, "Cluster, TorchrunExecutor", "the job, as module.qualname"),
    # a plan on a buffer: all-reduce, collectives, hierarchical, simulation
    "algo": MetaKey(_STR, "run_allreduce", "the all-reduce algorithm's name"),
    "collective": MetaKey(_STR, "plan runners, simulate", "the collective the plan computes"),
    "plan": MetaKey(_STR, "plan runners, simulate", "the plan's text form (Plan.from_text)"),
    "nbytes": MetaKey(_INT, "plan runners, simulate", "bytes of each rank's buffer"),
    "dtype": MetaKey(_STR, "plan runners, simulate", "element type of the buffers"),
    "input": MetaKey(_STR, "plan runners, simulate", "the input pattern (core.inputs.PATTERNS)"),
    "chunk_bounds": MetaKey(
        _LIST,
        "plan runners, simulate",
        "element offsets of the plan's chunks, num_chunks + 1 of them",
    ),
    "chunk_bytes": MetaKey(_LIST, "plan runners, simulate", "bytes of each chunk"),
    "root": MetaKey(_INT, "run_collective", "root rank of a rooted collective"),
    "nodes": MetaKey(_INT, "run_hierarchical", "pretend nodes"),
    "gpus_per_node": MetaKey(_INT, "run_hierarchical", "ranks per pretend node"),
    # time
    "time_unit": MetaKey(_STR, "simulate, retime", "'step' (simulation) or 's' (retimed)"),
    "clock": MetaKey(_STR, "run_pipeline", "'measured': wall-clock times of shared cores"),
    "retimed_with": MetaKey(_STR, "retime", "the link whose alpha-beta model timed the events"),
    "retimed_from": MetaKey((str, type(None)), "retime", "the source of the retimed trace"),
    "cost_model": MetaKey((dict,), "retime", "the link, rates and topology of the retiming"),
    # pipeline
    "schedule": MetaKey(_STR, "run_pipeline, Timeline.to_trace", "the schedule's name"),
    "schedule_text": MetaKey(_STR, "run_pipeline", "the schedule's text form"),
    "stages": MetaKey(_INT, "run_pipeline", "pipeline ranks P"),
    "num_stages": MetaKey(_INT, "run_pipeline, Timeline.to_trace", "virtual stages (P * chunks)"),
    "microbatches": MetaKey(_INT, "run_pipeline", "microbatches M"),
    "chunks": MetaKey(_INT, "run_pipeline", "model chunks per rank v (interleaving)"),
    "layers": MetaKey(_INT, "run_pipeline", "layers of the model"),
    "hidden": MetaKey(_INT, "run_pipeline", "hidden size of the model"),
    "microbatch_size": MetaKey(_INT, "run_pipeline", "rows per microbatch"),
    "makespan": MetaKey(_NUM, "Timeline.to_trace", "end of the last action, in model time"),
    # data parallel
    "stage": MetaKey(_INT, "run_zero", "ZeRO stage: 0 (DP), 1, 2, 3"),
    "steps": MetaKey(_INT, "run_zero, run_fsdp, run_ddp", "training steps"),
    "psi": MetaKey(_INT, "run_zero, run_fsdp", "parameters of the model"),
    "padded_numel": MetaKey(_INT, "run_zero", "flat parameter length, padded to N equal shards"),
    "granularity": MetaKey(_STR, "run_fsdp", "'layer' or 'model': the fully_shard units"),
    "model": MetaKey(_STR, "run_ddp", "the MLP of the data-parallel lesson: mlp, deep, tied"),
    "sync": MetaKey(_STR, "run_ddp", "per-param, bucketed or overlap"),
    "bucket_cap_mb": MetaKey((int, float, type(None)), "run_ddp", "None: DDP's default"),
    "accumulate": MetaKey(_INT, "run_ddp", "micro-batches per optimizer step K"),
    "buckets": MetaKey(_STR, "run_ddp", "the bucket plan's text form (BucketPlan.from_text)"),
    "reshard_after_forward": MetaKey(
        (bool, type(None)), "run_fsdp", "FSDP2's option; None: torch's default"
    ),
    # tensor, expert parallel, strategy map
    "mode": MetaKey(_STR, "run_tp", "the layer run: column, row, mlp, mlp-sp"),
    "rule": MetaKey(_STR, "run_tp", "'megatron' or 'syllabus' (errata E4)"),
    "experts": MetaKey(_INT, "run_moe", "experts E"),
    "top_k": MetaKey(_INT, "run_moe", "experts per token k"),
    "capacity_factor": MetaKey(_NUM, "run_moe", "capacity factor C"),
    "skew": MetaKey(_NUM, "run_moe", "router bias toward expert 0"),
    "strategy": MetaKey(_STR, "run_strategy_map", "dp, tp, tp-sp, pp or ep"),
    # lesson 14: synchronous against asynchronous training
    "regime": MetaKey(_STR, "run_async", "sync, async-ps, local-sgd or backup"),
    "workers": MetaKey(_INT, "run_async", "ranks that compute gradients W"),
    "straggler": MetaKey(_STR, "run_async", "the straggler setting, e.g. 'rank 3, fixed 4 ms'"),
    "local_steps": MetaKey(
        (int, type(None)), "run_async", "local SGD's H: steps between averages (None: not it)"
    ),
    "backup_workers": MetaKey(
        (int, type(None)), "run_async", "backup workers b (None: not mode backup)"
    ),
    "rows": MetaKey(_INT, "run_async", "samples per gradient"),
}


def meta_problems(meta: dict[str, Any]) -> list[str]:
    """Every key of ``meta`` that :data:`META` does not know, or whose value has another type."""
    if not isinstance(meta, dict):
        return [f"meta={meta!r} is not valid: expected a dict"]
    out = []
    for key, value in meta.items():
        spec = META.get(key)
        if spec is None:
            out.append(
                f"meta key {key!r} is not in the trace schema (edu_parallel.core.schema.META)"
            )
        elif (
            isinstance(value, bool) and bool not in spec.types or not isinstance(value, spec.types)
        ):
            kinds = " or ".join(t.__name__ for t in spec.types)
            out.append(f"meta[{key!r}]={value!r} is not valid: expected {kinds} ({spec.doc})")
    return out
