"""Lesson 12: synchronous, asynchronous, local-SGD and backup-worker training on real ranks."""

from __future__ import annotations

import argparse
import collections
import contextlib
import re
import statistics

import pytest
import torch
from helpers import fresh_python

from edu_parallel import Cluster
from edu_parallel.app.concepts.async_training import ASYNC
from edu_parallel.async_training.config import (
    LESSON_LR,
    PARETO_CAP,
    PSI,
    TARGET_ACCURACY,
    AsyncConfig,
    batch_seed,
    delay_s,
    workers_of,
    world_size_for,
)
from edu_parallel.async_training.param_server import server_job
from edu_parallel.async_training.replay_run import replay
from edu_parallel.async_training.report import applies_of, format_async, run_async, run_async_config
from edu_parallel.async_training.sgd import batch, build, flat_params, local_sgd, sync_sgd
from edu_parallel.async_training.tables import compare_regimes, straggler_table
from edu_parallel.core.dims import ParallelDims
from edu_parallel.core.schema import DROPPED_MARK
from edu_parallel.core.trace import Trace
from edu_parallel.task import classifier as task

STEPS = 24


@pytest.fixture(scope="module")
def cluster():
    with Cluster(4, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def runs(cluster):
    """One short run of each regime on 4 ranks (W = 4 for sync/local, 3 for the server modes)."""
    return {
        "sync": run_async(cluster, "sync", steps=STEPS),
        "local-sgd": run_async(cluster, "local-sgd", steps=STEPS, local_steps=5),
        "async-ps": run_async(cluster, "async-ps", steps=STEPS),
        "backup": run_async(cluster, "backup", steps=STEPS, backup=1),
    }


# ------------------------------------------------------------------ the configuration
@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (
            dict(world_size=4, straggler="rank", straggler_rank=4),
            "straggler_rank=4 is not valid: expected an integer in [0, 3]",
        ),
        (
            dict(world_size=4, mode="async-ps", straggler_rank=0),
            "straggler_rank=0 is not valid: expected an integer in [1, 3]",
        ),
        (
            dict(world_size=4, delay_ms=-1),
            "delay_ms=-1 is not valid: expected a number of milliseconds in [0, 1000]",
        ),
        (dict(world_size=4, delay_ms=5000), "delay_ms=5000 is not valid"),
        (
            dict(world_size=4, mode="local-sgd", local_steps=0),
            "local_steps=0 is not valid: expected an integer in [1, 2000]",
        ),
        (
            dict(world_size=4, mode="backup", backup=3),
            "backup=3 is not valid: expected an integer in [1, 2]",
        ),
        (dict(world_size=4, mode="backup", backup=4), "backup=4 is not valid"),
        (dict(world_size=3, mode="backup", backup=0), "backup=0 is not valid"),
        (
            dict(world_size=4, mode="hogwild"),
            "mode='hogwild' is not valid: expected one of 'sync', 'async-ps'",
        ),
        (
            dict(world_size=4, distribution="cauchy"),
            "distribution='cauchy' is not valid: expected one of 'fixed', 'exponential', 'pareto'",
        ),
        (dict(world_size=4, straggler="slow"), "straggler='slow' is not valid"),
        (dict(world_size=4, steps=0), "steps=0 is not valid: expected an integer in [1, 2000]"),
        (dict(world_size=4, steps=2001), "steps=2001 is not valid"),
        (dict(world_size=1, mode="async-ps"), "world_size=1 is not valid: expected an integer in"),
        (dict(world_size=17), "world_size=17 is not valid"),
        (dict(world_size=2, rows=0), "rows=0 is not valid"),
        (dict(world_size=2, lr=0), "lr=0 is not valid"),
        (dict(world_size=2, target=1.5), "target=1.5 is not valid: expected a held-out accuracy"),
    ],
)
def test_bad_input_names_option_value_and_range(kwargs, expected):
    with pytest.raises(ValueError) as err:
        AsyncConfig(**kwargs)
    text = str(err.value)
    assert expected in text, text
    assert "\n" not in text


def test_every_bad_field_is_named_at_once():
    with pytest.raises(ValueError) as err:
        AsyncConfig(4, "backup", steps=0, delay_ms=-2, backup=5, straggler_rank=9)
    text = str(err.value)
    for name in ("steps=0", "delay_ms=-2", "backup=5", "straggler_rank=9"):
        assert name in text


def test_the_config_is_torch_free_and_copies_the_task_constants():
    fresh_python("import edu_parallel.async_training.config")
    assert LESSON_LR == 2 * task.TASK_LR and TARGET_ACCURACY == task.TARGET_ACCURACY
    _, params = build(AsyncConfig(1))
    assert PSI == sum(p.numel() for p in params) == 22_026


def test_worker_convention():
    assert [workers_of(m, 4) for m in ("sync", "local-sgd", "async-ps", "backup")] == [4, 4, 3, 3]
    assert [world_size_for(m, 3) for m in ("sync", "async-ps")] == [3, 4]
    c = AsyncConfig(4, "backup", backup=1)
    assert (c.workers, c.first_worker, c.kept_per_step, c.straggler_rank) == (3, 1, 2, 3)
    assert AsyncConfig(3, "local-sgd", steps=10, local_steps=4).averages == 3  # 4, 8, 10


def test_batches_are_unique_per_worker_and_step_and_never_held_out():
    seeds = {batch_seed(s, w, t) for s in range(3) for w in range(16) for t in range(1, 300)}
    assert len(seeds) == 3 * 16 * 299 and task.HOLDOUT_SEED not in seeds
    assert min(seeds) > task.HOLDOUT_SEED
    c = AsyncConfig(2, rows=8)
    x, y = batch(c, 1, 5)
    assert x.shape == (8, 32) and torch.equal(x, batch(c, 1, 5)[0])
    assert not torch.equal(x, batch(c, 0, 5)[0])


class Recorder:
    """An executor that starts nothing: it records each ``run(fn, *args)`` it is asked for and
    answers as a non-zero rank of torchrun does (None); ``sized(n)`` gives one of ``n`` ranks."""

    backend = "gloo"

    def __init__(self, world_size: int, calls: list | None = None):
        self.world_size = world_size
        self.calls = [] if calls is None else calls

    def run(self, fn, *args, **kwargs):
        self.calls.append((fn, args))

    @contextlib.contextmanager
    def sized(self, n: int):
        yield Recorder(n, self.calls)


def cli_config(*argv: str, world_size: int = 4):
    """What ``edu-parallel run async ARGV`` hands its run, in this process."""
    parser = argparse.ArgumentParser()
    ASYNC.add_arguments(parser)
    return ASYNC.check(parser.parse_args(argv), ParallelDims.local(world_size))


@pytest.fixture
def checks(monkeypatch):
    """Every AsyncConfig checked (each construction runs ``_check`` once)."""
    counted = []
    original = AsyncConfig._check

    def counting(self):
        counted.append(self)
        return original(self)

    monkeypatch.setattr(AsyncConfig, "_check", counting)
    return counted


@pytest.mark.parametrize(
    "argv, job",
    [
        (("--mode", "backup", "--straggler", "random"), server_job),
        (("--mode", "local-sgd", "--local-steps", "3"), local_sgd),
        ((), sync_sgd),
    ],
)
def test_the_cli_checks_once_and_the_rank_job_gets_that_config(checks, argv, job):
    config = cli_config(*argv)
    assert isinstance(config, AsyncConfig) and len(checks) == 1
    executor = Recorder(4)
    assert ASYNC.run(executor, config) is None
    assert executor.calls == [(job, (config,))]
    assert executor.calls[0][1][0] is config and len(checks) == 1


def test_a_comparison_builds_each_config_once_and_runs_that_object(checks):
    executor = Recorder(4)
    cmp = compare_regimes(executor, workers=3, steps=5)
    ran = [args[0] for _, args in executor.calls]
    assert len(ran) == len(cmp.reports) == 12 and len(checks) == 12  # 4 regimes x 3 settings
    assert all(any(c is r for r in ran) for c in checks)
    assert {(c.mode, c.world_size) for c in ran} == {
        ("sync", 3),
        ("local-sgd", 3),
        ("async-ps", 4),
        ("backup", 4),
    }


def test_bad_cli_options_are_one_line_naming_each_as_spelled():
    with pytest.raises(ValueError) as err:
        cli_config("--straggler-rank", "7", "--delay-ms", "-5", "--local-steps", "0", "--rows", "0")
    text = str(err.value)
    assert "\n" not in text
    for named in ("straggler-rank=7", "delay-ms=-5.0", "local-steps=0", "rows=0"):
        assert named + " is not valid" in text, text
    assert not any(field in text for field in ("straggler_rank", "delay_ms", "local_steps"))


def test_a_given_config_must_fit_the_executor():
    executor = Recorder(4)
    with pytest.raises(ValueError, match=re.escape("config.world_size=3 is not valid: expected 4")):
        run_async_config(executor, AsyncConfig(3))
    assert executor.calls == []


def test_the_keyword_call_builds_the_config_once(checks):
    executor = Recorder(3)
    run_async(executor, "async-ps", steps=7, straggler="rank")
    ((fn, (config,)),) = executor.calls
    assert fn is server_job and len(checks) == 1
    got = (config.world_size, config.mode, config.steps, config.straggler_rank)
    assert got == (3, "async-ps", 7, 2)  # the straggler: the last rank


# ------------------------------------------------------------------ stragglers
def test_delays_fixed_rank_and_random_worker():
    fixed = AsyncConfig(4, straggler="rank", straggler_rank=2, delay_ms=7)
    assert [delay_s(fixed, w, 1) for w in range(4)] == [0, 0, 0.007, 0]
    server = AsyncConfig(4, "async-ps", straggler="rank", straggler_rank=2, delay_ms=7)
    assert [delay_s(server, w, 3) for w in range(3)] == [0, 0.007, 0]  # rank 2 = worker 1
    rand = AsyncConfig(4, straggler="random", delay_ms=5)
    slow = [[w for w in range(4) if delay_s(rand, w, t) > 0] for t in range(1, 401)]
    assert all(len(s) == 1 for s in slow)
    counts = collections.Counter(s[0] for s in slow)
    assert set(counts) == {0, 1, 2, 3} and min(counts.values()) > 60  # about 100 each
    assert delay_s(AsyncConfig(4), 3, 1) == 0 and delay_s(AsyncConfig(4, delay_ms=0), 3, 1) == 0


@pytest.mark.parametrize("dist", ["exponential", "pareto"])
def test_delay_distributions_have_the_stated_mean(dist):
    c = AsyncConfig(2, straggler="rank", distribution=dist, delay_ms=10)
    draws = [delay_s(c, 1, t) for t in range(1, 2001)]
    assert draws == [delay_s(c, 1, t) for t in range(1, 2001)]  # seeded by (seed, w, t)
    assert statistics.mean(draws) == pytest.approx(0.010, rel=0.15)
    assert max(draws) <= PARETO_CAP * 0.010
    if dist == "pareto":  # heavy tail: the largest draws far exceed an exponential's
        expo = AsyncConfig(2, straggler="rank", distribution="exponential", delay_ms=10)
        assert min(draws) >= 0.010 / 3 * 0.999  # x_m = mean (a - 1) / a
        e = sorted(delay_s(expo, 1, t) for t in range(1, 2001))
        assert sorted(draws)[-5] > e[-5]


# ------------------------------------------------------------------ the regimes on real ranks
def test_sync_equals_its_reference_and_one_big_batch(runs):
    r = runs["sync"]
    assert r.replay_matches and r.config.workers == 4
    # independent check: one backward over the union of the W batches, mean loss, same lr
    c = r.config
    model, params = build(c)
    for t in range(1, c.steps + 1):
        xs, ys = zip(*(batch(c, w, t) for w in range(c.workers)), strict=True)
        model.zero_grad()
        task.task_loss(model(torch.cat(xs)), torch.cat(ys)).backward()
        with torch.no_grad():
            for p in params:
                p.add_(p.grad, alpha=-c.lr)
    # the replay is what the ranks ended with (replay_matches), bit for bit
    assert torch.allclose(flat_params(params), replay(c, []).params, atol=1e-5)
    assert r.staleness_histogram == {0: c.steps * c.workers} and r.applied == c.steps * 4
    assert r.trace.meta["regime"] == "sync" and r.trace.meta["workers"] == 4


def test_sync_and_local_sgd_send_the_ring_formula(runs):
    for mode, count in (("sync", STEPS), ("local-sgd", 5)):  # averages at 5, 10, 15, 20, 24
        r = runs[mode]
        assert r.config.averages == 5 or mode == "sync"
        assert statistics.mean(r.sent_bytes) == pytest.approx(r.allreduce_bytes_formula)
        assert r.allreduce_bytes_formula == pytest.approx(count * 2 * 3 / 4 * PSI * 4)
        assert r.replay_matches


def test_local_sgd_with_h_1_is_synchronous_sgd(cluster):
    local = run_async(cluster, "local-sgd", steps=6, local_steps=1)
    sync = run_async(cluster, "sync", steps=6)
    assert local.replay_matches and sync.replay_matches
    assert local.final_loss == pytest.approx(sync.final_loss, rel=1e-5)
    assert local.staleness_histogram == {0: 24}


def test_async_ps_order_staleness_and_replay(runs):
    r = runs["async-ps"]
    c = r.config
    assert r.replay_matches and r.applied == c.steps * c.workers == len(r.order)
    assert sum(r.staleness_histogram.values()) == r.applied
    assert min(r.staleness_histogram) >= 0 and max(r.staleness_histogram) >= 1
    # each worker's gradients are applied once each, in the order it pushed them
    for w in range(c.workers):
        ts = [t for ww, t, _ in r.order if ww == w]
        assert ts == list(range(1, len(ts) + 1))
    assert r.discarded == c.workers - 1  # the others' last push, answered with stop
    assert sum(r.pushes) == r.applied + r.discarded
    # staleness recounted from the order: versions are the positions in the order
    recount = collections.Counter(v - pulled for v, (_, _, pulled) in enumerate(r.order))
    assert dict(recount) == r.staleness_histogram


def test_a_different_order_does_not_replay_to_the_same_parameters(runs):
    r = runs["async-ps"]
    attrs = [dict(e.attrs) for e in applies_of(r.trace)]
    good = replay(r.config, attrs).params
    swapped = [dict(a) for a in attrs]
    i = next(k for k in range(len(swapped) - 1) if swapped[k]["grads"] != swapped[k + 1]["grads"])
    swapped[i]["grads"], swapped[i + 1]["grads"] = swapped[i + 1]["grads"], swapped[i]["grads"]
    swapped[i]["grads"] = [[w, t, min(p, i)] for w, t, p in swapped[i]["grads"]]
    assert not torch.equal(replay(r.config, swapped).params, good)
    with pytest.raises(ValueError, match="the order is not complete"):
        replay(r.config, attrs[1:])


def test_backup_workers_apply_w_minus_b_per_step_and_count_drops(runs):
    r = runs["backup"]
    c = r.config
    assert r.replay_matches and r.applied == c.steps * (c.workers - c.backup)
    assert r.staleness_histogram == {0: r.applied}
    marks = [e for e in r.trace.events if e.kind == "mark" and e.op == DROPPED_MARK]
    assert len(marks) == r.dropped and r.dropped >= 1
    assert sum(r.pushes) == r.applied + r.dropped + r.discarded
    assert all(len(e.attrs["grads"]) == 2 for e in applies_of(r.trace))


def test_a_fixed_straggler_sleeps_in_every_gradient_and_sync_waits(cluster):
    r = run_async(cluster, "sync", steps=10, straggler="rank", straggler_rank=2, delay_ms=15)
    delays = [e for e in r.trace.events if e.op == "delay"]
    assert {e.rank for e in delays} == {2} and len(delays) == 10
    assert all(e.attrs["delay_s"] == 0.015 and e.duration >= 0.015 for e in delays)
    assert r.wall_s >= 10 * 0.015
    waits = [e.duration for e in r.trace.events if e.op == "all_reduce" and e.rank == 0]
    assert statistics.median(waits) > 0.010  # rank 0 idles in the all-reduce for rank 2


def test_async_workers_do_not_wait_for_the_straggler(cluster):
    r = run_async(cluster, "async-ps", steps=20, straggler="rank", delay_ms=25)
    slow = r.config.straggler_rank - 1
    assert r.replay_matches
    assert r.pushes[slow] < min(p for w, p in enumerate(r.pushes) if w != slow)
    assert max(r.staleness_histogram) > r.config.workers  # the straggler's gradients are stale


def test_time_to_target_is_read_off_the_curve(cluster):
    r = run_async(cluster, "sync", steps=90, straggler="random", delay_ms=2)
    curve = r.curve()
    assert list(curve.columns) == ["step", "samples", "loss", "accuracy", "time_s"]
    assert len(curve) == 90 and curve["time_s"].is_monotonic_increasing
    hit = curve[curve["accuracy"] >= TARGET_ACCURACY]
    assert r.time_to_target_s == hit["time_s"].iloc[0] and r.steps_to_target == hit["step"].iloc[0]
    assert r.final_loss == curve["loss"].iloc[-1] < curve["loss"].iloc[0]
    assert 0 < r.time_to_target_s <= r.wall_s and r.samples_per_s > 0
    text = format_async(r)
    assert "bit for bit" in text and "random worker, fixed 2 ms" in text
    assert run_async(cluster, "sync", steps=3).time_to_target_s is None


def test_json_dict_has_the_issue_keys(runs):
    for r in runs.values():
        data = r.to_json_dict()
        for key in (
            "samples_per_s",
            "staleness_histogram",
            "time_to_target_s",
            "final_loss",
            "replay_matches",
        ):
            assert key in data
        assert data["replay_matches"] is True
        assert sum(data["staleness_histogram"].values()) == r.applied


def test_compare_checks_everything_before_running(cluster):
    before = cluster._job_id
    with pytest.raises(ValueError, match="backup=3 is not valid"):
        compare_regimes(cluster, workers=3, settings=({"straggler": "none", "backup": 3},))
    assert cluster._job_id == before


def test_compare_regimes_table(cluster):
    cmp = compare_regimes(
        cluster,
        workers=2,
        modes=("sync", "async-ps"),
        settings=({"straggler": "none"}, {"straggler": "rank", "delay_ms": 5}),
        steps=5,
    )
    table = cmp.table()
    assert len(table) == 4 and table["replay matches"].all()
    assert set(table["straggler"]) == {"none", "worker 1, fixed 5 ms"}  # the same in both
    pivot = cmp.time_to_target()
    assert list(pivot.index) == ["sync", "async-ps"]
    assert list(pivot.columns) == ["none", "worker 1, fixed 5 ms"]


def test_traces_save_with_the_schema_and_load_back(runs, tmp_path):
    for mode, r in runs.items():
        path = tmp_path / f"{mode}.json"
        r.trace.save(path)
        back = Trace.load(path)
        assert back.meta["regime"] == mode and back.meta["concept"] == "async"
        assert len(applies_of(back)) == len(applies_of(r.trace))


def test_straggler_table_reads_both_settings(cluster):
    slow = "worker 1, fixed 20 ms"
    cmp = compare_regimes(
        cluster,
        workers=2,
        modes=("sync", "backup"),
        settings=({"straggler": "none", "backup": 1}, {"straggler": "rank", "delay_ms": 20}),
        steps=5,
    )
    table = straggler_table(cmp, "none", slow)
    assert list(table.index) == ["sync", "backup"]
    for mode in ("sync", "backup"):
        r, s = cmp.reports[(mode, "none")], cmp.reports[(mode, slow)]
        row = table.loc[mode]
        assert row["applied"] == r.applied == row["S x kept per step"]
        assert row["dropped"] == r.dropped and row["staleness"] == r.staleness_histogram
        assert row["wall, none (s)"] == r.wall_s and row[f"wall, {slow} (s)"] == s.wall_s
        assert row["slower by (s)"] == s.wall_s - r.wall_s
        delays = [e.duration for e in s.trace.events if e.op == "delay"]
        assert row["straggler delays (s)"] == sum(delays) > 0
    assert table.loc["backup", "S x kept per step"] == 5 * (2 - 1)
    assert table.loc["sync", "S x kept per step"] == 5 * 2
