"""All-reduce algorithms compared: plans valid, results right on real ranks, bytes and steps
measured from the trace equal to the textbook formulas, and the bottlenecks (errata E5)."""

import contextlib
import json
import math
from collections import Counter

import numpy as np
import pytest
from helpers import cli
from wcwidth import wcswidth

from edu_parallel import run_allreduce
from edu_parallel.app.cli import main
from edu_parallel.comm.allreduce import format_report
from edu_parallel.comm.compare import cluster_traffic_runner
from edu_parallel.core.i18n import language
from edu_parallel.core.width import MAX_TEXT_COLUMNS
from edu_parallel.models.simulation import expected_result, plan_events, simulate
from edu_parallel.models.traffic import format_traffic_table, simulated_runner, traffic_table
from edu_parallel.plans.algorithms import ALGOS, build_plan, formula_bytes
from edu_parallel.plans.checker import validate
from edu_parallel.plans.plan import Plan
from edu_parallel.plans.ps import parameter_server_plan
from edu_parallel.plans.rabenseifner import rabenseifner_allreduce_plan
from edu_parallel.plans.tree import (
    binary_tree_allreduce_plan,
    children,
    double_binary_tree_allreduce_plan,
    double_binary_trees,
    nccl_btree,
)

EVEN = 4800  # bytes: 1200 float32, divisible by every chunk count used at N = 2, 3, 4, 8
UNEVEN = 1000  # 250 float32 / 125 int64: not divisible by 3, 4 or 8 chunks (int64: nor 2)


def _pow2(n):
    return n & (n - 1) == 0


def _key(e):
    return (e.kind, e.rank, e.op, e.peer, e.step, e.phase, e.chunk, e.nbytes, e.tag)


def _all_plans(n):
    plans = [ALGOS[a](n) for a in ALGOS if a != "rabenseifner" or _pow2(n)]
    plans += [binary_tree_allreduce_plan(n, 3), double_binary_tree_allreduce_plan(n, 2)]
    return plans + [parameter_server_plan(n, k) for k in range(1, n + 1)]


# ------------------------------------------------------------------ plans, no processes
@pytest.mark.parametrize("n", range(1, 17))
def test_every_plan_validates_and_round_trips(n):
    for plan in _all_plans(n):
        assert validate(plan) == [], plan.name
        assert Plan.from_text(plan.to_text()) == plan
        assert plan.collective == "all_reduce" and plan.world_size == n


@pytest.mark.parametrize("n", [3, 5, 6, 7, 12, 4097])
def test_rabenseifner_needs_a_power_of_two(n):
    with pytest.raises(
        ValueError,
        match=rf"world_size={n} is not valid: expected a power of two: 1, 2, 4, 8, \.\.\., 4096",
    ):
        rabenseifner_allreduce_plan(n)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
def test_pipelined_plans_compute_the_sum_on_virtual_ranks(n):
    for plan in _all_plans(n):
        _, bufs = simulate(plan, 8 * 97, "int64", pattern="random", seed=n)  # 97: uneven chunks
        want = expected_result(plan, 97, "int64", "random", seed=n)
        assert all(np.array_equal(b, want) for b in bufs), plan.name


def test_nccl_trees_match_the_pictures_in_trees_cc():
    first, _ = double_binary_trees(14)  # ncclGetBtree illustration, 14 ranks
    assert {r: first[r] for r in (8, 4, 12, 2, 6, 10, 13, 1, 3, 9, 11)} == {
        8: 0,
        4: 8,
        12: 8,
        2: 4,
        6: 4,
        10: 12,
        13: 12,
        1: 2,
        3: 2,
        9: 10,
        11: 10,
    }
    _, mirror = double_binary_trees(12)  # ncclGetDtree, even: mirrored, root 11
    assert {r: mirror[r] for r in (3, 1, 7, 0, 2, 5, 9, 4, 6, 8, 10)} == {
        3: 11,
        1: 3,
        7: 3,
        0: 1,
        2: 1,
        5: 7,
        9: 7,
        4: 5,
        6: 5,
        8: 9,
        10: 9,
    }
    _, shift = double_binary_trees(13)  # odd: shifted by one, root 1
    assert (shift[1], shift[9], shift[5], shift[0], shift[11]) == (-1, 1, 9, 9, 0)
    assert nccl_btree(1, 0) == (-1, [])


@pytest.mark.parametrize("n", range(2, 65))
def test_every_rank_is_interior_in_at_most_one_tree(n):
    trees = double_binary_trees(n)
    kids = [children(t) for t in trees]
    assert [t.index(-1) for t in trees] == [0, 1 if n % 2 else n - 1]  # ncclGetDtreeRoots
    for k in kids:
        assert sum(map(len, k)) == n - 1 and all(len(c) <= 2 for c in k)  # spanning binary trees
    both = [r for r in range(n) if kids[0][r] and kids[1][r]]
    if n % 2 == 0:
        assert both == []  # a leaf in one tree, inner in at most the other
    else:
        # NCCL's shift: rank 0 is tree 1's root with one child and inner in tree 2
        assert both == [0] and kids[0][0] == [1 << (n - 1).bit_length() - 1]
    for r in range(n):  # so nobody has more than 4 tree neighbours: at most 2D each way
        assert sum(len(k[r]) + (t[r] >= 0) for t, k in zip(trees, kids, strict=True)) <= 4


@pytest.mark.parametrize("n", range(2, 17))
def test_steps_tree_log_ring_linear(n):
    log2 = math.log2(n)
    assert len(build_plan("tree", n).steps) == 2 * math.floor(log2)
    assert len(build_plan("double-tree", n).steps) == 2 * math.ceil(log2)
    assert len(build_plan("ring", n).steps) == 2 * (n - 1)
    assert len(build_plan("ps", n).steps) == len(build_plan("ps-sharded", n).steps) == 2
    if _pow2(n):
        assert len(build_plan("rabenseifner", n).steps) == 2 * int(log2)


def test_sharding_the_server_divides_its_load_by_about_k():
    n, d = 64, 6400
    load = {}
    for k in (1, 2, 4, 8, 64):
        trace, _ = simulate(parameter_server_plan(n, k), d, with_data=False)
        load[k] = max(trace.recv_bytes())
        assert load[k] == formula_bytes("ps", n, d, servers=k)["recv"][0] == (n + k - 2) / k * d
    assert load[1] == (n - 1) * d
    assert all(load[1] / load[k] > 0.85 * k for k in (2, 4, 8))
    assert load[64] == 2 * (n - 1) / n * d  # every rank a server: the ring's volume


@pytest.mark.parametrize(
    "call,match",
    [
        (
            lambda: build_plan("tree", 4, servers=2),
            r"servers=2 is not valid: expected no value unless algo is one of 'ps'",
        ),
        (
            lambda: build_plan("ps", 4, servers=5),
            r"servers=5 is not valid: expected an integer in \[1, 4\]",
        ),
        (lambda: parameter_server_plan(4, 0), r"servers=0 is not valid"),
        (
            lambda: binary_tree_allreduce_plan(4, 0),
            r"pipeline=0 is not valid: expected an integer in \[1, 64\]",
        ),
        (lambda: double_binary_tree_allreduce_plan(0), r"world_size=0 is not valid"),
        (lambda: traffic_table(["tree", "bogus"], [4], 64), r"algos='bogus' is not valid"),
        (lambda: traffic_table(["tree"], [0], 64), r"world_sizes=0 is not valid"),
        (lambda: traffic_table(["tree"], [4], 64, runner=3), r"runner=3 is not valid"),
        (lambda: cluster_traffic_runner(None, progress=1), r"progress=1 is not valid"),
    ],
)
def test_bad_arguments_name_parameter_value_and_range(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_table_sizes_its_runner_once_per_world_size_and_keeps_the_algorithm_order():
    """A runner with ``sized(n)`` is entered once per world size for all its algorithms (a real
    one starts one cluster per size, not one per run); rows stay algorithm by algorithm."""
    plain = simulated_runner()
    entered, calls, bar = [], [], []

    class SizedRunner:
        def progress(self, done, total, label):
            bar.append((done, total, label))

        def __call__(self, algo, n, nbytes):
            raise AssertionError("the table runs inside sized(n)")

        @contextlib.contextmanager
        def sized(self, n):
            entered.append(n)

            def run(algo, world_size, nbytes):
                assert world_size == n
                calls.append((algo, world_size))
                return plain(algo, world_size, nbytes)

            yield run

    algos, sizes = ["ring", "rabenseifner", "ps"], [2, 3, 4]
    rows = traffic_table(algos, sizes, EVEN, SizedRunner())
    assert entered == sizes
    assert ("rabenseifner", 3) not in calls and len(calls) == 8  # unsupported: never run
    assert [(r["algo"], r["world_size"]) for r in rows] == [(a, n) for a in algos for n in sizes]
    assert rows == traffic_table(algos, sizes, EVEN, plain)
    assert not rows[4]["supported"] and "power of two" in rows[4]["note"]
    # the runner's bar: before each of the 8 runs, then done
    assert [d for d, _, _ in bar] == list(range(9)) and {t for _, t, _ in bar} == {8}
    assert bar[0][2] == "ring, N=2" and bar[-1][2] == ""


# ------------------------------------------------------------------ real ranks
def _check_run(report, even):
    """Matches the builtin, the trace is the plan, bytes equal the formula (even sizes)."""
    assert report.matches_builtin, report.algo
    planned = plan_events(report.plan, report.trace.meta["chunk_bytes"])
    assert Counter(map(_key, report.trace.events)) == Counter(map(_key, planned)), report.algo
    if even:
        assert report.per_rank_sent_bytes == report.formula_sent_bytes, report.algo
        assert report.per_rank_recv_bytes == report.formula_recv_bytes, report.algo


@pytest.mark.multiprocess
@pytest.mark.parametrize("fixture", ["cluster2", "cluster3", "cluster4"])
def test_every_algorithm_matches_the_builtin_on_real_ranks(request, fixture):
    cluster = request.getfixturevalue(fixture)
    n = cluster.world_size
    for algo in ALGOS:
        if algo == "rabenseifner" and not _pow2(n):
            with pytest.raises(
                ValueError, match=rf"world_size={n} is not valid: expected a power of two"
            ):
                run_allreduce(cluster, EVEN, "float32", algo)
            continue
        for dtype in ("float32", "int64"):
            for size in (EVEN, UNEVEN):
                _check_run(run_allreduce(cluster, size, dtype, algo), even=size == EVEN)
    _check_run(run_allreduce(cluster, EVEN, "int64", "ps", servers=n), even=True)
    assert run_allreduce(cluster, 64, "int64", "ring").matches_builtin  # still healthy


@pytest.mark.multiprocess
def test_untraced_runs_count_sent_and_received_bytes_from_the_plan(cluster4):
    formula = {"tree": "D per tree", "double-tree": "D/2 per", "ps-sharded": "servers (N+k-2)/k"}
    for algo, text in formula.items():
        report = run_allreduce(cluster4, EVEN, "float32", algo, trace=False)
        assert report.trace.events == [] and report.matches_builtin
        assert report.per_rank_sent_bytes == report.formula_sent_bytes
        assert report.per_rank_recv_bytes == report.formula_recv_bytes
        assert "formula: " + text in format_report(run_allreduce(cluster4, EVEN, algo=algo))


@pytest.mark.multiprocess
def test_a_real_table_starts_one_cluster_per_other_world_size(cluster2, monkeypatch):
    from edu_parallel.engine.cluster import Cluster

    started = []
    plain_start = Cluster._start

    def counting(self):
        started.append(self.world_size)
        return plain_start(self)

    monkeypatch.setattr(Cluster, "_start", counting)
    algos = ["ring", "naive", "tree"]
    rows = traffic_table(algos, [2, 3], EVEN, cluster_traffic_runner(cluster2, progress=False))
    assert started == [3]  # the 3-rank cluster once for its three algorithms; 2 ranks: cluster2
    simulated = traffic_table(algos, [2, 3], EVEN, simulated_runner())
    keys = ("algo", "world_size", "sent", "recv", "steps", "max_messages")
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in simulated]
    assert all(r["source"] == "cluster" for r in rows)


@pytest.mark.multiprocess
def test_eight_ranks_all_algorithms_and_the_bottlenecks(cluster8):
    n, d = 8, EVEN
    for algo in ALGOS:
        _check_run(run_allreduce(cluster8, d, "float32", algo), even=True)
        _check_run(run_allreduce(cluster8, UNEVEN, "int64", algo), even=False)
    for k in (4, 8):
        _check_run(run_allreduce(cluster8, d, "float32", "ps", servers=k), even=True)
    rows = traffic_table(ALGOS, [n], d, cluster_traffic_runner(cluster8))
    simulated = traffic_table(ALGOS, [n], d, simulated_runner())
    keys = ("sent", "recv", "busiest_bytes", "steps", "max_messages")
    assert [[r[k] for k in keys] for r in rows] == [[r[k] for k in keys] for r in simulated]
    row = {r["algo"]: r for r in rows}
    assert all(
        r["source"] == "cluster" and r["busiest_bytes"] == r["formula_busiest_bytes"] for r in rows
    )
    load = {a: r["busiest_over_d"] for a, r in row.items()}
    assert load["ps"] == load["naive"] == n - 1  # one server / flat-tree root: (N-1) D
    assert row["ps"]["busiest_rank"] == 0 and row["ps"]["sent"][1:] == [d] * (n - 1)
    assert load["ps-sharded"] == (n + 2 - 2) / 2  # two servers: N/2 D each
    assert load["ring"] == load["rabenseifner"] == 2 * (n - 1) / n  # 1.75 D, every rank
    assert load["tree"] == 3 and row["tree"]["sent"][0] == 2 * d  # inner ranks 3D, root 2D
    assert load["double-tree"] == 2 and max(row["double-tree"]["recv"]) == 2 * d  # balanced
    assert load["double-tree"] / load["ring"] < 1.15 < load["tree"] / load["ring"]
    assert load["ps"] / load["ring"] == 4
    steps = {a: r["steps"] for a, r in row.items()}
    assert steps == {
        "ring": 14,
        "naive": 2,
        "tree": 6,
        "double-tree": 6,
        "ps": 2,
        "ps-sharded": 2,
        "rabenseifner": 6,
    }
    text = format_traffic_table(rows + traffic_table(["rabenseifner"], [6], d))
    assert "double-tree" in text and "n/a: world_size=6" in text and "7.000" in text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_traffic_table_fits_the_output_area_without_wrapping(lang):
    """Lesson 04's table: 8 ranks per row once (every all-reduce receives what it sends: one
    column), as many as fit where a row does not (two columns, then "...")."""
    rows = traffic_table(ALGOS, [2, 4, 8, 16], 48 * 1024, simulated_runner())
    lopsided = [{**rows[0], "recv": [2 * v for v in rows[0]["recv"]]}]  # one such row
    for table, ranks in ((rows, 8), (rows + lopsided, 6)):
        with language(lang):
            text = format_traffic_table(table)
        widths = [wcswidth(line) for line in text.splitlines()[:-1]]  # the legend is prose
        assert max(widths) <= MAX_TEXT_COLUMNS, (lang, max(widths))
        ring_8 = next(line for line in text.splitlines() if line.startswith("ring           8"))
        assert ring_8.count("1.75") == 1 + ranks * (1 if table is rows else 2), ring_8
        assert ("..." in ring_8) == (table is not rows)


@pytest.mark.multiprocess
@pytest.mark.parametrize("algo", ["ring", "naive", "tree", "double-tree", "ps", "rabenseifner"])
def test_cli_runs_every_algorithm(capsys, algo):
    assert (
        main(
            [
                "run",
                "allreduce",
                "--algo",
                algo,
                "--world-size",
                "2",
                "--size",
                "1200",
                "--dtype",
                "int64",
                "--json",
                "--timeout",
                "20",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["algo"] == algo and data["matches_builtin"] is True
    assert data["per_rank_recv_bytes"] == data["formula_recv_bytes_per_rank"]


@pytest.mark.multiprocess
def test_cli_parameter_server_with_servers():
    args = ("--algo", "ps", "--servers", "2", "--world-size", "3", "--size", "1200", "--json")
    out = cli("run", "allreduce", *args)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["servers"] == 2 and data["per_rank_recv_bytes"] == [1800, 1800, 1200]
    bad = cli("run", "allreduce", "--algo", "ring", "--servers", "2")
    assert bad.returncode == 2 and "servers=2 is not valid" in bad.stderr
