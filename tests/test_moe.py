"""Expert parallelism in one process: the router and the capacity against plain loops, every
bad value named in one line, and the CLI (its check, its JSON, its errors). The layer on gloo
ranks is in ``test_moe_layer.py``, the pictures and tables in ``test_moe_viz.py``.

Shazeer et al. 2017 (arXiv 1701.06538), GShard (arXiv 2006.16668), Switch (arXiv 2101.03961).
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from helpers import Recorder, count_checks, independent_matrix

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
    smallest_capacity_factor,
)
from edu_parallel.expert_parallel.layer import moe_job, moe_reference
from edu_parallel.expert_parallel.report import run_moe, run_moe_config
from edu_parallel.expert_parallel.router import capacity_positions, route


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


# ----------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "tokens, experts, top_k", [(16, 8, 2), (1, 64, 1), (1024, 1, 1), (7, 3, 1), (16, 8, 3)]
)
def test_a_factor_whose_capacity_rounds_to_0_is_refused_naming_the_smallest_that_keeps_one(
    tokens: int, experts: int, top_k: int
) -> None:
    smallest = smallest_capacity_factor(tokens, experts, top_k)
    below = float(f"{smallest - 10 ** (math.floor(math.log10(smallest)) - 2):.3g}")
    assert expert_capacity(tokens, experts, top_k, smallest) == 1  # one token kept
    assert expert_capacity(tokens, experts, top_k, below) == 0  # the next 3-digit factor down
    assert MoEConfig(1, experts, top_k, smallest, tokens=tokens).capacity == 1
    for factor in (below, 1e-300, 5e-324):
        with pytest.raises(ValueError) as err:
            MoEConfig(1, experts, top_k, factor, tokens=tokens)
        assert str(err.value) == (
            f"capacity_factor={factor!r} is not valid: expected a factor >= {smallest:g}:"
            f" capacity = ceil(C*T*k/E) rounds to 0 with T={tokens}, k={top_k}, E={experts},"
            " and every token would be dropped"
        )


def test_a_tiny_factor_and_a_bad_top_k_name_only_the_top_k() -> None:
    with pytest.raises(ValueError) as err:
        MoEConfig(4, experts=8, top_k=9, capacity_factor=1e-300)
    assert str(err.value).startswith("top_k=9 is not valid") and "capacity" not in str(err.value)


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
