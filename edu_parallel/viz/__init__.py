"""Renderers: they read traces (never run anything) and draw them.

* :func:`ring_animation` - plotly frames of the ranks' chunks step by step (plays in HTML).
* :func:`ring_step_figure` - one frame of it.
* :func:`step_grid` - every step at once as a matplotlib figure, for print.
* :func:`bytes_bars` / :func:`bytes_bars_plotly` - bytes each rank sent against the formula.
* :func:`timeline` - a Gantt of each rank's events (plotly), honestly labelled.
* :class:`RingPlayer`, :class:`PlayerState` - an ipywidgets player that re-runs the engine.
* Later lessons add theirs below: collectives, pipeline, ZeRO, FSDP, TP, MoE, the strategy map.

Plotting libraries are imported inside the functions; nothing here imports torch.
"""

from __future__ import annotations

from .bars import bytes_bars, bytes_bars_plotly, default_formula
from .grid import step_grid
from .model import Arrow, RingFrames, StepView, build_frames
from .player import PlayerState, RingPlayer
from .ring import RingDrawing, ring_animation, ring_step_figure
from .timeline import time_axis_label, timeline

__all__ = [
    "Arrow",
    "PlayerState",
    "RingDrawing",
    "RingFrames",
    "RingPlayer",
    "StepView",
    "build_frames",
    "bytes_bars",
    "bytes_bars_plotly",
    "default_formula",
    "ring_animation",
    "ring_step_figure",
    "step_grid",
    "time_axis_label",
    "timeline",
]

# Collectives (issue 3): each rank's buffer before and after a run.
from .collective import before_after  # noqa: E402

__all__ += ["before_after"]

# Pipeline parallelism (issue 4): Gantt with a time cursor, stashed activations, bubble vs M,
# and the schedule explorer widget (real run when small, else the simulation of the same plan).
from .pipeline import (  # noqa: E402
    PipelineView,
    activation_memory_figure,
    bubble_curves,
    bubble_vs_microbatches_figure,
    pipeline_gantt,
    pipeline_view,
)
from .pipeline_widget import PipelineState, PipelineWidget  # noqa: E402

__all__ += [
    "PipelineState",
    "PipelineView",
    "PipelineWidget",
    "activation_memory_figure",
    "bubble_curves",
    "bubble_vs_microbatches_figure",
    "pipeline_gantt",
    "pipeline_view",
]

# ZeRO (issue 5): the memory ledger of a run, animated stacked bars per rank (several runs side by
# side), static bars of calculator estimates, and the calculator explorer widget.
from .zero import (  # noqa: E402
    Ledger,
    LedgerFrame,
    ZeroState,
    ZeroWidget,
    ledger,
    memory_bars,
    memory_bars_animation,
)

__all__ += [
    "Ledger",
    "LedgerFrame",
    "ZeroState",
    "ZeroWidget",
    "ledger",
    "memory_bars",
    "memory_bars_animation",
]

# FSDP2 beside ZeRO-3 (issue 5): the collectives each issued, by unit and pass.
from .fsdp import collective_sequence  # noqa: E402

# Tensor and expert parallelism, and the strategy map (issue 6).
from .moe import dispatch_animation, expert_load_bars, traffic_heatmap  # noqa: E402
from .strategy_map import map_table_figure, sent_bars_figure, split_figure  # noqa: E402
from .tp import tp_animation, tp_blocks  # noqa: E402

__all__ += [
    "collective_sequence",
    "dispatch_animation",
    "expert_load_bars",
    "map_table_figure",
    "sent_bars_figure",
    "split_figure",
    "tp_animation",
    "tp_blocks",
    "traffic_heatmap",
]
