"""Lesson 14 without ranks: the configuration's checks, the worker convention, the batches, the
CLI handing the rank job its config, and the stragglers' delays."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import re
import statistics

import pytest
import torch
from helpers import Recorder, fresh_python

from edu_parallel.app.concepts.async_training import ASYNC
from edu_parallel.async_training import tables
from edu_parallel.async_training.config import (
    DEFAULT_BACKUP,
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
from edu_parallel.async_training.report import run_async, run_async_config
from edu_parallel.async_training.sgd import batch, build, local_sgd, sync_sgd
from edu_parallel.async_training.tables import compare_regimes
from edu_parallel.core.dims import ParallelDims
from edu_parallel.task import classifier as task


# ------------------------------------------------------------------ the configuration
@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (
            dict(world_size=4, straggler="rank", straggler_rank=4),
            "straggler_rank=4 is not valid: expected an integer in [0, 3]",
        ),
        (
            dict(world_size=4, mode="async-ps", straggler="rank", straggler_rank=0),
            "straggler_rank=0 is not valid: expected an integer in [1, 3]",
        ),
        (
            dict(world_size=4, straggler="rank", delay_ms=-1),
            "delay_ms=-1 is not valid: expected a number of milliseconds in [0, 1000]",
        ),
        (dict(world_size=4, straggler="rank", delay_ms=5000), "delay_ms=5000 is not valid"),
        (
            dict(world_size=4, mode="local-sgd", local_steps=0),
            "local_steps=0 is not valid: expected an integer in [1, 2000]",
        ),
        (
            dict(world_size=4, mode="backup", backup=3),
            "backup=3 is not valid: expected an integer in [1, 2]",
        ),
        (dict(world_size=4, mode="backup", backup=4), "backup=4 is not valid"),
        (
            dict(world_size=4, mode="sync", backup=1),
            "backup=1 is not valid: expected no value with mode='sync': only mode='backup' has",
        ),
        (dict(world_size=4, mode="local-sgd", backup=2), "backup=2 is not valid: expected no"),
        (
            dict(world_size=4, straggler_rank=2),
            "straggler_rank=2 is not valid: expected no value with straggler='none'",
        ),
        (
            dict(world_size=4, straggler="random", straggler_rank=2),
            "straggler_rank=2 is not valid: expected no value with straggler='random'",
        ),
        (dict(world_size=3, mode="backup", backup=0), "backup=0 is not valid"),
        (
            dict(world_size=4, mode="hogwild"),
            "mode='hogwild' is not valid: expected one of 'sync', 'async-ps'",
        ),
        (
            dict(world_size=4, straggler="rank", distribution="cauchy"),
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
        AsyncConfig(4, "backup", steps=0, straggler="rank", delay_ms=-2, backup=5, straggler_rank=9)
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
    c = AsyncConfig(4, "backup", backup=1, straggler="rank")
    assert (c.workers, c.first_worker, c.kept_per_step, c.straggler_rank) == (3, 1, 2, 3)


def test_options_of_one_mode_or_straggler_take_their_default_there_only():
    """backup means something in mode backup only, straggler_rank with straggler="rank" only:
    elsewhere they stay None (and giving them is refused); a copy of a checked config checks."""
    assert AsyncConfig(4, "backup").backup == DEFAULT_BACKUP
    plain = AsyncConfig(4, "sync")
    assert plain.backup is None and plain.straggler_rank is None
    assert plain.kept_per_step == 4 and plain.straggler_label() == "none"
    slow = AsyncConfig(4, "async-ps", straggler="rank")
    assert slow.straggler_rank == 3 and slow.straggler_label() == "worker 2, fixed 10 ms"
    assert dataclasses.replace(slow, steps=5).straggler_rank == 3
    assert AsyncConfig(4, straggler="random").straggler_label() == "random worker, fixed 10 ms"
    assert dataclasses.replace(AsyncConfig(4, "backup"), steps=5).backup == DEFAULT_BACKUP
    with pytest.raises(ValueError, match="straggler_rank=3 is not valid: expected no value"):
        dataclasses.replace(slow, straggler="none")
    assert AsyncConfig(3, "local-sgd", steps=10, local_steps=4).averages == 3  # 4, 8, 10


def test_batches_are_unique_per_worker_and_step_and_never_held_out():
    seeds = {batch_seed(s, w, t) for s in range(3) for w in range(16) for t in range(1, 300)}
    assert len(seeds) == 3 * 16 * 299 and task.HOLDOUT_SEED not in seeds
    assert min(seeds) > task.HOLDOUT_SEED
    c = AsyncConfig(2, rows=8)
    x, y = batch(c, 1, 5)
    assert x.shape == (8, 32) and torch.equal(x, batch(c, 1, 5)[0])
    assert not torch.equal(x, batch(c, 0, 5)[0])


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


def test_a_comparison_gives_backup_workers_to_the_backup_mode_only():
    executor = Recorder(4)
    compare_regimes(executor, workers=3, steps=5, backup=2)
    backups = {(args[0].mode, args[0].backup) for _, args in executor.calls}
    assert backups == {("sync", None), ("local-sgd", None), ("async-ps", None), ("backup", 2)}


def test_a_comparison_moves_its_progress_bar_before_each_run(monkeypatch):
    """The lesson's comparison takes seconds: a bar (one tick per run) says where it is."""
    executor, ticks = Recorder(4), []

    class Bar:
        def __init__(self, desc):
            self.desc = desc

        def __call__(self, done, total, label):
            ticks.append((self.desc, done, total, label, len(executor.calls)))

    monkeypatch.setattr(tables, "ProgressBar", Bar)
    cmp = compare_regimes(executor, workers=3, steps=5)
    labels = [f"{mode}, {label}" for mode, label in cmp.reports]  # every run, once
    ran = [(c.mode, c.straggler_label()) for _, (c,) in executor.calls]
    assert [label for _, _, _, label, _ in ticks] == [f"{m}, {s}" for m, s in ran] + [""]
    assert sorted(labels) == sorted(label for _, _, _, label, _ in ticks[:-1])
    assert [(done, total, jobs) for _, done, total, _, jobs in ticks] == [
        (i, 12, i) for i in range(13)
    ]
    assert {desc for desc, *_ in ticks} == {"training each regime"}
    ticks.clear()
    compare_regimes(executor, workers=3, steps=5, progress=False)
    assert ticks == []
    with pytest.raises(ValueError, match="progress=1 is not valid: expected True or False"):
        compare_regimes(executor, workers=3, steps=5, progress=1)


def test_bad_cli_options_are_one_line_naming_each_as_spelled():
    with pytest.raises(ValueError) as err:
        cli_config(
            *("--straggler", "rank", "--straggler-rank", "7", "--delay-ms", "-5"),
            *("--local-steps", "0", "--rows", "0"),
        )
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
    assert (
        delay_s(AsyncConfig(4), 3, 1) == 0
        and delay_s(AsyncConfig(4, straggler="rank", delay_ms=0), 3, 1) == 0
    )


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
