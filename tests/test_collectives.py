"""Collective semantics: every plan validates, runs on real ranks, matches torch and the formula."""

import json
from collections import Counter

import pytest
from helpers import cli, fresh_python

from edu_parallel.comm.collective import format_collective, run_collective
from edu_parallel.comm.tables import builtin_table, volume_table
from edu_parallel.core.metrics import bus_factor, bus_factor_source
from edu_parallel.models.cost import predict
from edu_parallel.models.simulation import plan_events
from edu_parallel.plans.checker import holdings_after_each_step, validate
from edu_parallel.plans.collectives import (
    CLI_NAMES,
    COLLECTIVE_PLANS,
    EQUAL_CHUNKS,
    chain_broadcast_plan,
    chain_reduce_plan,
    direct_all_to_all_plan,
    direct_gather_plan,
    ring_reduce_scatter_plan,
    volume_formula,
)
from edu_parallel.plans.plan import ROOTED, Plan, Step, Transfer
from edu_parallel.plans.ring import ring_all_gather_steps, ring_reduce_scatter_steps

NAMES = list(COLLECTIVE_PLANS)


def _key(e):
    return (e.kind, e.rank, e.op, e.peer, e.step, e.phase, e.chunk, e.nbytes, e.tag)


def _plan_bytes(plan: Plan, chunk: int) -> tuple[list[int], list[int]]:
    sent, recv = [0] * plan.world_size, [0] * plan.world_size
    for step in plan.steps:
        for t in step.transfers:
            sent[t.src] += chunk
            recv[t.dst] += chunk
    return sent, recv


# ----------------------------------------------------------------- plans, no processes
@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("name", NAMES)
def test_every_plan_validates_for_every_root(name, n):
    for root in range(n) if name in ROOTED else [0]:
        plan = COLLECTIVE_PLANS[name](n, root)
        assert plan.collective == name and plan.world_size == n
        assert validate(plan) == [], plan.to_text()
        assert Plan.from_text(plan.to_text()) == plan
        if name in ROOTED:
            assert plan.root == root


@pytest.mark.parametrize("n", range(1, 9))
def test_variants_validate_and_take_the_documented_steps(n):
    assert len(COLLECTIVE_PLANS["all_gather"](n).steps) == n - 1
    assert len(ring_reduce_scatter_plan(n).steps) == n - 1
    for c in (1, 3, 8):
        for plan in (chain_broadcast_plan(n, n - 1, c), chain_reduce_plan(n, n // 2, c)):
            assert validate(plan) == [] and len(plan.steps) == (c + n - 2 if n > 1 else 0)
    grouped = direct_all_to_all_plan(n, grouped=True)
    assert validate(grouped) == [] and len(grouped.steps) == (1 if n > 1 else 0)
    pairwise = direct_all_to_all_plan(n)
    assert len(pairwise.steps) == (0 if n == 1 else n - 1 if n % 2 == 0 else n)
    for step in pairwise.steps:  # one send and one receive per rank per step, partners swap
        pairs = Counter((t.src, t.dst) for t in step.transfers)
        assert all(pairs[(b, a)] == 1 for a, b in pairs)
        assert len({t.src for t in step.transfers}) == len(step.transfers)


@pytest.mark.parametrize("n", range(1, 9))
def test_reduce_scatter_leaves_chunk_r_on_rank_r_like_torch(n):
    full = (1 << n) - 1
    final = holdings_after_each_step(ring_reduce_scatter_plan(n))[-1]
    assert [final[r][r] for r in range(n)] == [full] * n
    # The all-reduce's first phase is also a valid reduce-scatter, but leaves chunk r+1 on rank r.
    unshifted = Plan("rs", "reduce_scatter", n, n, tuple(ring_reduce_scatter_steps(n)))
    assert validate(unshifted) == []
    assert all(holdings_after_each_step(unshifted)[-1][r][(r + 1) % n] == full for r in range(n))


def _wrong_plans() -> dict[str, tuple[Plan, str]]:
    n = 3
    shift = tuple(
        Step("a2a", tuple(Transfer(r, (r + s) % n, (r + s) % n, "copy", r) for r in range(n)))
        for s in range(1, n)
    )
    early = chain_broadcast_plan(3, 0, 3).steps
    return {
        # The out-of-place textbook schedule overwrites chunk r-s before rank r has sent it.
        "shifted all-to-all in place": (Plan("x", "all_to_all", n, n, shift), "needs"),
        "forward before arrival": (
            Plan(
                "x",
                "broadcast",
                3,
                3,
                (Step("b", (Transfer(0, 1, 0, "copy"), Transfer(1, 2, 0, "copy"))),) + early[1:],
            ),
            "holds nothing",
        ),
        "all-gather offset of the all-reduce": (
            Plan("x", "all_gather", n, n, tuple(ring_all_gather_steps(n, 1))),
            "needs",
        ),
        "reduce counted twice": (
            Plan(
                "x",
                "reduce",
                3,
                1,
                (
                    Step("r", (Transfer(1, 0, 0), Transfer(2, 0, 0))),
                    Step("r", (Transfer(1, 0, 0),)),
                ),
            ),
            "counted twice",
        ),
        "gather missing a rank": (
            Plan("x", "gather", 3, 3, (Step("g", (Transfer(1, 0, 1, "copy"),)),)),
            "needs",
        ),
        "scatter from a non-root": (
            Plan("x", "scatter", 3, 3, (Step("s", (Transfer(1, 2, 2, "copy"),)),)),
            "holds nothing",
        ),
    }


@pytest.mark.parametrize("case", list(_wrong_plans()))
def test_wrong_plans_are_caught(case):
    plan, message = _wrong_plans()[case]
    problems = validate(plan)
    assert problems and any(message in p.message for p in problems)


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("name", NAMES)
def test_plans_move_exactly_the_volume_formula(name, n):
    for root in range(n) if name in ROOTED else [0]:
        plan = COLLECTIVE_PLANS[name](n, root)
        s = 840 * plan.num_chunks  # equal chunks of 840 B (divisible by 1..8)
        sent, recv = _plan_bytes(plan, 840)
        f = volume_formula(name, n, s, root)
        assert sent == f["sent"] and recv == f["recv"] and f["S"] == s


def test_bus_factors_per_collective():
    """One table of factors: nccl-tests' values, named sources, and the alpha-beta model's busbw."""
    want = {
        "all_reduce": 1.5,
        "all_gather": 0.75,
        "reduce_scatter": 0.75,
        "all_to_all": 0.75,
        "broadcast": 1.0,
        "reduce": 1.0,
        "gather": 0.75,
        "scatter": 0.75,
    }
    for name in NAMES:
        assert bus_factor(name, 4) == pytest.approx(want[name])
        source = bus_factor_source(name)
        assert source.startswith("nccl-tests src/") and "GetBw" in source
        model = predict("ring" if name == "all_reduce" else name, 4, 1 << 20, "nvlink4-h100")
        assert model.busbw_gbps == pytest.approx(model.algbw_gbps * want[name])


@pytest.mark.parametrize(
    "call,match",
    [
        (
            lambda: chain_broadcast_plan(4, 4),
            "root=4 is not valid: expected an integer in \\[0, 3\\]",
        ),
        (lambda: chain_reduce_plan(0), "world_size=0"),
        (lambda: chain_broadcast_plan(4, 0, 0), "num_chunks=0"),
        (lambda: direct_gather_plan(3, -1), "root=-1"),
        (lambda: volume_formula("allgather", 4, 64), "collective='allgather'"),
    ],
)
def test_bad_builder_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ----------------------------------------------------------------- real ranks
def _planned(plan: Plan, chunk_bytes: list[int]) -> list:
    """The events the plan says a run records (a recv's chunk is where the data lands)."""
    return plan_events(plan, chunk_bytes)


def _check_run(report, root):
    n = report.world_size
    assert report.matches_builtin, format_collective(report)
    planned = _planned(report.plan, report.trace.meta["chunk_bytes"])
    assert Counter(map(_key, report.trace.events)) == Counter(map(_key, planned))
    f = volume_formula(report.collective, n, report.nbytes, root)
    assert report.formula == f
    return f


@pytest.mark.multiprocess
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("name", NAMES)
def test_four_ranks_match_the_builtin_trace_the_plan_and_send_the_formula(cluster4, name, dtype):
    report = run_collective(cluster4, name, 4096, dtype, root=1)
    f = _check_run(report, 1)
    assert report.per_rank_sent_bytes == f["sent"] and report.per_rank_recv_bytes == f["recv"]
    assert report.busbw_gbps == pytest.approx(report.algbw_gbps * bus_factor(name, 4))
    assert report.algbw_gbps == pytest.approx(report.nbytes / report.time_s / 1e9)


@pytest.mark.multiprocess
@pytest.mark.parametrize("name", NAMES)
def test_three_ranks_even_and_uneven_sizes(cluster3, name):
    for dtype, size in (("float32", 48), ("int64", 96)):  # a multiple of 3 * itemsize
        report = run_collective(cluster3, name, size, dtype, root=2)
        f = _check_run(report, 2)
        assert report.per_rank_sent_bytes == f["sent"]
    if name in EQUAL_CHUNKS:  # 1000 B of int64 = 125 elements: no equal thirds for the builtin
        with pytest.raises(
            ValueError,
            match="size=1000 is not valid: expected a multiple of n\\*itemsize = 24 bytes",
        ):
            run_collective(cluster3, name, 1000, "int64", root=2)
        assert run_collective(cluster3, name, 48, "int64").matches_builtin  # nothing hung
    else:
        report = run_collective(cluster3, name, 1000, "int64", root=2)
        f = _check_run(report, 2)
        chunk = max(report.trace.meta["chunk_bytes"])
        assert all(
            abs(a - b) < chunk for a, b in zip(report.per_rank_sent_bytes, f["sent"], strict=True)
        )
        if name != "all_reduce":  # a chain moves every chunk once per link: exactly S
            assert report.per_rank_sent_bytes == f["sent"]


@pytest.mark.multiprocess
def test_two_ranks_large_untraced_and_segmented(cluster2):
    for name in NAMES:
        big = run_collective(cluster2, name, "64KiB", root=1)
        assert big.matches_builtin and big.before is None and big.trace.snapshots == []
        quiet = run_collective(cluster2, name, 4096, "int64", trace=False)
        f = volume_formula(name, 2, 4096)
        assert quiet.trace.events == [] and quiet.matches_builtin
        assert quiet.per_rank_sent_bytes == f["sent"] and quiet.per_rank_recv_bytes == f["recv"]
    for name in ("all_to_all", "broadcast", "reduce_scatter"):  # ~11 pieces per message
        report = run_collective(cluster2, name, 2048, "int64", segment_bytes=96)
        _check_run(report, 0)


@pytest.mark.multiprocess
def test_buffers_before_and_after_show_the_semantics(cluster4):
    a2a = run_collective(cluster4, "alltoall", 64, "int64", pattern="rank")  # 2 elements a chunk
    assert a2a.before == [[r] * 8 for r in range(4)]
    assert a2a.after == [[k for k in range(4) for _ in range(2)]] * 4  # chunk k from rank k
    gather = run_collective(cluster4, "gather", 64, "int64", pattern="powers_of_two", root=3)
    assert gather.before[1] == [0, 0, 2, 2, 0, 0, 0, 0]  # only its own chunk is input
    assert gather.after[3] == [1, 1, 2, 2, 4, 4, 8, 8] and gather.defined[0] == []
    bcast = run_collective(cluster4, "broadcast", 64, "int64", pattern="powers_of_two", root=2)
    assert bcast.before[0] == [0] * 8 and bcast.after == [[4] * 8] * 4
    rs = run_collective(cluster4, "reduce_scatter", 64, "int64", pattern="powers_of_two")
    assert [rs.after[r][2 * r : 2 * r + 2] for r in range(4)] == [[15, 15]] * 4
    assert rs.defined == [[0], [1], [2], [3]]


@pytest.mark.multiprocess
def test_before_after_figure_draws_the_real_buffers(cluster4):
    from edu_parallel.viz import before_after

    report = run_collective(cluster4, "all_to_all", 128, "int64")  # random: every chunk unique
    for source in (report, report.trace):
        fig = before_after(source)
        after = fig.axes[1]
        assert len([p for p in after.patches if p.get_gid() == "cell"]) == 16
        heads = [t.get_text().split("\n")[0] for t in after.texts if t.get_gid() == "label"]
        assert heads == [f"r{k}:c{r}" for r in range(4) for k in range(4)]
    reduce = run_collective(cluster4, "reduce", 64, "int64", root=1)
    heads = [t.get_text().split("\n")[0] for t in before_after(reduce).axes[1].texts]
    assert heads.count("undefined") == 12 and heads[4:8] == ["\u03a3"] * 4
    big = run_collective(cluster4, "all_gather", "64KiB")
    with pytest.raises(ValueError, match="no buffers"):
        before_after(big)


@pytest.mark.multiprocess
def test_bad_run_arguments_raise_before_anything_runs(cluster2):
    with pytest.raises(ValueError, match="name='allreduce'"):
        run_collective(cluster2, "allreduce")
    with pytest.raises(ValueError, match="root=2 is not valid"):
        run_collective(cluster2, "gather", 64, root=2)
    with pytest.raises(ValueError, match="expected a multiple of n\\*itemsize = 16 bytes"):
        run_collective(cluster2, "scatter", 104, "float64")  # 13 elements: not 2 equal chunks
    with pytest.raises(ValueError, match="whole number of float64 elements .* such as 96 or 104"):
        run_collective(cluster2, "scatter", 100, "float64")  # not even whole elements


# ----------------------------------------------------------------- command line
@pytest.mark.multiprocess
def test_cli_json_for_two_collectives():
    keys = (
        "concept",
        "world_size",
        "nbytes",
        "dtype",
        "per_rank_sent_bytes",
        "per_rank_recv_bytes",
        "formula_sent_bytes",
        "matches_builtin",
        "steps",
        "time_s",
        "algbw_gbps",
        "busbw_gbps",
        "plan",
    )
    out = cli(
        "run", "allgather", "--world-size", "3", "--size", "960", "--dtype", "int64", "--json"
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert all(k in data for k in keys)
    assert data["concept"] == "allgather" and data["matches_builtin"] is True and data["steps"] == 2
    assert data["per_rank_sent_bytes"] == data["formula_sent_bytes"] == [640] * 3
    assert data["plan"].startswith("plan ring_all_gather all_gather n=3 chunks=3")
    out = cli("run", "scatter", "--world-size", "2", "--size", "1KiB", "--root", "1", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["root"] == 1 and data["per_rank_sent_bytes"] == [0, 512]
    assert data["per_rank_recv_bytes"] == [512, 0] and data["matches_builtin"] is True
    assert set(CLI_NAMES) <= set(cli("run", "--help").stdout.split())


def test_cli_bad_size_is_one_line():
    out = cli("run", "alltoall", "--world-size", "4", "--size", "100")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith(
        "error: --size='100' is not valid: expected a multiple of n*itemsize = 16 bytes"
    )


def test_before_after_draws_a_simulated_trace_without_torch():
    code = (
        "from edu_parallel.viz import before_after\n"
        "from edu_parallel.models.simulation import simulate\n"
        "from edu_parallel.plans.collectives import chain_reduce_plan\n"
        "trace, _ = simulate(chain_reduce_plan(3, 2), 72, 'int64', pattern='random')\n"
        "fig = before_after(trace)\n"
        "print([t.get_text().split(chr(10))[0] for t in fig.axes[1].texts])\n"
    )
    done = fresh_python(code)  # and torch was not imported
    assert done.stdout.strip() == str(["undefined"] * 6 + ["\u03a3"] * 3)  # only the root defined


def test_builtin_and_volume_tables_read_the_reports(cluster4):
    reports = {name: run_collective(cluster4, name, 4096, "float32", root=0) for name in NAMES}
    checks, volumes = builtin_table(reports), volume_table(reports)
    assert list(checks.index) == list(NAMES) == list(volumes.index)
    for name, r in reports.items():
        assert r.matches_builtin
        assert checks.loc[name, "matches torch builtin"] == r.matches_builtin
        assert checks.loc[name, "reference"] == r.reference
        row = volumes.loc[name]
        assert row["sent per rank (counted, B)"] == r.per_rank_sent_bytes
        formula = volume_formula(name, 4, 4096, 0)["sent"]
        assert row["sent per rank (formula, B)"] == [round(x) for x in formula]
        assert row["sent per rank (counted, B)"] == row["sent per rank (formula, B)"]  # even
        assert row["busbw factor"] == bus_factor(name, 4)
