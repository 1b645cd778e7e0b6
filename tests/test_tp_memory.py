"""What a tensor-parallel run holds, measured on its ranks and in the calling process, against
the bounds the command line checks before any process starts (``TPConfig.bytes_per_rank`` and
``reference_bytes``); the largest accepted shape is refused on this CI's machine, with the figure.

Each rank resets its resident high-water mark and reports its rise over the job, as the ring's
memory test does (``tests/test_ring_memory.py``); the dense reference is measured the same way in
this process. The one-time costs of a fresh rank are paid by a small job first.
"""

from __future__ import annotations

import pytest

from edu_parallel.app.cli import main
from edu_parallel.comm import memory
from edu_parallel.comm.allreduce import with_peak
from edu_parallel.comm.memory import peak_reset, peak_resident_bytes, resident_bytes
from edu_parallel.core.units import GIB, MIB
from edu_parallel.tensor_parallel.config import MAX_FFN, MAX_HIDDEN, TPConfig
from edu_parallel.tensor_parallel.job import dense_reference, problem_of, tp_job

ALLOWANCE = 16 * MIB  # per process, above the bound (page tables, the trace, gloo's buffers)


def tp_peak_job(ctx, config: TPConfig) -> int | None:
    """:func:`tp_job` with this rank's peak measured (None where the kernel cannot reset it)."""
    return with_peak(tp_job, ctx, config)[1]


@pytest.mark.multiprocess
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_tp_run_stays_within_its_bounds_on_the_ranks_and_here(cluster2, dtype):
    cluster2.run(tp_peak_job, TPConfig(2, hidden=64, ffn=256))
    for mode in ("column", "row", "mlp", "mlp-sp"):
        # every weight above 32 MiB, glibc's largest mmap threshold: allocated and freed as its
        # own mapping, so a block an earlier job freed cannot hide it from the measure
        config = TPConfig(2, mode=mode, batch=2, seq=64, hidden=2048, ffn=8192, dtype=dtype)
        peaks = cluster2.run(tp_peak_job, config, trace=False).results
        assert None not in peaks, "the ranks could not reset their high-water mark (not Linux?)"
        for peak in peaks:
            assert peak <= config.bytes_per_rank() + ALLOWANCE, (mode, peak / MIB)
            assert peak >= config.hidden * config.ffn * config.itemsize  # it sees the weights
        assert peak_reset()
        before = resident_bytes()
        dense_reference(mode, problem_of(config))
        assert peak_resident_bytes() - before <= config.reference_bytes() + ALLOWANCE, mode


def test_the_largest_tp_shape_is_refused_with_what_it_would_need(monkeypatch, capsys):
    monkeypatch.setattr(memory, "free_memory_bytes", lambda: 24 * GIB)  # this CI's machine
    argv = ["run", "tp", "--world-size", "2", "--hidden", str(MAX_HIDDEN), "--ffn", str(MAX_FFN)]
    assert main([*argv, "--batch", "1", "--seq", "16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --hidden=8192, --ffn=32768 need about 40.05 GiB (2 ranks x")
    assert "this machine has 24 GiB free" in err and err.count("\n") == 1
