"""What a 3D step holds, measured on its ranks and in the calling process, against the bounds the
command line checks before any process starts (``parallel_3d.memory``; the largest accepted step
is refused on this CI's machine, with the figure, in ``tests/test_bad_inputs.py``).

As in ``tests/test_pipeline_memory.py``: each rank trims its heap, resets its resident high-water
mark and reports its rise over the step; the reference is measured the same way here. A small
step of the same layout runs first, so that a fresh rank's one-time costs (imports, kernels) are
not counted as the step's.
"""

from __future__ import annotations

import pytest
from test_pipeline_memory import ALLOWANCE

from edu_parallel import Cluster
from edu_parallel.app.cli import main
from edu_parallel.comm import memory as comm_memory
from edu_parallel.comm.allreduce import with_peak
from edu_parallel.comm.memory import peak_reset, peak_resident_bytes, resident_bytes, trim_heap
from edu_parallel.core.units import GIB, MIB
from edu_parallel.parallel_3d import memory
from edu_parallel.parallel_3d.config import Run3D
from edu_parallel.parallel_3d.model import reference_step
from edu_parallel.parallel_3d.step import step_job

CASES = [  # (dp, tp, pp, ep), sizes
    ((4, 1, 1, 1), {"layers": 8, "hidden": 128, "batch": 64, "seq": 64, "microbatches": 1}),
    ((1, 2, 2, 1), {"layers": 8, "hidden": 128, "batch": 64, "seq": 64, "microbatches": 8}),
    ((2, 1, 2, 1), {"layers": 4, "hidden": 64, "heads": 64, "batch": 32, "seq": 64}),
    ((4, 1, 1, 2), {"layers": 4, "hidden": 64, "batch": 64, "seq": 64, "experts": 8}),
]


def trimmed_peak_job(ctx, run: Run3D) -> int | None:
    """:func:`step_job` with this rank's peak measured from a trimmed heap."""
    trim_heap()  # pages an earlier job freed would hide what this one holds
    return with_peak(step_job, ctx, run)[1]


def _small(dp: int, tp: int, pp: int, ep: int) -> Run3D:
    moe = {"experts": 4} if ep > 1 else {}
    return Run3D.build(4, dp, tp, pp, ep, layers=pp, hidden=8, heads=2, batch=8 * dp, seq=4, **moe)


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "layout, sizes", CASES, ids=lambda v: str(v) if isinstance(v, tuple) else ""
)
def test_a_3d_step_stays_within_its_bounds_on_the_ranks_and_here(layout, sizes):
    run = Run3D.build(4, *layout, **sizes)
    with Cluster(4) as cluster:
        cluster.run(trimmed_peak_job, _small(*layout), trace=False)
        peaks = cluster.run(trimmed_peak_job, run, trace=False).results
    assert None not in peaks, "the ranks could not reset their high-water mark (not Linux?)"
    assert max(peaks) <= memory.bytes_per_rank(run) + ALLOWANCE, [p / MIB for p in peaks]
    reference_step(_small(*layout).config)
    trim_heap()
    assert peak_reset()
    before = resident_bytes()
    reference_step(run.config)
    reference = peak_resident_bytes() - before
    assert reference <= memory.reference_bytes(run) + ALLOWANCE, reference / MIB
    # what autograd saves is most of it: the bound is not a blanket
    tokens = run.config.batch * run.config.seq * run.config.layers
    assert reference >= tokens * memory.saved_per_token(run.config) / 2


def test_a_layer_saves_what_the_hook_counts_not_what_the_time_bound_assumes():
    """About 15 h float32 elements a token and layer for the dense layer (Config3D's time bound
    counts 4h + a s): counted on one sequence, scaling with h."""
    small = Run3D.build(1, 1, 1, 1, 1, hidden=32, heads=4, seq=16).config
    large = Run3D.build(1, 1, 1, 1, 1, hidden=128, heads=4, seq=16).config
    per_h = [memory.saved_per_token(c) / (4 * c.hidden) for c in (small, large)]
    assert 13 <= per_h[0] <= 17 and 13 <= per_h[1] <= 17, per_h


def test_the_largest_step_is_refused_on_a_laptop_with_what_it_would_need(monkeypatch, capsys):
    """It fits this CI's 24 GiB (about 4.2 GiB measured, 7.4 GiB bounded); with 4 GiB free it
    is refused before any process starts."""
    monkeypatch.setattr(comm_memory, "free_memory_bytes", lambda: 4 * GIB)
    argv = ["run", "3d", "--world-size", "16", "--dp", "16", "--tp", "1", "--pp", "1"]
    sizes = ["--layers", "32", "--hidden", "128", "--heads", "1", "--batch", "256", "--seq", "16"]
    assert main([*argv, *sizes, "--microbatches", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --layers=32, --hidden=128, --batch=256, --seq=16 need about")
    assert "(16 ranks x " in err and "this machine has 4 GiB free" in err
    assert err.count("\n") == 1
