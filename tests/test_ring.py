"""Ring and naive all-reduce on real ranks: results, bytes per phase, trace against plan."""

from collections import Counter

import pytest

from edu_parallel import run_allreduce
from edu_parallel.comm.tables import bandwidth_table, phase_table, ring_volume_table
from edu_parallel.core.inputs import contributors
from edu_parallel.core.metrics import bus_factor
from edu_parallel.models.simulation import plan_events
from edu_parallel.plans.ring import ring_sent_bytes_formula

pytestmark = pytest.mark.multiprocess


def _key(e):
    return (e.kind, e.rank, e.op, e.peer, e.step, e.phase, e.chunk, e.nbytes, e.tag)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("size", [4096, 1000, 24])  # 1000 B float32 = 250 elements: uneven over 4
def test_ring_matches_builtin_and_sends_the_formula(cluster4, dtype, size):
    report = run_allreduce(cluster4, size, dtype, "ring")
    assert report.matches_builtin
    n, d = 4, report.nbytes
    chunk = max(report.trace.meta["chunk_bytes"])
    formula = ring_sent_bytes_formula(n, d)
    for phase in ("reduce-scatter", "all-gather"):
        for sent in report.per_phase_sent_bytes[phase]:
            assert abs(sent - formula[phase]) < chunk  # uneven chunks: within one chunk
            if len(set(report.trace.meta["chunk_bytes"])) == 1:
                assert sent == formula[phase]  # even chunks: exactly (N-1)/N * D
    assert sum(report.per_rank_sent_bytes) == sum(report.per_rank_recv_bytes)
    assert report.steps == 2 * (n - 1)


@pytest.mark.parametrize("n_fixture", ["cluster2", "cluster4"])
def test_even_sizes_send_exactly_the_formula_per_phase(request, n_fixture):
    cluster = request.getfixturevalue(n_fixture)
    n = cluster.world_size
    report = run_allreduce(cluster, 4096, "float32", "ring")
    per_phase = (n - 1) / n * 4096
    assert report.per_phase_sent_bytes == {
        "reduce-scatter": [per_phase] * n,
        "all-gather": [per_phase] * n,
    }
    assert (
        report.per_rank_sent_bytes == [2 * per_phase] * n
    )  # errata E1: 2(N-1)/N*D in all, not per phase


def test_the_trace_is_the_plan(cluster4):
    report = run_allreduce(cluster4, 1000, "int64", "ring")
    planned = plan_events(report.plan, report.trace.meta["chunk_bytes"])
    assert Counter(map(_key, report.trace.events)) == Counter(map(_key, planned))
    for send, recv in report.trace.matched_transfers():
        assert recv.end >= send.start  # causality on one host's clock


def test_naive_allreduce_shows_the_root_bottleneck(cluster4):
    report = run_allreduce(cluster4, 4096, "float32", "naive")
    assert report.matches_builtin
    assert report.per_rank_sent_bytes == [3 * 4096, 4096, 4096, 4096]
    assert report.per_rank_recv_bytes == [3 * 4096, 4096, 4096, 4096]
    ring = run_allreduce(cluster4, 4096, "float32", "ring")
    assert max(report.per_rank_sent_bytes) / max(ring.per_rank_sent_bytes) == pytest.approx(3 / 1.5)


def test_small_runs_carry_snapshots_that_animate_partial_sums(cluster4):
    report = run_allreduce(cluster4, 64, "int64", "ring", pattern="powers_of_two")
    snaps = {(s.rank, s.step): s.values for s in report.trace.snapshots}
    assert contributors(snaps[(1, -1)][0]) == [1]
    assert contributors(snaps[(1, 0)][0]) == [0, 1]  # step 0: rank 1 adds rank 0's chunk 0
    assert all(contributors(v) == [0, 1, 2, 3] for v in snaps[(3, 5)])


def test_large_runs_carry_no_snapshots(cluster2):
    report = run_allreduce(cluster2, "1MiB", "float32", "ring")
    assert report.trace.snapshots == []
    assert report.matches_builtin


def test_bandwidth_follows_nccl_tests(cluster2):
    report = run_allreduce(cluster2, "64KiB")
    assert report.algbw_gbps == pytest.approx(report.nbytes / report.time_s / 1e9)
    assert report.busbw_gbps == pytest.approx(report.algbw_gbps * bus_factor("all_reduce", 2))


def test_untraced_run_counts_bytes_from_the_plan(cluster2):
    report = run_allreduce(cluster2, 4096, trace=False)
    assert report.trace.events == [] and report.matches_builtin
    assert report.per_rank_sent_bytes == [4096, 4096]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"size": 0}, "size=0"),
        ({"dtype": "float8"}, "dtype='float8'"),
        ({"algo": "bogus"}, "algo=.bogus."),
        ({"pattern": "zeros"}, "pattern='zeros'"),
        ({"seed": -1}, "seed=-1"),
    ],
)
def test_bad_arguments(cluster2, kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_allreduce(cluster2, **kwargs)


@pytest.mark.parametrize("algo", ["ring", "naive"])
def test_segmented_messages_still_trace_as_planned(cluster4, algo):
    report = run_allreduce(cluster4, 4000, "int64", algo, segment_bytes=96)  # ~11 pieces per chunk
    assert report.matches_builtin
    planned = plan_events(report.plan, report.trace.meta["chunk_bytes"])
    assert Counter(map(_key, report.trace.events)) == Counter(map(_key, planned))


def test_ring_tables_put_the_counts_beside_the_formulas(cluster2, cluster4):
    runs = [run_allreduce(c, 4096) for c in (cluster2, cluster4)]
    volumes = ring_volume_table(runs)
    assert list(volumes.index) == [2, 4]
    for r in runs:
        row, f = volumes.loc[r.world_size], ring_sent_bytes_formula(r.world_size, 4096)
        assert row["reduce-scatter sent (counted, B)"] == r.per_phase_sent_bytes["reduce-scatter"]
        assert row["total sent (counted, B)"] == r.per_rank_sent_bytes
        assert (row["(N-1)/N·D (B)"], row["2(N-1)/N·D (B)"]) == (f["reduce-scatter"], f["total"])
        assert row["total sent (counted, B)"] == [f["total"]] * r.world_size  # even chunks
    big = runs[1]
    phases = phase_table(big, rank=1)
    assert list(phases.index) == ["reduce-scatter", "all-gather", "both phases"]
    assert phases.loc["reduce-scatter", "sent (B)"] == big.per_phase_sent_bytes["reduce-scatter"][1]
    assert phases.loc["all-gather", "received (B)"] == 3 / 4 * 4096 == phases.iloc[0]["formula (B)"]
    assert phases.loc["both phases", "sent (B)"] == big.per_rank_sent_bytes[1] == 2 * 3 / 4 * 4096
    assert (phases["outline's 2(N-1)/N·D (B)"] == 2 * 3 / 4 * 4096).all()
    bw = bandwidth_table(runs)
    assert list(bw["busbw (GB/s)"]) == [r.busbw_gbps for r in runs]
    assert list(bw["time (ms)"]) == [r.time_s * 1e3 for r in runs]
    assert list(bw["busbw / algbw"]) == pytest.approx([bus_factor("all_reduce", n) for n in (2, 4)])
    assert list(bw["2(N-1)/N"]) == [1.0, 1.5]
