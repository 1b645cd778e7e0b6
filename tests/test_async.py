"""Lesson 14: synchronous, asynchronous, local-SGD and backup-worker training on real ranks.
The configuration and the stragglers' delays are in ``test_async_config.py``."""

from __future__ import annotations

import collections
import statistics

import pytest
import torch

from edu_parallel import Cluster
from edu_parallel.async_training.config import PSI, TARGET_ACCURACY
from edu_parallel.async_training.replay_run import replay
from edu_parallel.async_training.report import applies_of, format_async, run_async
from edu_parallel.async_training.sgd import batch, build, flat_params
from edu_parallel.async_training.tables import compare_regimes, straggler_table
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
    text = " ".join(format_async(r).split())  # its prose wraps to the output area
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
