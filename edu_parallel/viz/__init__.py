"""Renderers: they read traces and reports (never run anything) and draw them.

* Rings and collectives: :func:`ring_animation` (plotly frames, plays in exported HTML),
  :func:`ring_step_figure`, :func:`step_grid` (matplotlib, for print), :func:`before_after`;
  :class:`RingPlayer` re-runs the engine from a widget.
* Bytes and time: :func:`bytes_bars` / :func:`bytes_bars_plotly` against the formula,
  :func:`timeline` (a Gantt of each rank's events), ``cost.py``'s crossover plot,
  :func:`busiest_rank_figure` (the busiest rank's load per algorithm against N),
  :func:`nccl_choice_figure` (NCCL's algorithm and protocol per size, errata E9).
* Pipelines: :func:`pipeline_gantt` with a time cursor, :func:`activation_memory_figure`,
  :func:`bubble_vs_microbatches_figure`, and the :class:`PipelineWidget` explorer.
* Data parallel (lesson 06): :func:`streams_figure` (each rank's compute and comm streams, the
  buckets' all-reduces under backward), :func:`bucket_fill_animation` (gradients filling buckets,
  issued, reduced), :func:`sweep_figure` (step time against bucket size).
* Gradient compression (lesson 13): :func:`curves_figure` (accuracy against steps and bytes),
  :func:`residual_figure` (error feedback's residual), :func:`bytes_by_n_figure` (all-gather
  against all-reduce as N grows), :func:`whatif_figure` (when compression pays, per link).
* Synchronous against asynchronous training (lesson 14): :func:`regime_timeline` (idle time at
  barriers against overlapping pushes), :func:`staleness_figure`, :func:`loss_curves_figure`,
  :func:`time_to_target_figure`.
* Debugging a distributed job (lesson 16): :func:`hang_strip` (a rank × time strip of a
  failed job's flight records: where each rank was stuck, the culprits' rows marked).
* Text: :func:`quoted` (another program's own words, verbatim, marked as English) and
  :func:`wrapped` (a table of prose that fits the page).
* Bytes become time (lesson 11): :func:`crossover_time_figure` (the measured crossover beside the
  formula's), :func:`gpu_share_figure` (communication over compute on 8 H100s, modelled).
* Interconnects (lesson 15): :func:`interconnect_figure` (one trace timed on every link
  preset and rail-optimised fabric).
* Memory: the ZeRO ledger animated per rank (:func:`memory_bars_animation`), calculator bars
  (:func:`memory_bars`), the :class:`ZeroWidget` explorer; ``fsdp.py``: FSDP2's collectives by unit.
* Tensor and expert parallelism and the strategy map: :func:`tp_animation` (the frames of
  ``tp_frames.py``), :func:`traffic_heatmap`, :func:`dispatch_animation`, :func:`map_table_figure`,
  :func:`strategy_figure` (one strategy of lesson 01's run: who holds which weights, which data,
  and what travels).
* The planner (lesson 12): :func:`pareto_figure` (memory per GPU against step time, the Pareto
  front, the best starred), :func:`time_terms_figure` (why the fastest win), and the
  :class:`PlannerWidget` explorer.
* The mesh of a 3D run (lesson 12): :func:`mesh_figure` (ranks as a (stage, replica, TP) grid,
  TP / PP / DP / EP buttons showing who talks and how many bytes, animated from the trace),
  :func:`group_bytes_figure` (bytes per rank by group type against the planner),
  :func:`memory_figure` (model states and activations per rank).
* ``style.py``: the one plot style every renderer imports: the layout (940 px wide, font, title
  and legend helpers) and the palette (one colour per rank, phase, memory category, parallel
  dimension, op). ``fit.py``: the rules a figure is checked against.
* ``plotly_figure.py``: the ``go.Figure`` subclass every plotly renderer returns; in a kernel it
  displays as plotly's mimetype renderer would, without the 0.9 s of nbformat that plotly's
  renderers import at a kernel's first figure.
* ``controls.py``: the play/pause/slider block and the widget display every renderer shares; each
  widget holds one frozen, checked config (:class:`PipelineState`, :class:`PlannerState`,
  :class:`PlayerState`, :class:`ZeroState`) and changes it with :func:`dataclasses.replace`.

Imports ``core/``, ``plans/``, ``models/``, ``memory/``, ``planner/`` and the pure modules of the
parallelism folders, never the engine; plotting libraries are imported inside the functions,
never torch. The names load on first use (``core/lazy.py``): ``from edu_parallel.viz import
ring_animation`` imports the ring's renderer, not every lesson's.
"""

from __future__ import annotations

from ..core.lazy import lazy_exports

_LAZY = {
    "Quoted": "verbatim",
    "quoted": "verbatim",
    "wrapped": "verbatim",
    "loss_curves_figure": "async_timeline",
    "regime_timeline": "async_timeline",
    "staleness_figure": "async_timeline",
    "time_to_target_figure": "async_timeline",
    "bytes_bars": "bars",
    "bytes_bars_plotly": "bars",
    "default_formula": "bars",
    "busiest_rank_figure": "busiest",
    "before_after": "collective",
    "bytes_by_n_figure": "compress",
    "curves_figure": "compress",
    "residual_figure": "compress",
    "whatif_figure": "compress",
    "crossover_figure": "cost",
    "streams_figure": "ddp",
    "bucket_fill_animation": "ddp_buckets",
    "cap_label": "ddp_sweep",
    "sweep_figure": "ddp_sweep",
    "collective_sequence": "fsdp",
    "gathered_memory_figure": "fsdp",
    "step_grid": "grid",
    "hang_strip": "hang",
    "interconnect_figure": "interconnects",
    "Ledger": "memory_ledger",
    "LedgerFrame": "memory_ledger",
    "ledger": "memory_ledger",
    "mesh_figure": "mesh",
    "group_bytes_figure": "mesh_bars",
    "memory_figure": "mesh_bars",
    "Arrow": "model",
    "RingFrames": "model",
    "StepView": "model",
    "build_frames": "model",
    "dispatch_animation": "moe",
    "expert_load_bars": "moe",
    "traffic_heatmap": "moe",
    "nccl_choice_figure": "nccl_choice",
    "PipelineView": "pipeline",
    "pipeline_gantt": "pipeline",
    "pipeline_view": "pipeline",
    "bubble_curves": "pipeline_bubble",
    "bubble_vs_microbatches_figure": "pipeline_bubble",
    "activation_memory_figure": "pipeline_memory",
    "PipelineState": "pipeline_widget",
    "PipelineWidget": "pipeline_widget",
    "pareto_figure": "planner",
    "time_terms_figure": "planner",
    "PlannerState": "planner_widget",
    "PlannerWidget": "planner_widget",
    "PlayerState": "player",
    "RingPlayer": "player",
    "time_axis_label": "rank_timeline",
    "timeline": "rank_timeline",
    "RingDrawing": "ring",
    "ring_animation": "ring",
    "ring_step_figure": "ring",
    "crossover_time_figure": "roofline",
    "gpu_share_figure": "roofline",
    "map_table_figure": "strategy_map",
    "sent_bars_figure": "strategy_map",
    "split_figure": "strategy_map",
    "strategy_figure": "strategy_picture",
    "tp_animation": "tp",
    "tp_blocks": "tp",
    "memory_bars": "zero",
    "memory_bars_animation": "zero",
    "ZeroState": "zero_widget",
    "ZeroWidget": "zero_widget",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _LAZY)
