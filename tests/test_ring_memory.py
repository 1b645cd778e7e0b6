"""What an all-reduce holds per rank: the ring within 3x its payload, measured on the ranks, and a
size that cannot fit refused before any process starts, with the numbers.

How the ranks are measured: each rank resets its resident high-water mark (``VmHWM``, through
``/proc/self/clear_refs``), runs the all-reduce as ``edu-parallel run ring`` does (input, the
builtin reference, the traced ring, the check), and reports the rise of the mark over its resident
size at the start (:func:`~edu_parallel.comm.allreduce.allreduce_peak_job`). That counts every
page the job touched, in torch, gloo and numpy alike, not only the tensors the code names; it is
the rank's own process, so other processes on a shared machine do not move it, and timing does
not enter. Tensors this large are mapped (glibc maps any block above 32 MiB) and unmapped when
freed, so what an earlier job freed does not hide what this one allocates. One-time costs of a
fresh rank (numpy's generator, gloo's pair buffers, the allocator's first arenas: about 20 MiB)
are paid by a small job first; the allowance is for the rest (page tables, the trace).

Why it fails when the copies come back: each full-size temporary adds a whole payload (or two) to
the mark: a ``.double()`` of the buffer (2x for float32), a comparison on the whole tensors
(``allclose`` makes several), a clone of the buffer per step for the step grid, a scratch buffer
of the whole buffer instead of one chunk. Before this test the ring peaked at about 9x.
"""

from __future__ import annotations

import pytest
import torch
from helpers import Recorder, child_pids, fresh_python

from edu_parallel import run_allreduce
from edu_parallel.app.cli import main
from edu_parallel.comm import memory
from edu_parallel.comm.allreduce import COMPARE_BLOCK, allreduce_peak_job, compare
from edu_parallel.comm.memory import PEAK_FACTOR, bytes_per_rank, check_fits, free_memory_bytes
from edu_parallel.core.i18n import language
from edu_parallel.core.units import GIB, MIB
from edu_parallel.engine.cluster import Cluster
from edu_parallel.engine.execute import same_result
from edu_parallel.plans.algorithms import plan_allreduce

ALLOWANCE = 16 * MIB  # per rank, above PEAK_FACTOR x the payload, after a warm-up job


def _peaks(cluster, size, algo="ring"):
    """Each rank's peak over the payload, after a small job has paid a fresh rank's one-time
    costs; every rank's result is checked against dist.all_reduce."""
    cluster.run(allreduce_peak_job, plan_allreduce(cluster.world_size, "1MiB", algo=algo))
    run = plan_allreduce(cluster.world_size, size, algo=algo)
    results = cluster.run(allreduce_peak_job, run).results
    assert all(r["matches_builtin"] for r in results)
    peaks = [r["peak_bytes"] for r in results]
    assert None not in peaks, "the ranks could not reset their high-water mark (not Linux?)"
    return run, peaks


@pytest.mark.multiprocess
def test_a_ring_rank_holds_at_most_three_times_its_payload(cluster2):
    run, peaks = _peaks(cluster2, "64MiB")
    d = run.buffer.real_bytes
    for peak in peaks:
        assert peak <= PEAK_FACTOR * d + ALLOWANCE, f"{peak / d:.2f}x the payload"
        # the buffer and the builtin's result: the measure sees most of them (pages the job takes
        # back from ones an earlier test freed are resident already, so they are no rise; a
        # fresh-clone run once measured 1.88x)
        assert peak >= 1.75 * d


@pytest.mark.multiprocess
def test_the_need_counts_what_the_plan_stages(cluster4):
    """The naive root stages N-1 whole buffers: 5x on 4 ranks, which the check counts (a ring's
    3x for every rank would let it through)."""
    run, peaks = _peaks(cluster4, "32MiB", algo="naive")
    d, need = run.buffer.real_bytes, bytes_per_rank(run)
    assert need == [5 * d, 3 * d, 3 * d, 3 * d]
    # the root holds its N-1 staged buffers at once (the input was there when the job began),
    # which no other rank does
    assert peaks[0] >= 3 * d and peaks[0] > max(peaks[1:])
    for peak, bound in zip(peaks, need, strict=True):
        assert peak <= bound + ALLOWANCE


def test_the_ring_needs_three_payloads_per_rank():
    for n in (2, 3, 4, 16):
        run = plan_allreduce(n, "4MiB")
        assert bytes_per_rank(run) == [PEAK_FACTOR * 4 * MIB] * n


def test_a_size_that_cannot_fit_is_refused_before_any_process_starts(monkeypatch, capsys):
    monkeypatch.setattr(memory, "free_memory_bytes", lambda: 1 * GIB)
    built: list = []
    monkeypatch.setattr(Cluster, "__init__", lambda self, *a, **kw: built.append(a))
    before = child_pids()
    assert main(["run", "ring", "--size", "256MiB", "--world-size", "2"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: --size='256MiB' needs about 1.5 GiB on 2 ranks (3x 256 MiB per rank);"
        " this machine has 1 GiB free\n"
    )
    assert built == [] and child_pids() == before


def test_the_refusal_costs_no_torch_import():
    """Refused from the options alone: torch (and so any rank) never loads."""
    fresh_python(
        "from edu_parallel.comm import memory\n"
        "memory.free_memory_bytes = lambda: 1 << 30\n"
        "from edu_parallel.app.cli import main\n"
        "assert main(['run', 'ring', '--size', '256MiB', '--world-size', '2']) == 2\n"
    )


def test_a_size_that_fits_is_not_refused(monkeypatch):
    monkeypatch.setattr(memory, "free_memory_bytes", lambda: 1536 * MIB)
    check_fits(plan_allreduce(2, "256MiB"), 2, "256MiB")  # exactly 1.5 GiB: it fits
    monkeypatch.setattr(memory, "free_memory_bytes", lambda: None)  # unknown: nothing refused
    check_fits(plan_allreduce(16, GIB), 16, GIB)


def test_the_python_api_refuses_before_any_job(monkeypatch):
    monkeypatch.setattr(memory, "free_memory_bytes", lambda: 100 * MIB)
    ranks = Recorder(4)
    with pytest.raises(ValueError, match=r"size=67108864 needs about 768 MiB on 4 ranks"):
        run_allreduce(ranks, 64 * MIB)
    assert ranks.calls == []


def test_the_refusal_speaks_chinese(monkeypatch):
    monkeypatch.setattr(memory, "free_memory_bytes", lambda: 1 * GIB)
    with language("zh"), pytest.raises(ValueError) as exc:
        check_fits(plan_allreduce(2, "256MiB"), 2, "256MiB")
    assert str(exc.value) == (
        "size='256MiB' 在 2 个 rank 上约需 1.5 GiB 内存（每个 rank 3 倍的 256 MiB）；"
        "本机只有 1 GiB 可用"
    )


def test_free_memory_is_memavailable(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24683568 kB\nMemFree: 100 kB\nMemAvailable:   2048 kB\n")
    assert free_memory_bytes(meminfo) == 2 * MIB
    fallback = free_memory_bytes(tmp_path / "absent")  # sysconf's free pages
    assert fallback is None or fallback > 0


def test_the_check_by_blocks_is_the_check_on_the_whole():
    """The check against the builtin runs a block at a time (no full-size temporaries) and says
    what the whole-tensor check says: equal bit for bit, or within the float tolerance."""
    ints = torch.arange(3 * COMPARE_BLOCK + 5, dtype=torch.int64)
    off = ints.clone()
    off[-1] += 7  # in the last, short block
    assert compare(ints, ints.clone(), 4, exact=True) == (True, 0.0)
    assert compare(ints, off, 4, exact=True) == (False, 7.0)
    floats = torch.randn(2 * COMPARE_BLOCK + 3, generator=torch.Generator().manual_seed(0))
    for shift in (1e-7, 1e-3):
        near = floats + shift
        matches, err = compare(floats, near, 4, exact=False)
        assert matches == same_result(floats, near, 4, exact=False) == (shift < 1e-5)
        assert err == float((floats.double() - near.double()).abs().max())


@pytest.mark.multiprocess
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_every_collective_stays_within_its_bound_and_the_bound_refuses_what_cannot_fit(
    cluster4, dtype
):
    """Each collective of ``run allgather`` ... ``run scatter`` measured on 4 ranks at 32 MiB: no
    rank passes bytes_per_rank (3x the payload, a chunk, the staged chunks), which is what the
    command line refuses up front; the largest, 1 GiB on 16 ranks, is refused."""
    from edu_parallel.comm.collective import collective_peak_job
    from edu_parallel.plans.collectives import CLI_NAMES, plan_collective

    for name in CLI_NAMES.values():
        cluster4.run(collective_peak_job, plan_collective(4, name, "1MiB", dtype))
        run = plan_collective(4, name, "32MiB", dtype)
        results = cluster4.run(collective_peak_job, run).results
        assert all(r["matches_builtin"] for r in results), name
        d = run.buffer.real_bytes
        peaks = [r["peak_bytes"] for r in results]
        for peak, bound in zip(peaks, bytes_per_rank(run), strict=True):
            assert peak is not None and peak <= bound + ALLOWANCE, f"{name}: {peak / d:.2f}x"
        largest = plan_collective(16, name, "1GiB", dtype)
        with pytest.raises(ValueError, match=r"size='1GiB' needs about [\d.]+ GiB on 16 ranks"):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(memory, "free_memory_bytes", lambda: 24 * GIB)  # this CI's machine
                check_fits(largest, 16, "1GiB")
