"""The strategy map's numbers as tables (pandas DataFrames) for the lesson to show.

* :func:`formula_table`: each dense strategy's parameter and sent bytes per rank, read off its
  trace, beside :func:`~edu_parallel.strategy_map.formulas.formula_param_bytes` and
  :func:`~edu_parallel.strategy_map.formulas.formula_sent_bytes`;
* :func:`crossover_table`: DP's and TP's bytes across runs with more or fewer tokens per step,
  against the crossover ``T* = 4h + 2.5`` (Megatron-LM, Shoeybi et al. 2019, arXiv 1909.08053).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .formulas import formula_param_bytes, formula_sent_bytes
from .report import StrategyMapReport

DENSE = ("dp", "tp", "tp-sp", "pp")


def _sizes(report: StrategyMapReport) -> dict[str, int]:
    cfg = report.config
    return {"layers": cfg["layers"], "hidden": cfg["hidden"], "tokens": cfg["batch"] * cfg["seq"]}


def formula_table(report: StrategyMapReport) -> pd.DataFrame:
    """One row per (dense strategy, rank) of ``report``: trace and formula side by side."""
    n, sizes = report.world_size, _sizes(report)
    rows = []
    for s in (s for s in DENSE if s in report.runs):
        run = report.runs[s]
        params = formula_param_bytes(s, n, layers=sizes["layers"], hidden=sizes["hidden"])
        for r, row in enumerate(run.per_rank):
            rows.append(
                {
                    "strategy": run.name,
                    "rank": r,
                    "params (trace, B)": row["param_bytes"],
                    "params (formula, B)": params,
                    "sent (trace, B)": row["sent_bytes"],
                    "sent (formula, B)": formula_sent_bytes(s, n, r, **sizes),
                }
            )
    return pd.DataFrame(rows).set_index(["strategy", "rank"])


def crossover_table(reports: Sequence[StrategyMapReport]) -> pd.DataFrame:
    """Rank 0's bytes per step under DP and TP, one row per run (each with its own batch)."""
    rows = []
    for rep in reports:
        n, sizes = rep.world_size, _sizes(rep)
        dp, tp = (rep.runs[s].per_rank[0]["sent_bytes"] for s in ("dp", "tp"))
        rows.append(
            {
                "tokens T": sizes["tokens"],
                "T* = 4h + 2.5": 4 * sizes["hidden"] + 2.5,
                "DP sent per rank (B)": dp,
                "DP formula (B)": formula_sent_bytes("dp", n, 0, **sizes),
                "TP sent per rank (B)": tp,
                "TP formula (B)": formula_sent_bytes("tp", n, 0, **sizes),
                "TP/DP": tp / dp,
            }
        )
    return pd.DataFrame(rows).set_index("tokens T")
