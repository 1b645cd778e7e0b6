"""Lesson 11's roofline: the formulas, and the crossover measured on real ranks against them.

The formula's crossover (``T* = F t_comm / W per token``, with this machine's measured ``F``,
``α`` and ``B``) must land within 30 % of the measured one: the median of three sweeps, since two
shared cores are noisy (each sweep keeps the fastest of its rounds).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from edu_parallel.app.course.links import load
from edu_parallel.models.published import PUBLISHED_BUSBW
from edu_parallel.quiz import roofline_quiz
from edu_parallel.roofline.config import SweepConfig
from edu_parallel.roofline.formulas import (
    allreduce_time,
    critical_intensity,
    crossover,
    dp_crossover_tokens,
    dp_step_flops,
    ring_factor,
    step_time,
    tp_dp_time_crossover,
)
from edu_parallel.roofline.gpu import H100_FLOPS, IN_NODE, dp_tokens, gpu_rows
from edu_parallel.roofline.steps import MATMUL
from edu_parallel.roofline.strategies import strategy_flops, transfers
from edu_parallel.roofline.sweep import run_sweep, sweep_runner
from edu_parallel.roofline.tables import strategy_time_table, sweep_table
from edu_parallel.strategy_map.crossover import crossover_tokens
from edu_parallel.strategy_map.formulas import block_params, formula_sent_bytes
from edu_parallel.strategy_map.report import run_strategy_map
from edu_parallel.viz.fit import fit_problems
from edu_parallel.viz.roofline import crossover_time_figure, gpu_share_figure
from edu_parallel.zero.report import run_zero

SWEEP: dict = {}  # the lesson's sweep: the defaults


def test_step_time_is_flops_over_f_and_alpha_beta() -> None:
    t = step_time(2e9, 1e6, 4, 1e9, 1e-4, 1e9)
    assert t.compute_s == pytest.approx(2.0) and t.comm_s == pytest.approx(4e-4 + 1e-3)
    assert t.bound == "compute" and t.overlapped_s == t.compute_s
    assert t.serial_s == pytest.approx(2.0014) and 0 < t.comm_share < 0.001
    assert step_time(1, 1e9, 1, 1e12, 0, 1e9).bound == "communication"
    assert critical_intensity(989e12, 50e9) == pytest.approx(19780)
    with pytest.raises(ValueError, match=r"^flops_per_s=0 is not valid: expected"):
        step_time(1, 1, 1, 0, 1, 1)
    with pytest.raises(ValueError, match=r"^alpha_s=-1 is not valid"):
        step_time(1, 1, 1, 1, -1, 1)


def test_crossover_interpolates_in_log_and_says_when_there_is_none() -> None:
    xs = [1, 2, 4, 8, 16]
    compute = [x * 1.0 for x in xs]  # slope 1
    assert crossover(xs, [3.0] * 5, compute) == pytest.approx(3.0)  # exact on a power law
    assert crossover(xs, [0.5] * 5, compute) is None  # compute-bound from the start
    assert crossover(xs, [99.0] * 5, compute) is None  # communication-bound throughout
    with pytest.raises(ValueError, match="a sweep of at least two points"):
        crossover([1], [1], [1])


def test_dp_crossover_is_where_the_two_terms_meet() -> None:
    psi, n, f, a, b = 10**6, 4, 50e9, 1e-4, 2e9
    t = dp_crossover_tokens(psi, n, f, a, b)
    comm = allreduce_time(n, psi * 4, a, b)
    assert 6 * psi * t / f == pytest.approx(comm)
    # without α it is the intensity form: 6T / (2(N-1)/N e) = F / B
    t0 = dp_crossover_tokens(psi, n, f, 0.0, b)
    assert 6 * t0 / (ring_factor(n) * 4) == pytest.approx(critical_intensity(f, b))
    assert dp_step_flops(16, 4, 10, input_grad=True) == 4 * 6 * 8 * 16 * 16 * 10


@pytest.mark.parametrize("kind", ["mlp", "bare", "gpt2"])
@pytest.mark.parametrize("k", [1, 4])
def test_tp_against_dp_in_time_is_the_byte_crossover_without_alpha(kind: str, k: int) -> None:
    bytes_t = crossover_tokens(64, kind, k)
    assert tp_dp_time_crossover(64, 4, 0.0, 1e9, kind, 1, k) == pytest.approx(bytes_t)
    assert tp_dp_time_crossover(64, 4, 5e-6, 1e9, kind, 1, k) < bytes_t  # TP pays α more often


def test_sweep_config_names_every_bad_value_at_once() -> None:
    with pytest.raises(ValueError) as err:
        SweepConfig(1, hidden=0, accumulation=(2, 1), repeats=1, microbatch=0)
    text = str(err.value)
    for name in ("world_size=1", "hidden=0", "accumulation=(2, 1)", "repeats=1", "microbatch=0"):
        assert name in text
    with pytest.raises(ValueError, match=r"accumulation=\(1, 64\) is not valid: expected at most"):
        SweepConfig(2, microbatch=16, accumulation=(1, 64))
    cfg = SweepConfig(2, **SWEEP)
    assert cfg.params == block_params(128) and cfg.calibration_sizes[-1] == cfg.params * 4
    assert cfg.tokens == tuple(4 * k for k in cfg.accumulation)


def test_transfers_count_ring_messages() -> None:
    assert transfers({"all_reduce": 2, "isend": 3}, 4) == 2 * 6 + 3
    assert transfers({"all_gather_into_tensor": 1, "all_to_all_single": 2}, 4) == 3 + 6
    with pytest.raises(ValueError, match="ops="):
        transfers({"broadcast": 1}, 4)


def test_the_gpu_model_keeps_tp_in_a_node_and_lets_dp_cross_nodes() -> None:
    assert H100_FLOPS == 400e12  # Llama 3's achieved rate, not the datasheet's
    assert IN_NODE.bandwidth_Bps == PUBLISHED_BUSBW["h100x8-ring"].busbw_gbps * 1e9
    rows = {(r.strategy, r.place): r for r in gpu_rows(8192, 65536)}
    assert rows[("tp", "in a node")].time.bound == "compute"
    assert rows[("tp", "across nodes")].time.bound == "communication"
    assert rows[("dp", "across nodes")].time.bound == "compute"
    for r in rows.values():  # bound by the intensity against the link's F / B (α is small here)
        assert (r.intensity < r.critical) == (r.time.bound == "communication")
    small, large = (
        {(r.strategy, r.place): r.time.comm_share for r in gpu_rows(8192, t)}
        for t in (8192, 1 << 20)
    )
    assert large[("dp", "across nodes")] < small[("dp", "across nodes")] / 10  # batch helps DP
    assert large[("tp", "in a node")] == pytest.approx(small[("tp", "in a node")], rel=0.05)
    crossing, hidden = dp_tokens(share=1.0), dp_tokens(share=2 / 3)
    assert hidden == pytest.approx(1.5 * crossing)  # overlap needs the all-reduce under backward
    r = next(
        r
        for r in gpu_rows(8192, int(hidden) + 8)
        if r.strategy == "dp" and r.place == "across nodes"
    )
    assert r.time.comm_s <= 2 / 3 * r.time.compute_s


def test_gpu_figure_fits() -> None:
    fig = gpu_share_figure()
    assert not fit_problems(fig)
    assert len(fig.data) == 6  # DP and TP, in a node and across; the crossover; overlap


@pytest.mark.multiprocess
def test_the_measured_crossover_matches_the_formula_within_30_percent(cluster2) -> None:
    reports = [run_sweep(cluster2, **SWEEP) for _ in range(3)]
    for rep in reports:
        cfg = rep.config
        assert rep.sent_bytes == pytest.approx(ring_factor(2) * rep.params * 4)
        assert rep.messages == 1 and rep.params == cfg.params
        step = rep.trace.select("compute", rank=0, phase=MATMUL)
        counted = sum(e.attrs["flops"] for e in step if e.step == len(cfg.accumulation) - 1)
        assert counted == dp_step_flops(cfg.hidden, cfg.layers, cfg.tokens[-1])
        assert min(rep.comm_s) <= rep.comm_level_s <= max(rep.comm_s) and rep.link.bandwidth_Bps > 0
    ratios = [r.ratio for r in reports]
    median = statistics.median(x if x is not None else float("inf") for x in ratios)
    assert 0.7 <= median <= 1.3, [
        (r.measured_crossover, r.formula_crossover, r.comm_level_s, r.formula_comm) for r in reports
    ]
    table = sweep_table(reports[0])
    assert list(table.index) == list(SweepConfig(2).accumulation)
    fig = crossover_time_figure(reports[0])
    assert not fit_problems(fig)
    names = [t.name for t in fig.data]
    assert any(n.startswith("measured:") for n in names) or reports[0].measured_crossover is None


@pytest.mark.multiprocess
def test_every_strategy_in_time_reads_its_bytes_off_the_trace(cluster2) -> None:
    sizes = {"hidden": 64, "layers": 2, "batch": 8, "seq": 4}
    report = run_strategy_map(cluster2, **sizes)
    zero = run_zero(cluster2, stage=3, steps=1, dims=(64, 256, 64, 256, 64), microbatch=16)
    table = strategy_time_table(report, zero, 20e9, IN_NODE, 16)
    assert list(table.index) == ["DP", "TP", "TP+SP", "PP", "EP", "ZeRO-3"]
    tokens = sizes["batch"] * sizes["seq"]
    for s, name in (("dp", "DP"), ("tp", "TP"), ("pp", "PP")):
        want = formula_sent_bytes(s, 2, 0, layers=2, hidden=64, tokens=tokens)
        assert table.loc[name, "bytes sent"] == pytest.approx(want)
        assert table.loc[name, "FLOPs per rank"] == strategy_flops(s, report.config, 2)
    assert table.loc["DP", "messages"] == 2 and table.loc["TP", "messages"] == 4 * 2
    assert table.loc["ZeRO-3", "bytes sent"] == pytest.approx(zero.per_rank_sent_bytes[0])
    comm = table["communication, modelled (ms)"]
    assert comm["TP"] > comm["DP"]  # 2L all-reduces of activations against one of the gradients


@pytest.mark.multiprocess
def test_the_predict_question_is_graded_against_a_real_run(cluster2) -> None:
    q = roofline_quiz(runner=sweep_runner(cluster2, hidden=64, layers=1, repeats=3)).by_key(
        "predict_accumulation"
    )
    report = q.result()
    assert report.accumulation == (1, q.params["k"])
    assert q.check(q.predict.position(q.truth(report))).correct
    assert "ms" in q.reveal(report)


def test_the_lessons_gpu_prose_quotes_the_model() -> None:
    """Lesson 11's text names the GPU model's numbers; they must be what the model computes."""
    nb = load(Path(__file__).resolve().parents[1] / "notebooks" / "11_bytes_to_time.ipynb")
    text = {c["id"]: "".join(c["source"]) for c in nb["cells"]}
    rows = {(r.strategy, r.place): r for r in gpu_rows(8192, 65536)}
    quoted = {
        "c13": [
            rows[("tp", "in a node")].intensity,
            rows[("tp", "in a node")].critical,
            rows[("tp", "across nodes")].critical,
            rows[("dp", "across nodes")].intensity,
            65536 / 8,
        ],
        "c11": [H100_FLOPS / 1e12, IN_NODE.bandwidth_Bps / 1e9, 65536],
    }
    for cell, values in quoted.items():
        for v in values:
            assert f"{v:,.0f}" in text[cell], (cell, f"{v:,.0f}")
