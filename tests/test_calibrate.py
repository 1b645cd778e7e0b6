"""calibrate() and the hierarchical all-reduce on real ranks (gloo, 2 and 4 ranks, pretend
nodes)."""

from __future__ import annotations

import pytest

from edu_parallel.comm.allreduce import run_allreduce
from edu_parallel.comm.calibration import (
    DEFAULT_SIZES,
    calibrate,
    fit_alpha_beta,
    measure_reduce_Bps,
)
from edu_parallel.comm.hierarchical import run_hierarchical
from edu_parallel.comm.tables import calibration_table, topology_table
from edu_parallel.models.cost import predict
from edu_parallel.models.retiming import CostModel, retime
from edu_parallel.models.topology import LINKS, Link, Topology
from edu_parallel.plans.checker import validate
from edu_parallel.plans.hierarchical import hierarchical_allreduce_plan


def test_fit_recovers_alpha_and_bandwidth_exactly() -> None:
    alpha, bw = 3e-5, 2.5e9
    sizes = list(DEFAULT_SIZES)
    fitted = fit_alpha_beta(sizes, [alpha + m / bw for m in sizes])
    assert fitted == pytest.approx((alpha, bw), rel=1e-9)
    noisy = [(alpha + m / bw) * (1.1 if i % 2 else 0.9) for i, m in enumerate(sizes)]
    a2, b2 = fit_alpha_beta(sizes, noisy)
    assert 0.5 * alpha < a2 < 2 * alpha and 0.5 * bw < b2 < 2 * bw
    assert fit_alpha_beta([1, 2], [1.0, 1.0])[0] > 0  # flat: a positive latency, a finite bandwidth
    with pytest.raises(
        ValueError,
        match=r"sizes=\[1024, 1024\] is not valid: expected at least two different sizes",
    ):
        fit_alpha_beta([1024, 1024], [1.0, 2.0])
    with pytest.raises(
        ValueError, match=r"times=\[1.0, 0.0\] is not valid: expected finite times > 0"
    ):
        fit_alpha_beta([1024, 2048], [1.0, 0.0])


def test_calibrate_rejects_bad_arguments_before_running() -> None:
    class OneRank:
        world_size = 1

        def run(self, *a, **k):  # pragma: no cover - must not be called
            raise AssertionError

    with pytest.raises(
        ValueError,
        match=r"cluster=.* is not valid: expected a running Cluster with at least 2 ranks",
    ):
        calibrate(OneRank())
    with pytest.raises(ValueError, match=r"cluster=None is not valid"):
        calibrate(None)


@pytest.mark.multiprocess
def test_calibrate_on_two_ranks_returns_a_positive_link(cluster2, capsys) -> None:
    with pytest.raises(
        ValueError, match=r"sizes=\['1KiB'\] is not valid: expected at least two different"
    ):
        calibrate(cluster2, sizes=["1KiB"])
    with pytest.raises(
        ValueError, match=r"repeats=0 is not valid: expected an integer in \[1, 1000\]"
    ):
        calibrate(cluster2, repeats=0)
    with pytest.raises(ValueError, match=r"sizes='1KiB' is not valid: expected a list"):
        calibrate(cluster2, sizes="1KiB")
    with pytest.raises(ValueError, match=r"progress='yes' is not valid"):
        calibrate(cluster2, progress="yes")
    link = calibrate(cluster2, sizes=["1KiB", "64KiB", "1MiB"], repeats=3, progress=True)
    assert isinstance(link, Link) and link.name == "this machine"
    assert link.alpha_s > 0 and link.bandwidth_Bps > 0
    assert link.source.startswith("calibrate() on ") and "20" in link.source
    err = capsys.readouterr().err  # tqdm.auto outside a kernel: a text bar on stderr
    assert "calibrate: 100%" in err and "3/3" in err and "µs one-way" in err
    assert predict("ring", 2, 1 << 20, link).time_s > 0  # usable like a preset
    assert measure_reduce_Bps(cluster2, "64KiB", 3) > 0


@pytest.mark.multiprocess
def test_hierarchical_allreduce_on_two_pretend_nodes_matches_the_builtin(cluster4) -> None:
    for dtype, size in (("int64", 4096), ("float32", "64KiB")):
        report = run_hierarchical(cluster4, 2, size, dtype)
        assert report.matches_builtin and (report.nodes, report.gpus_per_node) == (2, 2)
        assert validate(report.plan) == [] and report.plan == hierarchical_allreduce_plan(2, 2)
        d = report.nbytes  # every rank: D/2 in the node's reduce-scatter and D/2 in its
        # all-gather, D/4 twice in its shard's ring across nodes: 3D/2, no leader
        assert report.per_rank_sent_bytes == [3 * d // 2] * 4
    topo = Topology(2, 2, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"])
    out = retime(report.trace, CostModel(topo.bottleneck(), reduce_Bps=50e9, topology=topo))
    expected = predict("hierarchical", 4, report.nbytes, topo, reduce_Bps=50e9)
    assert out.duration == pytest.approx(expected.time_s, rel=1e-12)
    assert run_hierarchical(cluster4, 4, 4096, "int64").matches_builtin  # one rank per node
    assert run_hierarchical(cluster4, 1, 4096, "int64").matches_builtin  # one node: a chain
    with pytest.raises(
        ValueError,
        match=r"nodes=8 is not valid: expected at most world_size=4: more pretend nodes than ranks",
    ):
        run_hierarchical(cluster4, 8, 4096)
    with pytest.raises(
        ValueError, match=r"nodes=3 is not valid: expected a divisor of world_size=4"
    ):
        run_hierarchical(cluster4, 3, 4096)


@pytest.mark.multiprocess
def test_calibration_and_topology_tables_read_runs_and_model(cluster4) -> None:
    runs = [run_allreduce(cluster4, size) for size in ("4KiB", "64KiB")]
    link = LINKS["ib-ndr-400"]
    table = calibration_table(runs, link)
    assert list(table.index) == [4096, 65536]
    for r in runs:
        row, model = table.loc[r.nbytes], predict("ring", 4, r.nbytes, link).time_s
        assert row["measured (ms)"] == r.time_s * 1e3
        assert row["alpha-beta model (ms)"] == model * 1e3
        assert row["measured / model"] == r.time_s / model
    topo = Topology(2, 2, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"])
    hier, flat = run_hierarchical(cluster4, 2, "64KiB"), runs[1]
    both = topology_table(hier, flat, topo)
    model = CostModel(topo.intra, topology=topo)
    assert both.loc["hierarchical", "matches dist.all_reduce"] == hier.matches_builtin
    assert both.loc["flat ring", "trace retimed (µs)"] == retime(flat.trace, model).duration * 1e6
    assert both.loc["hierarchical", "alpha-beta model (µs)"] == pytest.approx(
        predict("hierarchical", 4, 65536, topo).time_s * 1e6
    )
    assert both.loc["hierarchical", "trace retimed (µs)"] == pytest.approx(
        both.loc["hierarchical", "alpha-beta model (µs)"], rel=1e-9
    )
