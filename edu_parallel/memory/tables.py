"""Memory estimates as a table (a pandas DataFrame): bytes per GPU and the formula behind each.

The estimates come from :func:`~edu_parallel.memory.model_states.model_state_bytes` (ZeRO,
Rajbhandari et al. 2019, §3.1 and §5).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .model_states import GB, MemoryEstimate


def estimates_table(estimates: Mapping[str, MemoryEstimate]) -> pd.DataFrame:
    """One row per named estimate: GB per GPU (10^9 bytes), the bytes, and the formula."""
    rows = [
        {
            "setup": name,
            "GB per GPU": e.bytes_per_gpu / GB,
            "bytes per GPU": e.bytes_per_gpu,
            "formula": e.formula,
        }
        for name, e in estimates.items()
    ]
    return pd.DataFrame(rows).set_index("setup")
