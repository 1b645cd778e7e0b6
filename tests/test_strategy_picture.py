"""Lesson 01's pictures: each rank's data mark and calls per pass, read off real runs, and the
figure of one strategy drawn from the report's data alone (no browser); lesson 01's
predict-then-run graded against a real TP run.

Every expected number is computed here from the sizes and the routing the ranks returned.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from helpers import fresh_python

from edu_parallel.quiz import map_quiz
from edu_parallel.strategy_map.formulas import MapConfig, formula_param_bytes
from edu_parallel.strategy_map.report import map_runner, run_strategy_map
from edu_parallel.viz.strategy_map import split_grid
from edu_parallel.viz.strategy_picture import OWN, ROUTED, data_grid, strategy_figure

CFG = MapConfig()
L, H, B, S, E = CFG.layers, CFG.hidden, CFG.batch, CFG.seq, CFG.experts


@pytest.fixture(scope="module")
def report4(cluster4):
    return run_strategy_map(cluster4)


@pytest.fixture(scope="module")
def data4(report4):
    return json.loads(json.dumps(report4.to_json_dict()))  # what a renderer reads


def test_each_rank_marks_the_rows_and_positions_it_computes_on(report4):
    n = report4.world_size
    per_b, per_s = B // n, S // n
    want = {  # strategy -> rank -> (rows, seq, microbatches)
        "dp": lambda r: ([r * per_b, (r + 1) * per_b], [0, S], 1),
        "ep": lambda r: ([r * per_b, (r + 1) * per_b], [0, S], 1),
        "tp": lambda r: ([0, B], [0, S], 1),
        "tp-sp": lambda r: ([0, B], [r * per_s, (r + 1) * per_s], 1),
        "pp": lambda r: ([0, B], [0, S], 2 * n),
    }
    for s, run in report4.runs.items():
        for r, row in enumerate(run.per_rank):
            d = row["data"]
            assert (d["rows"], d["seq"], d["microbatches"]) == want[s](r), (s, r)
            assert ("routed_to" in d) == (s == "ep")


def test_ep_marks_where_its_router_sent_each_token_in_the_first_block(report4):
    n, ep = report4.world_size, report4.runs["ep"]
    for r, row in enumerate(ep.per_rank):
        first = ep.extra["routings"][r][0]  # what the rank returned: (tokens, k) expert ids
        want = [
            sorted({e // (E // n) for e, kept in zip(es, ks, strict=True) if kept})
            for es, ks in zip(first["experts"].tolist(), first["kept"].tolist(), strict=True)
        ]
        assert row["data"]["routed_to"] == want
        assert len(want) == B // n * S and all(1 <= len(ranks) <= CFG.top_k for ranks in want)


def test_calls_per_pass_add_up_to_the_ops(report4):
    for run in report4.runs.values():
        for row in run.per_rank:
            total = Counter()
            for calls in row["calls_by_pass"].values():
                total.update(calls)
            assert dict(total) == row["ops"]
            assert set(row["calls_by_pass"]) == {p for p, b in row["sent_by_pass"].items() if b}
    assert report4.runs["dp"].per_rank[0]["calls_by_pass"] == {"grad_sync": {"all_reduce": 1}}
    tp = report4.runs["tp"].per_rank[0]["calls_by_pass"]
    assert tp == {"forward": {"all_reduce": L}, "backward": {"all_reduce": L}}


def test_the_data_grid_colours_each_ranks_own_tokens_and_eps_visitors(data4):
    n = data4["world_size"]
    codes, hover = data_grid(data4["runs"]["dp"], B, S)
    for r in range(n):
        own = [t for t, c in enumerate(codes[r]) if c == OWN]
        assert own == list(range(r * B // n * S, (r + 1) * B // n * S))
        assert f"rank {r}" in hover[r][0]
    codes, _ = data_grid(data4["runs"]["tp-sp"], B, S)
    assert [t % S for t, c in enumerate(codes[1]) if c] == [1] * B  # position 1 of every sequence
    codes, hover = data_grid(data4["runs"]["pp"], B, S)
    assert all(c == OWN for row in codes for c in row) and "microbatch 7 of 8" in hover[0][-1]
    ep = data4["runs"]["ep"]
    codes, _ = data_grid(ep, B, S)
    per = B // n * S  # tokens per rank
    for r in range(n):
        for t, c in enumerate(codes[r]):
            src, i = divmod(t, per)
            visits = r in ep["per_rank"][src]["data"]["routed_to"][i]
            assert c == (OWN if src == r else ROUTED if visits else 0), (r, t)
    assert any(ROUTED in row for row in codes)


@pytest.mark.parametrize("strategy", ["dp", "tp", "pp", "ep"])
def test_the_strategy_figure_draws_the_holds_the_data_and_the_bytes(data4, strategy):
    run = data4["runs"][strategy]
    fig = strategy_figure(data4, strategy)
    weights, tokens, *bars = fig.data
    names, frac, _ = split_grid(run)
    assert list(weights.x) == names and [list(z) for z in weights.z] == frac
    assert [list(z) for z in tokens.z] == data_grid(run, B, S)[0]
    sent = [sum(bar.x[r] for bar in bars) for r in range(data4["world_size"])]
    assert sent == pytest.approx([row["sent_bytes"] for row in run["per_rank"]])
    assert run["name"] in fig.layout.title.text
    assert fig.layout.width <= 940


def test_the_strategy_figure_names_a_strategy_the_report_lacks(data4):
    small = {**data4, "runs": {"dp": data4["runs"]["dp"]}}
    with pytest.raises(ValueError, match="^strategy='tp'"):
        strategy_figure(small, "tp")


def test_the_picture_module_imports_no_torch():
    fresh_python("import edu_parallel.viz.strategy_picture")


def test_lesson_01s_prediction_is_graded_against_a_real_tp_run(cluster2):
    q = map_quiz(runner=map_runner(cluster2, ["tp"])).by_key("predict_map_tp_params")
    assert not q.has_run
    held = q.truth(q.result())
    assert set(q.result().runs) == {"tp"}
    assert held == formula_param_bytes("tp", 2, layers=L, hidden=H) == q.predict.answer
    half = formula_param_bytes("dp", 1, layers=L, hidden=H) / 2  # "half the model" is close
    assert q.check(held).correct and q.check(half).correct
    assert not q.check(held / 2).correct and not q.check(2 * held).correct
