"""DDP's bucket rule as pure data, checked against torch's own C++ assignment; the run's config."""

import argparse
import pickle
import random
import typing

import pytest
import torch
import torch.distributed as dist

from edu_parallel.app.concepts.ddp import DDP
from edu_parallel.core.dims import ParallelDims
from edu_parallel.core.units import MIB
from edu_parallel.data_parallel import buckets
from edu_parallel.data_parallel import config as config_module
from edu_parallel.data_parallel.buckets import (
    DEFAULT_FIRST_BUCKET_BYTES,
    BucketPlan,
    ParamSpec,
    assign_buckets,
    bucket_limits,
    validate_buckets,
)
from edu_parallel.data_parallel.config import (
    DDP_MODELS,
    MODELS,
    SYNCS,
    DdpConfig,
    DdpRun,
    ModelName,
    Sync,
)
from edu_parallel.data_parallel.ddp import ddp_job
from edu_parallel.engine.context import RankContext, rank_output
from edu_parallel.engine.executor import RunResult
from edu_parallel.engine.recording import Tracer
from edu_parallel.engine.stream import CommStream

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def torch_assignment(params, bucket_cap_mb):
    """What ``dist._compute_bucket_assignment_by_size`` makes of the same parameters, handed over
    as DDP's rebuild hands them: tensors in gradient-ready order (reverse registration order),
    each labelled with its registration index."""
    order = list(reversed(range(len(params))))
    tensors = [torch.empty(params[i].numel, dtype=DTYPES[params[i].dtype]) for i in order]
    first, cap = bucket_limits(bucket_cap_mb)
    indices, _ = dist._compute_bucket_assignment_by_size(
        tensors, [first, cap], [False] * len(params), order
    )
    return [[params[i].name for i in bucket] for bucket in indices]


def random_params(rng, n, dtypes):
    return [
        ParamSpec(f"p{i}", rng.choice([1, 7, 300, 4096, 70_000, 300_000]), rng.choice(dtypes))
        for i in range(n)
    ]


def test_the_first_bucket_is_1_mib_only_when_the_cap_is_left_at_its_default():
    assert dist._DEFAULT_FIRST_BUCKET_BYTES == DEFAULT_FIRST_BUCKET_BYTES
    assert bucket_limits(None) == (MIB, 25 * MIB)
    assert bucket_limits(2) == (2 * MIB, 2 * MIB)  # torch's _BucketCapacityConfig: no 1 MiB


@pytest.mark.parametrize("cap", [None, 1e-6, 0.01, 0.5, 1.0, 3.0])
def test_one_dtype_assignment_equals_torchs_reducer(cap):
    rng = random.Random(cap)
    for _ in range(20):
        params = random_params(rng, rng.randint(1, 30), ["float32"])
        ours = [list(b.params) for b in assign_buckets(params, cap)]
        assert ours == torch_assignment(params, cap)


@pytest.mark.parametrize("cap", [None, 0.01, 0.5])
def test_mixed_dtypes_never_share_a_bucket_and_match_torch(cap):
    rng = random.Random(7)
    for _ in range(20):
        params = random_params(rng, rng.randint(2, 30), list(DTYPES))
        plan = assign_buckets(params, cap)
        dtype = {p.name: p.dtype for p in params}
        assert all({dtype[n] for n in b.params} == {b.dtype} for b in plan)
        # torch appends the open buckets of several dtypes in hash-map order: compare as sets
        assert sorted(map(list, (b.params for b in plan))) == sorted(torch_assignment(params, cap))
        assert validate_buckets(plan, params) == []


def test_the_deep_model_gets_a_1_mib_first_bucket_then_one_for_the_rest():
    plan = DdpConfig(4, model="deep").buckets()
    assert plan.sizes == [MIB + 512 * 4, 7 * (MIB + 512 * 4)]
    assert plan.buckets[0].params == ("14.bias", "14.weight")
    assert DdpConfig(4, model="deep", bucket_cap_mb=2).buckets().sizes == [2 * (MIB + 2048)] * 4
    assert len(DdpConfig(4, model="deep", sync="per-param").buckets()) == 16


def test_text_form_round_trips_and_the_validator_names_every_problem():
    params = DdpConfig(2, model="mlp").param_specs()
    plan = assign_buckets(params, 0.001)
    assert BucketPlan.from_text(plan.to_text()) == plan
    assert validate_buckets(plan, params) == []
    bad = BucketPlan.from_text(
        "buckets first=1 cap=1\n"
        "b0 float32 cpu 64: 4.bias 4.bias\n"
        "b2 bfloat16 cpu 1024: 0.weight 2.weight\n"
    )
    problems = "\n".join(validate_buckets(bad, params))
    for expected in (
        "4.bias is in b0 and b0",
        "numbered b2",
        "holds 0.weight (float32 on cpu)",
        "says 64 B but its parameters hold 128 B",
        "0.bias is in no bucket",
        "not in reverse registration order",
    ):
        assert expected in problems, (expected, problems)
    with pytest.raises(ValueError, match="first line"):
        BucketPlan.from_text("b0 float32 cpu 4: x")


def test_a_tied_weight_is_one_parameter_and_frozen_layers_are_in_no_bucket():
    tied = DdpConfig(2, model="tied")
    names = [p.name for p in tied.param_specs()]
    assert names.count("0.weight") == 1 and "6.weight" not in names
    assert tied.psi == 3 * 256 + 4 * 16
    frozen = DdpConfig(2, model="mlp", freeze=2)
    assert [p.name for p in frozen.param_specs()] == ["4.weight", "4.bias"]
    assert frozen.bytes_per_step() == 2 * (2 - 1) / 2 * 272 * 4


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"bucket_cap_mb": 0}, "bucket_cap_mb=0 is not valid"),
        ({"bucket_cap_mb": -2.5}, "bucket_cap_mb=-2.5 is not valid"),
        ({"accumulate": 0}, "accumulate=0 is not valid: expected an integer in [1, 64]"),
        ({"freeze": 3}, "freeze=3 is not valid: expected at most 2"),
        ({"world_size": 3}, "world_size=3 is not valid with accumulate=1"),
        ({"world_size": 4, "accumulate": 8}, "splits evenly over world sizes 1, 2"),
        ({"model": "huge"}, "model='huge' is not valid: expected one of 'mlp', 'deep', 'tied'"),
        ({"sync": "later"}, "sync='later' is not valid"),
    ],
)
def test_bad_options_get_one_line_naming_them(kwargs, expected):
    options = {"world_size": 2, **kwargs}
    with pytest.raises(ValueError) as err:
        DdpConfig(**options)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_several_bad_options_are_named_together():
    with pytest.raises(ValueError) as err:
        DdpConfig(2, bucket_cap_mb=0, accumulate=0, steps=0, lr=-1)
    for name in ("bucket_cap_mb=0", "accumulate=0", "steps=0", "lr=-1"):
        assert name in str(err.value)


def test_the_models_and_syncs_have_one_source_each():
    assert tuple(DDP_MODELS) == MODELS == typing.get_args(ModelName)
    assert all(spec.name == name for name, spec in DDP_MODELS.items())
    assert SYNCS == typing.get_args(Sync) == ("per-param", "bucketed", "overlap")


def test_every_model_splits_its_batch_over_the_documented_world_sizes():
    for name, spec in DDP_MODELS.items():
        for n in (1, 2, 4):
            assert DdpConfig(n, model=name).microbatch * n == spec.batch


def test_the_comm_stream_runs_in_order_and_hands_errors_to_the_waiter():
    ran = []

    def boom():
        raise RuntimeError("rank 1 vanished")

    with CommStream() as stream:
        handles = [stream.issue(ran.append, i) for i in range(5)]
        failing = stream.issue(boom)
        after = stream.issue(ran.append, 99)
        for h in handles:
            h.wait(5)
        with pytest.raises(RuntimeError, match="vanished"):
            failing.wait(5)
        with pytest.raises(RuntimeError, match="vanished"):  # nothing runs after a failure
            after.wait(5)
    assert ran == [0, 1, 2, 3, 4]
    h = handles[0]
    assert h.issued <= h.started <= h.finished <= h.released and h.waited <= h.released


# ------------------------------------------------------------ checked once, passed down
class RankZeroHere:
    """An executor that runs rank 0 of a one-rank job in this process, as a worker runs it: the
    job and its arguments pickled and unpickled on the way, a context with no process group (a
    single rank has nobody to line up with). It records what it was asked to run."""

    world_size = 1
    backend = "gloo"
    timeout = 60.0

    def __init__(self):
        self.jobs = []

    def run(self, fn, *args, trace=True, **kwargs):
        self.jobs.append((fn, args))
        fn, args = pickle.loads(pickle.dumps((fn, args)))  # what a worker receives
        ctx = Alone(0, 1, "gloo", torch.device("cpu"), Tracer(0))
        return RunResult.merge([rank_output(ctx, fn(ctx, *args))], {}, 0.0)


class Alone(RankContext):
    def barrier(self):
        pass


def counted(monkeypatch, calls, owner, name, *more_owners):
    """Count the calls of ``owner.name`` (patched where each owner looks it up)."""
    real = getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls[name] = calls.get(name, 0) + 1
        return real(*args, **kwargs)

    for where in (owner, *more_owners):
        monkeypatch.setattr(where, name, wrapper)


def refuse(*args, **kwargs):
    raise AssertionError("the bucket plan was parsed from text on its way to the ranks")


def test_bucket_mb_is_checked_once_from_the_command_line_to_the_ranks(monkeypatch):
    """``--bucket-mb`` is checked by the config the CLI's check builds, and nowhere else: the
    bucket limits are computed and the buckets assigned once per run, the rank job receives the
    same frozen config with the plan in it as a BucketPlan (no text), and neither the ranks nor
    the references nor the report check, derive or parse it again."""
    calls = {}
    counted(monkeypatch, calls, buckets, "bucket_limits", config_module)
    counted(monkeypatch, calls, config_module, "assign_within")
    counted(monkeypatch, calls, DdpConfig, "_check")
    monkeypatch.setattr(BucketPlan, "from_text", refuse)
    parser = argparse.ArgumentParser()
    DDP.add_arguments(parser)
    a = parser.parse_args(["--bucket-mb", "0.001", "--steps", "2", "--no-torch"])
    run = DDP.check(a, ParallelDims.local(1))
    assert isinstance(run, DdpRun) and run.config.bucket_cap_mb == 0.001
    assert calls == {"bucket_limits": 1, "assign_within": 1, "_check": 1}
    executor = RankZeroHere()
    report = DDP.run(executor, run)
    assert calls == {"bucket_limits": 1, "assign_within": 1, "_check": 1}  # nothing again
    [(fn, args)] = executor.jobs
    assert fn is ddp_job and args[0] is run.config and args[1:] == (None, False)
    assert isinstance(args[0].plan, BucketPlan) and args[0].buckets() is run.config.plan
    assert len(run.config.plan) == 3  # 0.001 MiB: one bucket per layer of the mlp
    assert report.plan is run.config.plan and report.bitwise_equal_reference
    assert [b["params"] for b in report.buckets] == [list(b.params) for b in run.config.plan]


def test_the_command_line_names_its_options_without_patching_the_text():
    parser = argparse.ArgumentParser()
    DDP.add_arguments(parser)
    a = parser.parse_args(["--bucket-mb", "0", "--flops", "-1", "--rows", "0", "--model", "x"])
    with pytest.raises(ValueError) as err:
        DDP.check(a, ParallelDims.local(2))
    text = str(err.value)
    assert "bucket-mb=0.0 is not valid: expected a finite number > 0 (leave it out" in text
    assert "flops=-1.0 is not valid" in text and "rows=0 is not valid" in text
    assert "model='x' is not valid" in text and "\n" not in text
    assert "bucket_cap_mb" not in text and "flops_per_s" not in text
    with pytest.raises(ValueError, match="bucket_cap_mb=0 is not valid"):  # Python's names
        DdpRun.of(2, bucket_cap_mb=0)
