"""Every figure the viz layer makes fits a notebook output (MAX_WIDTH_PX), with readable labels.

Each public figure function of ``edu_parallel.viz`` is built from the inputs the lessons give it
(real runs on 4 ranks for the lesson-sized cases, the other viz tests' simulated inputs otherwise)
and checked by :func:`edu_parallel.viz.fit.fit_problems`: width <= MAX_WIDTH_PX, fonts >= 11 px,
titles
below the modebar, play buttons clear of the slider. The checker itself is shown failing on
planted bad figures, and the list of covered functions cannot silently shrink.
"""

from __future__ import annotations

import inspect

import pandas as pd
import pytest
from test_tp import report as tp_report
from test_viz_async import async_trace, sync_trace
from test_viz_compress import bytes_by_n_table
from test_viz_ddp import ddp_trace, sweep_table
from test_viz_mesh import reports_3d
from test_viz_pipeline import timed
from test_viz_zero import zero3_trace

import edu_parallel.viz as viz
from edu_parallel.compression import CompressConfig, Measured, what_if
from edu_parallel.compression.config import messages_per_step, wire_bytes_per_step
from edu_parallel.models.interconnects import interconnect_table
from edu_parallel.models.nccl.systems import NCCL_SYSTEMS
from edu_parallel.models.simulation import simulate
from edu_parallel.planner import ClusterSpec, plan
from edu_parallel.plans.naive import naive_allreduce_plan
from edu_parallel.plans.ring import ring_allreduce_plan
from edu_parallel.quiz.banks.debugging_sim import simulated_diagnosis
from edu_parallel.viz.fit import MAX_WIDTH_PX, fit_problems
from edu_parallel.zero import preload, run_fsdp, run_zero

pytestmark = pytest.mark.multiprocess

preload()  # FSDP2's imports before the cluster forks

# Public functions of edu_parallel.viz that return something other than a figure.
NOT_FIGURES = {
    "bubble_curves",
    "build_frames",
    "cap_label",
    "default_formula",
    "ledger",
    "pipeline_view",
    "quoted",
    "time_axis_label",
    "wrapped",
}


def ring(n: int, nbytes: int):
    return simulate(ring_allreduce_plan(n), nbytes)[0]


@pytest.fixture(scope="module")
def runs(cluster4):
    """The lessons' runs, on 4 real ranks (sizes as in lessons 01, 02, 07, 09, 11, 13)."""
    from edu_parallel.comm import cluster_traffic_runner, run_collective
    from edu_parallel.compression import run_compress
    from edu_parallel.expert_parallel import run_moe
    from edu_parallel.models import traffic_table
    from edu_parallel.roofline import run_sweep
    from edu_parallel.strategy_map.report import run_strategy_map

    moe = dict(top_k=2, capacity_factor=1.25, tokens=16, hidden=8)
    compress = [
        run_compress(cluster4, m, steps=3, error_feedback=m != "none", compare_torch=False)
        for m in ("none", "topk")
    ]
    return {
        "collectives": [
            run_collective(cluster4, name, 64, "int64", root=0)
            for name in ("all_reduce", "all_to_all", "reduce_scatter")
        ],
        "zero": {f"ZeRO-{s}": run_zero(cluster4, s, steps=1).trace for s in (0, 1, 2, 3)},
        "fsdp": run_fsdp(cluster4, steps=1),
        "moe": run_moe(cluster4, experts=8, **moe),
        "moe_skew": run_moe(cluster4, experts=8, skew=4.0, **moe),
        "map": run_strategy_map(cluster4),
        "sweep": run_sweep(cluster4, hidden=64, layers=1, repeats=2),
        "curves": pd.concat([r.curve() for r in compress]),
        "traffic": traffic_table(
            ["ring", "naive", "ps", "rabenseifner"],
            [2, 4, 8],
            4096,
            cluster_traffic_runner(cluster4),
        ),
    }


def _whatif() -> pd.DataFrame:
    measured = []
    for m in ("none", "topk"):
        c = CompressConfig(4, m)
        measured.append(
            Measured(c.label, m, 4, c.ddp().psi, wire_bytes_per_step(c), messages_per_step(c))
        )
    return what_if(measured, links=("nvlink4-h100", "eth-25g"))


def _planned(model: str = "llama3-70b", nodes: int = 8, batch: int = 512, seq: int = 4096):
    """The planner's result for a lesson-sized cluster (pure arithmetic, fast)."""
    return plan(model, ClusterSpec(nodes, 8, "h100"), batch, seq)


def _estimates() -> dict:
    from types import SimpleNamespace

    gib = 1024**3
    names = ("param16", "grad16", "master32", "adam_m", "adam_v")
    return {
        f"ZeRO-{s}": SimpleNamespace(breakdown=dict(zip(names, [2, 2, 4, 4, 4], strict=True)))
        for s in range(4)
    } | {"DP": SimpleNamespace(breakdown={n: 4 * gib for n in names})}


# name -> inputs -> the figures to check (the lesson-sized cases and the largest ones)
BUILDERS = {
    "activation_memory_figure": lambda r: [viz.activation_memory_figure(timed("1f1b", 4, 8))],
    "before_after": lambda r: (
        [viz.before_after(c) for c in r["collectives"]] + [viz.before_after(ring(8, 64))]
    ),
    "bubble_vs_microbatches_figure": lambda r: [
        viz.bubble_vs_microbatches_figure(4, [4, 8, 16, 32, 64])
    ],
    "bucket_fill_animation": lambda r: [viz.bucket_fill_animation(ddp_trace())],
    "bytes_bars": lambda r: [viz.bytes_bars(ring(4, 64)), viz.bytes_bars(ring(8, 256))],
    "bytes_bars_plotly": lambda r: [viz.bytes_bars_plotly(ring(8, 256))],
    "busiest_rank_figure": lambda r: [viz.busiest_rank_figure(r["traffic"])],
    "bytes_by_n_figure": lambda r: [viz.bytes_by_n_figure(bytes_by_n_table())],
    "collective_sequence": lambda r: [viz.collective_sequence(r["fsdp"])],
    "crossover_figure": lambda r: [viz.crossover_figure(64, "ib-ndr-400")],
    "crossover_time_figure": lambda r: [viz.crossover_time_figure(r["sweep"])],
    "gpu_share_figure": lambda r: [viz.gpu_share_figure(), viz.gpu_share_figure(hidden=4096)],
    "curves_figure": lambda r: [viz.curves_figure(r["curves"], target=0.8)],
    "dispatch_animation": lambda r: [viz.dispatch_animation(r["moe"])],
    "expert_load_bars": lambda r: [viz.expert_load_bars(r["moe_skew"])],
    "gathered_memory_figure": lambda r: [
        viz.gathered_memory_figure({"ZeRO-3": r["fsdp"].zero3_trace, "FSDP": r["fsdp"].trace})
    ],
    "group_bytes_figure": lambda r: [viz.group_bytes_figure(rep) for rep in reports_3d()],
    "interconnect_figure": lambda r: [
        viz.interconnect_figure(interconnect_table(ring(8, 1 << 20), 1 << 20)),
        viz.interconnect_figure(interconnect_table(ring(4, 4096), 4096, nodes=2)),
    ],
    "loss_curves_figure": lambda r: [
        viz.loss_curves_figure(
            {"sync": pd.DataFrame({"step": [1, 2], "time_s": [0.1, 0.3], "loss": [2.0, 1.5]})}
        )
    ],
    "map_table_figure": lambda r: [viz.map_table_figure(r["map"])],
    "memory_bars": lambda r: [viz.memory_bars(_estimates(), gpu_bytes=20 * 1024**3)],
    "memory_bars_animation": lambda r: [
        viz.memory_bars_animation(r["zero"]),
        viz.memory_bars_animation(zero3_trace(world=2), title="ZeRO-3"),
    ],
    "memory_figure": lambda r: [viz.memory_figure(rep) for rep in reports_3d()],
    "mesh_figure": lambda r: [viz.mesh_figure(rep) for rep in reports_3d()],
    "nccl_choice_figure": lambda r: (
        [viz.nccl_choice_figure(s) for s in NCCL_SYSTEMS.values()]
        + [viz.nccl_choice_figure(NCCL_SYSTEMS["4x1-pcie-25gbe"], "all_gather")]
    ),
    "pareto_figure": lambda r: [
        viz.pareto_figure(_planned(), highlight={"dp": 8, "tp": 8, "pp": 1, "name": "8 x 8 x 1"}),
        viz.pareto_figure(_planned("gpt3-175b", 64, 1536, 2048), infeasible=False),
        viz.pareto_figure(_planned("llama3-8b", 1, 64)),
    ],
    "pipeline_gantt": lambda r: [
        viz.pipeline_gantt(timed("1f1b", 4, 8)),
        viz.pipeline_gantt(timed("interleaved", 2, 4, 2)),
    ],
    "regime_timeline": lambda r: [
        viz.regime_timeline(sync_trace()),
        viz.regime_timeline(async_trace(), title="async"),
    ],
    "residual_figure": lambda r: [viz.residual_figure(r["curves"])],
    "ring_animation": lambda r: [
        viz.ring_animation(ring(n, 64 * n), title="ring") for n in (2, 4, 8)
    ],
    "ring_step_figure": lambda r: [viz.ring_step_figure(ring(4, 64), 2)],
    "sent_bars_figure": lambda r: [viz.sent_bars_figure(r["map"])],
    "split_figure": lambda r: [viz.split_figure(r["map"])],
    "strategy_figure": lambda r: [
        viz.strategy_figure(r["map"], s) for s in ("dp", "tp", "tp-sp", "pp", "ep")
    ],
    "hang_strip": lambda r: [
        viz.hang_strip(simulated_diagnosis(case, culprit))
        for case, culprit in (("sleeps", 2), ("deadlock", 1), ("straggler", 3), ("killed", 0))
    ],
    "staleness_figure": lambda r: [viz.staleness_figure({"sync": {0: 40}, "async": {0: 9, 2: 30}})],
    "step_grid": lambda r: [viz.step_grid(ring(4, 64)), viz.step_grid(ring(8, 256))],
    "streams_figure": lambda r: [viz.streams_figure(ddp_trace(), title="overlap")],
    "sweep_figure": lambda r: [viz.sweep_figure(sweep_table())],
    "time_terms_figure": lambda r: [
        viz.time_terms_figure(_planned(), top=10),
        viz.time_terms_figure(_planned("gpt3-175b", 64, 1536, 2048), top=1),
        viz.time_terms_figure(_planned(), top=5, overhead_only=True),
    ],
    "time_to_target_figure": lambda r: [
        viz.time_to_target_figure(
            pd.DataFrame(
                {
                    "regime": ["sync", "async"],
                    "straggler": ["none"] * 2,
                    "time to target (s)": [1, 0.5],
                }
            )
        )
    ],
    "timeline": lambda r: [
        viz.timeline(ring(4, 64)),
        viz.timeline(simulate(naive_allreduce_plan(3), 8)[0]),
    ],
    "tp_animation": lambda r: [
        viz.tp_animation(tp_report(mode, 4), title=mode)
        for mode in ("column", "row", "mlp", "mlp-sp")
    ],
    "tp_blocks": lambda r: [viz.tp_blocks(tp_report("mlp-sp", 4), frame=-1)],
    "traffic_heatmap": lambda r: [
        viz.traffic_heatmap(r["moe"], title="top-2, 8 experts on 4 ranks"),
        viz.traffic_heatmap(
            {"skew 0": r["moe"], "skew 4": r["moe_skew"], "C = 1.25": r["moe_skew"]}
        ),
    ],
    "whatif_figure": lambda r: [viz.whatif_figure(_whatif())],
}


def public_functions() -> set[str]:
    return {n for n in viz.__all__ if inspect.isfunction(getattr(viz, n))}


def test_every_public_figure_function_is_covered():
    """A new figure function must be added to BUILDERS (or NOT_FIGURES): the list cannot shrink."""
    covered = set(BUILDERS) | NOT_FIGURES
    assert public_functions() - covered == set(), "add these to BUILDERS"
    assert covered - public_functions() == set(), "no longer public: remove them"
    assert len(BUILDERS) >= 34


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_figure_fits_960px_with_readable_labels(name, runs):
    figures = BUILDERS[name](runs)
    assert figures
    problems = [f"{name}[{i}]: {p}" for i, fig in enumerate(figures) for p in fit_problems(fig)]
    assert problems == []


# ------------------------------------------------------------------ the checker itself
def _go():
    import plotly.graph_objects as go

    return go


def test_checker_fails_a_too_wide_figure():
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=3)
    assert any("no layout.width" in p for p in fit_problems(fig))
    fig.update_layout(width=MAX_WIDTH_PX + 1)
    assert fit_problems(fig) == [f"layout.width={MAX_WIDTH_PX + 1} > {MAX_WIDTH_PX}"]
    fig.update_layout(width=MAX_WIDTH_PX)
    assert fit_problems(fig) == []


def test_checker_fails_small_fonts_anywhere():
    go = _go()
    fig = go.Figure(go.Heatmap(z=[[1]], texttemplate="%{z}", textfont=dict(size=6)))
    assert fit_problems(fig) == ["data[0].textfont.size=6 < 11"]
    fig = go.Figure(go.Scatter(x=[0]), frames=[go.Frame(data=[go.Scatter(textfont=dict(size=9))])])
    assert fit_problems(fig) == ["frames[*].data[0].textfont.size=9 < 11"]
    fig = go.Figure().add_annotation(text="a", font=dict(size=10))
    assert fit_problems(fig) == ["layout.annotations[0].font.size=10 < 11"]


def test_checker_fails_a_title_under_the_modebar():
    go = _go()
    fig = go.Figure(layout=dict(title=dict(text="a<br>b<br>c", y=0.99, yanchor="top"), height=400))
    assert any("under the modebar" in p for p in fit_problems(fig))
    fig = go.Figure(layout=dict(title=dict(text="a"), height=400, margin=dict(t=30)))
    assert any("under the modebar" in p for p in fit_problems(fig))  # centred in a small margin
    fig.update_layout(margin=dict(t=130))
    assert fit_problems(fig) == []


def test_checker_fails_buttons_over_the_slider():
    from edu_parallel.viz.controls import play_controls

    go = _go()
    frames = [go.Frame(name=str(k)) for k in range(3)]
    fig = go.Figure(go.Scatter(x=[0]), frames=frames, layout=dict(width=600, height=400))
    fig.update_layout(**play_controls(["0", "1", "2"], duration_ms=100, slider_x=0.05))
    assert any("overlap the slider" in p for p in fit_problems(fig))
    fig.update_layout(**play_controls(["0", "1", "2"], duration_ms=100, plot_px=600 - 160))
    assert fit_problems(fig) == []


def test_a_frame_that_moves_some_traces_is_named_and_made_whole():
    """plotly.js erases the traces a frame leaves out while it plays (lesson 10's bars blanked
    under a moving cursor): the checker names such a frame, and whole_frames gives every frame
    every trace, the ones it moved as they were and the others as a stub of their type."""
    from edu_parallel.viz.fit import whole_frames

    go = _go()
    bars, cursor = go.Bar(x=[1, 2], y=[3, 4]), go.Scatter(x=[0, 0], y=[0, 1])
    frames = [go.Frame(name=str(k), data=[go.Scatter(x=[k, k])], traces=[1]) for k in range(3)]
    fig = go.Figure([bars, cursor], frames=frames, layout=dict(width=600))
    assert fit_problems(fig) == [
        "frames[0] carries traces [1] of 2: the others blank while it plays (whole_frames)"
    ]
    whole_frames(fig)
    assert fit_problems(fig) == []
    assert [list(f.traces) for f in fig.frames] == [[0, 1]] * 3
    assert [f.data[0].to_plotly_json() for f in fig.frames] == [{"type": "bar"}] * 3
    assert [list(f.data[1].x) for f in fig.frames] == [[0, 0], [1, 1], [2, 2]]


def test_checker_reads_matplotlib_pngs():
    from edu_parallel.viz.figure import new_figure

    fig = new_figure(figsize=(12, 3))
    fig.subplots().set_title("wide", fontsize=12)
    assert fit_problems(fig) == [p for p in fit_problems(fig) if "PNG is" in p] != []
    fig = new_figure(figsize=(6, 3))
    fig.subplots().set_title("small", fontsize=6)
    assert fit_problems(fig) == ["text 'small' is 8.3 px < 11"]
