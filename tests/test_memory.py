"""The memory calculator: ZeRO's Fig. 1, offload, activations (Korthikanti et al.), presets, CLI."""

from __future__ import annotations

import json

import pytest
from helpers import cli

from edu_parallel.app.cli import main as cli_main
from edu_parallel.app.memory_command import DEFAULT_MICRO_BATCH, DEFAULT_RECOMPUTE
from edu_parallel.memory.activations import (
    activation_bytes,
    activation_estimate,
    shape_activation_estimate,
)
from edu_parallel.memory.communication import comm_bytes_per_step, comm_estimate
from edu_parallel.memory.model_states import largest_model_that_fits, model_state_bytes
from edu_parallel.memory.presets import PRESETS, count_params, get_preset
from edu_parallel.memory.tables import estimates_table

PSI, N = 7.5e9, 64  # the ZeRO paper's Fig. 1 example


@pytest.mark.parametrize(
    "zero, paper_gb, exact",
    [
        (0, 120, 16 * PSI),  # DP: (2 + 2 + K)Ψ
        (1, 31.4, 4 * PSI + 12 * PSI / N),  # P_os
        (2, 16.6, 2 * PSI + 14 * PSI / N),  # P_os+g
        (3, 1.9, 16 * PSI / N),  # P_os+g+p
    ],
)
def test_zero_figure_1(zero, paper_gb, exact):
    est = model_state_bytes(PSI, N, zero=zero)
    assert est.bytes_per_gpu == pytest.approx(exact)
    assert round(est.bytes_per_gpu / 1e9, 1) == paper_gb  # the numbers printed in Fig. 1
    assert sum(est.breakdown.values()) == pytest.approx(est.bytes_per_gpu)
    assert set(est.breakdown) == {"param16", "grad16", "master32", "adam_m", "adam_v"}
    assert est.cpu_bytes_per_gpu == 0
    assert "Fig. 1" in est.formula and est.dp == N


def test_breakdown_by_category_zero2():
    b = model_state_bytes(PSI, N, zero=2).breakdown
    assert b["param16"] == pytest.approx(2 * PSI)
    assert b["grad16"] == pytest.approx(2 * PSI / N)
    for name in ("master32", "adam_m", "adam_v"):
        assert b[name] == pytest.approx(4 * PSI / N)


def test_fp32_and_bf16_pure_accounting():
    fp32 = model_state_bytes(1e9, 1, precision="fp32")
    assert fp32.breakdown == {"param32": 4e9, "grad32": 4e9, "adam_m": 4e9, "adam_v": 4e9}
    assert fp32.bytes_per_gpu == 16e9 and "K=8" in fp32.formula
    fp32_z1 = model_state_bytes(1e9, 4, zero=1, precision="fp32")
    assert fp32_z1.bytes_per_gpu == pytest.approx(8e9 + 8e9 / 4)
    bf16 = model_state_bytes(1e9, 1, precision="bf16-pure")
    assert bf16.bytes_per_gpu == 8e9 and "K=4" in bf16.formula


def test_tp_pp_divide_params_and_dp_degree():
    est = model_state_bytes(PSI, 64, zero=1, tp=4, pp=2)
    psi, n = PSI / 8, 64 // 8
    assert est.dp == n and est.params_per_gpu == pytest.approx(psi)
    assert est.bytes_per_gpu == pytest.approx(4 * psi + 12 * psi / n)


def test_offload_optimizer_moves_master_and_adam_states():
    base = model_state_bytes(PSI, N, zero=2)
    off = model_state_bytes(PSI, N, zero=2, offload="optimizer")
    moved = ("master32", "adam_m", "adam_v")
    for name in moved:
        assert off.breakdown[name] == 0
        assert off.cpu_breakdown[name] == pytest.approx(base.breakdown[name])
    for name in ("param16", "grad16"):
        assert off.breakdown[name] == pytest.approx(base.breakdown[name])
        assert off.cpu_breakdown[name] == 0
    assert off.bytes_per_gpu == pytest.approx(2 * PSI + 2 * PSI / N)
    assert off.cpu_bytes_per_gpu == pytest.approx(12 * PSI / N)
    assert off.bytes_per_gpu + off.cpu_bytes_per_gpu == pytest.approx(base.bytes_per_gpu)


def test_offload_all_moves_params_too_with_zero3():
    off = model_state_bytes(PSI, N, zero=3, offload="all")
    assert off.breakdown["param16"] == 0
    assert off.cpu_breakdown["param16"] == pytest.approx(2 * PSI / N)
    assert off.bytes_per_gpu == pytest.approx(2 * PSI / N)  # only the gradient partition
    assert off.cpu_bytes_per_gpu == pytest.approx(14 * PSI / N)
    fp32 = model_state_bytes(PSI, N, zero=3, precision="fp32", offload="optimizer")
    assert fp32.cpu_breakdown == {
        "param32": 0,
        "grad32": 0,
        "adam_m": 4 * PSI / N,
        "adam_v": 4 * PSI / N,
    }


@pytest.mark.parametrize(
    "zero, precision, offload, tp, pp",
    [
        (0, "mixed", "none", 1, 1),
        (1, "mixed", "none", 1, 1),
        (2, "fp32", "optimizer", 2, 1),
        (3, "mixed", "none", 1, 1),
        (3, "bf16-pure", "all", 2, 4),
        (1, "mixed", "optimizer", 1, 2),
    ],
)
def test_largest_model_that_fits_inverts_the_formula(zero, precision, offload, tp, pp):
    gpu_bytes = 80e9
    n = largest_model_that_fits(gpu_bytes, 64, zero, precision, offload, tp, pp)
    assert model_state_bytes(n, 64, zero, precision, offload, tp, pp).bytes_per_gpu <= gpu_bytes
    assert model_state_bytes(n + 1, 64, zero, precision, offload, tp, pp).bytes_per_gpu > gpu_bytes


def test_largest_model_that_fits_known_values():
    assert largest_model_that_fits(80e9, 1) == 5_000_000_000  # 80 GB / 16 B
    assert largest_model_that_fits(32e9, 64, zero=3) == 128_000_000_000  # 32e9 · 64 / 16


def test_comm_volumes_ring_exact():
    dp = comm_bytes_per_step(PSI, N, zero=0)
    assert dp == pytest.approx(2 * (N - 1) / N * 2 * PSI)
    assert comm_bytes_per_step(PSI, N, zero=1) == pytest.approx(dp)
    assert comm_bytes_per_step(PSI, N, zero=2) == pytest.approx(dp)
    assert comm_bytes_per_step(PSI, N, zero=3) == pytest.approx(1.5 * dp)
    est = comm_estimate(PSI, N, zero=3)
    assert sum(est.breakdown.values()) == pytest.approx(est.bytes_per_gpu)
    assert comm_bytes_per_step(PSI, 1, zero=0) == 0  # one rank: nothing to send
    assert comm_bytes_per_step(PSI, N, precision="fp32") == pytest.approx(2 * dp)


def test_korthikanti_hand_computed():
    # s=4, b=2, h=8, a=2: sbh = 64, 5as/h = 5·2·4/8 = 5
    args = dict(seq=4, batch=2, hidden=8, heads=2, layers=1)
    assert activation_bytes(**args) == 64 * (34 + 5)  # eq. (1): 2496
    assert activation_bytes(**args, tp=2) == 64 * (10 + 24 / 2 + 5 / 2)  # eq. (2): 1568
    assert activation_bytes(**args, tp=2, sequence_parallel=True) == 64 * (
        34 / 2 + 5 / 2
    )  # eq. (3)
    assert activation_bytes(**args, tp=2, recompute="selective") == 64 * (10 + 12)
    assert activation_bytes(**args, tp=2, sequence_parallel=True, recompute="selective") == 64 * 17
    assert activation_bytes(**args, recompute="selective") == 64 * 34
    assert activation_bytes(**args, recompute="full") == 64 * 2
    three = activation_estimate(4, 2, 8, 2, layers=3)
    assert three.bytes == 3 * 2496 and three.bytes_per_layer == 2496
    assert "eq. (1)" in three.formula


def test_korthikanti_gpt3_scale():
    # GPT-3 175B (s=2048, h=12288, a=96, L=96), b=1, t=8 with sequence parallelism: the paper's
    # eq. (3) per layer; with selective recomputation the 5as/h term goes (Table 2)
    s, h, a, t = 2048, 12288, 96, 8
    full = activation_bytes(s, 1, h, a, 96, tp=t, sequence_parallel=True)
    assert full == pytest.approx(96 * s * h * (34 / t + 5 * a * s / (h * t)))
    sel = activation_bytes(s, 1, h, a, 96, tp=t, sequence_parallel=True, recompute="selective")
    assert sel / full == pytest.approx(34 / (34 + 5 * a * s / h))


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_param_counts_within_2_percent(name):
    shape = get_preset(name)
    assert shape.params == count_params(shape)
    assert abs(shape.params / shape.nominal_params - 1) < 0.02
    assert shape.source


def test_preset_shapes_exact_counts():
    assert get_preset("gpt2-1.5b").params == 1_557_611_200  # GPT-2 XL's known count
    assert get_preset("llama3-8b").params == 8_030_261_248  # Meta-Llama-3-8B
    assert get_preset("llama3-70b").params == 70_553_706_496  # Meta-Llama-3-70B
    l8 = get_preset("llama3-8b")
    assert (l8.layers, l8.hidden, l8.heads, l8.kv_heads, l8.ffn, l8.vocab, l8.seq) == (
        32,
        4096,
        32,
        8,
        14336,
        128256,
        8192,
    )


def test_unknown_preset_lists_names():
    with pytest.raises(ValueError) as exc:
        get_preset("gpt5")
    for name in PRESETS:
        assert name in str(exc.value)
    assert "model='gpt5'" in str(exc.value)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(zero=4), ["zero=4", "[0, 3]"]),
        (dict(zero=-1), ["zero=-1"]),
        (dict(precision="fp8"), ["precision='fp8'", "'mixed'"]),
        (dict(params=0), ["params=0", "> 0"]),
        (dict(params=-5), ["params=-5"]),
        (dict(params=float("nan")), ["params=nan"]),
        (dict(gpus=0), ["gpus=0", ">= 1"]),
        (dict(gpus=2.5), ["gpus=2.5"]),
        (dict(offload="disk"), ["offload='disk'", "'optimizer'"]),
        (dict(offload="optimizer", zero=0), ["offload='optimizer'", "does not support it"]),
        (dict(offload="all", zero=2), ["offload='all'", "does not support it", "3"]),
        (dict(gpus=6, tp=4), ["gpus=6", "multiple of tp*pp", "4"]),
        (dict(gpus=8, tp=2, pp=3), ["gpus=8", "6"]),
        (dict(tp=0), ["tp=0"]),
        (dict(pp=0), ["pp=0"]),
    ],
)
def test_model_state_bad_inputs(kwargs, words):
    args = dict(params=1e9, gpus=8, zero=1) | kwargs
    with pytest.raises(ValueError) as exc:
        model_state_bytes(**args)
    for word in words:
        assert word in str(exc.value)
    assert "\n" not in str(exc.value)


def test_other_bad_inputs():
    with pytest.raises(ValueError, match="gpu_bytes=0"):
        largest_model_that_fits(0, 8)
    with pytest.raises(ValueError, match="offload='all'"):
        largest_model_that_fits(80e9, 8, zero=1, offload="all")
    with pytest.raises(ValueError, match="zero=5"):
        comm_bytes_per_step(1e9, 8, zero=5)
    with pytest.raises(ValueError, match="gpus=0"):
        comm_bytes_per_step(1e9, 0)
    with pytest.raises(ValueError, match="params=0"):
        comm_bytes_per_step(0, 8)
    with pytest.raises(ValueError, match="recompute='some'"):
        activation_bytes(4, 2, 8, 2, 1, recompute="some")
    with pytest.raises(ValueError, match="tp=3.*divisor of heads=2"):
        activation_bytes(4, 2, 8, 2, 1, tp=3)
    with pytest.raises(ValueError, match="seq=0"):
        activation_bytes(0, 2, 8, 2, 1)
    with pytest.raises(ValueError, match="sequence_parallel='yes'"):
        activation_bytes(4, 2, 8, 2, 1, sequence_parallel="yes")


def test_to_json_dict_round_trips():
    data = json.loads(json.dumps(model_state_bytes(PSI, N, zero=3).to_json_dict()))
    assert data["bytes_per_gpu"] == pytest.approx(16 * PSI / N)
    assert set(data["breakdown"]) == {"param16", "grad16", "master32", "adam_m", "adam_v"}


def test_cli_json():
    out = cli("memory", "--params", "7.5e9", "--gpus", "64", "--zero", "2", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["bytes_per_gpu"] == pytest.approx(2 * PSI + 14 * PSI / N)
    assert data["breakdown"]["grad16"] == pytest.approx(2 * PSI / N)
    assert data["comm"]["bytes_per_gpu"] == pytest.approx(2 * (N - 1) / N * 2 * PSI)
    assert data["activations"] is None


def test_cli_model_offload_tp_json():
    out = cli(
        "memory",
        "--model",
        "llama3-70b",
        "--gpus",
        "64",
        "--tp",
        "8",
        "--zero",
        "3",
        "--offload",
        "all",
        "--gpu-gb",
        "80",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    psi = get_preset("llama3-70b").params / 8
    assert data["params"] == get_preset("llama3-70b").params
    assert data["bytes_per_gpu"] == pytest.approx(2 * psi / 8)
    assert data["cpu_bytes_per_gpu"] == pytest.approx(14 * psi / 8)
    # Llama's own terms (SwiGLU width 28672, 8 KV heads), not Korthikanti's GPT layer
    assert data["activations"]["bytes"] == pytest.approx(
        activation_bytes(8192, 1, 8192, 64, 80, tp=8, arch="llama", kv_heads=8, ffn=28672)
    )
    assert data["activations"]["arch"] == "llama"
    assert data["largest_model_that_fits"] == largest_model_that_fits(
        80e9, 64, 3, "mixed", "all", 8
    )


def test_cli_text():
    out = cli("memory", "--params", "7.5B", "--gpus", "64", "--zero", "1")
    assert out.returncode == 0, out.stderr
    assert "bytes_per_gpu" in out.stdout and "breakdown" in out.stdout
    assert "31.41 GB" in out.stdout and "master32" in out.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["--params", "7.5e9", "--gpus", "64", "--zero", "7"], ["zero=7"]),
        (["--params", "lots"], ["params='lots'"]),
        (["--model", "gpt5"], ["model='gpt5'", "llama3-8b"]),
        (
            ["--params", "1e9", "--offload", "optimizer"],
            ["offload='optimizer'", "does not support it"],
        ),
        (["--params", "1e9", "--gpus", "6", "--tp", "4"], ["gpus=6"]),
        (["--params", "1e9", "--precision", "fp8"], ["precision='fp8'"]),
        ([], ["params=None"]),
    ],
)
def test_cli_one_line_errors(args, words):
    out = cli("memory", *args)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    for word in words:
        assert word in lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["--params", "7e9", "--gpus", "8", "--zero", "3", "--convention", "deepspeed",
         "--largest-layer-params", "1e8", "--no-zero-init", "--gpus-per-node", "4"],
        ["--params", "7e9", "--gpus", "8", "--zero", "2", "--convention", "deepspeed",
         "--gpus-per-node", "4"],
        ["--model", "llama3-8b", "--gpus", "8", "--tp", "2", "--sequence-parallel", "--seq",
         "1024", "--micro-batch", "2", "--recompute", "selective"],
    ],
)  # fmt: skip
def test_each_option_is_accepted_where_it_means_something(args, capsys):
    assert cli_main(["memory", *args, "--json"]) == 0, capsys.readouterr().err
    data = json.loads(capsys.readouterr().out)
    assert data["bytes_per_gpu"] > 0
    if "--no-zero-init" in args:
        assert (
            "zero_init=False, L=100000000" in data["formula"]
            and "gpus_per_node=4" in data["formula"]
        )
    if "--sequence-parallel" in args:
        shape = get_preset("llama3-8b")
        expected = shape_activation_estimate(
            shape, 1024, 2, shape.layers, 2, True, "selective"
        ).bytes
        assert data["activations"]["bytes"] == pytest.approx(expected)


def test_the_activation_options_default_to_one_sequence_and_no_recomputation(capsys):
    assert cli_main(["memory", "--model", "llama3-8b", "--json"]) == 0
    shape = get_preset("llama3-8b")
    expected = shape_activation_estimate(
        shape, shape.seq, DEFAULT_MICRO_BATCH, shape.layers, 1, False, DEFAULT_RECOMPUTE
    )
    assert json.loads(capsys.readouterr().out)["activations"]["bytes"] == expected.bytes


def test_estimates_table_reads_each_estimate() -> None:
    estimates = {f"ZeRO-{s}": model_state_bytes(7.5e9, 64, zero=s) for s in (0, 3)}
    table = estimates_table(estimates)
    assert list(table.index) == ["ZeRO-0", "ZeRO-3"]
    assert table.loc["ZeRO-0", "GB per GPU"] == pytest.approx(120.0)  # 16 Psi, ZeRO §3.1
    for name, e in estimates.items():
        assert table.loc[name, "bytes per GPU"] == e.bytes_per_gpu
        assert table.loc[name, "GB per GPU"] == e.bytes_per_gpu / 1e9
        assert table.loc[name, "formula"] == e.formula
