"""Expert parallelism on gloo ranks: the all-to-all layer against one process (forward and
backward), its traffic read from the trace, skew and drops, subgroups, and the padded (GShard)
dispatch against the variable one.

GShard (arXiv 2006.16668), Switch (arXiv 2101.03961).
"""

from __future__ import annotations

import json

import pytest
import torch
from helpers import independent_matrix

from edu_parallel.expert_parallel.config import MoEConfig
from edu_parallel.expert_parallel.experts import init_moe, make_tokens
from edu_parallel.expert_parallel.formulas import (
    all_to_one_dropped,
    expert_capacity,
    padded_dispatch_bytes,
)
from edu_parallel.expert_parallel.layer import moe_job, moe_reference
from edu_parallel.expert_parallel.report import format_moe, moe_routing_stats, moe_runner, run_moe
from edu_parallel.quiz.banks.expert_parallel import HOT_SKEW, formula_runner, moe_quiz

A2A = "all_to_all_single"


# ----------------------------------------------------------------- the layer on real ranks


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
