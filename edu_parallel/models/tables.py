"""Alpha-beta predictions as tables (pandas DataFrames) for the lessons to show.

* :func:`prediction_table`: each algorithm's predicted time split into its latency and bandwidth
  terms, with the busbw it implies (Thakur, Rabenseifner & Gropp 2005; nccl-tests
  ``doc/PERFORMANCE.md``);
* :func:`choice_table`: what :func:`~edu_parallel.models.choose.choose_allreduce` picks per size,
  with every candidate's predicted time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from .choose import choose_allreduce
from .cost import predict


def prediction_table(
    algos: Sequence[str], world_size: int, sizes: Sequence[float], link: Any
) -> pd.DataFrame:
    """One row per (size, algorithm): time = latency + bandwidth (+ compute) in µs, and busbw."""
    rows = []
    for size in sizes:
        for algo in algos:
            p = predict(algo, world_size, size, link)
            rows.append(
                {
                    "bytes per rank": size,
                    "algorithm": algo,
                    "time (µs)": p.time_s * 1e6,
                    "latency (µs)": p.latency_s * 1e6,
                    "bandwidth (µs)": p.bandwidth_s * 1e6,
                    "busbw (GB/s)": p.busbw_gbps,
                }
            )
    return pd.DataFrame(rows).set_index(["bytes per rank", "algorithm"])


def choice_table(sizes: Sequence[float], world_size: int, topology_or_link: Any) -> pd.DataFrame:
    """One row per size: the chosen all-reduce and every candidate's predicted time (µs)."""
    rows = []
    for size in sizes:
        c = choose_allreduce(size, world_size, topology_or_link)
        rows.append(
            {
                "bytes per rank": size,
                "chosen": c.algo,
                **{f"{algo} (µs)": t * 1e6 for algo, t in c.times.items()},
            }
        )
    return pd.DataFrame(rows).set_index("bytes per rank")
