"""DDP runs as a table (a pandas DataFrame): counted bytes beside the formulas.

* :func:`ddp_sync_table`: DDP's bytes and messages per step under each sync mode, against
  ``2(N-1)/N Psi 4`` and ``2(N-1)`` messages per bucket (Li et al. 2020, arXiv 2006.15704).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..core.i18n import N_
from ..core.shown import shown
from .report import DdpReport


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
