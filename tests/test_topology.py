"""Topology: ranks on nodes, intra/inter links, validation, and retime with a topology."""

from __future__ import annotations

import pytest

from edu_parallel.models.cost import predict
from edu_parallel.models.retiming import CostModel, cost_model, retime
from edu_parallel.models.simulation import simulate
from edu_parallel.models.topology import Link, Topology
from edu_parallel.plans.hierarchical import hierarchical_allreduce_plan
from edu_parallel.plans.ring import ring_allreduce_plan

LINK = Link("test", alpha_s=1e-6, bandwidth_Bps=1e9)
INTRA, INTER = Link("intra", 1e-6, 100e9), Link("inter", 5e-6, 10e9)


def test_topology_maps_ranks_to_nodes_and_links() -> None:
    topo = Topology(2, 3, INTRA, INTER)
    assert topo.world_size == 6 and [topo.node_of(r) for r in range(6)] == [0, 0, 0, 1, 1, 1]
    assert topo.link(0, 2) is INTRA and topo.link(2, 3) is INTER and topo.link(5, 0) is INTER
    assert topo.local_rank(4) == 1 and "2 nodes x 3 ranks" in topo.describe()
    assert Topology(1, 4, INTRA, INTER).bottleneck() is INTRA
    assert Topology(4, 1, INTRA, INTER).bottleneck() is INTER
    slow = topo.bottleneck()
    assert (slow.alpha_s, slow.bandwidth_Bps) == (5e-6, 10e9)
    assert Topology.split(8, 4, INTRA, INTER) == Topology(4, 2, INTRA, INTER)


def test_topology_validation_names_every_factor() -> None:
    cases = [
        (lambda: Topology(0, 2, INTRA, INTER), r"nodes=0 is not valid: expected an integer >= 1"),
        (lambda: Topology(2, 0, INTRA, INTER), r"gpus_per_node=0 is not valid"),
        (lambda: Topology(2, 2, "nvlink", INTER), r"intra='nvlink' is not valid: expected a Link"),
        (
            lambda: Topology(2, 2, INTRA, INTER).node_of(4),
            r"rank=4 is not valid: expected an integer in \[0, 3\]",
        ),
        (lambda: Topology(2, 2, INTRA, INTER).link(0, 9), r"dst=9 is not valid"),
        (
            lambda: Topology.split(4, 8, INTRA),
            r"nodes=8 is not valid: expected at most world_size=4: more pretend nodes than ranks",
        ),
        (
            lambda: Topology.split(6, 4, INTRA),
            (
                r"nodes=4 is not valid: expected a divisor of world_size=6 \(1, 2, 3, 6\): nodes \*"
                r" gpus_per_node must equal world_size, and 4 \* 1 = 4 != 6"
            ),
        ),
        (
            lambda: Topology(2, 2, INTRA, INTER).check_world_size(6),
            r"world_size=6 is not valid: expected nodes \* gpus_per_node = 2 \* 2 = 4 ranks",
        ),
        (lambda: CostModel(LINK, topology="2x2"), r"topology='2x2' is not valid"),
        (lambda: hierarchical_allreduce_plan(0, 2), r"nodes=0 is not valid"),
    ]
    for make, message in cases:
        with pytest.raises(ValueError, match=message):
            make()


def test_retime_without_topology_is_unchanged_and_checks_the_world_size() -> None:
    trace = simulate(ring_allreduce_plan(4), 4096, with_data=False)[0]
    plain = retime(trace, CostModel(LINK))
    same = retime(trace, CostModel(LINK, topology=Topology(2, 2, LINK, LINK)))
    assert [(e.start, e.end) for e in same] == [(e.start, e.end) for e in plain]
    assert (
        "topology" not in plain.meta["cost_model"]
        and same.meta["cost_model"]["topology"]["nodes"] == 2
    )
    out = retime(trace, CostModel(INTRA, topology=Topology(2, 2, INTRA, INTER)))
    for e in out.select(kind="send"):  # each message on its own link
        link = INTRA if e.rank // 2 == e.peer // 2 else INTER
        assert e.duration == pytest.approx(link.message_s(e.nbytes), rel=1e-12)
    with pytest.raises(
        ValueError,
        match=r"trace.world_size=4 is not valid: expected nodes \* gpus_per_node = 2 \* 4 = 8",
    ):
        retime(trace, CostModel(LINK, topology=Topology(2, 4, LINK, LINK)))


def test_a_flat_ring_across_nodes_runs_at_the_slow_links_pace() -> None:
    for nodes, gpus in ((2, 2), (2, 4), (3, 3)):
        topo, n = Topology(nodes, gpus, INTRA, INTER), nodes * gpus
        s = 4 * 1000 * n
        model = cost_model(topo)
        assert model.topology is topo and model.link == topo.bottleneck()
        assert predict("ring", n, s, topo).time_s == pytest.approx(
            retime(simulate(ring_allreduce_plan(n), s, with_data=False)[0], model).duration,
            rel=1e-12,
        )
