"""The planner's inputs checked once: :class:`~edu_parallel.planner.PlannerInputs` (every bad
field named in one line, trusted below), and ``edu-parallel planner``'s options."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, replace

import pytest

from edu_parallel.app import cli
from edu_parallel.memory.presets import ModelShape, count_params, get_preset
from edu_parallel.planner import JSON_KEYS, TERMS, ClusterSpec, PlannerInputs, estimate_config, plan

H100x16 = ClusterSpec(2, 8, "h100")
MOE6 = ModelShape(
    "moe6", "bare", layers=2, hidden=16, heads=4, vocab=0, seq=4, experts=6, top_k=2, expert_ffn=8
)


def _check_config(d: dict) -> None:
    """What every --json config must satisfy; raises AssertionError otherwise."""
    assert tuple(d) == JSON_KEYS
    assert set(d["time_terms"]) == set(TERMS)
    assert sum(d["time_terms"].values()) == pytest.approx(d["step_time_s"])
    assert d["dp"] * d["micro_batch"] * d["microbatches"] == 64
    assert d["tokens_per_s"] == pytest.approx(64 * 4096 / d["step_time_s"])


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = cli.main(["planner", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


ARGS = ("--model", "llama3-8b", "--nodes", "2", "--gpus-per-node", "8", "--global-batch", "64")


@pytest.mark.parametrize("batch", [0, -4])
def test_zero_or_negative_batch(batch):
    with pytest.raises(ValueError, match=f"global_batch={batch} is not valid"):
        plan("llama3-8b", H100x16, batch, 4096)


def test_every_bad_input_named_at_once():
    with pytest.raises(ValueError) as exc:
        plan("llama9", H100x16, 0, -1, efficiency=1.5, memory_budget=-3)
    for word in ("model='llama9'", "global_batch=0", "seq=-1", "efficiency=1.5", "memory_budget"):
        assert word in str(exc.value)


def test_planner_inputs_name_every_bad_field_in_one_line_and_resolve_once():
    with pytest.raises(ValueError) as exc:
        PlannerInputs("llama9", "2x8", 1.5, 0, efficiency=True, memory_budget=float("inf"))
    text = str(exc.value)
    assert "\n" not in text and text.count("is not valid") == 6
    for word in (
        "model='llama9' is not valid: expected one of 'gpt2-1.5b'",
        "cluster='2x8' is not valid: expected a ClusterSpec",
        "global_batch=1.5 is not valid: expected an integer >= 1",
        "seq=0 is not valid: expected an integer >= 1",
        "efficiency=True is not valid: expected a number in (0, 1]",
        "memory_budget=inf is not valid: expected bytes > 0, or None",
    ):
        assert word in text
    inputs = PlannerInputs("llama3-8b", H100x16, 64.0, 4096, efficiency=1)
    assert inputs.shape == get_preset("llama3-8b") and inputs.budget == 80e9
    assert (inputs.global_batch, inputs.efficiency) == (64, 1.0)  # normalised by the check
    assert type(inputs.global_batch) is int
    assert replace(inputs, memory_budget=40e9).budget == 40e9
    with pytest.raises(FrozenInstanceError):
        inputs.seq = 1  # type: ignore[misc]
    with pytest.raises(TypeError, match="give a PlannerInputs alone"):
        plan(inputs, H100x16)


def test_plan_and_estimate_given_inputs_do_not_check_them_again(monkeypatch, capsys):
    checks = []
    original = PlannerInputs._check

    def counted(self):
        checks.append(self)
        return original(self)

    monkeypatch.setattr(PlannerInputs, "_check", counted)
    inputs = PlannerInputs("llama3-8b", H100x16, 64, 4096)
    assert len(checks) == 1
    result = plan(inputs)
    estimate = estimate_config(inputs, tp=4, pp=2)
    assert len(checks) == 1  # trusted as built
    assert len(result.configs) == len(plan("llama3-8b", H100x16, 64, 4096).configs)
    assert len(checks) == 2  # the keyword call builds its inputs once
    same = estimate_config("llama3-8b", H100x16, 64, 4096, tp=4, pp=2)
    assert estimate.to_json_dict() == same.to_json_dict() and len(checks) == 3
    rc, _, _ = _cli(capsys, *ARGS, "--seq", "4096", "--top", "1")
    assert rc == 0 and len(checks) == 4  # the command line: once


def test_cli_names_a_bad_custom_shape_and_a_bad_cluster_together(capsys):
    shape = ("--layers", "4", "--hidden", "30", "--heads", "4", "--global-batch", "0")
    rc, _, err = _cli(capsys, *shape, "--nodes", "0")
    assert rc == 2 and err.count("\n") == 1
    for word in ("--hidden=30 is not valid: expected a multiple of heads=4", "--nodes=0"):
        assert word in err
    assert "--global-batch=0" in err  # checked with a stand-in model and cluster


@pytest.mark.parametrize(
    "kv_heads, arch, words",
    [
        ("3", "llama", ["--kv-heads=3 is not valid: expected a divisor of --heads=32",
                        "(1, 2, 4, 8, 16, 32)"]),
        ("64", "bare", ["--kv-heads=64 is not valid: expected a divisor of --heads=32"]),
        ("8", "gpt2", ["--kv-heads=8 is not valid: expected no value with --arch='gpt2'"]),
        ("8", "llama", []),
        ("32", "bare", []),
    ],
)  # fmt: skip
def test_kv_heads_divide_heads_and_mean_nothing_for_gpt2(capsys, kv_heads, arch, words):
    shape = ("--layers", "2", "--hidden", "256", "--heads", "32", "--kv-heads", kv_heads)
    rc, out, err = _cli(capsys, *shape, "--arch", arch, "--nodes", "1", "--global-batch", "8")
    assert rc == (2 if words else 0), err
    assert all(word in err for word in words) and err.count("\n") == (1 if words else 0), err
    if not words:
        assert out.startswith("custom (")


def test_a_budget_no_configuration_fits_names_the_smallest():
    smallest = min(
        c.memory_bytes_per_gpu
        for c in plan("llama3-8b", H100x16, 64, 4096).configs
        if c.memory_bytes_per_gpu is not None
    )
    with pytest.raises(ValueError) as exc:
        plan("llama3-8b", H100x16, 64, 4096, memory_budget=1e9)
    text = str(exc.value)
    assert f"smallest memory per GPU that would fit is {smallest / 1e9:.4g} GB" in text
    assert "\n" not in text


def test_cli_json_keys_exactly_and_a_planted_wrong_value_is_caught(capsys):
    rc, out, _ = _cli(capsys, *ARGS, "--seq", "4096", "--json", "--top", "5")
    assert rc == 0
    data = json.loads(out)
    assert len(data["configs"]) == 5
    for d in data["configs"]:
        _check_config(d)
        assert d["feasible"] and d["reason"] == ""
    planted = dict(data["configs"][0], step_time_s=data["configs"][0]["step_time_s"] * 1.1)
    with pytest.raises(AssertionError):
        _check_config(planted)
    rc, out, _ = _cli(capsys, *ARGS, "--seq", "4096", "--json", "--all")
    every = json.loads(out)["configs"]
    assert any(not d["feasible"] and d["reason"] for d in every)
    assert len(every) == data["count"]


def test_cli_table_and_custom_shape(capsys):
    rc, out, _ = _cli(
        capsys,
        "--layers",
        "4",
        "--hidden",
        "64",
        "--heads",
        "4",
        "--nodes",
        "1",
        "--global-batch",
        "16",
        "--top",
        "3",
    )
    # the heading wraps to the output area (core/width.fit); then the header and 3 rows
    assert rc == 0 and "custom" in out and len(out.splitlines()) == 6


@pytest.mark.parametrize(
    "args, words",
    [
        (("--global-batch", "0"), ["--global-batch=0 is not valid"]),
        (("--global-batch", "-2", "--nodes", "0"), ["--global-batch=-2", "--nodes=0"]),
        (("--efficiency", "2", "--gpu", "tpu"), ["--efficiency=2.0", "--gpu='tpu'"]),
        (("--model", "gpt5", "--seq", "0", "--top", "0"), ["--model='gpt5'", "--seq=0", "--top=0"]),
        (("--memory-gb", "1"), ["smallest memory per GPU that would fit"]),
    ],
)
def test_cli_bad_input_one_line_exit_2(capsys, args, words):
    base = ["--model", "llama3-8b", "--nodes", "1", "--global-batch", "8"]
    rc, _, err = _cli(capsys, *base, *args)
    assert rc == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    for word in words:
        assert word in err


def test_cli_mixtral_json_shows_ep_and_custom_moe_shape(capsys):
    args = ("--model", "mixtral-8x7b", "--nodes", "2", "--global-batch", "64", "--seq", "4096")
    rc, out, _ = _cli(capsys, *args, "--json", "--top", "3")
    data = json.loads(out)
    assert rc == 0 and data["model"] == "mixtral-8x7b" and len(data["configs"]) == 3
    for d in data["configs"]:
        _check_config(d)
        assert d["ep"] >= 1 and d["dp"] % d["ep"] == 0
    rc, out, _ = _cli(capsys, *args, "--top", "2")
    header = next(line.split() for line in out.splitlines() if line.lstrip().startswith("#"))
    assert "B active" in " ".join(out.split()) and header[:5] == ["#", "dp", "tp", "pp", "ep"]
    custom = ("--layers", "2", "--hidden", "16", "--heads", "4", "--nodes", "1", "--seq", "4")
    rc, out, _ = _cli(capsys, *custom, "--global-batch", "16", "--experts", "6", "--top-k", "2",
                      "--arch", "bare", "--vocab", "0", "--json", "--all")  # fmt: skip
    data = json.loads(out)
    assert data["params"] == count_params(MOE6) + 2 * 6 * (2 * 16 * 64 - 2 * 16 * 8)  # ffn 4h
    assert {d["ep"] for d in data["configs"]} == {1, 2}
    for bad, word in ((("--experts", "6"), "--top-k=None"), (("--top-k", "2"), "--top-k=2")):
        rc, _, err = _cli(capsys, *custom, "--global-batch", "16", *bad)
        assert rc == 2 and word in err and err.count("\n") == 1
