"""Tensor parallelism's config and CLI: every bad value named in one line, the CLI checking once
and handing the rank job that config, the JSON of ``edu-parallel run tp`` (arXiv 1909.08053)."""

from __future__ import annotations

import json
import re

import pytest
import torch
from helpers import Recorder, cli, count_checks

from edu_parallel.app.cli import build_parser
from edu_parallel.app.concepts.registry import CONCEPTS
from edu_parallel.core.dims import ParallelDims
from edu_parallel.tensor_parallel.config import TPConfig
from edu_parallel.tensor_parallel.job import tp_job
from edu_parallel.tensor_parallel.layers import shard_linear
from edu_parallel.tensor_parallel.report import run_tp, run_tp_config


# ------------------------------------------------------------------ sharding, no processes
def test_shard_linear_splits_nn_linear_weights() -> None:
    w = torch.arange(24.0).reshape(6, 4)  # nn.Linear(4, 6): W (h_out=6, h_in=4)
    b = torch.arange(6.0)
    cols = [shard_linear(w, b, r, 2, "column") for r in range(2)]
    assert torch.equal(cols[0][0], w[:3]) and torch.equal(
        cols[1][1], b[3:]
    )  # rows of W = cols of A
    rows = [shard_linear(w, b, r, 2, "row") for r in range(2)]
    assert torch.equal(rows[1][0], w[:, 2:]) and torch.equal(
        rows[0][1], b
    )  # full bias on every rank
    assert torch.equal(torch.cat([s[0] for s in rows], 1), w)
    with pytest.raises(ValueError, match="mode='diagonal'"):
        shard_linear(w, b, 0, 2, "diagonal")
    with pytest.raises(ValueError, match=r"weight.shape=\(6, 4\).*multiple of world=4"):
        shard_linear(w, b, 0, 4, "column")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "diag"}, "mode='diag'"),
        ({"hidden": 6}, "hidden=6 is not valid: expected a multiple of the TP degree world_size=4"),
        ({"ffn": 10}, "ffn=10 is not valid"),
        ({"mode": "mlp-sp", "seq": 6}, "seq=6"),
        ({"rule": "syllabus", "mode": "mlp"}, "rule='syllabus'"),
        ({"dtype": "int8"}, "dtype='int8'"),
        ({"gather_output": True, "mode": "row"}, "gather_output=True"),
        ({"world_size": 0}, "world_size=0"),
        ({"batch": 0}, "batch=0"),
        ({"rule": "nope"}, "rule='nope'"),
        ({"gather_output": 1}, "gather_output=1"),
        ({"seed": -1}, "seed=-1"),
        ({"batch": 1024, "seq": 4096}, "batch*seq*max(hidden, ffn)=134217728"),
    ],
)
def test_a_bad_value_is_one_line_naming_it(kwargs: dict, match: str) -> None:
    args = {"world_size": 4, "mode": "mlp", "hidden": 8} | kwargs
    with pytest.raises(ValueError) as err:
        TPConfig(**args)
    text = str(err.value)
    assert text.startswith(match) and text.count("is not valid") == 1 and "\n" not in text, text


def test_every_bad_value_is_named_at_once_and_ffn_defaults_to_4h() -> None:
    with pytest.raises(ValueError) as err:
        TPConfig(4, "mlp-sp", hidden=6, ffn=10, seq=6, dtype="int8")
    text = str(err.value)
    assert text.count("is not valid") == 4 and "\n" not in text, text
    for name in ("dtype='int8'", "hidden=6", "ffn=10", "seq=6"):
        assert name + " is not valid" in text
    c = TPConfig(2, "column", hidden=6)
    assert (c.ffn, c.itemsize, c.tolerances) == (24, 8, (1e-10, 1e-12))


def test_more_ranks_than_a_local_cluster_are_a_matter_of_the_shape() -> None:
    """The TP degree has no limit of its own: under torchrun it may exceed a local cluster's."""
    assert TPConfig(32, "mlp", hidden=64).world_size == 32
    with pytest.raises(ValueError, match="hidden=8 is not valid: expected a multiple of the TP"):
        TPConfig(32, "mlp", hidden=8)


def cli_config(*argv: str, world_size: int = 2) -> TPConfig:
    """What ``edu-parallel run tp ARGV`` hands its run, in this process."""
    a = build_parser().parse_args(["run", "tp", "--world-size", str(world_size), *argv])
    return CONCEPTS["tp"].check(a, ParallelDims.local(world_size))


def test_the_cli_checks_once_and_the_rank_job_gets_that_config(monkeypatch) -> None:
    checks = count_checks(monkeypatch, TPConfig)
    config = cli_config("--mode", "column", "--gather-output", "--dtype", "float32")
    assert (config.mode, config.dtype, config.ffn) == ("column", "float32", 32)
    assert config.gather_output is True
    executor = Recorder(2)
    assert CONCEPTS["tp"].run(executor, config) is None
    assert executor.calls == [(tp_job, (config,))] and executor.calls[0][1][0] is config
    assert checks == [config]  # checked once, by the concept


def test_the_keyword_call_builds_the_config_once(monkeypatch) -> None:
    checks = count_checks(monkeypatch, TPConfig)
    executor = Recorder(4)
    run_tp(executor, "mlp-sp", seq=8, hidden=16)
    ((fn, (config,)),) = executor.calls
    assert fn is tp_job and checks == [config] and config == TPConfig(4, "mlp-sp", seq=8, hidden=16)


def test_bad_cli_options_are_one_line_naming_each_as_spelled() -> None:
    with pytest.raises(ValueError) as err:
        cli_config("--mode", "row", "--gather-output", "--hidden", "5")
    text = str(err.value)
    assert "\n" not in text and text.count("is not valid") == 2, text
    assert "--gather-output=True is not valid" in text and "hidden=5 is not valid" in text


def test_a_given_config_must_fit_the_executor() -> None:
    with pytest.raises(ValueError, match=re.escape("config.world_size=2 is not valid: expected 4")):
        run_tp_config(Recorder(4), TPConfig(2))


def test_bad_input_before_running(cluster2) -> None:
    with pytest.raises(ValueError, match="hidden=5"):
        run_tp(cluster2, "column", hidden=5)


# ------------------------------------------------------------------ CLI
def test_cli_json_and_errors() -> None:
    args = ("--mode", "mlp", "--world-size", "2", "--hidden", "4", "--seq", "2", "--json")
    out = cli("run", "tp", *args)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["forward_collectives"] == ["all_reduce"] == data["backward_collectives"]
    assert (
        data["matches_dense"] is True and data["per_rank_sent_bytes"] == [2 * (2 * 2 * 4 * 8)] * 2
    )
    bad = cli("run", "tp", "--mode", "row", "--world-size", "4", "--hidden", "6")
    assert bad.returncode == 2 and "hidden=6 is not valid" in bad.stderr + bad.stdout
    bad = cli("run", "tp", "--mode", "diagonal")
    assert bad.returncode == 2 and "mode='diagonal'" in bad.stderr + bad.stdout
