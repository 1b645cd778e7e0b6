"""Expert parallelism on gloo ranks: router, capacity, all-to-all layer vs one process, traffic,
CLI, pictures.

Shazeer et al. 2017 (arXiv 1701.06538), GShard (arXiv 2006.16668), Switch (arXiv 2101.03961).
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from helpers import Recorder, count_checks, fresh_python

from edu_parallel.app.cli import build_parser, main
from edu_parallel.app.concepts.registry import CONCEPTS
from edu_parallel.core.dims import ParallelDims
from edu_parallel.expert_parallel.config import MoEConfig
from edu_parallel.expert_parallel.experts import init_moe, make_tokens
from edu_parallel.expert_parallel.formulas import (
    all_to_one_dropped,
    balanced_dispatch_bytes,
    expert_capacity,
    padded_dispatch_bytes,
)
from edu_parallel.expert_parallel.layer import moe_job, moe_reference
from edu_parallel.expert_parallel.report import (
    format_moe,
    moe_routing_stats,
    moe_runner,
    run_moe,
    run_moe_config,
)
from edu_parallel.expert_parallel.router import capacity_positions, route
from edu_parallel.expert_parallel.tables import (
    bytes_into,
    dispatch_table,
    experts_table,
    skew_table,
)
from edu_parallel.quiz.banks.expert_parallel import HOT_SKEW, formula_runner, moe_quiz

A2A = "all_to_all_single"


# ----------------------------------------------------------------- router and capacity, one process
def test_capacity_formula() -> None:
    assert expert_capacity(16, 8, 2, 1.25) == 5  # 1.25 * 16 * 2 / 8 = 5 exactly
    assert expert_capacity(10, 4, 1, 1.0) == 3  # 2.5 rounded up
    assert expert_capacity(8, 8, 1, 1.0) == 1
    assert expert_capacity(3, 64, 1, 0.01) == 1  # never 0
    assert balanced_dispatch_bytes(16, 2, 8, 4) == 3 / 4 * 16 * 2 * 8 * 4
    assert all_to_one_dropped(4, 16, 5) == 44 and all_to_one_dropped(2, 3, 5) == 0
    assert padded_dispatch_bytes(8, 5, 8, 4) == 3 * 2 * 5 * 8 * 4  # 3 peers x E/N x C x h x 4
    assert padded_dispatch_bytes(6, 7, 3, 3, itemsize=2) == 2 * 2 * 7 * 3 * 2


def test_capacity_positions_follow_gshard_priority() -> None:
    """All first choices in token order, then all second choices: checked with a plain loop."""
    g = torch.Generator().manual_seed(3)
    t, k, e = 13, 3, 4
    choices = torch.stack([torch.randperm(e, generator=g)[:k] for _ in range(t)])  # (T, k)
    want = [[0] * k for _ in range(t)]
    seen = [0] * e
    for j in range(k):
        for i in range(t):
            want[i][j] = seen[choices[i, j]]
            seen[choices[i, j]] += 1
    assert capacity_positions(choices, e).tolist() == want


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_router_gates_and_capacity(top_k: int) -> None:
    params = init_moe(6, 5, seed=2)
    x, _ = make_tokens(1, 20, 5, seed=2)
    r = route(x, params.router, top_k, 0.75)
    logits = x @ params.router.weight.T + params.router.bias
    assert r.experts.tolist() == logits.argsort(-1, descending=True)[:, :top_k].tolist()
    if top_k == 1:  # Switch: the raw softmax probability
        want = logits.softmax(-1).max(-1, keepdim=True).values
    else:  # GShard / Mixtral: softmax over the top-k logits = renormalised probabilities
        want = logits.gather(1, r.experts).softmax(-1)
    assert torch.allclose(r.gates, want, atol=1e-6)
    assert r.capacity == math.ceil(0.75 * 20 * top_k / 6)
    per_expert = torch.bincount(r.experts[r.kept], minlength=6)
    assert int(per_expert.max()) <= r.capacity
    assert torch.equal(r.kept, r.positions < r.capacity)


def test_skew_biases_toward_expert_zero() -> None:
    x, _ = make_tokens(1, 32, 8)
    plain = route(x, init_moe(8, 8).router, 1, 8.0)
    hot = route(x, init_moe(8, 8, skew=20.0).router, 1, 8.0)
    assert int((plain.experts == 0).sum()) < 32
    assert int((hot.experts == 0).sum()) == 32


def test_dense_reference_equals_a_token_loop() -> None:
    """The reference (every expert on every token, combine matrix) against a per-token loop."""
    params = init_moe(4, 6, seed=5)
    x, _ = make_tokens(2, 9, 6, seed=5)
    y, routings = moe_reference(
        x, params.router, params.experts, top_k=2, capacity_factor=0.5, groups=2
    )
    w1, b1, w2, b2 = (p.detach() for p in params.experts.parameters())
    want = torch.zeros_like(x)
    dropped = 0
    for gi, r in enumerate(routings):
        for t in range(9):
            for j in range(2):
                e = int(r.experts[t, j])
                if r.kept[t, j]:
                    xt = x[gi * 9 + t]
                    want[gi * 9 + t] += r.gates[t, j] * (F.gelu(xt @ w1[e] + b1[e]) @ w2[e] + b2[e])
                else:
                    dropped += 1
    assert dropped > 0  # C = 0.5 drops
    assert torch.allclose(y, want.detach(), atol=1e-6)


# ----------------------------------------------------------------- the layer on real ranks
def independent_matrix(
    world: int, experts: int, top_k: int, c: float, skew: float, tokens: int, hidden: int
) -> list[list[int]]:
    """Kept assignments from rank s to the rank owning each expert, x h x 4 bytes, on one
    process."""
    params = init_moe(experts, hidden, skew=skew)
    x, _ = make_tokens(world, tokens, hidden)
    per = experts // world
    m = [[0] * world for _ in range(world)]
    for s in range(world):
        r = route(x[s * tokens : (s + 1) * tokens], params.router, top_k, c)
        for e in r.experts[r.kept].tolist():
            m[s][e // per] += hidden * 4
    return m


CASES = [
    dict(experts=8, top_k=2, capacity_factor=1.25, skew=0.0),
    dict(experts=4, top_k=1, capacity_factor=1.0, skew=3.0),
    dict(experts=8, top_k=8, capacity_factor=0.5, skew=0.0),  # every expert, half dropped
    dict(experts=12, top_k=3, capacity_factor=8.0, skew=2.0, tokens=10, hidden=6),  # no drops
]


@pytest.mark.parametrize("kw", CASES)
def test_four_ranks_match_one_process_forward_and_backward(cluster4, kw: dict) -> None:
    r = run_moe(cluster4, **kw)
    assert r.matches_reference and r.gradients_match, (r.max_abs_diff_output, r.max_abs_diff_grads)
    assert r.max_abs_diff_output < 1e-5 and max(r.max_abs_diff_grads.values()) < 1e-5
    assert set(r.max_abs_diff_grads) == {"dx", "router", "experts"}
    t, h = kw.get("tokens", 16), kw.get("hidden", 8)
    want = independent_matrix(
        4, kw["experts"], kw["top_k"], kw["capacity_factor"], kw["skew"], t, h
    )
    assert r.traffic_matrix_bytes == want and r.traffic_matches_routing
    assert sum(map(sum, want)) == (r.assignments - r.dropped_tokens) * h * 4  # drops never travel
    assert r.assignments == 4 * t * kw["top_k"]
    assert r.capacity == expert_capacity(t, kw["experts"], kw["top_k"], kw["capacity_factor"])
    assert max(r.expert_processed) <= 4 * r.capacity
    if kw["capacity_factor"] >= 8:
        assert r.dropped_tokens == 0
    if kw["top_k"] == kw["experts"]:  # each expert sees 16 per rank, keeps 8
        assert r.dropped_tokens == r.assignments // 2 and r.load_imbalance == 1.0
    assert "matches single-process reference: yes" in format_moe(r)


def test_trace_holds_every_exchange(cluster4) -> None:
    r = run_moe(cluster4)
    n, row = 4, 8 * 4
    m, by = r.traffic_matrix_bytes, r.traffic_by_exchange
    transpose = [list(col) for col in zip(*m, strict=True)]
    assert by["combine"] == transpose  # the outputs go back the way the tokens came
    assert by["combine_grad"] == m and by["dispatch_grad"] == transpose
    assert by["counts"] == [[2 * 8] * n for _ in range(n)]  # E/N int64 counts to every rank
    for rank in range(n):
        ev = [e for e in r.trace.events if e.kind == "collective" and e.rank == rank]
        assert [e.op for e in ev] == [A2A] * 5
        assert [e.phase for e in ev] == ["counts", "dispatch", "combine", "backward", "backward"]
        # the recorded buffer of each exchange is its output: what this rank received
        assert ev[1].nbytes == sum(m[s][rank] for s in range(n))
        assert ev[2].nbytes == sum(m[rank])
        # backward: combine_grad brings dy rows to the experts, dispatch_grad brings dx rows home
        assert ev[3].nbytes == ev[1].nbytes and ev[4].nbytes == ev[2].nbytes
    assert r.per_rank_sent_bytes == [sum(m[s]) - m[s][s] for s in range(n)]
    assert r.forward_collectives == [A2A] * 3 and r.backward_collectives == [A2A] * 2
    assert all(b % row == 0 for line in m for b in line)
    json.dumps(r.to_json_dict())


def test_skew_makes_a_hot_column_then_drops(cluster4) -> None:
    flat = run_moe(cluster4, top_k=1, capacity_factor=8.0)
    hot = run_moe(cluster4, top_k=1, capacity_factor=8.0, skew=4.0)
    capped = run_moe(cluster4, top_k=1, capacity_factor=1.0, skew=4.0)
    col = [sum(row[d] for row in hot.traffic_matrix_bytes) for d in range(4)]
    assert col[0] == max(col) and col[0] > 2 * sum(row[0] for row in flat.traffic_matrix_bytes)
    assert hot.dropped_tokens == 0 and hot.load_imbalance > 2 * flat.load_imbalance
    assert capped.dropped_tokens > 0 and capped.dropped_per_expert[0] == max(
        capped.dropped_per_expert
    )
    cap_bytes = capped.capacity * 2 * 8 * 4  # at most capacity rows per local expert per sender
    assert all(row[0] <= cap_bytes for row in capped.traffic_matrix_bytes)
    assert all(rep.matches_builtin for rep in (flat, hot, capped))


def test_all_tokens_to_one_expert_drops_the_formula(cluster4) -> None:
    r = run_moe(cluster4, experts=8, top_k=1, capacity_factor=1.0, skew=20.0, tokens=16)
    assert r.capacity == 2 and r.dropped_tokens == all_to_one_dropped(4, 16, 2) == 56
    assert r.traffic_matrix_bytes == [[2 * 8 * 4, 0, 0, 0] for _ in range(4)]
    stats = moe_routing_stats(4, 8, 1, 1.0, 20.0, 16)
    assert stats.dropped_tokens == 56 and stats.traffic_matrix_bytes == r.traffic_matrix_bytes


def test_quiz_formula_runner_equals_routed_tokens() -> None:
    """The quiz's default runner (a formula) gives what routing real tokens gives, for every
    configuration its predict-then-run question draws (top-1, hot skew)."""
    drawn = {
        tuple(moe_quiz(seed=s).by_key("predict_hot_dropped").params[k] for k in "NETC")
        for s in [None, *range(60)]
    }
    assert len(drawn) >= 12
    for n, e, t, c in sorted(drawn):
        want = moe_routing_stats(n, e, 1, c, HOT_SKEW, t)
        got = formula_runner(n, e, 1, c, HOT_SKEW, t)
        assert got.dropped_tokens == want.dropped_tokens, (n, e, t, c)
    assert got.traffic_matrix_bytes == want.traffic_matrix_bytes


def test_two_ranks_and_forward_only(cluster2) -> None:
    r = run_moe(
        cluster2, experts=2, top_k=2, capacity_factor=1.0, tokens=7, hidden=3, backward=False
    )
    assert r.matches_reference and not r.gradients_match and r.max_abs_diff_grads == {}
    assert r.backward_collectives == [] and r.traffic_matrix_bytes == independent_matrix(
        2, 2, 2, 1.0, 0.0, 7, 3
    )


def subgroup_job(ctx, dispatch: str = "variable") -> torch.Tensor:
    """Two expert-parallel groups {0, 1} and {2, 3}, each holding all 4 experts (2 per rank)."""
    import torch.distributed as dist

    from edu_parallel.expert_parallel.layer import moe_layer

    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    params = init_moe(4, 6, seed=1)
    local = params.experts.shard(ctx.rank % 2, 2)
    x_all, _ = make_tokens(4, 8, 6, seed=1)
    x = x_all[ctx.rank * 8 : (ctx.rank + 1) * 8]
    y, _ = moe_layer(
        ctx,
        x,
        params.router,
        local,
        top_k=2,
        capacity_factor=1.0,
        step=0,
        group=groups[ctx.rank // 2],
        dispatch=dispatch,
    )
    return y


@pytest.mark.parametrize("dispatch", ["variable", "padded"])
def test_layer_in_a_subgroup(cluster4, dispatch: str) -> None:
    from edu_parallel.core.marks import traffic_matrix

    out = cluster4.run(subgroup_job, dispatch)
    params = init_moe(4, 6, seed=1)
    x_all, _ = make_tokens(4, 8, 6, seed=1)
    m = traffic_matrix(out.trace)
    for g in (0, 1):
        xg = x_all[g * 16 : (g + 1) * 16]
        ref, routings = moe_reference(
            xg, params.router, params.experts, top_k=2, capacity_factor=1.0, groups=2
        )
        assert torch.allclose(torch.cat(out.results[2 * g : 2 * g + 2]), ref.detach(), atol=1e-5)
        for i, r in enumerate(
            routings
        ):  # rows of rank 2g+i to the group's two ranks, global columns
            kept = r.experts[r.kept].tolist()
            want = [0] * 4
            for e in kept:
                want[2 * g + e // 2] += 6 * 4
            if dispatch == "padded":  # 2 local experts x capacity 4 slots to each group peer
                want = [2 * 4 * 6 * 4 if d // 2 == g else 0 for d in range(4)]
            assert m[2 * g + i] == want


def test_quiz_predict_then_run_against_real_ranks(cluster4) -> None:
    from edu_parallel.quiz import moe_quiz

    q = moe_quiz(runner=moe_runner(cluster4)).by_key("predict_hot_dropped")
    assert q.params["N"] == 4
    assert q.check(q.predict.answer).correct  # the formula equals the run
    assert not q.check(q.predict.answer + 1).correct
    assert "dropped assignments counted by the run" in q.check(0).reveal


# ----------------------------------------------------------------- padded (GShard) dispatch
def both_dispatches(cluster, kw: dict) -> dict:
    """moe_job's raw per-rank results for both dispatches (same weights, tokens, routing)."""
    n = cluster.world_size
    return {
        d: cluster.run(moe_job, MoEConfig(n, **kw, dispatch=d)).results
        for d in ("variable", "padded")
    }


@pytest.mark.parametrize("kw", CASES)
def test_padded_equals_variable_and_reference(cluster4, kw: dict) -> None:
    """Output, dx, router and expert gradients: padded == variable (raw tensors) == one process."""
    r = run_moe(cluster4, **kw, dispatch="padded")
    assert r.matches_reference and r.gradients_match, (r.max_abs_diff_output, r.max_abs_diff_grads)
    assert r.max_abs_diff_output < 1e-5 and max(r.max_abs_diff_grads.values()) < 1e-5
    runs = both_dispatches(cluster4, kw)
    for v, p in zip(runs["variable"], runs["padded"], strict=True):
        assert torch.equal(v["experts"], p["experts"]) and torch.equal(v["kept"], p["kept"])
        pairs = [(v["y"], p["y"]), (v["dx"], p["dx"])]
        pairs += list(
            zip(
                v["router_grads"] + v["expert_grads"],
                p["router_grads"] + p["expert_grads"],
                strict=True,
            )
        )
        for a, b in pairs:
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)
    assert r.dispatch == "padded" and r.traffic_matches_routing and r.matches_builtin


@pytest.mark.parametrize(("c", "cap"), [(1.25, 5), (2.0, 8)])
@pytest.mark.parametrize("skew", [0.0, 4.0])
def test_padded_bytes_equal_the_formula_whatever_the_routing(
    cluster4, c: float, cap: int, skew: float
) -> None:
    r = run_moe(cluster4, capacity_factor=c, skew=skew, dispatch="padded")
    assert r.capacity == cap
    want = padded_dispatch_bytes(8, cap, 8, 4)  # (N-1)/N E C h 4
    assert want == 3 / 4 * 8 * cap * 8 * 4
    for ex in ("dispatch", "combine", "combine_grad", "dispatch_grad"):  # read from the trace
        assert r.sent_bytes_by_exchange[ex] == [want] * 4, ex
        assert r.traffic_by_exchange[ex] == [[2 * cap * 8 * 4] * 4 for _ in range(4)]
    assert r.sent_bytes_per_exchange == want
    assert r.traffic_by_exchange["counts"] == [[0] * 4 for _ in range(4)]  # no counts exchange
    for rank in range(4):
        ev = [e for e in r.trace.events if e.kind == "collective" and e.rank == rank]
        assert [e.phase for e in ev] == ["dispatch", "combine", "backward", "backward"]
        assert all(e.nbytes == 4 * 2 * cap * 8 * 4 for e in ev)  # N x E/N x C rows of h floats
    kept = r.assignments - r.dropped_tokens
    assert r.slots_dispatched == 4 * 8 * cap and r.expert_rows_computed == 4 * 8 * cap
    assert r.expert_rows_with_tokens == kept
    assert r.padding_fraction == pytest.approx(1 - kept / (4 * 8 * cap), abs=1e-12)
    assert r.padding_fraction > 0 and r.forward_collectives == [A2A] * 2


@pytest.mark.parametrize(
    "kw",
    [
        {},
        dict(skew=4.0, top_k=1, capacity_factor=2.0),
        dict(experts=8, top_k=8, capacity_factor=0.5),
    ],
)
def test_variable_bytes_never_exceed_padded(cluster4, kw: dict) -> None:
    """Per rank: variable <= padded; equal exactly when every slot it sends to a peer is full."""
    var = run_moe(cluster4, **kw)
    pad = run_moe(cluster4, **kw, dispatch="padded")
    assert var.kept_matrix == pad.kept_matrix and var.capacity == pad.capacity
    per = var.experts_per_rank
    for s in range(4):
        full = all(
            var.kept_matrix[s][e] == var.capacity for e in range(var.experts) if e // per != s
        )
        assert var.per_rank_sent_bytes[s] <= pad.per_rank_sent_bytes[s]
        assert (var.per_rank_sent_bytes[s] == pad.per_rank_sent_bytes[s]) == full
    assert var.padding_fraction == 0.0 and var.expert_rows_computed == var.expert_rows_with_tokens
    assert var.sent_bytes_per_exchange <= pad.sent_bytes_per_exchange
    if kw.get("top_k") == 8:  # 16 assignments per expert per rank, capacity 8: every slot full
        assert pad.padding_fraction == 0.0
        assert var.per_rank_sent_bytes == pad.per_rank_sent_bytes
    else:
        assert var.sent_bytes_per_exchange < pad.sent_bytes_per_exchange


# ----------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"top_k": 9}, "top_k=9"),
        ({"top_k": 0}, "top_k"),
        ({"experts": 6}, "experts=6"),
        ({"experts": 0}, "experts"),
        ({"capacity_factor": 0}, "capacity_factor"),
        ({"capacity_factor": -1.5}, "capacity_factor"),
        ({"capacity_factor": float("inf")}, "capacity_factor"),
        ({"skew": -1}, "skew"),
        ({"skew": 101}, "skew"),
        ({"skew": "hot"}, "skew"),
        ({"tokens": 0}, "tokens"),
        ({"tokens": 5000}, "tokens"),
        ({"hidden": 0}, "hidden"),
        ({"seed": -1}, "seed"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError) as err:
        MoEConfig(4, **kwargs)
    text = str(err.value)
    assert text.startswith(name) and text.count("is not valid: expected") == 1, text
    assert "\n" not in text


def test_every_bad_value_is_named_at_once() -> None:
    with pytest.raises(ValueError) as err:
        MoEConfig(4, experts=6, top_k=7, skew="hot", dispatch="dense", backward=1)
    text = str(err.value)
    assert text.count("is not valid") == 5 and "\n" not in text, text
    for name in ("experts=6", "top_k=7", "skew='hot'", "dispatch='dense'", "backward=1"):
        assert name + " is not valid" in text
    c = MoEConfig(4, skew=2, capacity_factor=1)
    assert (c.skew, c.capacity_factor, c.experts_per_rank, c.capacity) == (2.0, 1.0, 2, 4)


def cli_config(*argv: str, world_size: int = 2) -> MoEConfig:
    """What ``edu-parallel run moe ARGV`` hands its run, in this process."""
    a = build_parser().parse_args(["run", "moe", "--world-size", str(world_size), *argv])
    return CONCEPTS["moe"].check(a, ParallelDims.local(world_size))


def test_the_cli_checks_once_and_the_rank_job_gets_that_config(monkeypatch) -> None:
    checks = count_checks(monkeypatch, MoEConfig)
    config = cli_config("--experts", "4", "--top-k", "1", "--dispatch", "padded")
    assert (config.experts, config.top_k, config.dispatch) == (4, 1, "padded") and config.backward
    executor = Recorder(2)
    assert CONCEPTS["moe"].run(executor, config) is None
    assert executor.calls == [(moe_job, (config,))] and executor.calls[0][1][0] is config
    assert checks == [config]  # checked once, by the concept


def test_the_keyword_call_builds_the_config_once(monkeypatch) -> None:
    checks = count_checks(monkeypatch, MoEConfig)
    executor = Recorder(4)
    run_moe(executor, 8, 1, 2.0, skew=3.0, backward=False)
    ((fn, (config,)),) = executor.calls
    assert fn is moe_job and checks == [config]
    assert config == MoEConfig(4, 8, 1, 2.0, skew=3.0, backward=False)
    with pytest.raises(ValueError, match="config.world_size=4 is not valid: expected 2"):
        run_moe_config(Recorder(2), config)


def test_bad_input_before_running(cluster2) -> None:
    with pytest.raises(
        ValueError, match="dispatch='dense' is not valid: expected one of 'variable', 'padded'"
    ):
        run_moe(cluster2, experts=2, dispatch="dense")
    with pytest.raises(
        ValueError, match="experts=3 is not valid: expected a multiple of the world size 2"
    ):
        run_moe(cluster2, experts=3)
    assert run_moe(cluster2, experts=2, top_k=1).matches_builtin  # the cluster is still fine


def test_cli_json_and_errors(capsys) -> None:
    argv = [
        "run",
        "moe",
        "--world-size",
        "2",
        "--experts",
        "4",
        "--top-k",
        "2",
        "--capacity-factor",
        "1.0",
        "--skew",
        "2",
        "--tokens",
        "8",
        "--hidden",
        "4",
        "--json",
    ]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["matches_reference"] is True and data["gradients_match"] is True
    assert data["traffic_matrix_bytes"] == independent_matrix(2, 4, 2, 1.0, 2.0, 8, 4)
    assert isinstance(data["dropped_tokens"], int) and data["dropped_tokens"] >= 0
    for bad, text in (
        (["--experts", "4", "--top-k", "5"], "--top-k=5"),
        (["--experts", "3"], "experts=3"),
        (["--capacity-factor", "0"], "--capacity-factor=0.0"),
        (["--tokens", "0"], "tokens=0"),
        (["--skew", "-2"], "skew=-2.0"),
        (["--hidden", "0"], "hidden=0"),
        (["--dispatch", "dense"], "dispatch='dense'"),
    ):
        assert main(argv[:4] + bad) == 2
        err = capsys.readouterr().err
        assert text in err and err.count("\n") == 1
    assert main(argv + ["--dispatch", "padded"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dispatch"] == "padded" and data["matches_reference"] and data["gradients_match"]
    cap = expert_capacity(8, 4, 2, 1.0)  # 4 slots per expert
    assert data["traffic_matrix_bytes"] == [[2 * cap * 4 * 4] * 2] * 2
    assert data["sent_bytes_per_exchange"] == padded_dispatch_bytes(4, cap, 4, 2)


# ----------------------------------------------------------------- pictures (no browser)
def fake_report() -> SimpleNamespace:
    """2 ranks, 4 experts, top-1, 3 tokens per rank, capacity 1; written out by hand."""
    experts = [[[0], [0], [3]], [[2], [0], [1]]]
    kept = [[[True], [False], [True]], [[True], [True], [False]]]
    return SimpleNamespace(
        experts=4,
        capacity=1,
        routing_experts=experts,
        routing_kept=kept,
        routed_matrix=[[2, 0, 0, 1], [1, 1, 1, 0]],
        kept_matrix=[[1, 0, 0, 1], [1, 0, 1, 0]],
        traffic_by_exchange={"dispatch": [[16, 16], [16, 16]], "combine": [[16, 16], [16, 16]]},
    )


def test_heatmap_load_bars_and_animation() -> None:
    from edu_parallel.viz.moe import dispatch_animation, expert_load_bars, traffic_heatmap

    rep = fake_report()
    fig = traffic_heatmap({"a": rep, "b": [[0, 48], [8, 0]]}, title="t")
    assert [list(map(list, d.z)) for d in fig.data] == [[[16, 16], [16, 16]], [[0, 48], [8, 0]]]
    assert all(d.zmax == 48 for d in fig.data) and "(local)" in fig.data[0].text[0][0]
    bars = expert_load_bars(rep)
    assert [list(b.y) for b in bars.data] == [[1, 0, 0, 1], [1, 0, 1, 0], [1, 1, 0, 0]]
    assert bars.layout.meta["capacity_line"] == 2 and bars.layout.barmode == "stack"
    anim = dispatch_animation(rep)
    assert [f.name for f in anim.frames] == ["routed", "dispatched", "combined"]
    assert anim.layout.meta["slot_width"] == 4  # k + E/N + 1: top-1 column, e0 e1 columns, a gap
    routed, dispatched = anim.frames[0].data[0], anim.frames[1].data[0]
    at = [((routed.x[i], routed.y[i]), (dispatched.x[i], dispatched.y[i])) for i in range(6)]
    assert at[0] == ((0, 0), (1, 0))  # rank 0 token 0 -> e0: rank 0's first expert column
    assert at[1] == ((0, 1), (0, 1))  # rank 0 token 1 dropped: stays home
    assert at[2] == ((0, 2), (6, 0))  # rank 0 token 2 -> e3: rank 1's second expert column
    assert at[3] == ((4, 0), (5, 0))  # rank 1 token 0 -> e2, local on rank 1
    assert at[4] == ((4, 1), (1, 1))  # rank 1 token 1 -> e0: second row of e0
    assert list(anim.frames[2].data[0].x) == list(routed.x)  # combined: back home
    assert list(anim.layout.xaxis.ticktext[:3]) == ["top-1", "e0", "e1"]
    assert anim.layout.updatemenus[0].buttons[0].method == "animate"
    with pytest.raises(ValueError, match="report="):
        expert_load_bars(SimpleNamespace())


def test_renderers_import_without_torch() -> None:
    fresh_python("import edu_parallel.viz.moe, edu_parallel.expert_parallel.formulas")


def test_tables_read_the_runs_and_the_formulas(cluster4) -> None:
    flat, hot = run_moe(cluster4, capacity_factor=8.0), run_moe(cluster4, skew=4.0)
    skews = skew_table([flat, hot])
    assert list(skews.index) == [(0.0, 8.0), (4.0, 1.25)]
    for r in (flat, hot):
        row = skews.loc[(r.skew, r.capacity_factor)]
        columns = [sum(row_[d] for row_ in r.traffic_matrix_bytes) for d in range(4)]
        assert row["bytes into each rank"] == columns == bytes_into(r)
        assert row["bytes into rank 0"] == columns[0]
        assert row["max/mean load"] == r.load_imbalance
        assert row["dropped"] == r.dropped_tokens
    everything = 4 * flat.tokens_per_rank * flat.top_k * flat.hidden * 4  # no drops at C = 8
    assert sum(skews.loc[(0.0, 8.0), "bytes into each rank"]) == everything
    padded = run_moe(cluster4, skew=4.0, dispatch="padded")
    modes = dispatch_table([hot, padded])
    assert list(modes.index) == [(4.0, "variable", 1.25), (4.0, "padded", 1.25)]
    pad = modes.loc[(4.0, "padded", 1.25)]
    formula = padded_dispatch_bytes(padded.experts, padded.capacity, padded.hidden, 4)
    assert pad["padded formula (B)"] == formula == pad["sent per rank per exchange (B)"]
    assert pad["capacity"] == padded.capacity and pad["padding"] == padded.padding_fraction
    assert pad["expert rows computed"] == padded.expert_rows_computed
    assert pad["expert rows with tokens"] == padded.expert_rows_with_tokens
    var = modes.loc[(4.0, "variable", 1.25)]
    assert var["sent per rank per exchange (B)"] == hot.sent_bytes_per_exchange < formula
    assert var["dropped"] == pad["dropped"] == hot.dropped_tokens
    runs = [run_moe(cluster4, experts=e, capacity_factor=float(e)) for e in (4, 8)]
    table = experts_table(runs)
    t, k, h = runs[0].tokens_per_rank, runs[0].top_k, runs[0].hidden
    for r in runs:
        row = table.loc[r.experts]
        assert row["matrix total (B)"] == sum(map(sum, r.traffic_matrix_bytes))
        assert row["N·T·k·h·4 (B)"] == 4 * t * k * h * 4 == row["matrix total (B)"]  # no drops
        assert row["mean sent per rank (B)"] == sum(r.per_rank_sent_bytes) / 4
        assert row["balanced formula (B)"] == balanced_dispatch_bytes(t, k, h, 4)
        shard = init_moe(r.experts, h).experts.shard(0, 4)
        params = sum(p.numel() * p.element_size() for p in shard.parameters())
        assert row["expert bytes per rank"] == params
    assert table.loc[8, "expert bytes per rank"] == 2 * table.loc[4, "expert bytes per rank"]
