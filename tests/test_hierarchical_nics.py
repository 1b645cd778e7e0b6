"""NICs and channels across nodes (issue 15): ports, the channel ring, the hierarchical all-reduce
that uses every NIC, their closed forms against retimed traces, the CLI and a real run."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from edu_parallel.app.cli import main
from edu_parallel.comm.allreduce import run_allreduce
from edu_parallel.comm.hierarchical import run_hierarchical, sent_by_link_class
from edu_parallel.comm.tables import link_class_table, nics_table, topology_table
from edu_parallel.models.cost import predict
from edu_parallel.models.fast_simulation import simulate_fast
from edu_parallel.models.retiming import CostModel, retime
from edu_parallel.models.simulation import simulate
from edu_parallel.models.topology import LINKS, Link, Topology
from edu_parallel.plans.checker import validate
from edu_parallel.plans.hierarchical import (
    channel_ring_allreduce_plan,
    hierarchical_allreduce_plan,
    hierarchical_bytes_formula,
)
from edu_parallel.plans.plan import Plan, Step, Transfer
from edu_parallel.plans.ring import ring_allreduce_plan

INTRA, INTER = Link("intra", 1e-6, 100e9), Link("inter", 5e-6, 10e9)
H100, NDR = LINKS["nvlink4-h100"], LINKS["ib-ndr-400"]
SHAPES = [(2, 2), (2, 4), (3, 4), (4, 2), (2, 6), (3, 3), (1, 4), (4, 1)]


def divisors(g: int) -> list[int]:
    return [d for d in range(1, g + 1) if g % d == 0]


def retimed(plan: Plan, nbytes: int, model: CostModel) -> float:
    return retime(simulate(plan, nbytes, with_data=False)[0], model).duration


def test_nics_serve_local_ranks_modulo_and_queue_on_their_ports() -> None:
    topo = Topology(2, 4, INTRA, INTER, nics_per_node=2)
    assert [topo.nic_of(r) for r in range(8)] == [0, 1, 0, 1, 0, 1, 0, 1]
    assert topo.ports(0, 3) == (0, 3)  # inside a node: the ranks' own ports
    assert topo.ports(2, 5) == (8 + 0, 8 + 2 + 1)  # NIC 0 of node 0 -> NIC 1 of node 1
    assert topo.channels == 2 and Topology(1, 4, INTRA, INTER, 4).channels == 1
    assert "2 NICs per node" in topo.describe()
    assert Topology.split(8, 2, INTRA, INTER, 4).nics_per_node == 4
    for bad, message in (
        (3, r"nics_per_node=3 is not valid: expected a divisor of gpus_per_node=4 \(1, 2, 4\)"),
        (8, r"nics_per_node=8 is not valid: expected a divisor of gpus_per_node=4"),
        (0, r"nics_per_node=0 is not valid: expected an integer >= 1"),
    ):
        with pytest.raises(ValueError, match=message):
            Topology(2, 4, INTRA, INTER, bad)
    with pytest.raises(ValueError, match=r"channels=3 is not valid: expected a divisor of"):
        channel_ring_allreduce_plan(2, 4, 3)


def test_ranks_sharing_a_nic_wait_for_each_other_in_retime_and_fast_simulation() -> None:
    # ranks 0 and 1 (node 0) send to ranks 2 and 3 (node 1) at once; rank 0 also sends to rank 1
    plan = Plan(
        "two_out",
        "all_gather",
        4,
        4,
        (Step("x", (Transfer(0, 2, 0, "copy"), Transfer(1, 3, 1, "copy"))),),
    )
    nbytes = 4 * 1000 * 4
    one = INTER.message_s(1000 * 4)
    for nics, expected in ((1, 2 * one), (2, one)):
        model = CostModel(INTER, topology=Topology(2, 2, INTRA, INTER, nics))
        assert retimed(plan, nbytes, model) == pytest.approx(expected, rel=1e-12)
        fast = simulate_fast(plan, nbytes, model=model)
        assert fast.time_s == pytest.approx(expected, rel=1e-12)
        assert fast.timed_by == ("events" if nics == 1 else "columns")
    # a rank sends inside and across nodes at once: NVLink and the NIC are separate paths
    both = Plan("both", "all_gather", 4, 4, (Step("x", (Transfer(0, 1, 0), Transfer(0, 2, 0))),))
    model = CostModel(INTER, topology=Topology(2, 2, INTRA, INTER, 2))
    assert retimed(both, nbytes, model) == pytest.approx(one, rel=1e-12)
    assert simulate_fast(both, nbytes, model=model).time_s == pytest.approx(one, rel=1e-12)


@pytest.mark.parametrize("reduce_Bps", [None, 3e9, 3e7])
@pytest.mark.parametrize("nodes,gpus", SHAPES)
def test_channel_ring_and_hierarchical_formulas_equal_the_retimed_plans(
    nodes: int, gpus: int, reduce_Bps: float | None
) -> None:
    for nics in divisors(gpus):
        for intra, inter in ((INTRA, INTER), (H100, NDR), (INTER, INTRA)):
            topo = Topology(nodes, gpus, intra, inter, nics)
            s = 8 * 100 * nodes * gpus * nics  # whole float32 elements in every chunk
            model = CostModel(topo.bottleneck(), reduce_Bps=reduce_Bps, topology=topo)
            ring = channel_ring_allreduce_plan(nodes, gpus, topo.channels)
            hier = hierarchical_allreduce_plan(nodes, gpus)
            assert validate(ring) == [] and validate(hier) == []
            for name, plan in (("ring", ring), ("hierarchical", hier)):
                p = predict(name, nodes * gpus, s, topo, reduce_Bps=reduce_Bps)
                assert p.time_s == pytest.approx(retimed(plan, s, model), rel=1e-12), (name, nics)
                fast = simulate_fast(plan, s, model=model)
                assert fast.time_s == pytest.approx(p.time_s, rel=1e-12)


def test_one_channel_is_the_ring_and_a_one_ring_trace_uses_one_nic() -> None:
    one = channel_ring_allreduce_plan(3, 4, 1)
    assert one.steps == ring_allreduce_plan(12).steps
    topo = Topology(3, 4, H100, NDR, 4)
    s = 4 * 1200
    model = CostModel(topo.bottleneck(), topology=topo)
    assert retimed(one, s, model) == pytest.approx(
        predict("ring", 12, s, replace(topo, nics_per_node=1)).time_s, rel=1e-12
    )
    big = 4 * 48 * 250_000  # 48 MB: bandwidth-bound, one ring per NIC is ~4x faster
    four = retimed(channel_ring_allreduce_plan(3, 4, 4), big, model)
    assert retimed(one, big, model) > 3 * four
    assert four == pytest.approx(predict("ring", 12, big, topo).time_s, rel=1e-12)


def test_eight_h100_nodes_cross_at_up_to_eight_nics_not_one() -> None:
    size = 1 << 30
    eight = predict("ring", 64, size, Topology(8, 8, H100, NDR, nics_per_node=8))
    one = predict("ring", 64, size, Topology(8, 8, H100, NDR, nics_per_node=1))
    nic = NDR.bandwidth_Bps / 1e9
    assert nic == 50.0
    assert 4 * nic < eight.busbw_gbps <= 8 * nic  # bounded by 8 x 50 GB/s, well above one NIC
    assert one.busbw_gbps <= nic
    table = nics_table(8, 8, H100, NDR, size)
    assert list(table.index.get_level_values(0).unique()) == [1, 2, 4, 8]
    assert table.loc[(8, "ring"), "busbw (GB/s)"] == eight.busbw_gbps
    assert table.loc[(1, "ring"), "busbw (GB/s)"] == one.busbw_gbps
    busbw = table.xs("ring", level="algorithm")["busbw (GB/s)"]
    assert busbw.is_monotonic_increasing
    assert (table["busbw (GB/s)"] <= table["NICs x per-NIC (GB/s)"]).all()
    hier = table.xs("hierarchical", level="algorithm")["busbw (GB/s)"]
    assert hier.loc[8] > 4 * hier.loc[1]  # every NIC carries a shard's ring


@pytest.mark.parametrize("nodes,gpus", SHAPES)
def test_each_rank_sends_the_formulas_bytes_inside_and_across_nodes(nodes: int, gpus: int) -> None:
    s = 4 * 60 * nodes * gpus
    trace = simulate(hierarchical_allreduce_plan(nodes, gpus), s, with_data=False)[0]
    intra, inter = sent_by_link_class(trace, Topology(nodes, gpus, INTRA, INTER))
    f = hierarchical_bytes_formula(nodes, gpus, s)
    assert intra == [pytest.approx(f["intra"], rel=1e-12)] * (nodes * gpus)
    assert inter == [pytest.approx(f["inter"], rel=1e-12)] * (nodes * gpus)
    assert f == {
        "intra": 2 * (gpus - 1) / gpus * s,
        "inter": 2 * (nodes - 1) / nodes * s / gpus,
    }


def test_cli_nics_option_and_its_errors(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["model", "allreduce", "--world-size", "64", "--nodes", "8", "--size", "1GiB"]
    assert main([*args, "--nics", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    expected = predict("ring", 64, 1 << 30, Topology(8, 8, H100, NDR, 8))
    assert data["busbw_gbps"] == pytest.approx(expected.busbw_gbps, rel=1e-12)
    for extra, message in (
        (["--nics", "3"], "error: --nics=3 is not valid: expected a divisor of the 8 ranks"),
        (["--nics", "0"], "error: --nics=0 is not valid: expected an integer in [1, 8]"),
    ):
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith(message) and err.count("\n") == 1
    assert main(["model", "allreduce", "--nics", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --nics=2 is not valid: expected no value without --nodes")


@pytest.mark.multiprocess
def test_hierarchical_run_on_pretend_nodes_counts_bytes_per_link_class(cluster4) -> None:
    report = run_hierarchical(cluster4, 2, "64KiB", "int64")
    assert report.matches_builtin and report.plan == hierarchical_allreduce_plan(2, 2)
    s = report.nbytes
    assert report.per_rank_intra_bytes == [s] * 4  # 2(g-1)/g·S = S for g = 2
    assert report.per_rank_inter_bytes == [s // 2] * 4  # 2(K-1)/K·S/g = S/2 for K = g = 2
    assert report.formula_bytes == hierarchical_bytes_formula(2, 2, s)
    table = link_class_table(report)
    assert table["intra sent (counted, B)"].tolist() == report.per_rank_intra_bytes
    assert (table["inter sent (counted, B)"] == table["2(K-1)/K·S/g (B)"]).all()
    flat = run_allreduce(cluster4, "64KiB")
    for nics in (1, 2):
        both = topology_table(report, flat, Topology(2, 2, H100, NDR, nics))
        for name in ("hierarchical", "flat ring"):
            row = both.loc[name]
            assert row["trace retimed (µs)"] == pytest.approx(
                row["alpha-beta model (µs)"], rel=1e-9
            )
