"""Models: predictions that never start a process, each checked against the engine by a test.

* ``simulation.py``: a plan run in-process on virtual ranks (:func:`simulate`);
  ``fast_simulation.py``: the same for thousands of ranks from the plan's arrays.
* ``topology.py``: :class:`Link` (Hockney's alpha + S/bandwidth, datasheet presets in
  :data:`LINKS`) and :class:`Topology` (nodes of ranks, a fast and a slow link);
  ``retiming.py``: any trace retimed with a :class:`CostModel` (:func:`retime`).
* ``cost.py``: closed-form alpha-beta predictions of every algorithm (:func:`predict`);
  ``choose.py``: NCCL-style ring/tree choice and the crossover size.
* ``traffic.py``: all-reduce algorithms side by side, counted from traces (:func:`traffic_table`).
* ``tables.py``: predictions per size and algorithm as DataFrames (:func:`prediction_table`,
  :func:`choice_table`).

Imports ``core/`` and ``plans/``; never torch.
"""

from __future__ import annotations

from .choose import Choice, choose_allreduce, crossover_size
from .cost import ALLREDUCE_ALGOS, NAMES, OTHER_COLLECTIVES, Prediction, link_preset, predict
from .fast_simulation import SimSummary, simulate_fast
from .retiming import CostModel, collective_time, cost_model, per_rank_busy, retime
from .simulation import expected_result, plan_events, simulate
from .tables import choice_table, prediction_table
from .topology import LINKS, Link, Topology
from .traffic import format_traffic_table, simulated_runner, traffic_table

__all__ = [
    "ALLREDUCE_ALGOS",
    "LINKS",
    "NAMES",
    "OTHER_COLLECTIVES",
    "Choice",
    "CostModel",
    "Link",
    "Prediction",
    "SimSummary",
    "Topology",
    "choice_table",
    "choose_allreduce",
    "collective_time",
    "cost_model",
    "crossover_size",
    "expected_result",
    "format_traffic_table",
    "link_preset",
    "per_rank_busy",
    "plan_events",
    "predict",
    "prediction_table",
    "retime",
    "simulate",
    "simulate_fast",
    "simulated_runner",
    "traffic_table",
]
