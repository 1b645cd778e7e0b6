"""What a pipeline run holds in memory, counted from its checked config before any process starts,
so that the command line refuses a run this machine cannot hold (``comm.memory.check_need``).
Pure Python: the config's schedule grid is walked, nothing runs.

Per pipeline rank (:func:`~edu_parallel.pipeline_parallel.execute.pipeline_job`), ``W_r`` its own
blocks' weights (``(h^2 + h)`` float64 elements a block; the rank draws the others' numbers into
one scratch block, :func:`~edu_parallel.pipeline_parallel.model.build_blocks`):

* the weights, their gradient sums and the copy of those sums it returns: ``3 W_r``; while it
  draws, the scratch block and a block's two temporaries; while a backward runs, one stage's
  weight gradients;
* the batch, inputs and targets of ``(M, mb, h)`` each;
* the stash: per microbatch in flight on a stage of ``n`` blocks, what autograd saves (each
  Linear's input and each GeLU's input, ``2 n mb h``), the stage's output (on the last stage, the
  output and the target the loss saves) and, between an ``I`` and its ``W``, the output gradient:
  the most the rank's schedule row holds at one slot;
* every send's tensor (``mb h``), held until the rank waits for them all at the end.

The calling process (:func:`~edu_parallel.pipeline_parallel.report.execute_pipeline`) holds the
gradients the ranks return (``W``, every block) and the one-process reference
(:func:`~edu_parallel.pipeline_parallel.model.reference_grads`): the whole model, its gradients
and their copies (``3 W``), the batch, and what autograd saves for all ``M`` microbatches at once.

Both are bounds, measured against the runs in ``tests/test_pipeline_memory.py``: the bytes above,
with :data:`GRAPH_BYTES` of autograd's own records per block and microbatch saved, the activations
(the batch, the stash, the sends) times the allocator's :data:`~edu_parallel.comm.memory.HEAP_SLACK`
(many tensors of a few MiB or less come from the heap, whose freed holes a run reuses only in
part: measured up to 1.35x).
"""

from __future__ import annotations

from ..comm.memory import HEAP_SLACK
from ..core.units import DTYPES
from .config import DTYPE, PipelineConfig, stage_bounds

ITEMSIZE = DTYPES[DTYPE]  # float64
# autograd's nodes and saved-variable records for one block (Linear, GeLU) on one microbatch:
# measured about 1 KiB above the tensors, with 512 microbatches of 64 blocks of (64, 8)
GRAPH_BYTES = 2048


def _block_bytes(config: PipelineConfig) -> int:
    """One Linear(h, h)'s weight and bias."""
    return (config.hidden**2 + config.hidden) * ITEMSIZE


def _stage_blocks(config: PipelineConfig) -> list[int]:
    return [hi - lo for lo, hi in stage_bounds(config.layers, config.num_stages)]  # type: ignore[arg-type]


def stash_peak_bytes(config: PipelineConfig, rank: int) -> int:
    """The most activation bytes ``rank`` holds at one slot of its schedule row: each ``F`` adds
    its stage's saved tensors and output, an ``I`` the output gradient it keeps for its ``W``,
    and a ``B`` or ``W`` frees that microbatch's."""
    row = config.microbatch_size * config.hidden * ITEMSIZE  # (mb, h)
    blocks = _stage_blocks(config)
    last = config.num_stages - 1
    live = peak = 0
    held: dict[tuple[int, int], int] = {}
    for action in config.plan.actions[rank]:
        if action is None:
            continue
        key = (action.stage, action.microbatch)
        if action.kind == "F":
            n = blocks[action.stage]  # + the output; the last stage's loss saves it and the target
            held[key] = (2 * n + (2 if action.stage == last else 1)) * row + n * GRAPH_BYTES
        elif action.kind == "I":
            held[key] += row
        live = sum(held.values())
        peak = max(peak, live)
        if action.kind in ("B", "W"):
            held.pop(key, None)
    return peak


def _sends_bytes(config: PipelineConfig, rank: int) -> int:
    """Every tensor ``rank`` sends (an activation up, a gradient down), held until the end."""
    row = config.microbatch_size * config.hidden * ITEMSIZE
    last = config.num_stages - 1
    sends = 0
    for a in config.plan.actions[rank]:
        if a is not None and (
            (a.kind == "F" and a.stage < last) or (a.kind in ("B", "I") and a.stage > 0)
        ):
            sends += 1
    return sends * row


def _batch_bytes(config: PipelineConfig) -> int:
    return 2 * config.microbatches * config.microbatch_size * config.hidden * ITEMSIZE


def bytes_per_rank(config: PipelineConfig) -> list[int]:
    """A bound on each pipeline rank's peak (ranks ``>= P`` hold nothing of the run)."""
    block = _block_bytes(config)
    blocks = _stage_blocks(config)
    plan = config.plan
    out = []
    for r in range(plan.num_ranks):
        mine = [blocks[s] for s in range(plan.num_stages) if plan.rank_of(s) == r]
        weights = sum(mine) * block
        transient = max(3 * block, max(mine) * block)  # drawing; one backward's gradients
        activations = stash_peak_bytes(config, r) + _sends_bytes(config, r)
        activations += _batch_bytes(config)
        out.append(int(3 * weights + transient + HEAP_SLACK * activations))
    return out


def reference_bytes(config: PipelineConfig) -> int:
    """A bound on the calling process: the ranks' gradients, and the one-process reference."""
    row = config.microbatch_size * config.hidden * ITEMSIZE
    weights = config.layers * _block_bytes(config)  # type: ignore[operator]
    m, layers = config.microbatches, config.layers
    saved = m * ((2 * layers + 2) * row + layers * GRAPH_BYTES)  # type: ignore[operator]
    activations = _batch_bytes(config) + saved
    return int(4 * weights + 3 * _block_bytes(config) + HEAP_SLACK * activations)
