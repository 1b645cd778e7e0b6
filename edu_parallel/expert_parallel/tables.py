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
                "skew": r.skew,
                "C": r.capacity_factor,
                "max/mean load": r.load_imbalance,
                "dropped": r.dropped_tokens,
                "bytes into rank 0": into[0],
                "bytes into each rank": into,
            }
        )
    return pd.DataFrame(rows).set_index(["skew", "C"])


def dispatch_table(reports: Sequence[MoEReport]) -> pd.DataFrame:
    """One row per run, indexed by (skew, dispatch, C): capacity, drops, bytes per exchange (mean
    over ranks) beside the padded formula, padding share, expert rows computed / with tokens."""
    rows = [
        {
            "skew": r.skew,
            "dispatch": r.dispatch,
            "C": r.capacity_factor,
            "capacity": r.capacity,
            "dropped": r.dropped_tokens,
            "sent per rank per exchange (B)": r.sent_bytes_per_exchange,
            "padded formula (B)": padded_dispatch_bytes(
                r.experts, r.capacity, r.hidden, r.world_size
            ),
            "padding": r.padding_fraction,
            "expert rows computed": r.expert_rows_computed,
            "expert rows with tokens": r.expert_rows_with_tokens,
        }
        for r in reports
    ]
    return pd.DataFrame(rows).set_index(["skew", "dispatch", "C"])


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
                "matrix total (B)": sum(map(sum, r.traffic_matrix_bytes)),
                "N·T·k·h·4 (B)": n * t * k * h * ITEMSIZE,
                "mean sent per rank (B)": sum(r.per_rank_sent_bytes) / n,
                "balanced formula (B)": balanced_dispatch_bytes(t, k, h, n),
                "expert bytes per rank": sum(
                    p.numel() * p.element_size() for p in shard.parameters()
                ),
            }
        )
    return pd.DataFrame(rows).set_index("E")
