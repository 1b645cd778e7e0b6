"""What a pipeline run holds, measured on its ranks and in the calling process, against the bounds
the command line checks before any process starts (``pipeline_parallel.memory``; the largest
accepted shape is refused on this CI's machine, with the figure, in ``tests/test_bad_inputs.py``).

Each rank returns its freed heap to the system (``comm.memory.trim_heap``),
resets its resident high-water mark and reports its rise over the job, as the TP memory test
does; the one-process reference is measured the same way in this process. Without the trim a job
would reuse the pages an earlier job freed, and the measure would see less than the job holds.
"""

from __future__ import annotations

import pytest

from edu_parallel.comm.allreduce import with_peak
from edu_parallel.comm.memory import peak_reset, peak_resident_bytes, resident_bytes, trim_heap
from edu_parallel.core.units import MIB
from edu_parallel.pipeline_parallel import memory as pipeline_memory
from edu_parallel.pipeline_parallel.config import MAX_HIDDEN, MAX_LAYERS, PipelineConfig
from edu_parallel.pipeline_parallel.execute import pipeline_job
from edu_parallel.pipeline_parallel.model import reference_grads

ALLOWANCE = 16 * MIB  # per process, above the bound (page tables, the trace, gloo's buffers)

SHAPES = [  # (schedule, chunks, microbatches, hidden, microbatch size, layers)
    ("gpipe", 1, 8, 1024, 256, 4),  # a few big tensors: the stash of every microbatch
    ("zb-h1", 1, 64, 32, 1024, 4),  # I before W: the output gradients kept; heap-sized tensors
    ("interleaved", 2, 16, 256, 128, 8),
    ("1f1b", 1, 256, 8, 64, 32),  # autograd's records outweigh the tensors
]


def trimmed_peak_job(ctx, config: PipelineConfig) -> tuple[int | None, int]:
    """:func:`pipeline_job` with this rank's peak measured (None where the kernel cannot reset
    the mark), and what autograd saved at the worst moment."""
    trim_heap()  # pages an earlier job freed would hide what this one holds
    out, peak = with_peak(pipeline_job, ctx, config)
    return peak, out["peak_activation_bytes"]


@pytest.mark.multiprocess
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}-M{s[2]}-h{s[3]}")
def test_a_pipeline_run_stays_within_its_bounds_on_the_ranks_and_here(cluster2, shape):
    schedule, chunks, m, h, mb, layers = shape
    config = PipelineConfig(schedule, 2, m, chunks, layers, h, mb, world_size=2)
    bounds = pipeline_memory.bytes_per_rank(config)
    measured = cluster2.run(trimmed_peak_job, config, trace=False).results
    for rank, (peak, saved) in enumerate(measured):
        assert peak is not None, "the ranks could not reset their high-water mark (not Linux?)"
        assert peak <= bounds[rank] + ALLOWANCE, (rank, peak / MIB, bounds[rank] / MIB)
        assert saved <= pipeline_memory.stash_peak_bytes(config, rank)
        assert peak >= saved  # the measure sees the stash
    trim_heap()
    assert peak_reset()
    before = resident_bytes()
    reference_grads(2 * chunks, layers, h, m, mb, config.seed)
    reference = peak_resident_bytes() - before
    assert reference <= pipeline_memory.reference_bytes(config) + ALLOWANCE, reference / MIB


def test_a_rank_holds_only_its_own_stages_weights():
    """Of 512 blocks of (1024, 1024) on 16 ranks, a rank holds its 32 (it once built all 512)."""
    config = PipelineConfig(stages=16, layers=MAX_LAYERS, hidden=MAX_HIDDEN, world_size=16)
    weights = MAX_LAYERS * (MAX_HIDDEN**2 + MAX_HIDDEN) * pipeline_memory.ITEMSIZE
    assert max(pipeline_memory.bytes_per_rank(config)) < weights / 3
