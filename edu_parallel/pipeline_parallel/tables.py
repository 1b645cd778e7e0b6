"""Pipeline runs and timed schedules as tables (pandas DataFrames), measured beside the formulas.

* :func:`bubble_table`: each run's bubble, its executed order retimed, beside
  :func:`~edu_parallel.pipeline_parallel.timing.bubble_formula` in both conventions: share of the
  total time (GPipe, Huang et al. 2019, §2.3) and relative to the ideal time (Megatron-LM,
  Narayanan et al. 2021, §2.2); with the peak of stashed microbatches per stage;
* :func:`comm_table`: how much point-to-point transfer time a schedule hides behind compute.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..core.i18n import N_
from ..core.shown import shown
from .report import PipelineReport
from .schedule import Schedule
from .timing import time_schedule


def bubble_table(reports: Sequence[PipelineReport]) -> pd.DataFrame:
    """One row per run, indexed by (schedule, M): P, v, the bubble modelled and by formula.

    "modelled": the idle share of the schedule as it executed (each rank's order read back from the
    trace), retimed with the run's stage times (``bubble_fraction_retimed``): a model of the
    executed order, not a wall-clock measurement."""
    rows = []
    for r in reports:
        share = r.bubble_fraction_retimed
        rows.append(
            {
                N_("schedule"): r.schedule,
                "M": r.microbatches,
                "P": r.stages,
                "v": r.chunks,
                N_("matches reference"): r.matches_reference,
                N_("modelled (share)"): share,
                N_("formula (share)"): r.bubble_fraction_formula,
                N_("modelled/(1-modelled)"): share / (1 - share),
                N_("formula (bubble/ideal)"): r.bubble_relative_to_ideal_formula,
                N_("peak stashed per stage"): r.peak_activations_per_stage,
            }
        )
    return shown(pd.DataFrame(rows).set_index(["schedule", "M"]))


def comm_table(
    schedule: Schedule, t_f: float, t_b: float, t_comms: Sequence[float]
) -> pd.DataFrame:
    """One row per transfer time ``t_comm`` (in units of ``t_f`` when ``t_f`` = 1): the
    messages (each microbatch crosses S - 1 stage boundaries forward and again backward), their
    total transfer time, and how much longer the timed run gets than with ``t_comm`` = 0."""
    messages = 2 * (schedule.num_stages - 1) * schedule.num_microbatches
    base = time_schedule(schedule, t_f, t_b).makespan
    rows = [
        {
            "t_comm": t_comm,
            N_("messages"): messages,
            N_("transfer time"): messages * t_comm,
            N_("run longer by"): time_schedule(schedule, t_f, t_b, t_comm=t_comm).makespan - base,
        }
        for t_comm in t_comms
    ]
    return shown(pd.DataFrame(rows).set_index("t_comm"))
