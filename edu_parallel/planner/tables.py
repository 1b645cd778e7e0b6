"""The planner's results as pandas DataFrames: ranked configurations, published comparison."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..core.i18n import N_
from ..core.shown import shown
from .estimate import CONFIG_KEYS, TERMS
from .planning import PlannerResult


def configs_table(
    result: PlannerResult,
    top: int | None = 10,
    all: bool = False,  # noqa: A002
    compact: bool = False,
) -> pd.DataFrame:
    """One row per configuration, best first: the degrees, memory (GB), step time, its terms (s),
    tokens/s, MFU, feasible and reason; ``compact``: the layout in one column, memory, step time
    and MFU only (fits a notebook's width)."""
    chosen = result.configs if all else result.feasible
    chosen = chosen[:top] if top is not None else chosen
    if compact:
        return _compact(chosen, all)
    rows = []
    for rank, c in enumerate(chosen, 1):
        row: dict[str, Any] = {"rank": rank, **{k: getattr(c, k) for k in CONFIG_KEYS}}
        mem = c.memory_bytes_per_gpu
        row["memory_gb"] = None if mem is None else mem / 1e9
        row["step_s"] = c.step_time_s
        for term in TERMS:
            row[f"{term}_s"] = None if c.time_terms is None else c.time_terms[term]
        row["tokens_per_s"] = c.tokens_per_s
        row["mfu"] = c.mfu
        row["feasible"] = c.feasible
        row["reason"] = c.reason
        rows.append(row)
    return pd.DataFrame(rows)


def _compact(chosen: list[Any], reasons: bool) -> pd.DataFrame:
    rows = []
    for rank, c in enumerate(chosen, 1):
        mem = c.memory_bytes_per_gpu
        row = {
            "rank": rank,
            "dp x tp x pp": f"{c.dp} x {c.tp} x {c.pp}" + (f" (ep {c.ep})" if c.ep > 1 else ""),
            N_("chunks"): c.chunks,
            "ZeRO": c.zero,
            "mb x M": f"{c.micro_batch} x {c.microbatches}",
            N_("recompute"): c.recompute,
            "GB/GPU": None if mem is None else round(mem / 1e9, 1),
            N_("step s"): None if c.step_time_s is None else round(c.step_time_s, 2),
            "MFU": None if c.mfu is None else f"{c.mfu:.1%}",
        }
        if reasons:
            row["reason"] = c.reason
        rows.append(row)
    return shown(pd.DataFrame(rows).set_index("rank"))


def published_table(comparisons: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per published layout (:func:`~edu_parallel.planner.published.compare_all`)."""
    rows = []
    for c in comparisons:
        choice = c["planner_choice"] or {}
        rows.append(
            {
                N_("run"): c["name"],
                "dp x tp x pp": f"{c['dp']} x {c['tp']} x {c['pp']}",
                "rank": f"{c['rank']} of {c['feasible_count']}" if c["feasible"] else "no fit",
                N_("planner's choice"): (
                    f"v{choice.get('chunks')} ZeRO-{choice.get('zero')} {choice.get('recompute')}"
                    if choice
                    else "-"
                ),
                "TFLOP/s/GPU": c["published_tflops_per_gpu"],
                N_("predicted"): round(c["predicted_tflops_per_gpu"]),
                "MFU": f"{c['published_fraction_of_peak']:.0%}",
                N_("predicted MFU"): f"{c['predicted_fraction_of_peak']:.0%}",
                N_("planner's best"): "{dp} x {tp} x {pp}".format(**c["best"]),
            }
        )
    return shown(pd.DataFrame(rows))
