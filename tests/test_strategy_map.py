"""The strategy map: DP, TP, TP+SP, PP, EP on one tiny model, measured from the traces.

Every expected number is computed here from the sizes (or, for EP, from the routing the ranks
returned), not by the code under test.
"""

from __future__ import annotations

import json

import pytest
from helpers import Recorder, checked_names, cli, count_checks, fresh_python, no_process_cluster

from edu_parallel.app.cli import main
from edu_parallel.core.trace import Event, Trace
from edu_parallel.strategy_map.formulas import (
    STRATEGIES,
    MapConfig,
    MapRun,
    formula_param_bytes,
    formula_sent_bytes,
)
from edu_parallel.strategy_map.report import run_strategy_map
from edu_parallel.strategy_map.strategies import strategy_job
from edu_parallel.strategy_map.table import measure
from edu_parallel.strategy_map.tables import crossover_table, formula_table

CFG = MapConfig()
L, H, B, S, E = CFG.layers, CFG.hidden, CFG.batch, CFG.seq, CFG.experts
T = B * S  # tokens per step
F4 = 4  # bytes per fp32 element
BLOCK = 4 * H * H + 4 * H + H * 4 * H + H  # W1, b1, W2, b2


@pytest.fixture(scope="module")
def report2(cluster2):
    return run_strategy_map(cluster2)


@pytest.fixture(scope="module")
def report4(cluster4):
    return run_strategy_map(cluster4)


@pytest.fixture(params=["report2", "report4"])
def report(request):
    return request.getfixturevalue(request.param)


def ring_all_reduce(n: int, nbytes: float) -> float:
    return 2 * (n - 1) / n * nbytes


def test_every_strategy_equals_one_process(report):
    assert set(report.runs) == {"dp", "tp", "tp-sp", "pp", "ep"}
    for run in report.runs.values():
        assert run.matches_reference, (run.name, run.max_abs_diff)
        assert run.max_abs_diff < 1e-4
    assert report.matches_builtin


def test_dp_replicates_params_and_all_reduces_the_gradients_once(report):
    n, dp = report.world_size, report.runs["dp"]
    for row in dp.per_rank:
        assert row["param_bytes"] == L * BLOCK * F4
        assert row["ops"] == {"all_reduce": 1} and row["messages"] == 1
        assert row["sent_bytes"] == pytest.approx(ring_all_reduce(n, L * BLOCK * F4))
        assert row["sent_by_pass"]["grad_sync"] == row["sent_bytes"]
        # saved per block: x (T,h), W1 x (T,4h), GeLU (T,4h); the loss saves out - y (T,h)
        assert row["activation_bytes"] == T // n * (9 * H * L + H) * F4
    assert report.reference_activation_bytes == T * (9 * H * L + H) * F4
    assert (
        formula_sent_bytes("dp", n, 0, layers=L, hidden=H, tokens=T) == dp.per_rank[0]["sent_bytes"]
    )


def test_tp_splits_the_matrices_and_all_reduces_activations_in_both_passes(report):
    n, tp = report.world_size, report.runs["tp"]
    for r, row in enumerate(tp.per_rank):
        assert row["param_bytes"] == L * ((8 * H * H + 4 * H) // n + H) * F4
        assert row["ops"] == {"all_reduce": 2 * L}
        assert row["sent_bytes"] == pytest.approx(2 * L * ring_all_reduce(n, T * H * F4))
        assert row["sent_by_pass"]["forward"] == row["sent_by_pass"]["backward"]
        assert row["sent_by_pass"]["grad_sync"] == 0
        # the h-wide tensors stay whole on every rank (no sequence parallelism), the 4h ones split
        assert row["activation_bytes"] == T * (L * (H + 8 * H // n) + H) * F4
        assert row["holds"]["block0.w1"]["fraction"] == pytest.approx(1 / n)
        assert row["holds"]["block0.w1"]["index"][0] == [r * 4 * H // n, (r + 1) * 4 * H // n]
        assert row["holds"]["block0.w2"]["index"][1] == [r * 4 * H // n, (r + 1) * 4 * H // n]
        assert row["holds"]["block0.b2"]["fraction"] == 1.0
    assert tp.per_rank[0]["param_bytes"] == formula_param_bytes("tp", n, layers=L, hidden=H)
    forward = [e for e in tp.trace.events if e.kind == "collective" and e.phase == "forward"]
    assert all(e.op == "all_reduce" and e.nbytes == T * H * F4 for e in forward)
    assert len(forward) == n * L


def test_tp_sp_splits_the_residual_stream_along_the_sequence(report):
    from edu_parallel.engine.context import ALL_GATHER, REDUCE_SCATTER

    n, sp, tp = report.world_size, report.runs["tp-sp"], report.runs["tp"]
    b2_sync = ring_all_reduce(n, L * H * F4)  # the L replicated b2 gradients, one bucket
    for r, row in enumerate(sp.per_rank):
        assert row["param_bytes"] == tp.per_rank[r]["param_bytes"]  # the same shards as TP
        assert row["holds"] == tp.per_rank[r]["holds"]
        # per block and pass: all-gather (T h) + reduce-scatter (T/t h) = TP's one all-reduce;
        # backward also gathers W1's input again, (N-1)/N T h per block
        assert row["ops"] == {ALL_GATHER: 3 * L, REDUCE_SCATTER: 2 * L, "all_reduce": 1}
        assert row["messages"] == 5 * L + 1
        fwd = L * ring_all_reduce(n, T * H * F4)
        regather = L * (n - 1) / n * T * H * F4
        assert row["sent_by_pass"]["forward"] == pytest.approx(fwd)
        assert row["sent_by_pass"]["backward"] == pytest.approx(fwd + regather)
        assert row["sent_by_pass"]["grad_sync"] == pytest.approx(b2_sync)
        assert row["sent_bytes"] == pytest.approx(tp.per_rank[r]["sent_bytes"] + regather + b2_sync)
        assert row["sent_bytes"] == pytest.approx(
            formula_sent_bytes("tp-sp", n, r, layers=L, hidden=H, tokens=T)
        )
        # saved per block: W1's input, its sequence block only (T/t, h), W1 x and its GeLU
        # (T, 4h/t) each; the loss saves out - y on the rank's T/t tokens: T/t (9hL + h), DP's
        assert row["activation_bytes"] == (T * L * (H // n + 8 * H // n) + T // n * H) * F4
        assert row["activation_bytes"] == report.runs["dp"].per_rank[r]["activation_bytes"]
        assert row["activation_bytes"] < tp.per_rank[r]["activation_bytes"]
    assert sp.per_rank[0]["param_bytes"] == formula_param_bytes("tp-sp", n, layers=L, hidden=H)
    # rank 0's collectives in order: per block gather (b, s, h) then scatter to (b, s/t, h);
    # backward, per block from the last: gather dY, gather X again, scatter dX; then the b2 bucket
    gather, scatter = (ALL_GATHER, T * H * F4), (REDUCE_SCATTER, T // n * H * F4)
    got = [(e.phase, e.op, e.nbytes) for e in sp.trace.select("collective", rank=0)]
    want = [("forward", *c) for _ in range(L) for c in (gather, scatter)]
    want += [("backward", *c) for _ in range(L) for c in (gather, gather, scatter)]
    assert got == [*want, ("grad_sync", "all_reduce", L * H * F4)]


def test_pp_sends_activations_to_neighbours_only(report):
    n, pp = report.world_size, report.runs["pp"]
    m = report.microbatches
    assert m == 2 * n
    sends = pp.trace.select("send")
    assert sends and all(abs(e.peer - e.rank) == 1 for e in sends)
    assert all(e.peer == e.rank + 1 for e in sends if e.phase == "forward")
    assert all(e.peer == e.rank - 1 for e in sends if e.phase == "backward")
    assert not pp.trace.select("collective")
    for r, row in enumerate(pp.per_rank):
        hops = (r < n - 1) + (r > 0)
        assert row["sent_bytes"] == hops * T * H * F4
        assert row["messages"] == hops * m
        assert row["param_bytes"] == L // n * BLOCK * F4
        assert set(row["holds"]) == {
            f"block{i}.{k}"
            for i in range(r * L // n, (r + 1) * L // n)
            for k in ("w1", "b1", "w2", "b2")
        }
        # 1F1B: stage r keeps min(n - r, m) microbatches of its blocks; the last also the loss
        per_mb = T // m * 9 * H * (L // n) * F4 + (T // m * H * F4 if r == n - 1 else 0)
        assert row["activation_bytes"] == min(n - r, m) * per_mb


def test_ep_moves_tokens_by_all_to_all_and_only_the_router_is_all_reduced(report):
    n, ep = report.world_size, report.runs["ep"]
    f = 4 * H // E
    expert = H * f + f + f * H + H
    router = H * E + E
    row_bytes = H * F4
    for r, row in enumerate(ep.per_rank):
        assert (
            set(row["ops"]) == {"all_to_all_single", "all_reduce"} and row["ops"]["all_reduce"] == 1
        )
        assert row["param_bytes"] == L * (router + E // n * expert) * F4
        assert row["sent_by_pass"]["grad_sync"] == pytest.approx(
            ring_all_reduce(n, L * router * F4)
        )
        assert row["holds"]["block0.experts.w1"]["index"][0] == [r * E // n, (r + 1) * E // n]
        assert row["holds"]["block0.router.weight"]["fraction"] == 1.0
    # forward: per block, the counts exchange (E/N int64 to each peer), the dispatch (rank r's kept
    # assignments whose expert lives elsewhere) and the combine (rows other ranks sent to r)
    routings = ep.extra["routings"]
    owner = [[[0] * n for _ in range(n)] for _ in range(L)]  # [block][src][dst] kept rows
    for src in range(n):
        for blk, rt in enumerate(routings[src]):
            for e_id in rt["experts"][rt["kept"]].tolist():
                owner[blk][src][e_id // (E // n)] += 1
    for r, row in enumerate(ep.per_rank):
        dispatch = [sum(owner[b][r][d] for d in range(n) if d != r) * row_bytes for b in range(L)]
        combine = [sum(owner[b][s][r] for s in range(n) if s != r) * row_bytes for b in range(L)]
        counts = L * (n - 1) * (E // n) * 8
        assert row["sent_by_pass"]["forward"] == counts + sum(dispatch) + sum(combine)
        # backward: the gradients travel back the same ways; block 0's input is data (no dX)
        assert row["sent_by_pass"]["backward"] == sum(dispatch) + sum(combine[1:])


def test_table_rows_and_json(report):
    data = json.loads(json.dumps(report.to_json_dict()))
    assert data["concept"] == "map" and data["matches_reference"]
    assert len(data["rows"]) == 5 * report.world_size
    assert data["dense_param_bytes"] == L * BLOCK * F4
    text = report.format()
    assert "DP" in text and "all_to_all_single" in text and "DOES NOT MATCH" not in text
    assert {e.phase.split("/")[0] for e in report.trace.events} == set(STRATEGIES)
    assert "TP+SP" in text


def test_measure_needs_a_split_mark_per_all_to_all():
    ev = [Event(kind="collective", rank=0, op="all_to_all_single", nbytes=64, phase="dispatch")]
    with pytest.raises(ValueError, match="split marks"):
        measure(Trace({"world_size": 1}, ev), 1)


@pytest.mark.parametrize(
    ("n", "kw", "match"),
    [
        (3, {"hidden": 16}, "hidden=16"),  # 4h = 64 is not a multiple of TP degree 3
        (2, {"top_k": 5}, "top_k=5"),
        (4, {"experts": 6}, "experts=6"),
        (2, {"capacity_factor": 0}, "capacity_factor=0"),
        (4, {"layers": 2}, "layers=2"),
        (4, {"batch": 6}, "batch=6"),
        (2, {"microbatches": 3}, "microbatches=3"),
        (2, {"schedule": "zb"}, "schedule='zb'"),
        (2, {"lr": -1}, "lr=-1"),
        (4, {"seq": 6}, "seq=6"),  # TP+SP: 6 positions do not split into 4 sequence blocks
    ],
)
def test_bad_arguments_name_the_parameter(n, kw, match):
    with pytest.raises(ValueError, match=match) as err:
        MapRun.build(n, **kw)
    assert "\n" not in str(err.value)


def test_bad_strategy_lists():
    for bad in ("dp", [], ["dp", "xx"], ["dp", "dp"]):
        with pytest.raises(ValueError, match="strategies="):
            MapRun.build(2, bad)
    assert MapRun.build(3, ["dp", "pp"], layers=3, batch=6).strategies == ("dp", "pp")
    assert MapRun.build(4, ["dp", "tp"], seq=6).strategies == ("dp", "tp")  # only TP+SP: seq/N
    assert MapRun.build(4, "dp,tp,tp-sp,pp,ep".split(",")).strategies == STRATEGIES


def test_a_map_config_names_every_bad_size_at_once() -> None:
    with pytest.raises(ValueError) as err:
        MapConfig(layers=0, seq=2000, experts=3, microbatches=9, lr=0)
    names = [part.split("=")[0] for part in str(err.value).split("; ")]
    assert names == ["layers", "seq", "experts", "microbatches", "lr"]
    assert MapConfig(lr=1).lr == 1.0 and MapConfig(microbatches=8).microbatches == 8


def test_the_map_is_checked_once_and_the_ranks_receive_its_config(monkeypatch) -> None:
    """Python entry: one MapConfig and one MapRun per call; every strategy's job receives the
    same config object. The CLI: the world size once, the map once, the same config again."""
    configs, runs = count_checks(monkeypatch, MapConfig), count_checks(monkeypatch, MapRun)
    recorder = Recorder(2)
    assert run_strategy_map(recorder, ["dp", "tp", "pp"]) is None
    assert [(fn, args[0]) for fn, args in recorder.calls] == [
        (strategy_job, s) for s in ("dp", "tp", "pp")
    ]
    assert all(args[1] is configs[0] is runs[0].config for _fn, args in recorder.calls)
    assert len(configs) == len(runs) == 1
    records, names = no_process_cluster(monkeypatch), checked_names(monkeypatch)
    assert main(["run", "map", "--world-size", "2", "--strategies", "dp,ep"]) == 0
    assert names.count("world_size") == 1 and len(configs) == len(runs) == 2
    assert [args[1] for _c, _fn, args in records] == [configs[1]] * 2


def test_renderers_read_report_data(report2):
    from edu_parallel.viz.strategy_map import (
        map_table_figure,
        sent_bars_figure,
        split_figure,
        split_grid,
        table_cells,
    )

    data = json.loads(json.dumps(report2.to_json_dict()))
    rows, cols, values = table_cells(data)
    assert rows[0] == "DP r0" and len(rows) == 10 and len(cols) == 4
    assert (
        rows[4] == "TP+SP r0"
        and values[4][1] == report2.runs["tp-sp"].per_rank[0]["activation_bytes"]
    )
    assert values[2][0] == report2.runs["tp"].per_rank[0]["param_bytes"]
    names, frac, _ = split_grid(data["runs"]["pp"])
    assert frac[0][names.index("block0.w1")] == 1.0 and frac[1][names.index("block0.w1")] == 0.0
    assert len(map_table_figure(data).data) == 1
    assert len(split_figure(report2).data) == 5
    assert len(sent_bars_figure(data).data) == 3
    with pytest.raises(ValueError, match="report="):
        map_table_figure({"concept": "zero"})


def test_renderer_module_imports_no_torch():
    fresh_python("import edu_parallel.viz.strategy_map, edu_parallel.quiz.banks.strategy_map")


def test_cli_map_json():
    args = ("--world-size", "2", "--strategies", "dp,tp-sp,pp", "--layers", "2", "--json")
    done = cli("run", "map", *args)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["matches_reference"] and set(data["runs"]) == {"dp", "tp-sp", "pp"}
    bad = cli("run", "map", "--world-size", "2", "--top-k", "9")
    assert bad.returncode == 2 and "--top-k=9" in bad.stderr


def test_formula_table_puts_trace_beside_formula(report2, cluster2):
    df = formula_table(report2)
    assert list(df.index.get_level_values("strategy").unique()) == ["DP", "TP", "TP+SP", "PP"]
    for s in ("dp", "tp", "tp-sp", "pp"):
        run = report2.runs[s]
        for r, row in enumerate(run.per_rank):
            got = df.loc[(run.name, r)]
            assert got["params (trace, B)"] == row["param_bytes"]
            assert got["sent (trace, B)"] == row["sent_bytes"]
            assert got["params (formula, B)"] == formula_param_bytes(s, 2, layers=L, hidden=H)
            assert got["sent (formula, B)"] == formula_sent_bytes(
                s, 2, r, layers=L, hidden=H, tokens=T
            )
    assert df.loc[("DP", 0), "sent (formula, B)"] == ring_all_reduce(2, L * BLOCK * F4)
    small = run_strategy_map(cluster2, ["dp", "tp"], batch=2 * B)
    table = crossover_table([small, report2])
    assert list(table.index) == [2 * T, T]
    assert table.loc[T, "DP sent per rank (B)"] == report2.runs["dp"].per_rank[0]["sent_bytes"]
    assert table.loc[T, "TP/DP"] == pytest.approx(
        report2.runs["tp"].per_rank[0]["sent_bytes"] / report2.runs["dp"].per_rank[0]["sent_bytes"]
    )
    assert table.loc[2 * T, "TP formula (B)"] == formula_sent_bytes(
        "tp", 2, 0, layers=L, hidden=H, tokens=2 * T
    )
    assert (table["T* = 4h + 2.5"] == 4 * H + 2.5).all()
