"""Mixture-of-experts runs as tables (pandas DataFrames): traffic and drops beside the formulas.

* :func:`skew_table`: load imbalance, drops and the bytes each rank receives, per (skew, C);
* :func:`dispatch_table`: variable against padded dispatch, bytes beside
  :func:`~edu_parallel.expert_parallel.formulas.padded_dispatch_bytes` (GShard, Lepikhin et al.
  2020, §2.2; Switch, Fedus et al. 2021, §2.2);
* :func:`experts_table`: traffic against the number of experts, beside
  :func:`~edu_parallel.expert_parallel.formulas.balanced_dispatch_bytes`, and the expert
  parameter bytes one rank stores.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..core.i18n import N_
from ..core.shown import shown
from .experts import init_moe
from .formulas import ITEMSIZE, balanced_dispatch_bytes, padded_dispatch_bytes
from .report import MoEReport


def bytes_into(report: MoEReport) -> list[int]:
    """Dispatch bytes each rank receives: the columns of the traffic matrix summed."""
    matrix = report.traffic_matrix_bytes
    return [sum(row[d] for row in matrix) for d in range(report.world_size)]


def skew_table(reports: Sequence[MoEReport]) -> pd.DataFrame:
    """One row per run, indexed by (skew, C): max/mean load, drops, bytes into each rank."""
    rows = []
    for r in reports:
        into = bytes_into(r)
        rows.append(
            {
                N_("skew"): r.skew,
                "C": r.capacity_factor,
                N_("max/mean load"): r.load_imbalance,
                N_("dropped"): r.dropped_tokens,
                N_("bytes into rank 0"): into[0],
                N_("bytes into each rank"): into,
            }
        )
    return shown(pd.DataFrame(rows).set_index(["skew", "C"]))


def dispatch_table(reports: Sequence[MoEReport]) -> pd.DataFrame:
    """One row per run, indexed by (skew, dispatch, C): capacity, drops, bytes per exchange (mean
    over ranks) beside the padded formula, padding share, expert rows computed / with tokens."""
    rows = [
        {
            N_("skew"): r.skew,
            N_("dispatch"): r.dispatch,
            "C": r.capacity_factor,
            N_("capacity"): r.capacity,
            N_("dropped"): r.dropped_tokens,
            N_("sent per rank per exchange (B)"): r.sent_bytes_per_exchange,
            N_("padded formula (B)"): padded_dispatch_bytes(
                r.experts, r.capacity, r.hidden, r.world_size
            ),
            N_("padding"): r.padding_fraction,
            N_("expert rows computed"): r.expert_rows_computed,
            N_("expert rows with tokens"): r.expert_rows_with_tokens,
        }
        for r in reports
    ]
    return shown(pd.DataFrame(rows).set_index(["skew", "dispatch", "C"]))


def experts_table(reports: Sequence[MoEReport]) -> pd.DataFrame:
    """One row per run, indexed by E: the whole traffic matrix beside ``N T k h 4``, the mean
    bytes a rank sends beside the balanced formula, and rank 0's expert parameter bytes."""
    rows = []
    for r in reports:
        n, t, k, h = r.world_size, r.tokens_per_rank, r.top_k, r.hidden
        shard = init_moe(r.experts, h).experts.shard(0, n)
        rows.append(
            {
                "E": r.experts,
                N_("matrix total (B)"): sum(map(sum, r.traffic_matrix_bytes)),
                "N·T·k·h·4 (B)": n * t * k * h * ITEMSIZE,
                N_("mean sent per rank (B)"): sum(r.per_rank_sent_bytes) / n,
                N_("balanced formula (B)"): balanced_dispatch_bytes(t, k, h, n),
                N_("expert bytes per rank"): sum(
                    p.numel() * p.element_size() for p in shard.parameters()
                ),
            }
        )
    return shown(pd.DataFrame(rows).set_index("E"))
