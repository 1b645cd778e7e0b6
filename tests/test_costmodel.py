"""Alpha-beta predictions (costmodel) against the retimed plans, on links and topologies; the
formulas' shapes, the link presets and the argument errors: no processes. The chooser, the
tables and `edu-parallel model` are in ``test_costmodel_choose.py``."""

from __future__ import annotations

import json

import pytest

from edu_parallel.models.cost import NAMES, link_preset, predict, tree_levels
from edu_parallel.models.retiming import CostModel, collective_time, retime
from edu_parallel.models.simulation import simulate
from edu_parallel.models.topology import LINKS, Link, Topology
from edu_parallel.plans.checker import validate
from edu_parallel.plans.hierarchical import hierarchical_allreduce_plan
from edu_parallel.plans.naive import naive_allreduce_plan
from edu_parallel.plans.plan import Plan
from edu_parallel.plans.ring import (
    ring_all_gather_steps,
    ring_allreduce_plan,
    ring_reduce_scatter_steps,
)

LINK = Link("test", alpha_s=1e-6, bandwidth_Bps=1e9)
INTRA, INTER = Link("intra", 1e-6, 100e9), Link("inter", 5e-6, 10e9)
REDUCE_BPS = 4e9


def retimed(plan: Plan, nbytes: int, model: CostModel) -> float:
    return retime(simulate(plan, nbytes, with_data=False)[0], model).duration


# ------------------------------------------------------------------ formulas = retimed plans
@pytest.mark.parametrize("reduce_Bps", [None, REDUCE_BPS])
@pytest.mark.parametrize("n", range(2, 10))
def test_ring_and_naive_formulas_equal_their_retimed_plans(
    n: int, reduce_Bps: float | None
) -> None:
    model = CostModel(LINK, reduce_Bps=reduce_Bps)
    s = 4 * 1000 * n
    for name, plan in (("ring", ring_allreduce_plan(n)), ("naive", naive_allreduce_plan(n))):
        p = predict(name, n, s, model)
        assert p.time_s == pytest.approx(retimed(plan, s, model), rel=1e-12)
        assert p.time_s == pytest.approx(p.latency_s + p.bandwidth_s + p.compute_s, rel=1e-15)
    ring = predict("ring", n, s, LINK)  # by hand: 2(n-1) steps of alpha + (S/n)/B
    assert ring.latency_s == pytest.approx(2 * (n - 1) * 1e-6)
    assert ring.bandwidth_s == pytest.approx(2 * (n - 1) / n * s / 1e9)
    assert ring.formula == "2(n-1)·α + 2(n-1)/n·S/B"


@pytest.mark.parametrize("n", range(2, 12))
def test_ring_all_gather_and_reduce_scatter_plans_match_the_collective_formulas(n: int) -> None:
    model = CostModel(LINK, reduce_Bps=REDUCE_BPS)
    s = 4 * 100 * n
    ag = Plan("ring_allgather", "all_gather", n, n, tuple(ring_all_gather_steps(n, 0)))
    rs = Plan("ring_reduce_scatter", "reduce_scatter", n, n, tuple(ring_reduce_scatter_steps(n)))
    assert validate(ag) == [] and validate(rs) == []
    for name, plan in (("all_gather", ag), ("reduce_scatter", rs)):
        p = predict(name, n, s, model)
        assert p.time_s == pytest.approx(retimed(plan, s, model), rel=1e-12)
        assert p.time_s == pytest.approx(collective_time(name, n, s, model), rel=1e-12)


@pytest.mark.parametrize("reduce_Bps", [None, REDUCE_BPS])
@pytest.mark.parametrize("nodes,gpus", [(1, 4), (4, 1), (2, 2), (2, 3), (3, 2), (3, 4), (5, 3)])
def test_hierarchical_formula_equals_retimed_plan_on_a_topology(
    nodes: int, gpus: int, reduce_Bps: float | None
) -> None:
    topo = Topology(nodes, gpus, INTRA, INTER)
    plan = hierarchical_allreduce_plan(nodes, gpus)
    assert validate(plan) == []
    s = 8 * 1000 * nodes * gpus  # g·K chunks of whole float32 elements
    model = CostModel(topo.bottleneck(), reduce_Bps=reduce_Bps, topology=topo)
    p = predict("hierarchical", nodes * gpus, s, topo, reduce_Bps=reduce_Bps)
    assert p.time_s == pytest.approx(retimed(plan, s, model), rel=1e-12)
    k, g = nodes, gpus  # by hand: 2(g-1) intra steps of K chunks, 2(K-1) inter steps in which
    c = s / (g * k)  # the node's one NIC carries g messages
    by_hand = 2 * (g - 1) * k * INTRA.message_s(c) + 2 * (k - 1) * g * INTER.message_s(c)
    assert p.latency_s + p.bandwidth_s == pytest.approx(by_hand, rel=1e-12)
    # every local rank crosses nodes with 2(K-1)/K * S/g: all of a node's NICs carry the same
    inter = [
        e
        for e in simulate(plan, s, with_data=False)[0].select(kind="send")
        if topo.link(e.rank, e.peer) is INTER
    ]
    assert {e.rank % gpus for e in inter} == (set(range(gpus)) if k > 1 else set())
    assert sum(e.nbytes for e in inter) == pytest.approx(2 * (k - 1) * s if k > 1 else 0)


@pytest.mark.parametrize("n", range(2, 21))
def test_tree_ps_and_rabenseifner_against_their_retimed_plans(n: int) -> None:
    from edu_parallel.plans.ps import parameter_server_plan
    from edu_parallel.plans.rabenseifner import rabenseifner_allreduce_plan
    from edu_parallel.plans.tree import binary_tree_allreduce_plan

    s = 8 * 3 * 5 * 7 * n  # divisible by n and by every server count up to 8
    model = CostModel(LINK)
    assert predict("tree", n, s, model).time_s == pytest.approx(
        retimed(binary_tree_allreduce_plan(n), s, model), rel=1e-12
    )
    for k in range(1, min(n, 8) + 1):  # exact with one server or n a power of two; else a bound
        bound = predict("ps", n, s, model, servers=k).time_s
        actual = retimed(parameter_server_plan(n, k), s, model)
        if k == 1 or n in (2, 4, 8, 16):
            assert bound == pytest.approx(actual, rel=1e-12), k
        assert bound <= actual * (1 + 1e-12)
    if n & (n - 1) == 0:  # the plan sends a block as one message per chunk: more alpha terms
        assert predict("rabenseifner", n, s, model).time_s <= retimed(
            rabenseifner_allreduce_plan(n), s, model
        )


def test_tree_levels_is_the_one_port_critical_path_of_a_heap_tree() -> None:
    def brute(n: int) -> int:  # a parent takes its children in order of readiness, one at a time
        ready = [0] * n
        for v in reversed(range(n)):
            t = 0
            for c in sorted(
                (c for c in (2 * v + 1, 2 * v + 2) if c < n), key=lambda c: (ready[c], c)
            ):
                t = max(t, ready[c]) + 1
            ready[v] = t
        return ready[0]

    assert [tree_levels(n) for n in range(1, 9)] == [0, 1, 2, 2, 3, 3, 4, 4]
    assert all(tree_levels(n) == brute(n) for n in range(1, 700))
    for h in range(1, 12):  # full trees: two messages per level
        assert tree_levels(2**h - 1) == 2 * (h - 1)


def test_every_formula_is_zero_on_one_rank_and_grows_with_size() -> None:
    for name in NAMES:
        for link in (LINK, LINKS["ib-ndr-400"]):
            kw = {"nodes": 1} if name == "hierarchical" else {}
            one = predict(name, 1, 1 << 20, link, reduce_Bps=REDUCE_BPS, **kw)
            assert (one.time_s, one.latency_s, one.bandwidth_s, one.busbw_gbps) == (
                0.0,
                0.0,
                0.0,
                0.0,
            )
            n = 8
            kw = {"nodes": 2} if name == "hierarchical" else {}
            times = [
                predict(name, n, s, link, reduce_Bps=REDUCE_BPS, **kw).time_s
                for s in (0, 1, 1024, 1 << 20, 1 << 30)
            ]
            assert times[0] > 0 and all(a < b for a, b in zip(times, times[1:], strict=False)), name
            p = predict(name, n, 1 << 20, link, **kw)
            assert p.latency_s > 0 and p.bandwidth_s > 0 and p.compute_s == 0.0
            assert p.algbw_gbps == pytest.approx((1 << 20) / p.time_s / 1e9)


def test_textbook_shapes_of_the_other_formulas() -> None:
    n, s, a, b = 16, 1 << 24, 1e-6, 1e9
    assert predict("tree", n, s, LINK).time_s == pytest.approx(2 * tree_levels(n) * (a + s / b))
    # NCCL 2.30.7 tuning.cc: 2 log2 n latency, Tree busBw x .92, algbw = busBw x .5
    dt = predict("double-tree", n, s, LINK)
    assert (dt.latency_s, dt.bandwidth_s) == pytest.approx((2 * 4 * a, 2 * s / (0.92 * b)))
    assert predict("double_tree", n, s, LINK) == dt  # alias
    rab = predict("rabenseifner", n, s, LINK)
    assert (rab.latency_s, rab.bandwidth_s) == pytest.approx((2 * 4 * a, 2 * 15 / 16 * s / b))
    rab12 = predict("rabenseifner", 12, s, LINK)  # folded to 8, plus one step each way
    assert (rab12.latency_s, rab12.bandwidth_s) == pytest.approx(
        (2 * 3 * a + 2 * a, 2 * 7 / 8 * s / b + 2 * s / b)
    )
    assert predict("ps", n, s, LINK, servers=1).time_s == pytest.approx(
        predict("naive", n, s, LINK).time_s
    )
    assert predict("ps", n, s, LINK, servers=4).bandwidth_s == pytest.approx(2 * 15 / 4 * s / b)
    assert predict("ps-sharded", n, s, LINK) == predict("ps", n, s, LINK, servers=2)
    for name, lat, bw in (
        ("broadcast", 15 * a, s / b),
        ("all_to_all", 15 * a, 15 / 16 * s / b),
        ("gather", 4 * a, 15 / 16 * s / b),
        ("scatter", 4 * a, 15 / 16 * s / b),
    ):
        p = predict(name, n, s, LINK)
        assert (p.latency_s, p.bandwidth_s) == pytest.approx((lat, bw)), name
    assert predict("reduce", n, s, LINK).time_s == pytest.approx(
        collective_time("reduce", n, s, CostModel(LINK))
    )


def test_bus_bandwidth_follows_nccl_tests() -> None:
    n, s = 8, 1 << 26
    ring = predict("ring", n, s, "nvlink4")
    assert ring.busbw_gbps == pytest.approx(ring.algbw_gbps * 2 * 7 / 8)
    assert predict("broadcast", n, s, "nvlink4").busbw_gbps == pytest.approx(
        predict("broadcast", n, s, "nvlink4").algbw_gbps
    )
    ag = predict("all_gather", n, s, "nvlink4")
    assert ag.busbw_gbps == pytest.approx(ag.algbw_gbps * 7 / 8)
    assert ring.busbw_gbps < 450  # never above the link: 450 GB/s each way
    assert (
        json.loads(json.dumps(predict("ring", 1, s, "nvlink4").to_json_dict()))["algbw_gbps"]
        is None
    )


def test_link_presets_aliases_and_argument_errors() -> None:
    assert (
        link_preset("nvlink4") is LINKS["nvlink4-h100"]
        and link_preset("ndr") is LINKS["ib-ndr-400"]
    )
    with pytest.raises(
        ValueError, match=r"link='nvlink9' is not valid: expected one of nvlink4-h100, .*aliases"
    ):
        predict("ring", 8, 1024, "nvlink9")
    with pytest.raises(
        ValueError, match=r"alpha_s=-1e-06 is not valid: expected a finite number >= 0"
    ):
        Link("bad", -1e-6, 1e9)
    cases = [
        (dict(name="rings"), r"name='rings' is not valid: expected one of ring, naive"),
        (dict(world_size=0), r"world_size=0 is not valid: expected an integer"),
        (dict(nbytes=-1), r"nbytes=-1 is not valid: expected a finite number of bytes >= 0"),
        (dict(link=3.5), r"link=3.5 is not valid: expected a Link, a Topology"),
        (dict(reduce_Bps=0), r"reduce_Bps=0 is not valid: expected a finite number > 0"),
        (dict(servers=2), r"servers=2 is not valid: expected None unless name is 'ps'"),
        (dict(name="ps", servers=9), r"servers=9 is not valid: expected an integer in \[1, 8\]"),
        (dict(nodes=2), r"nodes=2 is not valid: expected None unless name is 'hierarchical'"),
        (dict(name="hierarchical"), r"nodes=None is not valid: expected the number of nodes"),
        (
            dict(name="hierarchical", nodes=3),
            r"nodes=3 is not valid: expected a divisor of world_size=8",
        ),
        (
            dict(link=Topology(2, 2, INTRA, INTER)),
            r"world_size=8 is not valid: expected nodes \* gpus_per_node = 2 \* 2 = 4",
        ),
    ]
    for kw, message in cases:
        args = {"name": "ring", "world_size": 8, "nbytes": 1024, "link": LINK} | kw
        with pytest.raises(ValueError, match=message):
            predict(**args)


def test_the_double_tree_formulas_and_the_lesson_name_nccl_s_tree_factor() -> None:
    """One home for the 0.92: nccl/constants.py; every text that writes it says what it holds."""
    import json
    from pathlib import Path

    from edu_parallel.models.cost_topology import DOUBLE_TREE_NODES
    from edu_parallel.models.nccl.constants import TREE_ALGBW_RATIO, TREE_BW_FACTOR

    term = f"{1 / TREE_ALGBW_RATIO:g}·S/({TREE_BW_FACTOR:g}·B)"
    assert term == "2·S/(0.92·B)"
    assert term in predict("double-tree", 16, 1 << 20, LINK).formula
    assert term in DOUBLE_TREE_NODES
    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    said = [
        "".join(cell["source"])
        for path in sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
        if cell["cell_type"] == "markdown" and "pipelined double tree" in "".join(cell["source"])
    ]
    assert said, "no lesson derives the double tree's alpha-beta formula"
    for text in said:
        assert term.replace("·S", "S") in text and "0.9·B" not in text, text
