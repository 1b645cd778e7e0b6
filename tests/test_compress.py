"""Lesson 13: the learning task, the compressors on real ranks, their bytes, torch's hooks."""

from __future__ import annotations

import argparse
import dataclasses
import math
import re

import pytest
import torch
from helpers import Recorder
from test_ddp import NothingMayRun

from edu_parallel.app.concepts.compression import COMPRESS
from edu_parallel.compression import (
    NO_FEEDBACK,
    CompressConfig,
    Measured,
    bytes_by_world_size,
    run_compress,
    run_compress_config,
    summary_table,
    sweep,
    sweep_compress,
    what_if,
    wire_bytes_per_step,
)
from edu_parallel.compression.compressors import pack_bits, unpack_bits
from edu_parallel.compression.config import (
    DEFAULT_POWERSGD_RANK,
    DEFAULT_RATIO,
    DEFAULT_START_STEP,
    LESSON_LR,
    LESSON_STEPS,
    MIN_COMPRESSION_RATE,
    SPARSE,
    kept,
    max_powersgd_rank,
    messages_per_step,
    param_shapes,
    powersgd_split,
)
from edu_parallel.compression.powersgd import compressible, orthogonalize
from edu_parallel.compression.report import COMPARE_STEPS, TORCH_RTOL, compress_job, make_hook
from edu_parallel.compression.sweep import SWEEP
from edu_parallel.core.dims import ParallelDims
from edu_parallel.core.i18n import language
from edu_parallel.core.schema import COMPRESS_MARK, GRAD_SYNC
from edu_parallel.data_parallel import run_ddp
from edu_parallel.data_parallel.config import DdpConfig
from edu_parallel.data_parallel.ddp import GradBucket
from edu_parallel.data_parallel.model import build_model, loss_of, sgd_step, step_batch
from edu_parallel.task.classifier import HOLDOUT_ROWS, evaluate, holdout, labelled, steps_to_target
from edu_parallel.task.targets import TARGET_ACCURACY, TARGET_STEPS, TASK_LR

PSI = 32 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10  # the classifier, counted by hand
METHODS = (
    {"method": "none"},
    {"method": "fp16"},
    {"method": "bf16", "error_feedback": True},
    {"method": "topk", "ratio": 0.02},
    {"method": "randk", "ratio": 0.05, "error_feedback": True},
    {"method": "sign", "error_feedback": True},
    {"method": "powersgd", "rank": 2, "start_step": 1},
)


# ------------------------------------------------------------------------------ the task
def test_the_task_is_seeded_balanced_and_offline():
    x, y = labelled(5, 4096)
    x2, y2 = labelled(5, 4096)
    assert torch.equal(x, x2) and torch.equal(y, y2) and x.shape == (4096, 32)
    counts = torch.bincount(y, minlength=10)
    assert counts.min() > 4096 / 10 / 2  # every class is well represented
    hx, hy = holdout()
    assert hx.shape == (HOLDOUT_ROWS, 32) and not torch.equal(hx[:64], labelled(7919, 64)[0])


@pytest.fixture
def one_thread():
    """One intra-op thread, as on every rank (two threads on two busy cores are much slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_plain_sgd_reaches_the_stated_target_in_one_process(one_thread):
    """The target the lessons state: plain SGD with TASK_LR gets there within TARGET_STEPS."""
    config = DdpConfig(1, model="classifier", steps=TARGET_STEPS, lr=TASK_LR)
    model = build_model(config)
    params = [p for p in model.parameters() if p.requires_grad]
    assert sum(p.numel() for p in params) == PSI == config.psi
    accuracies = []
    for step in range(1, TARGET_STEPS + 1):
        model.zero_grad(set_to_none=True)
        x, y = step_batch(config, step)
        loss_of(config, model(x), y).backward()
        sgd_step(params, TASK_LR)
        accuracies.append(evaluate(model)[1])
    hit = steps_to_target(accuracies)
    assert hit is not None and hit <= TARGET_STEPS
    assert accuracies[0] < 0.3  # it starts near chance: the target is learned, not given


def test_steps_to_target_is_the_first_step_at_the_target():
    assert steps_to_target([0.1, 0.79, 0.8, 0.5], 0.8) == 3
    assert steps_to_target([0.1, 0.2], 0.8) is None


def test_the_classifier_trains_data_parallel_like_one_process_and_like_torch_ddp(cluster2):
    """Cross-entropy through lesson 06's trainer: bit for bit the one-process replay, and the
    same gradients as torch's DDP."""
    r = run_ddp(cluster2, "classifier", steps=4, lr=TASK_LR)
    assert r.matches_reference and r.bitwise_equal_reference and r.matches_big_batch
    assert r.matches_torch_ddp_buckets and r.matches_torch_ddp_grads


# ------------------------------------------------------------------------------ pure parts
def test_bits_round_trip():
    g = torch.Generator().manual_seed(0)
    for d in (1, 7, 8, 9, 1000):
        bits = torch.rand(d, generator=g) > 0.5
        packed = pack_bits(bits)
        assert packed.dtype == torch.uint8 and packed.numel() == math.ceil(d / 8)
        assert torch.equal(unpack_bits(packed, d), bits)


def test_orthogonalize_makes_orthonormal_columns():
    g = torch.Generator().manual_seed(1)
    for r in (1, 2, 3, 5):
        m = torch.randn(1, 40, r, generator=g)
        orthogonalize(m)
        eye = m[0].T @ m[0]
        assert torch.allclose(eye, torch.eye(r), atol=1e-5)


def test_powersgd_compresses_what_torch_would():
    """torch's rule, (n + m) r * 2 < n m, by hand on the classifier's weights."""
    shapes = list(param_shapes((32, 128, 128, 10)).values())
    for r in (1, 4, 8, 31, 32):
        u, p, q = powersgd_split(shapes, r)
        by_hand = [s for s in shapes if len(s) == 2 and (s[0] + s[1]) * r * 2 < s[0] * s[1]]
        assert p == sum(s[0] * r for s in by_hand) and q == sum(s[1] * r for s in by_hand)
        assert u + sum(s[0] * s[1] for s in by_hand) == PSI
        assert [compressible(s, r) for s in shapes] == [s in by_hand for s in shapes]
    assert max_powersgd_rank((32, 128, 128, 10)) == 31 == (128 * 128 - 1) // (256 * 2)
    assert MIN_COMPRESSION_RATE == 2


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"method": "gzip"}, "method='gzip' is not valid: expected one of 'none', 'fp16'"),
        ({"method": "topk", "ratio": 0}, "ratio=0 is not valid: expected a number in (0, 1]"),
        ({"method": "randk", "ratio": 1.5}, "ratio=1.5 is not valid"),
        ({"method": "topk", "ratio": float("nan")}, "ratio=nan is not valid"),
        ({"method": "powersgd", "rank": 0}, "rank=0 is not valid: expected an integer in [1, 31]"),
        ({"method": "powersgd", "rank": 32}, "rank=32 is not valid: expected an integer in"),
        (
            {"error_feedback": True},
            "error_feedback=True is not valid: expected False with method='none'",
        ),
        ({"steps": 0}, "steps=0 is not valid"),
        ({"lr": -1}, "lr=-1"),
        ({"method": "powersgd", "start_step": -1}, "start_step=-1 is not valid"),
        # an option of other methods means nothing here: refused, not silently ignored
        (
            {"ratio": 0.1},
            "ratio=0.1 is not valid: expected no value with method='none': only topk and randk",
        ),
        ({"method": "powersgd", "ratio": 0.1}, "ratio=0.1 is not valid: expected no value with"),
        ({"method": "fp16", "rank": 2}, "rank=2 is not valid: expected no value with method="),
        ({"method": "topk", "rank": 2}, "rank=2 is not valid: expected no value with method="),
        ({"method": "sign", "start_step": 3}, "start_step=3 is not valid: expected no value"),
        # PowerSGD that would compress no step
        (
            {"method": "powersgd", "steps": 5, "start_step": 10},
            "start_step=10 is not valid: expected an integer in [0, 4]: the first 10 steps are"
            " plain all-reduces, so a run of steps=5 would never compress",
        ),
        ({"method": "powersgd", "steps": 5, "start_step": 5}, "start_step=5 is not valid"),
        (  # the default start step, 2, is not the caller's: the line names steps
            {"method": "powersgd", "steps": 2},
            "steps=2 is not valid: expected at least 3 with method='powersgd'",
        ),
    ],
)
def test_bad_options_get_one_line_naming_them(kwargs, expected):
    with pytest.raises(ValueError) as err:
        CompressConfig(2, **kwargs)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_the_options_of_some_methods_take_their_default_there_only():
    """ratio belongs to topk and randk, rank and start_step to powersgd: there a None gets the
    default, elsewhere it stays None; a copy of a checked config (dataclasses.replace) checks."""
    plain = CompressConfig(2, "fp16")
    assert (plain.ratio, plain.rank, plain.start_step) == (None, None, None)
    assert plain.label == "fp16" and dataclasses.replace(plain, steps=3).steps == 3
    top = CompressConfig(2, "randk")
    assert (top.ratio, top.rank, top.start_step) == (DEFAULT_RATIO, None, None)
    assert dataclasses.replace(top, steps=3).ratio == DEFAULT_RATIO
    power = CompressConfig(2, "powersgd", steps=3)
    assert (power.ratio, power.rank, power.start_step) == (None, 1, DEFAULT_START_STEP)
    assert power.rank == DEFAULT_POWERSGD_RANK and power.label == "powersgd r=1"
    assert wire_bytes_per_step(plain) < wire_bytes_per_step(CompressConfig(2))
    with pytest.raises(ValueError, match="start_step=2 is not valid: expected an integer in"):
        dataclasses.replace(power, steps=2)


def test_a_torch_comparison_of_powersgd_covers_a_compressed_step():
    """The short run beside torch's hook compresses at least one step: past COMPARE_STEPS when
    PowerSGD starts later (a short run of start_step steps would be refused)."""
    config = CompressConfig(2, "powersgd", steps=20, start_step=COMPARE_STEPS + 3)
    executor = Recorder(2)
    run_compress_config(executor, config)
    ((_, (_, short)),) = executor.calls
    assert short.steps == COMPARE_STEPS + 4 and short.start_step == config.start_step


def test_every_bad_option_is_named_at_once():
    with pytest.raises(ValueError) as err:
        CompressConfig(3, method="topk", ratio=2, rank=0)
    text = str(err.value)
    assert "ratio=2" in text and "rank=0" in text and "world_size=3 is not valid" in text


@pytest.mark.parametrize(
    "kwargs",
    [{"method": "topk", "ratio": 0}, {"method": "powersgd", "rank": 99}, {"compare_torch": 1}],
)
def test_run_compress_checks_before_any_process_runs(kwargs):
    with pytest.raises(ValueError):
        run_compress(NothingMayRun(), **kwargs)


def cli_config(*argv: str, world_size: int = 2):
    """What ``edu-parallel run compress ARGV`` hands its run, in this process."""
    parser = argparse.ArgumentParser()
    COMPRESS.add_arguments(parser)
    return COMPRESS.check(parser.parse_args(argv), ParallelDims.local(world_size))


@pytest.fixture
def checks(monkeypatch):
    """How many times a CompressConfig is checked (every construction runs ``_check`` once)."""
    counted = []
    original = CompressConfig._check

    def counting(self):
        counted.append(self)
        return original(self)

    monkeypatch.setattr(CompressConfig, "_check", counting)
    return counted


@pytest.mark.parametrize("argv", [("--method", "topk", "--ratio", "0.05"), ("--no-torch",)])
def test_the_cli_checks_once_and_the_rank_job_gets_that_config(checks, argv):
    """The concept's check returns the frozen config; the run hands the same object to every
    rank, and nothing on the way builds or checks another one."""
    config = cli_config(*argv)
    assert isinstance(config, CompressConfig) and len(checks) == 1
    executor = Recorder(2)
    assert COMPRESS.run(executor, config) is None
    assert executor.calls == [(compress_job, (config, None))]
    assert executor.calls[0][1][0] is config and len(checks) == 1


def test_a_torch_comparison_gets_its_short_run_from_the_parent(checks):
    """With torch's hook the ranks also get the short run, built once in the parent."""
    config = cli_config("--method", "powersgd", "--rank", "2", "--steps", "20")
    executor = Recorder(2)
    run_compress_config(executor, config)
    ((fn, (got, short)),) = executor.calls
    assert fn is compress_job and got is config and len(checks) == 2  # config, then short
    assert short.steps == COMPARE_STEPS and short.rank == 2 and short.ddp().steps == COMPARE_STEPS


def test_the_keyword_call_builds_the_config_once(checks):
    executor = Recorder(4)
    run_compress(executor, "sign", error_feedback=True, steps=5, compare_torch=False)
    ((_, (config, short)),) = executor.calls
    assert len(checks) == 1 and short is None
    assert (config.world_size, config.method, config.steps) == (4, "sign", 5)


def test_bad_cli_options_are_one_line_naming_each_as_spelled():
    with pytest.raises(ValueError) as err:
        cli_config("--error-feedback", "--start-step", "-1", "--ratio", "0", world_size=3)
    text = str(err.value)
    assert "\n" not in text
    for named in ("error-feedback=True", "start-step=-1", "ratio=0.0", "world_size=3"):
        assert named + " is not valid" in text, text
    assert "start_step" not in text and "error_feedback" not in text


def test_a_given_config_must_fit_the_executor():
    with pytest.raises(ValueError, match=re.escape("config.world_size=2 is not valid: expected 4")):
        run_compress_config(NothingMayRun(), CompressConfig(2, "fp16"))


# ------------------------------------------------------------------------------ on the ranks
@pytest.mark.parametrize("options", METHODS, ids=lambda o: CompressConfig(2, **o).label)
def test_bytes_and_messages_counted_equal_the_formulas(cluster4, options):
    r = run_compress(cluster4, steps=3, compare_torch=False, **options)
    c = r.config
    assert r.wire_bytes_per_step == pytest.approx(wire_bytes_per_step(c), abs=1e-9)
    assert r.messages_per_step == pytest.approx(messages_per_step(c))
    assert r.ranks_agree and r.matches_builtin
    sends = [e for e in r.trace.events if e.kind == "send"]
    assert sends and all(e.phase == GRAD_SYNC for e in sends)
    marks = [e for e in r.trace.events if e.kind == "mark" and e.op == COMPRESS_MARK]
    expected_marks = (
        0 if c.method == "none" else 4 * (3 - (c.start_step if c.method == "powersgd" else 0))
    )
    assert len(marks) == expected_marks


def test_a_target_never_reached_reads_as_words_not_nan(cluster4):
    short = run_compress(cluster4, steps=2, compare_torch=False)  # 2 steps: far from the target
    assert short.steps_to_target is None
    column = summary_table([short])["steps to target"]
    assert list(column) == ["not within 2 steps"]
    with language("zh"):
        assert list(summary_table([short])["steps to target"]) == ["2 步内未达到"]


def test_top_k_bytes_grow_with_n_and_all_reduce_bytes_do_not(cluster4):
    df = bytes_by_world_size(cluster4, world_sizes=(2, 4))
    assert (df["sent B/step"] == df["formula B/step"]).all()
    sent = df.pivot(index="N", columns="method", values="sent B/step")
    k = kept(PSI, 0.01)
    assert list(sent["topk 1%"]) == [1 * 8 * k, 3 * 8 * k]  # (N-1) 8k: all-gather
    assert sent.loc[4, "none"] / sent.loc[2, "none"] == pytest.approx(1.5)  # 2(N-1)/N
    assert sent.loc[4, "topk 1%"] / sent.loc[2, "topk 1%"] == 3


def probe(ctx, config, d):
    """A job: rank-seeded gradients through one hook call; returns the result and the input."""
    g = torch.Generator().manual_seed(100 + ctx.rank)
    x = torch.randn(d, generator=g)
    flat = x.clone()
    bucket = GradBucket(0, ("0.bias",), ((d,),))
    make_hook(config)(ctx, flat, 5, bucket)
    return {"out": flat, "x": x}


@pytest.mark.parametrize("method", ["fp16", "topk", "randk", "sign"])
def test_one_exchange_equals_the_mean_of_what_each_rank_compressed(cluster2, method):
    """Decompression by hand, in one process, from every rank's input."""
    d, n = 1000, 2
    config = CompressConfig(n, method, ratio=0.05 if method in SPARSE else None)
    out = cluster2.run(probe, config, d, trace=False)
    xs = [res["x"] for res in out.results]
    assert torch.equal(out.results[0]["out"], out.results[1]["out"])
    k = kept(d, 0.05)
    if method == "fp16":
        expected = sum(x.half() / n for x in xs).float()  # fp16 adds, as torch's hook
    elif method == "topk":
        expected = torch.zeros(d)
        for x in xs:
            idx = x.abs().topk(k).indices
            expected[idx] += x[idx]
        expected /= n
    elif method == "randk":
        res = out.results[0]["out"]
        idx = res.nonzero().flatten()
        assert idx.numel() == k  # the same k indices on every rank
        expected = torch.zeros(d)
        expected[idx] = sum(x[idx] / n for x in xs)
    else:
        expected = sum(x.abs().mean() * torch.where(x >= 0, 1.0, -1.0) for x in xs) / n
    assert torch.allclose(out.results[0]["out"], expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "options",
    [
        {"method": "fp16"},
        {"method": "powersgd", "rank": 1, "error_feedback": True},
        {"method": "powersgd", "rank": 3, "error_feedback": True},  # QR above rank 2
        {"method": "powersgd", "rank": 1, "error_feedback": False},
    ],
    ids=lambda o: CompressConfig(2, **o).label,
)
def test_our_hooks_equal_torchs_bit_for_bit_on_two_ranks(cluster2, options):
    r = run_compress(cluster2, steps=8, **options)
    assert r.matches_torch_hook is True and r.max_abs_diff_torch == 0.0


def test_powersgd_rank_two_equals_torch_to_the_last_bits(cluster2):
    """Rank 2 may differ in the last bits from run to run (noted in compress_report)."""
    r = run_compress(cluster2, "powersgd", rank=2, steps=8)
    assert r.matches_torch_hook is True and r.max_abs_diff_torch < 1e-7


@pytest.mark.parametrize("options", [{"method": "fp16"}, {"method": "powersgd", "rank": 2}])
def test_our_hooks_equal_torchs_within_the_stated_tolerance_on_four_ranks(cluster4, options):
    r = run_compress(cluster4, steps=8, **options)
    assert r.matches_torch_hook is True
    assert r.max_abs_diff_torch <= TORCH_RTOL[r.config.method] * 2  # params stay below 2 here


def test_bf16_has_no_torch_reference_on_gloo(cluster2):
    r = run_compress(cluster2, "bf16", steps=2)
    assert r.matches_torch_hook is None and r.max_abs_diff_torch is None


@pytest.fixture(scope="module")
def lesson(cluster2):
    """Lesson 13's runs at the lesson's size (LESSON_STEPS at LESSON_LR, 2 ranks), as the lesson
    runs them: the sweep and the ablation without error feedback, by label; and the progress
    bar's ticks, each with the jobs the cluster had run by then. torch's hooks are checked by
    the tests above."""
    ticks, first = [], cluster2._job_id

    class Bar:
        def __init__(self, desc):
            self.desc = desc

        def __call__(self, done, total, label):
            ticks.append((self.desc, done, total, label, cluster2._job_id - first))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sweep, "ProgressBar", Bar)
        _, runs = sweep_compress(cluster2)
        _, ablation = sweep_compress(cluster2, NO_FEEDBACK)
    return {r.config.label: r for r in runs + ablation}, ticks


def test_the_lesson_runs_at_its_size_one_job_per_run_under_a_progress_bar(lesson):
    reports, ticks = lesson
    assert {r.config.steps for r in reports.values()} == {LESSON_STEPS}
    assert {r.config.lr for r in reports.values()} == {LESSON_LR}
    assert LESSON_STEPS < TARGET_STEPS and len(reports) == len(SWEEP) + len(NO_FEEDBACK)
    n, labels = len(SWEEP), [CompressConfig(2, **run).label for run in SWEEP]
    assert ticks[: n + 1] == [
        ("training with each method", i, n, label, i) for i, label in enumerate([*labels, ""])
    ]  # the bar moves before each run's job, and ends full
    assert ticks[n + 1 :][-1][1:4] == (len(NO_FEEDBACK), len(NO_FEEDBACK), "")


def test_a_sweep_checks_its_progress_option_before_any_run():
    with pytest.raises(ValueError, match="progress=1 is not valid: expected True or False"):
        sweep_compress(NothingMayRun(), progress=1)


def test_the_lessons_claims_hold_at_its_size(lesson):
    """What lesson 13 says about its curves, true at LESSON_STEPS: plain SGD, the 16-bit casts
    and the compressors with error feedback reach the target (top-k and PowerSGD a little after
    plain SGD); random-k with feedback needs more steps than the run has; fp16 and bf16 lie on
    top of none; every compressor but the casts cuts the bytes by at least 10x."""
    lesson, _ = lesson
    plain = lesson["none"]
    assert plain.steps_to_target is not None and plain.steps_to_target <= 0.75 * LESSON_STEPS
    assert plain.accuracies[0] < 0.3  # learned, not given
    for label in ("fp16", "bf16"):
        cast = lesson[label]
        assert cast.steps_to_target is not None
        assert abs(cast.steps_to_target - plain.steps_to_target) <= 5
        gaps = [abs(a - b) for a, b in zip(cast.accuracies, plain.accuracies, strict=True)]
        assert max(gaps) <= 0.02  # on top of none: 10 of 512 held-out samples at most
        assert cast.compression_ratio == pytest.approx(2)
    for label in ("topk 1% + EF", "sign + EF", "powersgd r=1 + EF"):
        r = lesson[label]
        assert r.steps_to_target is not None, label
        assert r.steps_to_target <= 0.9 * LESSON_STEPS, label  # with a margin
        assert r.compression_ratio >= 10, label
    assert lesson["randk 1% + EF"].steps_to_target is None
    assert lesson["randk 1% + EF"].compression_ratio >= 10


def test_error_feedback_rescues_top_k_and_powersgd(lesson):
    """Without feedback both stall far below the target; with it they reach it, after far fewer
    bytes than plain SGD. Top-k's residual stays bounded (what piles up is sent); PowerSGD's
    keeps growing (torch's convention: the residual against the averaged approximation)."""
    lesson, _ = lesson
    plain = lesson["none"]
    for method in ("topk 1%", "powersgd r=1"):
        off, on = lesson[method], lesson[method + " + EF"]
        assert off.steps_to_target is None and max(off.accuracies) < TARGET_ACCURACY - 0.2
        assert on.steps_to_target is not None and plain.steps_to_target <= on.steps_to_target
        assert on.final_accuracy > off.final_accuracy + 0.2
        assert on.wire_bytes_per_step == off.wire_bytes_per_step  # the same bytes, other entries
        bytes_to_target = on.curve()["sent_MB"].iloc[on.steps_to_target - 1]
        assert bytes_to_target * 5 < plain.curve()["sent_MB"].iloc[plain.steps_to_target - 1]
    late = lesson["topk 1% + EF"].residual_norms[LESSON_STEPS // 2 :]
    assert max(late) < 2 * min(late)  # bounded
    grows = lesson["powersgd r=1 + EF"].residual_norms
    quarter = LESSON_STEPS // 4
    assert sum(grows[-quarter:]) > 1.3 * sum(grows[quarter : 2 * quarter])  # still growing


def test_what_if_compression_pays_on_slow_links_only():
    n = 4
    runs = []
    for method in ("none", "topk", "powersgd"):
        c = CompressConfig(n, method, error_feedback=method != "none")
        runs.append(
            Measured(c.label, method, n, c.ddp().psi, wire_bytes_per_step(c), messages_per_step(c))
        )
    df = what_if(runs)
    speed = {(row.link, row.method): row.speedup for row in df.itertuples()}
    assert speed[("nvlink4-h100", "topk 1% + EF")] < 1 and speed[("eth-25g", "topk 1% + EF")] > 5
    # at the run's own size the modelled bytes are the measured ones
    nvl = df[(df.link == "eth-25g") & (df.method == "none")].iloc[0]
    assert nvl.comm_s > nvl.compute_s * 2 / 3  # exposed: that is why it pays there
    with pytest.raises(ValueError, match="link='wifi' is not valid"):
        what_if(runs, links=("wifi",))
    with pytest.raises(ValueError, match="runs="):
        what_if(runs[1:])
