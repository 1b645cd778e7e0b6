"""Data-parallel training on real ranks: buckets, overlap, accumulation, against torch's DDP."""

import dataclasses
import json
import math

import pytest
import torch
import torch.distributed as dist

from edu_parallel import Cluster
from edu_parallel.core.errors import WorkerError
from edu_parallel.core.schema import BUCKET_READY_MARK, GRAD_READY_MARK
from edu_parallel.core.units import MIB
from edu_parallel.data_parallel import (
    SYNCS,
    allreduce_mean_hook,
    ddp_sync_table,
    format_ddp,
    measure,
    run_ddp,
    sweep_buckets,
)
from edu_parallel.data_parallel.config import DEFAULT_FLOPS_PER_S, DdpConfig, DdpRun
from edu_parallel.models.retiming import cost_model, ring_allreduce_time

pytestmark = pytest.mark.multiprocess


def by_step(trace, step, **match):
    return [
        e
        for e in trace.events
        if e.step == step and all(getattr(e, k) == v for k, v in match.items())
    ]


def marks(trace, name, rank=0, step=None):
    return [
        e
        for e in trace.events
        if e.kind == "mark"
        and e.op == name
        and e.rank == rank
        and (step is None or e.attrs.get("step") == step)
    ]


@pytest.mark.parametrize("model", ["mlp", "tied"])
@pytest.mark.parametrize("sync", ["per-param", "bucketed", "overlap"])
def test_two_ranks_equal_one_process_and_torch_ddp_bit_for_bit(cluster2, model, sync):
    r = run_ddp(cluster2, model, bucket_cap_mb=0.001, sync=sync, steps=2)
    assert r.matches_reference and r.bitwise_equal_reference
    assert r.matches_big_batch and r.matches_torch_ddp_buckets
    assert r.matches_torch_ddp_grads and r.max_abs_diff_torch_ddp == 0.0  # a + b == b + a
    assert r.per_rank_sent_bytes == [r.formula_sent_bytes] * 2


@pytest.mark.parametrize("cap", [1e-6, 0.001, None])
def test_bytes_per_step_do_not_depend_on_buckets_but_messages_do(cluster4, cap):
    r = run_ddp(cluster4, "mlp", bucket_cap_mb=cap, steps=2, compare_torch=False)
    config = DdpConfig(4, model="mlp", bucket_cap_mb=cap)
    assert r.per_rank_sent_bytes == [2 * 3 / 4 * 816 * 4] * 4
    assert r.messages_per_step == 2 * 3 * len(r.buckets) == config.messages_per_step()
    assert r.collectives_per_step == len(r.buckets)
    assert r.bitwise_equal_reference


def test_the_deep_model_on_four_ranks_has_ddps_buckets_and_its_rebuild(cluster4):
    r = run_ddp(cluster4, "deep", steps=2)
    assert [b["bytes"] for b in r.buckets] == [MIB + 2048, 7 * (MIB + 2048)]
    # DDP's first iteration reduces one bucket; from the second, the rebuilt ones (ours)
    assert r.torch_ddp_bucket_sizes[0] == [8 * (MIB + 2048)]
    assert r.torch_ddp_bucket_sizes[1] == [MIB + 2048, 7 * (MIB + 2048)]
    assert r.matches_torch_ddp_buckets and r.matches_torch_ddp_grads
    assert r.bitwise_equal_reference and r.matches_big_batch
    data = r.to_json_dict()
    for key in (
        "buckets",
        "matches_reference",
        "matches_torch_ddp_buckets",
        "per_rank_sent_bytes",
        "messages_per_step",
        "overlap_fraction_measured",
        "step_time_s",
    ):
        assert key in data
    assert "overlap_fraction_modelled" not in data
    json.dumps(data)


def test_overlap_issues_buckets_during_backward_and_waits_before_the_optimizer(cluster2):
    r = run_ddp(cluster2, "mlp", bucket_cap_mb=0.001, sync="overlap", steps=2, compare_torch=False)
    t = r.trace
    for rank in (0, 1):
        backward = [e for e in by_step(t, 2, rank=rank, op="backward")]
        coll = sorted(by_step(t, 2, rank=rank, kind="collective"), key=lambda e: e.attrs["bucket"])
        optimizer = by_step(t, 2, rank=rank, op="optimizer")[0]
        assert [e.attrs["layer"] for e in backward] == [2, 1, 0]
        assert len(coll) == 3 and [e.attrs["after_layer"] for e in coll] == [2, 1, 0]
        first = coll[0]
        assert first.attrs["issued"] < backward[-1].end  # issued while backward still ran
        for e in coll:
            a = e.attrs
            assert a["issued"] <= e.start <= e.end <= a["released"] <= optimizer.start
            assert a["waited"] <= a["released"]
        grads = marks(t, GRAD_READY_MARK, rank, 2)
        ready = marks(t, BUCKET_READY_MARK, rank, 2)
        assert [g.attrs["param"] for g in grads] == [
            "4.bias",
            "4.weight",
            "2.bias",
            "2.weight",
            "0.bias",
            "0.weight",
        ]
        for b in ready:  # a bucket is issued after its last gradient is in
            mine = [g.start for g in grads if g.attrs["bucket"] == b.attrs["bucket"]]
            assert len(mine) == 2 and max(mine) <= b.start


def test_bucketed_sync_issues_every_bucket_after_backward(cluster2):
    r = run_ddp(cluster2, "mlp", bucket_cap_mb=0.001, sync="bucketed", steps=1, compare_torch=False)
    backward_end = max(e.end for e in by_step(r.trace, 1, rank=0, op="backward"))
    coll = by_step(r.trace, 1, rank=0, kind="collective")
    assert len(coll) == 3
    assert all(e.attrs["after_layer"] is None and e.attrs["issued"] >= backward_end for e in coll)
    assert measure(r.trace).hidden_s == 0.0


def test_accumulation_syncs_once_per_optimizer_step_and_equals_one_big_batch(cluster2):
    k = 4
    r = run_ddp(cluster2, "mlp", accumulate=k, steps=2)
    t = r.trace
    forwards = by_step(t, 1, rank=0, op="forward")
    assert [e.attrs["microbatch"] for e in forwards] == list(range(k))
    last_forward = forwards[-1].start
    sends = by_step(t, 1, rank=0, kind="send")
    assert sends and all(e.start > last_forward for e in sends)  # nothing before the k-th
    assert r.per_rank_sent_bytes == [r.formula_sent_bytes] * 2  # per step, not k times
    assert r.matches_big_batch and r.bitwise_equal_reference and r.matches_torch_ddp_grads


def test_a_tied_weight_is_reduced_once_with_the_gradient_of_both_uses(cluster4):
    r = run_ddp(cluster4, "tied", steps=1)
    names = [p for b in r.buckets for p in b["params"]]
    assert names.count("0.weight") == 1 and len(names) == len(set(names)) == 7
    psi = 3 * 256 + 4 * 16  # the shared 16x16 weight counted once
    assert r.per_rank_sent_bytes == [2 * 3 / 4 * psi * 4] * 4
    assert r.matches_big_batch and r.matches_torch_ddp_buckets and r.bitwise_equal_reference


def test_frozen_layers_are_not_reduced_and_torch_agrees(cluster2):
    r = run_ddp(cluster2, "mlp", freeze=1, steps=1)
    names = [p for b in r.buckets for p in b["params"]]
    assert "0.weight" not in names and "0.bias" not in names and len(names) == 4
    assert r.matches_torch_ddp_buckets and r.bitwise_equal_reference
    assert {e.attrs["layer"] for e in by_step(r.trace, 1, rank=0, op="backward")} == {1, 2}


def builtin_hook(ctx, flat, step, bucket):
    """A communication hook of our own: torch's all_reduce instead of the engine's ring."""
    flat.mul_(1.0 / ctx.world_size)
    dist.all_reduce(flat)


def test_a_comm_hook_replaces_the_reduction(cluster4):
    r = run_ddp(cluster4, "mlp", steps=2, hook=builtin_hook)
    assert r.matches_reference and r.matches_big_batch and r.matches_torch_ddp_grads
    assert r.per_rank_sent_bytes == [0.0] * 4  # gloo's own messages are not the engine's
    assert len(by_step(r.trace, 2, rank=0, kind="collective")) == len(r.buckets)


def test_gpu_retiming_shows_the_u_shape_of_bucket_size(cluster4):
    steps = {}
    for cap in (1e-6, 2.0, 25.0):
        r = run_ddp(
            cluster4,
            "deep",
            bucket_cap_mb=cap,
            steps=1,
            link="ib-ndr-400",
            rows=16384,
            compare_torch=False,
        )
        m = r.modelled
        model = cost_model("ib-ndr-400")
        coll = [e for e in m.trace.events if e.kind == "collective"]
        assert [e.duration for e in coll] == pytest.approx(
            [ring_allreduce_time(4, e.nbytes, model) for e in coll]
        )
        pairs = zip(coll, coll[1:], strict=False)
        assert all(a.end <= b.start + 1e-15 for a, b in pairs)  # one stream, in order
        back = [e for e in m.trace.events if e.op == "backward"]
        flops = sum(e.attrs["flops"] for e in back) * 16384 / back[0].attrs["rows"]
        assert m.compute_s >= flops / 400e12
        steps[cap] = m.step_time_s
        assert 0.0 <= m.overlap_fraction <= 1.0
    assert steps[2.0] < steps[1e-6] and steps[2.0] < steps[25.0]
    assert r.modelled.overlap_fraction == 0.0  # one bucket: nothing left to overlap with


def test_the_report_reads_as_text(cluster2):
    r = run_ddp(cluster2, "mlp", steps=1, link="nvlink4-h100")
    text = format_ddp(r)
    assert "bit for bit" in text and "modelled on a GPU" in text and "b0:" in text
    assert list(r.table().columns)[:3] == ["params", "first", "last"]
    assert torch.isfinite(torch.tensor(r.losses)).all()


def failing_hook(ctx, flat, step, bucket):
    """Rank 1's communication thread fails in step 2 while the others wait in the ring."""
    if ctx.rank == 1 and step == 2:
        raise RuntimeError("a bucket could not be reduced")
    allreduce_mean_hook(ctx, flat, step, bucket)


def test_a_failure_on_the_communication_stream_names_the_rank_and_the_next_run_works():
    with Cluster(4, timeout=20) as cluster:  # a WorkerError, not the others' JobTimeoutError
        with pytest.raises(WorkerError) as err:
            run_ddp(cluster, "mlp", steps=3, hook=failing_hook, compare_torch=False)
        assert err.value.rank == 1 and "a bucket could not be reduced" in str(err.value)
        assert run_ddp(cluster, "mlp", steps=1, compare_torch=False).bitwise_equal_reference


class NothingMayRun:
    """An executor that fails the test if a job is started: checks must come first."""

    world_size = 4

    def run(self, *args, **kwargs):
        raise AssertionError("a job started before the arguments were checked")


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"flops_per_s": -1, "link": "ib-ndr-400"}, "flops_per_s=-1 is not valid"),
        ({"flops_per_s": 1e16}, "flops_per_s=1e+16 is not valid: expected no value without link"),
        ({"rows": 4096}, "rows=4096 is not valid: expected no value without link"),
        (
            {"rows": 0, "link": "ib-ndr-400"},
            "rows=0 is not valid: expected an integer in [1, 1073741824] (leave it out",
        ),
        ({"rows": float("inf"), "link": "ib-ndr-400"}, "rows=inf is not valid"),
        ({"rows": 2.5, "link": "ib-ndr-400"}, "rows=2.5 is not valid"),
        ({"link": "wifi"}, "link='wifi' is not valid"),
        ({"hook": 3}, "hook=3 is not valid"),
        ({"compare_torch": "yes"}, "compare_torch='yes' is not valid"),
        ({"model": "huge", "rows": -1}, "model='huge' is not valid"),
    ],
)
def test_run_ddp_checks_every_argument_before_any_job(kwargs, expected):
    with pytest.raises(ValueError) as err:
        run_ddp(NothingMayRun(), **kwargs)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_the_gpu_models_options_take_their_default_with_a_link_only():
    """flops_per_s and rows mean something to the GPU model only: without a link they stay None
    (and giving them is refused, above); with one, flops_per_s gets its default."""
    assert (DdpRun.of(2).flops_per_s, DdpRun.of(2).rows) == (None, None)
    run = DdpRun.of(2, link="ib-ndr-400")
    assert run.flops_per_s == DEFAULT_FLOPS_PER_S and run.rows is None
    assert dataclasses.replace(run, rows=64).flops_per_s == DEFAULT_FLOPS_PER_S
    with pytest.raises(ValueError, match="rows=64 is not valid: expected no value without link"):
        dataclasses.replace(run, link=None, flops_per_s=None, rows=64)


def test_a_run_whose_loss_becomes_nan_says_so(cluster2):
    """lr=1e30: the first step is finite, the second one's loss is not; the report says at which
    step and why, instead of a bare mismatch."""
    r = run_ddp(cluster2, "mlp", steps=3, lr=1e30, compare_torch=False)
    assert math.isfinite(r.losses[0]) and r.diverged_at_step == 2 and not r.finite_weights
    assert not r.matches_builtin and r.to_json_dict()["diverged_at_step"] == 2
    text = format_ddp(r)
    assert "the loss became nan at step 2" in text and "lr=1e+30 is too large" in text
    ok = run_ddp(cluster2, "mlp", steps=1, compare_torch=False)
    assert ok.diverged_at_step is None and ok.finite_weights and "diverged" not in format_ddp(ok)


def test_a_sweep_checks_every_size_before_the_first_runs():
    with pytest.raises(ValueError, match="bucket_cap_mb=0 is not valid"):
        sweep_buckets(NothingMayRun(), caps=(1.0, 2.0, 0))


def test_the_lessons_gpu_claims_hold_for_the_deep_model(cluster4):
    """Lesson 06 says: with 2 MiB buckets, issued during backward most of the all-reduce hides
    and the step beats issuing after backward, which beats one all-reduce per parameter; DDP's
    default leaves most of it exposed on this 8 MiB model."""
    gpu = {"link": "ib-ndr-400", "rows": 16384, "steps": 1, "compare_torch": False}
    m = {s: run_ddp(cluster4, "deep", 2, s, **gpu).modelled for s in SYNCS}
    assert m["overlap"].overlap_fraction > 0.5 and m["bucketed"].overlap_fraction == 0.0
    assert m["overlap"].step_time_s < m["bucketed"].step_time_s < m["per-param"].step_time_s
    assert run_ddp(cluster4, "deep", **gpu).modelled.overlap_fraction < 0.5


def test_the_lessons_bucket_sweep_shows_what_its_prose_says(cluster4):
    """Lesson 06's sweep (one step per size): 16 all-reduces of one parameter each on the left,
    one 8 MiB bucket on the right with nothing hidden, a U-shape whose bottom lies between them,
    DDP's default leaving most of the all-reduce exposed; the same bytes at every size, and
    every size equal to one process."""
    table = sweep_buckets(cluster4, progress=False)
    assert list(table["buckets"]) == [16, 8, 4, 3, 2, 2, 2, 1]
    assert list(table["messages"]) == [2 * 3 * n for n in table["buckets"]]
    assert len(set(table["sent MiB"])) == 1 and table["= one process"].all()
    modelled = list(table["step us (modelled)"])
    best = modelled.index(min(modelled))
    assert 0 < best < len(modelled) - 1
    hidden = dict(zip(table["bucket_cap_mb"], table["hidden (modelled)"], strict=True))
    assert hidden[25.0] == 0.0 and hidden["default"] < 0.5 < hidden[2.0]


def test_the_gpu_model_of_a_run_does_not_depend_on_its_steps(cluster4):
    """The sweep runs one step per size, the three-ways table two: the GPU model reads the
    structure only, so the 2 MiB point of one is the overlap row of the other."""
    gpu = {"link": "ib-ndr-400", "rows": 16384, "compare_torch": False}
    one, two = (run_ddp(cluster4, "deep", 2.0, "overlap", steps=k, **gpu) for k in (1, 2))
    assert one.modelled.step_time_s == two.modelled.step_time_s
    assert one.modelled.overlap_fraction == two.modelled.overlap_fraction
    assert one.bitwise_equal_reference and two.bitwise_equal_reference


def test_a_sweep_checks_its_progress_flag_with_the_sizes():
    with pytest.raises(ValueError) as err:
        sweep_buckets(NothingMayRun(), caps=(1.0, 0), progress="yes")
    assert "bucket_cap_mb=0 is not valid" in str(err.value)
    assert "progress='yes' is not valid" in str(err.value)


def test_sync_table_puts_bytes_and_messages_beside_their_formulas(cluster2):
    runs = {
        sync: run_ddp(cluster2, "mlp", bucket_cap_mb=0.001, sync=sync, steps=1, compare_torch=False)
        for sync in ("per-param", "overlap")
    }
    table = ddp_sync_table(runs)
    assert list(table.index) == ["per-param", "overlap"]
    for sync, r in runs.items():
        row, config = table.loc[sync], r.config
        assert row["sent per rank per step (B)"] == r.per_rank_sent_bytes[0]
        assert row["2(N-1)/N·Ψ·4 (B)"] == config.bytes_per_step() == 2 * 1 / 2 * config.psi * 4
        assert row["sent per rank per step (B)"] == row["2(N-1)/N·Ψ·4 (B)"]
        assert row["buckets"] == len(r.buckets)
        assert row["messages per step"] == r.messages_per_step
        assert row["2(N-1) × buckets"] == config.messages_per_step() == 2 * len(r.buckets)
