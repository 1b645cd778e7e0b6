"""Models: predictions that never start a process, each checked against the engine by a test.

* ``simulation.py``: a plan run in-process on virtual ranks (:func:`simulate`);
  ``fast_simulation.py``: the same for thousands of ranks from the plan's arrays.
* ``topology.py``: :class:`Link` (Hockney's alpha + S/bandwidth, datasheet presets in
  :data:`LINKS`) and :class:`Topology` (nodes of ranks, a fast link inside, NICs between);
  ``retiming.py``: any trace retimed with a :class:`CostModel` (:func:`retime`).
* ``cost.py``: closed-form alpha-beta predictions of every algorithm (:func:`predict`);
  ``choose.py``: NCCL-style ring/tree choice and the crossover size.
* ``links.py``: the link presets with their datasheets; ``interconnects.py``: rail-optimised
  fabrics (:data:`FABRICS`) and one trace retimed on every interconnect
  (:func:`interconnect_table`).
* ``nccl_tuning.py``: NCCL 2.30.7's own tuning model (:class:`NcclSystem`, :func:`nccl_time`;
  constants in ``nccl_constants.py``, where each pair runs in ``nccl_rules.py``);
  ``nccl_select.py``: its (algorithm, protocol) choice and ``NCCL_ALGO``/``NCCL_PROTO``
  (:func:`nccl_choose`); ``nccl_systems.py``: named clusters (:data:`NCCL_SYSTEMS`).
* ``published.py``: NCCL's bus bandwidth on real systems as published, with citations
  (:data:`PUBLISHED_BUSBW`, :func:`published_busbw_table`), to sit beside a modelled figure.
* ``traffic.py``: all-reduce algorithms side by side, counted from traces (:func:`traffic_table`).
* ``tables.py``: predictions per size and algorithm as DataFrames (:func:`prediction_table`,
  :func:`choice_table`, NCCL's :func:`nccl_choice_table` and :func:`nccl_winner_table`).

Imports ``core/`` and ``plans/``; never torch.
"""

from __future__ import annotations

from .choose import Choice, choose_allreduce, crossover_size
from .cost import ALLREDUCE_ALGOS, NAMES, OTHER_COLLECTIVES, Prediction, link_preset, predict
from .fast_simulation import SimSummary, simulate_fast
from .interconnects import FABRICS, fabric, interconnect_table, rail_of, rail_optimized
from .nccl.knobs import KNOBS, nccl_knobs_table
from .nccl.selection import NcclChoice, nccl_choose
from .nccl.systems import NCCL_SYSTEMS, nccl_system
from .nccl.tuning import NcclSystem, nccl_entry, nccl_time
from .published import PUBLISHED_BUSBW, PublishedBusbw, published_busbw_table
from .retiming import CostModel, collective_time, cost_model, per_rank_busy, retime
from .simulation import expected_result, plan_events, simulate
from .tables import choice_table, nccl_choice_table, nccl_winner_table, prediction_table
from .topology import LINKS, Link, Topology
from .traffic import format_traffic_table, simulated_runner, traffic_table

__all__ = [
    "ALLREDUCE_ALGOS",
    "FABRICS",
    "LINKS",
    "NCCL_SYSTEMS",
    "PUBLISHED_BUSBW",
    "NAMES",
    "OTHER_COLLECTIVES",
    "Choice",
    "CostModel",
    "Link",
    "NcclChoice",
    "NcclSystem",
    "PublishedBusbw",
    "Prediction",
    "SimSummary",
    "Topology",
    "choice_table",
    "choose_allreduce",
    "collective_time",
    "cost_model",
    "crossover_size",
    "expected_result",
    "fabric",
    "interconnect_table",
    "format_traffic_table",
    "link_preset",
    "nccl_choice_table",
    "nccl_knobs_table",
    "KNOBS",
    "nccl_choose",
    "nccl_entry",
    "nccl_system",
    "nccl_time",
    "nccl_winner_table",
    "per_rank_busy",
    "plan_events",
    "predict",
    "rail_of",
    "rail_optimized",
    "prediction_table",
    "published_busbw_table",
    "retime",
    "simulate",
    "simulate_fast",
    "simulated_runner",
    "traffic_table",
]
