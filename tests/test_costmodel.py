"""Alpha-beta predictions (costmodel), topologies, the chooser and `edu-parallel model`: no
processes."""

from __future__ import annotations

import json
import math

import pytest

from edu_parallel.app.cli import main
from edu_parallel.models.choose import CANDIDATES, choose_allreduce, crossover_size
from edu_parallel.models.cost import (
    ALLREDUCE_ALGOS,
    NAMES,
    OTHER_COLLECTIVES,
    link_preset,
    predict,
    tree_levels,
)
from edu_parallel.models.retiming import CostModel, collective_time, retime
from edu_parallel.models.simulation import simulate
from edu_parallel.models.tables import choice_table, prediction_table
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
    dt = predict("double-tree", n, s, LINK)  # NCCL tuning.cc: 2 log2 n latency, algbw = 0.9 busBw/2
    assert (dt.latency_s, dt.bandwidth_s) == pytest.approx((2 * 4 * a, 2 * s / (0.9 * b)))
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


# ------------------------------------------------------------------ chooser and crossover
def test_chooser_picks_a_tree_for_tiny_messages_on_many_ranks_and_the_ring_for_large() -> None:
    link = LINKS["nvlink4-h100"]
    tiny = choose_allreduce(1024, 256, link)
    assert tiny.algo in ("tree", "double-tree") and set(tiny.times) == set(CANDIDATES)
    assert tiny.times[tiny.algo] == min(tiny.times.values()) < tiny.times["ring"]
    assert "latency-bound" in tiny.reason and "log2 n" in tiny.reason and "tuning.cc" in tiny.reason
    large = choose_allreduce(1 << 30, 64, link)
    assert (
        large.algo == "ring" and "bandwidth-bound" in large.reason and "2(n-1)/n·S" in large.reason
    )
    assert choose_allreduce(1024, 2, link).algo == "ring"  # two ranks: no latency to save
    topo = Topology(4, 8, link, LINKS["ib-ndr-400"])
    assert "hierarchical" in choose_allreduce(1 << 20, 32, topo).times
    with pytest.raises(ValueError, match=r"candidates=\('ring', 'bogus'\) is not valid"):
        choose_allreduce(1024, 8, link, candidates=("ring", "bogus"))


@pytest.mark.parametrize("n", [8, 64, 512])
@pytest.mark.parametrize("b", ["tree", "double-tree"])
def test_crossover_is_where_the_predicted_times_are_equal(n: int, b: str) -> None:
    link = LINKS["ib-ndr-400"]
    x = crossover_size(n, link, "ring", b)
    ring, tree = predict("ring", n, x, link).time_s, predict(b, n, x, link).time_s
    assert ring == pytest.approx(tree, rel=1e-9)
    assert predict(b, n, x / 2, link).time_s < predict("ring", n, x / 2, link).time_s
    assert predict("ring", n, x * 2, link).time_s < predict(b, n, x * 2, link).time_s
    pair = ("ring", b)
    assert (
        choose_allreduce(x / 4, n, link, pair).algo == b
        and choose_allreduce(x * 4, n, link, pair).algo == "ring"
    )


def test_crossover_reports_when_the_curves_never_cross() -> None:
    with pytest.raises(
        ValueError, match=r"world_size=2 is not valid: .*'ring' is faster at every size"
    ):
        crossover_size(2, LINK, "ring", "tree")
    with pytest.raises(ValueError, match=r"b='trees' is not valid: expected one of ring, naive"):
        crossover_size(8, LINK, "ring", "trees")
    with pytest.raises(ValueError, match=r"world_size=1 is not valid: expected an integer >= 2"):
        crossover_size(1, LINK)


def test_crossover_figure_marks_the_crossing() -> None:
    from edu_parallel.viz.cost import crossover_figure

    fig = crossover_figure(64, "nvlink4")
    ax = fig.axes[0]
    assert len(ax.get_lines()) >= 4 and ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert any("ring = tree" in t.get_text() for t in ax.texts)
    assert fig._repr_png_()[:4] == b"\x89PNG"
    fig2 = crossover_figure(2, LINK)
    assert any("faster at every size" in t.get_text() for t in fig2.axes[0].texts)


# ------------------------------------------------------------------ CLI
def test_cli_model_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "model",
            "allreduce",
            "--algo",
            "ring",
            "--world-size",
            "64",
            "--size",
            "1GiB",
            "--link",
            "nvlink4-h100",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    p = predict("ring", 64, 1 << 30, LINKS["nvlink4-h100"])
    assert rc == 0 and data["collective"] == "all_reduce" and data["algo"] == "ring"
    for key in ("time_s", "latency_s", "bandwidth_s", "algbw_gbps", "busbw_gbps"):
        assert data[key] == pytest.approx(getattr(p, key), rel=1e-12)
    assert data["formula"] == "2(n-1)·α + 2(n-1)/n·S/B"
    rc = main(
        [
            "model",
            "allreduce",
            "--algo",
            "hierarchical",
            "--world-size",
            "16",
            "--nodes",
            "2",
            "--link",
            "nvlink4",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    topo = Topology(2, 8, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"])
    assert rc == 0 and data["time_s"] == pytest.approx(
        predict("hierarchical", 16, 1 << 20, topo).time_s
    )
    assert (
        main(["model", "all_gather", "--world-size", "8", "--size", "64MiB", "--link", "ib-ndr"])
        == 0
    )
    text = capsys.readouterr().out
    assert "latency" in text and "bandwidth" in text and "busbw" in text and "ib-ndr-400" in text


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--link", "nvlink9"],
            "error: link='nvlink9' is not valid: expected one of nvlink4-h100, nvlink3-a100",
        ),
        (
            ["--world-size", "4", "--nodes", "8"],
            (
                "error: nodes=8 is not valid: expected at most world_size=4: more pretend nodes"
                " than ranks"
            ),
        ),
        (["--alpha=-1e-6"], "error: alpha_s=-1e-06 is not valid: expected a finite number >= 0"),
        (["--algo", "bogus"], "error: name='bogus' is not valid: expected one of ring"),
        (["--size", "2GiB"], "error: size='2GiB' is not valid"),
    ],
)
def test_cli_model_errors_are_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["model", "allreduce", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_every_name_is_documented_in_one_table() -> None:
    assert set(ALLREDUCE_ALGOS) | set(OTHER_COLLECTIVES) == set(NAMES) and len(NAMES) == 14
    assert all(
        not math.isnan(
            predict(n, 4, 4096, LINK, **({"nodes": 2} if n == "hierarchical" else {})).time_s
        )
        for n in NAMES
    )


def test_prediction_and_choice_tables_equal_predict_and_choose() -> None:
    sizes, algos = (1024, 1 << 30), ("ring", "double-tree")
    table = prediction_table(algos, 64, sizes, "ib-ndr-400")
    assert list(table.index) == [(s, a) for s in sizes for a in algos]
    for s in sizes:
        for a in algos:
            p, row = predict(a, 64, s, "ib-ndr-400"), table.loc[(s, a)]
            assert row["time (µs)"] == p.time_s * 1e6
            assert row["latency (µs)"] == p.latency_s * 1e6
            assert row["bandwidth (µs)"] == p.bandwidth_s * 1e6
            assert row["busbw (GB/s)"] == p.busbw_gbps
    assert table.loc[(1024, "double-tree"), "time (µs)"] < table.loc[(1024, "ring"), "time (µs)"]
    topo = Topology(8, 8, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"])
    chosen = choice_table(sizes, 64, topo)
    for s in sizes:
        c = choose_allreduce(s, 64, topo)
        assert chosen.loc[s, "chosen"] == c.algo
        assert {k: chosen.loc[s, f"{k} (µs)"] for k in c.times} == {
            k: t * 1e6 for k, t in c.times.items()
        }
    assert "hierarchical (µs)" in chosen.columns
