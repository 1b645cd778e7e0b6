"""``convention=``: the ZeRO paper's 16Ψ, Megatron-LM's distributed optimizer table, DeepSpeed's
estimators reproduced to the byte (issue 15).

The DeepSpeed expectations come from :func:`deepspeed_reference` below, DeepSpeed 0.16.5's own
arithmetic (commit 38327e0) transcribed line by line from its source, never from the package.
"""

from __future__ import annotations

import json
import math

import pytest
from helpers import cli

from edu_parallel.memory import (
    CONVENTIONS,
    conventions_table,
    largest_model_that_fits,
    largest_module_params,
    model_state_bytes,
)
from edu_parallel.memory.communication import comm_estimate
from edu_parallel.memory.presets import ModelShape, get_preset


def deepspeed_reference(
    total_params, largest_layer_params, gpus_per_node, nodes, stage, offload, zero_init=True
):
    """DeepSpeed 0.16.5's (cpu_mem, gpu_mem), its expressions copied in order of evaluation.

    offload: "none" | "optimizer" (cpu_offload) | "all" (cpu_offload + cpu_offload_params);
    the additional_buffer_factor is DeepSpeed's default, 1.5.
    """
    abf = 1.5
    total_gpus = nodes * gpus_per_node
    if stage == 2:
        # deepspeed/runtime/zero/stage_1_and_2.py, estimate_zero2_model_states_mem_needs
        if offload == "optimizer":
            gpu = 2 * total_params  # line 2439
            cpu = total_params * max(4 * total_gpus, 16) * abf  # line 2440
        else:
            gpu = 2 * total_params + int(18 * total_params / total_gpus)  # line 2444
            cpu = total_params * 4 * gpus_per_node * abf  # line 2445
        return int(cpu), int(gpu)  # line 2447
    # deepspeed/runtime/zero/stage3.py, estimate_zero3_model_states_mem_needs
    gpus_factor = 1 / nodes  # line 3018
    llm = 4 * largest_layer_params  # line 3019
    if offload == "all":
        gpu = llm  # line 3023
        if zero_init:
            cpu = total_params * 18 * gpus_factor * abf  # line 3026
        else:
            cpu = total_params * max(4 * gpus_per_node, 18 * gpus_factor) * abf  # line 3028
    elif offload == "optimizer":
        gpu = llm + int(2 * total_params / total_gpus)  # line 3031
        if zero_init:
            cpu = total_params * 16 * gpus_factor * abf  # line 3034
        else:
            cpu = total_params * max(4 * gpus_per_node, 16 * gpus_factor) * abf  # line 3036
    else:
        gpu = llm + int(18 * total_params / total_gpus)  # line 3038
        if zero_init:
            cpu = largest_layer_params * 4 * gpus_per_node * abf  # line 3040
        else:
            cpu = total_params * 4 * gpus_per_node * abf  # line 3042
    return int(cpu), int(gpu)  # line 3044


# 1.5B and 7.5B parameters; the largest module of the matching preset (the token embedding)
MODELS = {1_500_000_000: "gpt2-1.5b", 7_500_000_000: "zero-7.5b"}
SETUPS = [(2, "none"), (2, "optimizer"), (3, "none"), (3, "optimizer"), (3, "all")]


@pytest.mark.parametrize("params", list(MODELS))
@pytest.mark.parametrize("gpus_per_node, nodes", [(8, 1), (8, 8)])  # 8 and 64 GPUs
@pytest.mark.parametrize("zero, offload", SETUPS)
@pytest.mark.parametrize("zero_init", [True, False])
def test_deepspeed_convention_reproduces_its_estimators(
    params, gpus_per_node, nodes, zero, offload, zero_init
):
    largest = largest_module_params(get_preset(MODELS[params]))
    est = model_state_bytes(
        float(params),
        gpus_per_node * nodes,
        zero,
        offload=offload,
        convention="deepspeed",
        gpus_per_node=gpus_per_node,
        largest_layer_params=largest,
        zero_init=zero_init,
    )
    cpu, gpu = deepspeed_reference(params, largest, gpus_per_node, nodes, zero, offload, zero_init)
    assert est.bytes_per_gpu == gpu and est.cpu_bytes_per_node == cpu
    assert est.cpu_bytes_per_gpu == cpu / gpus_per_node
    assert sum(est.breakdown.values()) == gpu
    assert est.convention == "deepspeed" and "DeepSpeed 0.16.5" in est.formula


def test_deepspeed_literal_values_by_hand():
    gpt2, big = largest_module_params(get_preset("gpt2-1.5b")), 154_389_504
    # ZeRO-2, 1.5B on 1 x 8: 2Ψ + int(18Ψ/8) = 3e9 + 3.375e9; CPU 1.5e9·4·8·1.5 = 72e9
    e = model_state_bytes(1.5e9, 8, 2, convention="deepspeed")
    assert (e.bytes_per_gpu, e.cpu_bytes_per_node) == (6_375_000_000, 72_000_000_000)
    # ... with cpu_offload: 2Ψ = 3e9; CPU 1.5e9·max(4·8, 16)·1.5 = 72e9
    e = model_state_bytes(1.5e9, 8, 2, offload="optimizer", convention="deepspeed")
    assert (e.bytes_per_gpu, e.cpu_bytes_per_node) == (3_000_000_000, 72_000_000_000)
    # ZeRO-2, 7.5B on 8 x 8: 15e9 + int(18·7.5e9/64) = 15e9 + 2_109_375_000; CPU 7.5e9·32·1.5
    e = model_state_bytes(7.5e9, 64, 2, convention="deepspeed")
    assert (e.bytes_per_gpu, e.cpu_bytes_per_node) == (17_109_375_000, 360_000_000_000)
    # ZeRO-3, 7.5B on 8 x 8, L = 50257·3072 = 154_389_504: 4L + 2_109_375_000; CPU L·4·8·1.5
    e = model_state_bytes(7.5e9, 64, 3, convention="deepspeed", largest_layer_params=big)
    assert (e.bytes_per_gpu, e.cpu_bytes_per_node) == (2_726_933_016, 7_410_696_192)
    # ... offload params and optimizer: 4L; CPU 7.5e9·18/8·1.5 = 25.3125e9
    e = model_state_bytes(
        7.5e9, 64, 3, "mixed", "all", convention="deepspeed", largest_layer_params=big
    )
    assert (e.bytes_per_gpu, e.cpu_bytes_per_node) == (617_558_016, 25_312_500_000)
    # ZeRO-3, 1.5B on 1 x 8, optimizer offload, L = 50257·1600: 4L + int(2·1.5e9/8);
    # CPU 1.5e9·16·1.5
    e = model_state_bytes(
        1.5e9, 8, 3, offload="optimizer", convention="deepspeed", largest_layer_params=gpt2
    )
    assert (e.bytes_per_gpu, e.cpu_bytes_per_node) == (696_644_800, 36_000_000_000)


def test_largest_module_params_hand_counts():
    assert largest_module_params(get_preset("gpt2-1.5b")) == 50257 * 1600  # wte
    assert largest_module_params(get_preset("llama3-8b")) == 128256 * 4096  # embed / lm_head
    # no vocabulary: the MLP's linear h x ffn is the largest (bare: no biases)
    bare = ModelShape("b", "bare", layers=2, hidden=16, heads=4, vocab=0, seq=8, ffn=48)
    assert largest_module_params(bare) == 16 * 48
    gpt = ModelShape("g", "gpt2", layers=2, hidden=16, heads=4, vocab=10, seq=8)
    assert largest_module_params(gpt) == 16 * 64 + 64  # c_fc with its bias


@pytest.mark.parametrize("d", [1, 8, 64])
def test_megatron_table(d):
    psi = 1e9
    # docs/user-guide/features/dist_optimizer.md: bf16 params + fp32 grads 18 | 6 + 12/d
    assert model_state_bytes(psi, d, 0, convention="megatron").bytes_per_gpu == 18 * psi
    dist = model_state_bytes(psi, d, 1, convention="megatron")
    assert dist.bytes_per_gpu == pytest.approx(6 * psi + 12 * psi / d)
    assert dist.breakdown["grad32"] == 4 * psi and dist.breakdown["param16"] == 2 * psi
    # fp32 params + fp32 grads: 16 | 8 + 8/d
    fp32 = model_state_bytes(psi, d, 1, "fp32", convention="megatron")
    assert fp32.bytes_per_gpu == pytest.approx(8 * psi + 8 * psi / d)
    assert "dist_optimizer.md" in dist.formula
    # the ZeRO paper (the default) counts 16-bit gradients: 2 bytes fewer, whole
    paper = model_state_bytes(psi, d, 1)
    assert dist.bytes_per_gpu - paper.bytes_per_gpu == pytest.approx(2 * psi)
    assert paper == model_state_bytes(psi, d, 1, convention="zero-paper")


def test_megatron_with_tp_pp_and_largest_model():
    est = model_state_bytes(8e9, 64, 1, tp=4, pp=2, convention="megatron")
    psi = 8e9 / 8
    assert est.bytes_per_gpu == pytest.approx(6 * psi + 12 * psi / 8)
    assert largest_model_that_fits(72e9, 1, convention="megatron") == 4_000_000_000  # 72e9 / 18


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(convention="nvidia"), ["convention='nvidia'", "'deepspeed'"]),
        (dict(convention="megatron", zero=2), ["zero=2", "'megatron'"]),
        (dict(convention="megatron", precision="bf16-pure"), ["precision='bf16-pure'"]),
        (dict(convention="megatron", zero=1, offload="optimizer"), ["offload='optimizer'"]),
        (dict(convention="deepspeed", zero=1), ["zero=1", "2 or 3"]),
        (dict(convention="deepspeed", zero=2, tp=2), ["tp*pp=2"]),
        (dict(convention="deepspeed", zero=2, precision="fp32"), ["precision='fp32'"]),
        (dict(convention="deepspeed", zero=3), ["largest_layer_params=None"]),
        (dict(convention="deepspeed", zero=2, gpus_per_node=3), ["gpus_per_node=3", "gpus=8"]),
        (dict(convention="deepspeed", zero=2, params=1.5), ["params=1.5", "whole number"]),
    ],
)
def test_convention_bad_inputs(kwargs, words):
    args = dict(params=1e9, gpus=8, zero=1) | kwargs
    with pytest.raises(ValueError) as exc:
        model_state_bytes(**args)
    for word in words:
        assert word in str(exc.value)
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="convention='deepspeed'"):
        largest_model_that_fits(80e9, 8, 2, convention="deepspeed")


def test_conventions_table_reads_the_calculator():
    shape = get_preset("llama3-8b")
    table = conventions_table(shape, 64)
    assert list(table.columns)[:3] == [f"{c} GB/GPU" for c in CONVENTIONS]
    assert table.loc[("DP", "none"), "zero-paper GB/GPU"] == 16 * shape.params / 1e9
    assert table.loc[("DP", "none"), "megatron GB/GPU"] == 18 * shape.params / 1e9
    assert math.isnan(table.loc[("ZeRO-1", "none"), "deepspeed GB/GPU"])
    assert math.isnan(table.loc[("ZeRO-2", "none"), "megatron GB/GPU"])
    cpu, gpu = deepspeed_reference(shape.params, 128256 * 4096, 8, 8, 3, "none")
    assert table.loc[("ZeRO-3", "none"), "deepspeed GB/GPU"] == gpu / 1e9
    assert table.loc[("ZeRO-3", "none"), "deepspeed host GB/node"] == cpu / 1e9


def test_cli_convention_deepspeed_json_and_text():
    args = ("--model", "zero-7.5b", "--gpus", "64", "--zero", "3", "--offload", "all")
    out = cli("memory", *args, "--convention", "deepspeed", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    shape = get_preset("zero-7.5b")
    cpu, gpu = deepspeed_reference(shape.params, 50257 * 3072, 8, 8, 3, "all")
    assert data["bytes_per_gpu"] == gpu and data["cpu_bytes_per_node"] == cpu
    assert data["convention"] == "deepspeed"
    text = cli(
        "memory", "--params", "7.5e9", "--gpus", "64", "--zero", "1", "--convention", "megatron"
    )
    assert text.returncode == 0, text.stderr
    assert "convention=megatron" in text.stdout and "46.41 GB" in text.stdout  # 6Ψ + 12Ψ/64
    bad = cli(
        "memory", "--params", "7.5e9", "--gpus", "64", "--zero", "1", "--convention", "deepspeed"
    )
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        line for line in bad.stderr.strip().splitlines() if line.startswith("error: ")
    ]
    assert "zero=1" in bad.stderr


@pytest.mark.parametrize("n", [8, 64])
def test_megatron_sends_fp32_gradients_and_16_bit_parameters(n):
    # Megatron-LM megatron/training/arguments.py: bf16 with fp32 main grads sets
    # accumulate_allreduce_grads_in_fp32, so gradients travel in 4 bytes, parameters in 2
    psi, ring = 7.5e9, (n - 1) / n
    dp = comm_estimate(psi, n, 0, "mixed", convention="megatron")
    assert dp.breakdown == {"all_reduce_grads": pytest.approx(2 * ring * 4 * psi)}
    dist_opt = comm_estimate(psi, n, 1, "mixed", convention="megatron")
    assert dist_opt.breakdown == {
        "reduce_scatter_grads": pytest.approx(ring * 4 * psi),
        "all_gather_params": pytest.approx(ring * 2 * psi),
    }
    assert "fp32 grads" in dist_opt.formula and "arguments.py" in dist_opt.formula
    paper = comm_estimate(psi, n, 1, "mixed")
    assert paper.bytes_per_gpu == pytest.approx(2 * ring * 2 * psi)
    assert comm_estimate(psi, n, 1, "fp32", convention="megatron").bytes_per_gpu == (
        pytest.approx(2 * ring * 4 * psi)
    )
    with pytest.raises(ValueError, match="zero=2 is not valid"):
        comm_estimate(psi, n, 2, convention="megatron")
    with pytest.raises(ValueError, match="convention='ds' is not valid"):
        comm_estimate(psi, n, 1, convention="ds")
