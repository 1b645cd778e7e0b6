"""Renderers: they read traces and reports (never run anything) and draw them.

* Rings and collectives: :func:`ring_animation` (plotly frames, plays in exported HTML),
  :func:`ring_step_figure`, :func:`step_grid` (matplotlib, for print), :func:`before_after`;
  :class:`RingPlayer` re-runs the engine from a widget.
* Bytes and time: :func:`bytes_bars` / :func:`bytes_bars_plotly` against the formula,
  :func:`timeline` (a Gantt of each rank's events), ``cost.py``'s crossover plot,
  :func:`nccl_choice_figure` (NCCL's algorithm and protocol per size, errata E9).
* Pipelines: :func:`pipeline_gantt` with a time cursor, :func:`activation_memory_figure`,
  :func:`bubble_vs_microbatches_figure`, and the :class:`PipelineWidget` explorer.
* Data parallel (lesson 05): :func:`streams_figure` (each rank's compute and comm streams, the
  buckets' all-reduces under backward), :func:`bucket_fill_animation` (gradients filling buckets,
  issued, reduced), :func:`sweep_figure` (step time against bucket size).
* Gradient compression (lesson 11): :func:`curves_figure` (accuracy against steps and bytes),
  :func:`residual_figure` (error feedback's residual), :func:`bytes_by_n_figure` (all-gather
  against all-reduce as N grows), :func:`whatif_figure` (when compression pays, per link).
* Synchronous against asynchronous training (lesson 12): :func:`regime_timeline` (idle time at
  barriers against overlapping pushes), :func:`staleness_figure`, :func:`loss_curves_figure`,
  :func:`time_to_target_figure`.
* Interconnects (lesson 13): :func:`interconnect_figure` (one trace timed on every link
  preset and rail-optimised fabric).
* Memory: the ZeRO ledger animated per rank (:func:`memory_bars_animation`), calculator bars
  (:func:`memory_bars`), the :class:`ZeroWidget` explorer; ``fsdp.py``: FSDP2's collectives by unit.
* Tensor and expert parallelism and the strategy map: :func:`tp_animation` (the frames of
  ``tp_frames.py``), :func:`traffic_heatmap`, :func:`dispatch_animation`, :func:`map_table_figure`.
* The planner (lesson 10): :func:`pareto_figure` (memory per GPU against step time, the Pareto
  front, the best starred), :func:`time_terms_figure` (why the fastest win), and the
  :class:`PlannerWidget` explorer.
* The mesh of a 3D run (lesson 10): :func:`mesh_figure` (ranks as a (stage, replica, TP) grid,
  TP / PP / DP / EP buttons showing who talks and how many bytes, animated from the trace),
  :func:`group_bytes_figure` (bytes per rank by group type against the planner),
  :func:`memory_figure` (model states and activations per rank).
* ``style.py``: the one plot style every renderer imports: the layout (940 px wide, font, title
  and legend helpers) and the palette (one colour per rank, phase, memory category, parallel
  dimension, op). ``fit.py``: the rules a figure is checked against.
* ``controls.py``: the play/pause/slider block and the widget display every renderer shares; each
  widget holds one frozen, checked config (:class:`PipelineState`, :class:`PlannerState`,
  :class:`PlayerState`, :class:`ZeroState`) and changes it with :func:`dataclasses.replace`.

Imports ``core/``, ``plans/``, ``models/``, ``memory/``, ``planner/`` and the pure modules of the
parallelism folders, never the engine; plotting libraries are imported inside the functions,
never torch.
"""

from __future__ import annotations

from .async_timeline import (
    loss_curves_figure,
    regime_timeline,
    staleness_figure,
    time_to_target_figure,
)
from .bars import bytes_bars, bytes_bars_plotly, default_formula
from .collective import before_after
from .compress import bytes_by_n_figure, curves_figure, residual_figure, whatif_figure
from .cost import crossover_figure
from .ddp import streams_figure
from .ddp_buckets import bucket_fill_animation
from .ddp_sweep import cap_label, sweep_figure
from .fsdp import collective_sequence, gathered_memory_figure
from .grid import step_grid
from .interconnects import interconnect_figure
from .memory_ledger import Ledger, LedgerFrame, ledger
from .mesh import mesh_figure
from .mesh_bars import group_bytes_figure, memory_figure
from .model import Arrow, RingFrames, StepView, build_frames
from .moe import dispatch_animation, expert_load_bars, traffic_heatmap
from .nccl_choice import nccl_choice_figure
from .pipeline import PipelineView, pipeline_gantt, pipeline_view
from .pipeline_bubble import bubble_curves, bubble_vs_microbatches_figure
from .pipeline_memory import activation_memory_figure
from .pipeline_widget import PipelineState, PipelineWidget
from .planner import pareto_figure, time_terms_figure
from .planner_widget import PlannerState, PlannerWidget
from .player import PlayerState, RingPlayer
from .rank_timeline import time_axis_label, timeline
from .ring import RingDrawing, ring_animation, ring_step_figure
from .strategy_map import map_table_figure, sent_bars_figure, split_figure
from .tp import tp_animation, tp_blocks
from .zero import memory_bars, memory_bars_animation
from .zero_widget import ZeroState, ZeroWidget

__all__ = [
    "Arrow",
    "Ledger",
    "LedgerFrame",
    "PipelineState",
    "PipelineView",
    "PipelineWidget",
    "PlannerState",
    "PlannerWidget",
    "PlayerState",
    "RingDrawing",
    "RingFrames",
    "RingPlayer",
    "StepView",
    "ZeroState",
    "ZeroWidget",
    "activation_memory_figure",
    "before_after",
    "bubble_curves",
    "bubble_vs_microbatches_figure",
    "bucket_fill_animation",
    "build_frames",
    "bytes_bars",
    "bytes_bars_plotly",
    "bytes_by_n_figure",
    "cap_label",
    "collective_sequence",
    "crossover_figure",
    "curves_figure",
    "default_formula",
    "dispatch_animation",
    "expert_load_bars",
    "gathered_memory_figure",
    "group_bytes_figure",
    "interconnect_figure",
    "ledger",
    "loss_curves_figure",
    "map_table_figure",
    "memory_bars",
    "memory_bars_animation",
    "memory_figure",
    "nccl_choice_figure",
    "mesh_figure",
    "pareto_figure",
    "pipeline_gantt",
    "pipeline_view",
    "regime_timeline",
    "residual_figure",
    "ring_animation",
    "ring_step_figure",
    "sent_bars_figure",
    "split_figure",
    "staleness_figure",
    "step_grid",
    "streams_figure",
    "sweep_figure",
    "time_axis_label",
    "time_terms_figure",
    "time_to_target_figure",
    "timeline",
    "tp_animation",
    "tp_blocks",
    "traffic_heatmap",
    "whatif_figure",
]
