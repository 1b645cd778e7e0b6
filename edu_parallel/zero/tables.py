"""ZeRO and FSDP2 runs as tables (pandas DataFrames): counted bytes beside the formulas.

* :func:`zero_table`: ZeRO stages 0-3, their model-state ledger against the ZeRO paper's formula
  (Rajbhandari et al. 2019, §3.1) and their bytes against DP's (§7.2);
* :func:`fsdp_table`: FSDP2 wrappings beside ZeRO-3 (PyTorch ``fully_shard`` docs, per-parameter
  sharding, pytorch/pytorch#114299; the units of FSDP1, Zhao et al. 2023, arXiv 2304.11277).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..core.errors import bad_value
from ..core.i18n import N_
from ..core.shown import shown
from ..memory import ZERO_STAGE_NAMES
from .fsdp_report import FsdpReport
from .report import ZeroReport


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
