"""ZeRO stages 0-3 executed on gloo ranks: reference, memory ledger, bytes, CLI (ZeRO arXiv
1910.02054)."""

from __future__ import annotations

import json
import re

import pytest
import torch
from helpers import Recorder, cli, count_checks
from wcwidth import wcswidth

from edu_parallel.app.cli import build_parser
from edu_parallel.app.concepts.registry import CONCEPTS
from edu_parallel.core.dims import ParallelDims
from edu_parallel.core.i18n import language
from edu_parallel.core.metrics import ring_sent_bytes
from edu_parallel.core.width import MAX_TEXT_COLUMNS
from edu_parallel.memory.model_states import ZERO_STAGE_NAMES, ZERO_STAGES
from edu_parallel.task.mlp import (
    adam_update,
    formula_model_state_bytes,
    num_params,
    reference_training,
)
from edu_parallel.zero.config import ZeroConfig
from edu_parallel.zero.report import format_zero, run_zero, run_zero_config
from edu_parallel.zero.stages import zero_job
from edu_parallel.zero.tables import zero_table

PSI = num_params((16, 16, 16, 16))


def test_adam_matches_torch_optim() -> None:
    g = torch.Generator().manual_seed(0)
    p0 = torch.randn(50, generator=g)
    mine, m, v = p0.clone(), torch.zeros(50), torch.zeros(50)
    ref = torch.nn.Parameter(p0.clone())
    opt = torch.optim.Adam([ref], lr=1e-2, foreach=False)
    for step in range(1, 4):
        grad = torch.randn(50, generator=g)
        adam_update(mine, grad, m, v, step, 1e-2)
        ref.grad = grad.clone()
        opt.step()
    assert torch.allclose(mine, ref.detach(), atol=1e-7, rtol=0)


@pytest.mark.parametrize("stage", ZERO_STAGES)
def test_two_ranks_match_reference_dp_and_formula(cluster2, stage: int) -> None:
    r = run_zero(cluster2, stage, steps=2)
    assert r.matches_reference and r.matches_dp, (r.max_abs_diff_reference, r.max_abs_diff_dp)
    assert r.max_abs_diff_reference == 0.0  # two ranks: bf16 a+b is order free, bitwise equal
    assert r.padded_numel == PSI and r.padding_bytes_per_rank == 0
    assert r.per_rank_peak_model_state_bytes == [formula_model_state_bytes(stage, PSI, 2)] * 2
    expected_ratio = 1.5 if stage == 3 else 1.0
    assert r.comm_ratio_vs_dp == pytest.approx(expected_ratio)
    assert "formula" in format_zero(r)


@pytest.mark.parametrize("stage", ZERO_STAGES)
def test_four_ranks(cluster4, stage: int) -> None:
    r = run_zero(cluster4, stage, steps=3)
    # the reference replays the ring's summation order: equal bit for bit after several steps
    assert r.matches_reference and r.bitwise_equal_reference, r.max_abs_diff_reference
    assert r.matches_dp and r.max_abs_diff_dp == 0.0  # every stage equals DP bitwise
    n = 4
    assert r.per_rank_peak_model_state_bytes == [formula_model_state_bytes(stage, PSI, n)] * n
    # bytes from the trace's send events: per step DP all-reduces 2Psi bytes, 2(N-1)/N of it
    dp = 2 * (n - 1) / n * 2 * PSI
    assert r.dp_sent_bytes_per_step == dp
    assert r.per_rank_sent_bytes == [dp * (1.5 if stage == 3 else 1.0)] * n
    sends = [e for e in r.trace.events if e.kind == "send" and e.rank == 1]
    assert sum(e.nbytes for e in sends) == 3 * dp * (1.5 if stage == 3 else 1.0)
    ops = {e.op for e in r.trace.events if e.kind == "collective"}
    assert ("all_reduce" in ops) == (stage == 0)
    assert r.comm_ratio_vs_dp == pytest.approx(1.5 if stage == 3 else 1.0)
    for lang in ("en", "zh"):  # the report fits the output area, its columns line up
        with language(lang):
            lines = format_zero(r).splitlines()
        assert max(wcswidth(line) for line in lines) <= MAX_TEXT_COLUMNS, lang
        table = lines[lines.index("") + 1 : lines.index("") + 2 + n]
        assert len({wcswidth(line) for line in table}) == 1, table


def test_stage3_gathers_twice_and_releases(cluster4) -> None:
    r = run_zero(cluster4, 3, steps=2)
    gathers = [e for e in r.trace.events if e.kind == "collective" and e.rank == 0]
    assert [e.phase for e in gathers] == ["forward", "backward", "reduce_grads"] * 2
    for k in range(4):
        assert r.per_rank_peak_bytes_by_category[k]["gathered_params"] == 2 * PSI
        final = r.per_rank_final_bytes_by_category[k]
        assert final["gathered_params"] == 0 and final["comm_buffer"] == 0
        steady = sum(final.values())
        assert steady == r.per_rank_peak_model_state_bytes[k] == 16 * PSI // 4
        assert r.per_rank_peak_total_bytes[k] > steady  # the gathered params were really there


def test_padding_reported(cluster4) -> None:
    dims = (16, 16, 16, 15)  # Psi = 799: flat length padded to 800
    psi = num_params(dims)
    for stage in ZERO_STAGES:
        r = run_zero(cluster4, stage, steps=2, dims=dims)
        assert r.bitwise_equal_reference and r.max_abs_diff_dp == 0.0
        if stage == 0:  # DP keeps Psi-long model states; only its gradient bucket is padded
            assert r.per_rank_peak_model_state_bytes[0] == 16 * psi
            assert r.per_rank_peak_bytes_by_category[0]["comm_buffer"] == 2 * 800
            continue
        assert (r.psi, r.padded_numel) == (psi, 800)
        assert r.per_rank_peak_model_state_bytes[0] == formula_model_state_bytes(stage, 800, 4)
        assert r.padding_bytes_per_rank == pytest.approx(
            formula_model_state_bytes(stage, 800, 4) - formula_model_state_bytes(stage, psi, 4)
        )
        assert 0 < r.padding_bytes_per_rank < 16


def test_replay_sums_each_chunk_in_ring_order() -> None:
    """The reference's reduce-scatter adds chunk k as ((g[k+1] + g[k+2]) + ...) + g[k], like the
    ring on the ranks; a plain rank-order sum rounds some bf16 elements differently."""
    from edu_parallel.engine.execute import replay_plan
    from edu_parallel.plans.collectives import ring_reduce_scatter_plan

    n, size = 4, 4000
    g = torch.Generator().manual_seed(3)
    grads = [torch.randn(size, generator=g).to(torch.bfloat16) for _ in range(n)]
    out = replay_plan(ring_reduce_scatter_plan(n), [x.clone() for x in grads])
    differs = 0
    for k in range(n):
        part = [torch.tensor_split(x, n)[k] for x in grads]
        ring = part[(k + 1) % n].clone()
        for j in range(2, n + 1):
            ring = ring + part[(k + j) % n]
        assert torch.equal(torch.tensor_split(out[k], n)[k], ring)
        differs += int((ring != ((part[0] + part[1]) + part[2]) + part[3]).sum())
    assert differs > 0  # why the order must be replayed


def test_reference_is_deterministic() -> None:
    a, _ = reference_training((4, 4), 2, 3, 2, 1e-2, 7)
    b, _ = reference_training((4, 4), 2, 3, 2, 1e-2, 7)
    assert torch.equal(a, b)


def test_ring_volume() -> None:
    assert ring_sent_bytes("all_reduce", 100, 4) == 150
    assert ring_sent_bytes("reduce_scatter_single", 25, 4) == 75  # event records the output shard
    assert ring_sent_bytes("all_gather_into_tensor", 100, 4) == 75
    with pytest.raises(ValueError, match="op="):
        ring_sent_bytes("broadcast", 1, 2)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"stage": 4}, "stage=4"),
        ({"stage": "1"}, "stage='1'"),
        ({"stage": True}, "stage=True"),
        ({"steps": 0}, "steps=0"),
        ({"steps": 1001}, "steps=1001"),
        ({"lr": 0.0}, "lr=0.0"),
        ({"lr": -1}, "lr=-1"),
        ({"seed": -1}, "seed=-1"),
        ({"dims": (1, 1), "world_size": 4}, "world_size=4"),
        ({"dims": (3,)}, "dims=(3,)"),
        ({"dims": 3}, "dims=3"),
        ({"microbatch": 0}, "microbatch=0"),
        ({"world_size": 0}, "world_size=0"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(kwargs: dict, name: str) -> None:
    args = {"world_size": 2, "stage": 1, "dims": (16, 16)} | kwargs
    with pytest.raises(ValueError) as err:
        ZeroConfig(**args)
    text = str(err.value)
    assert text.startswith(name + " is not valid: expected") and "\n" not in text, text


def test_every_bad_value_is_named_at_once() -> None:
    with pytest.raises(ValueError) as err:
        ZeroConfig(2, stage=9, steps=0, lr=-1.0, microbatch=0)
    text = str(err.value)
    assert "\n" not in text and text.count("is not valid") == 4, text
    for name in ("stage=9", "steps=0", "lr=-1.0", "microbatch=0"):
        assert name in text


def test_the_config_holds_normalised_values() -> None:
    c = ZeroConfig(2, 2.0, steps=3.0, dims=[16, 16])
    assert (c.stage, c.steps, c.dims) == (2, 3, (16, 16)) and isinstance(c.stage, int)
    assert c.psi == num_params((16, 16))


def cli_config(*argv: str, world_size: int = 2) -> ZeroConfig:
    """What ``edu-parallel run zero ARGV`` hands its run, in this process."""
    a = build_parser().parse_args(["run", "zero", "--world-size", str(world_size), *argv])
    return CONCEPTS["zero"].check(a, ParallelDims.local(world_size))


def test_the_cli_checks_once_and_the_rank_job_gets_that_config(monkeypatch) -> None:
    checks = count_checks(monkeypatch, ZeroConfig)
    config = cli_config("--stage", "3", "--steps", "4")
    assert isinstance(config, ZeroConfig) and len(checks) == 1
    assert (config.world_size, config.stage, config.steps) == (2, 3, 4)
    executor = Recorder(2)
    assert CONCEPTS["zero"].run(executor, config) is None
    assert executor.calls == [(zero_job, (config,))]
    assert executor.calls[0][1][0] is config and len(checks) == 1  # never checked again


def test_the_keyword_call_builds_the_config_once(monkeypatch) -> None:
    checks = count_checks(monkeypatch, ZeroConfig)
    executor = Recorder(4)
    run_zero(executor, 2, steps=3, seed=5)
    ((fn, (config,)),) = executor.calls
    assert fn is zero_job and checks == [config]
    assert config == ZeroConfig(4, 2, steps=3, seed=5)


def test_a_given_config_must_fit_the_executor() -> None:
    with pytest.raises(ValueError, match=re.escape("config.world_size=2 is not valid: expected 4")):
        run_zero_config(Recorder(4), ZeroConfig(2))


def test_bad_input_before_running(cluster2) -> None:
    with pytest.raises(ValueError, match="stage=5"):
        run_zero(cluster2, 5)


def test_cli_json() -> None:
    args = ("--world-size", "2", "--steps", "1", "--json")
    out = cli("run", "zero", "--stage", "2", *args)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for key in (
        "matches_reference",
        "per_rank_peak_model_state_bytes",
        "formula_model_state_bytes",
        "per_rank_sent_bytes",
        "comm_ratio_vs_dp",
    ):
        assert key in data
    assert data["matches_reference"] is True and data["comm_ratio_vs_dp"] == 1.0
    assert isinstance(data["per_rank_sent_bytes"], list) and len(data["per_rank_sent_bytes"]) == 2
    bad = cli("run", "zero", "--stage", "7", *args)
    assert bad.returncode == 2 and "stage=7" in bad.stderr + bad.stdout


@pytest.mark.parametrize("stage", ZERO_STAGES)
def test_calculator_agrees_with_the_ledger_of_a_real_run(cluster4, stage: int) -> None:
    """The memory calculator, scaled to the small model's Psi, equals the bytes the ranks held."""
    from edu_parallel.memory.communication import comm_bytes_per_step
    from edu_parallel.memory.model_states import model_state_bytes

    r = run_zero(cluster4, stage, steps=1)
    estimate = model_state_bytes(r.psi, 4, zero=stage)
    assert r.per_rank_peak_model_state_bytes == [estimate.bytes_per_gpu] * 4
    by_category = r.per_rank_peak_bytes_by_category[0]
    for category, nbytes in estimate.breakdown.items():
        assert by_category[category] == nbytes, category
    assert r.per_rank_sent_bytes[0] == pytest.approx(comm_bytes_per_step(r.psi, 4, zero=stage))


def test_zero_table_reads_each_stage_report(cluster2) -> None:
    reports = {s: run_zero(cluster2, s, steps=1) for s in ZERO_STAGES}
    table = zero_table(reports)
    assert list(table.index) == ["DP", "ZeRO-1", "ZeRO-2", "ZeRO-3"]
    for s, r in reports.items():
        row = table.loc[ZERO_STAGE_NAMES[s]]
        assert row["= one process, bitwise"] == r.bitwise_equal_reference
        ledger = row["model-state bytes per rank (ledger)"]
        assert ledger == r.per_rank_peak_model_state_bytes
        assert ledger == [row["formula (B)"]] * 2 == [formula_model_state_bytes(s, PSI, 2)] * 2
        assert row["sent per rank per step (B)"] == r.per_rank_sent_bytes[0]
        assert row["vs DP"] == r.comm_ratio_vs_dp
    assert table.loc["ZeRO-3", "vs DP"] == pytest.approx(1.5)
