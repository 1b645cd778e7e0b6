"""Data-parallel runs as tables (pandas DataFrames): counted bytes beside the formulas.

* :func:`ddp_sync_table`: DDP's bytes and messages per step under each sync mode, against
  ``2(N-1)/N Psi 4`` and ``2(N-1)`` messages per bucket (Li et al. 2020, arXiv 2006.15704);
* :func:`zero_table`: ZeRO stages 0-3, their model-state ledger against the ZeRO paper's formula
  (Rajbhandari et al. 2019, §3.1) and their bytes against DP's (§7.2);
* :func:`fsdp_table`: FSDP2 wrappings beside ZeRO-3 (PyTorch ``fully_shard`` docs, per-parameter
  sharding, pytorch/pytorch#114299; the units of FSDP1, Zhao et al. 2023, arXiv 2304.11277);
* :func:`straggler_table`: what a straggler costs synchronous regimes, gradients applied beside
  ``S (W - b)`` (backup workers, Chen et al. 2016, arXiv 1604.00981).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ..core.errors import bad_value
from ..core.i18n import N_
from ..core.shown import shown
from ..memory import ZERO_STAGE_NAMES
from .async_report import Comparison
from .ddp_report import DdpReport
from .fsdp_report import FsdpReport
from .zero_report import ZeroReport


def ddp_sync_table(runs: Mapping[str, DdpReport]) -> pd.DataFrame:
    """One row per sync mode: rank 0's bytes and messages per step, each beside its formula."""
    rows = [
        {
            N_("sync"): sync,
            N_("sent per rank per step (B)"): r.per_rank_sent_bytes[0],
            "2(N-1)/N·Ψ·4 (B)": r.config.bytes_per_step(),
            "buckets": len(r.buckets),
            N_("messages per step"): r.messages_per_step,
            N_("2(N-1) × buckets"): r.config.messages_per_step(),
        }
        for sync, r in runs.items()
    ]
    return shown(pd.DataFrame(rows).set_index("sync"), messages={"buckets": N_("buckets (count)")})


def zero_table(reports: Mapping[int, ZeroReport]) -> pd.DataFrame:
    """One row per ZeRO stage: bitwise check, model-state ledger vs formula, bytes vs DP."""
    rows = [
        {
            N_("stage"): ZERO_STAGE_NAMES[s],
            N_("= one process, bitwise"): r.bitwise_equal_reference,
            N_("model-state bytes per rank (ledger)"): list(r.per_rank_peak_model_state_bytes),
            N_("formula (B)"): r.formula_model_state_bytes,
            N_("sent per rank per step (B)"): r.per_rank_sent_bytes[0],
            N_("vs DP"): r.comm_ratio_vs_dp,
        }
        for s, r in reports.items()
    ]
    return shown(pd.DataFrame(rows).set_index("stage"))


def fsdp_table(reports: Mapping[str, FsdpReport]) -> pd.DataFrame:
    """ZeRO-3 (from the first report; every run repeats it on the same cluster), then one row per
    FSDP run: same parameters as ZeRO-3, collectives, bytes (busiest rank), peak gathered bytes."""
    if not reports:
        raise bad_value("reports", reports, "a non-empty mapping name -> FsdpReport")
    first = next(iter(reports.values()))
    rows = [
        {
            N_("run"): "ZeRO-3",
            N_("params = ZeRO-3"): None,
            N_("collectives per step"): first.collectives_per_step["zero3"],
            N_("sent per rank per step (B)"): max(first.zero3_per_rank_sent_bytes),
            N_("vs DP"): first.zero3_comm_ratio_vs_dp,
            N_("peak gathered (B)"): max(first.zero3_per_rank_peak_gathered_bytes),
        }
    ]
    rows += [
        {
            N_("run"): name,
            N_("params = ZeRO-3"): r.matches_zero3,
            N_("collectives per step"): r.collectives_per_step["fsdp"],
            N_("sent per rank per step (B)"): max(r.per_rank_sent_bytes),
            N_("vs DP"): r.comm_ratio_vs_dp,
            N_("peak gathered (B)"): max(r.per_rank_peak_gathered_bytes),
        }
        for name, r in reports.items()
    ]
    return shown(pd.DataFrame(rows).set_index("run"))


def straggler_table(
    comparison: Comparison, calm: str, straggler: str, modes: Sequence[str] = ("sync", "backup")
) -> pd.DataFrame:
    """One row per regime of ``modes``: gradients applied without a straggler beside
    ``S x kept per step`` (``W``, or ``W - b`` with backup workers), dropped ones, staleness, and
    the wall time it loses with ``straggler`` beside the delays that straggler slept."""
    rows = []
    for mode in modes:
        r, slow = comparison.reports[(mode, calm)], comparison.reports[(mode, straggler)]
        rows.append(
            {
                N_("regime"): mode,
                N_("applied"): r.applied,
                N_("S x kept per step"): r.config.steps * r.config.kept_per_step,
                N_("dropped"): r.dropped,
                N_("staleness"): r.staleness_histogram,
                f"wall, {calm} (s)": r.wall_s,
                f"wall, {straggler} (s)": slow.wall_s,
                N_("slower by (s)"): slow.wall_s - r.wall_s,
                N_("straggler delays (s)"): sum(
                    e.duration for e in slow.trace.events if e.op == "delay"
                ),
            }
        )
    return shown(pd.DataFrame(rows).set_index("regime"))
