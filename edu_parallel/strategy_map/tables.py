"""The strategy map's numbers as tables (pandas DataFrames) for the lesson to show.

* :func:`formula_table`: each dense strategy's parameter and sent bytes per rank, read off its
  trace, beside :func:`~edu_parallel.strategy_map.formulas.formula_param_bytes` and
  :func:`~edu_parallel.strategy_map.formulas.formula_sent_bytes`;
* :func:`crossover_table`: DP's and TP's bytes across runs with more or fewer tokens per step,
  against the crossover ``T* = 4h + 2.5`` (Megatron-LM, Shoeybi et al. 2019, arXiv 1909.08053);
* :func:`message_table`: messages per rank of each dense strategy, trace beside
  :func:`~edu_parallel.strategy_map.formulas.formula_messages`, across layers and microbatches;
* :func:`layer_crossover_table`: the same DP-against-TP question for lesson 12's full transformer
  layer with gradient accumulation, from its runs (:func:`edu_parallel.parallel_3d.run_3d`
  reports, read by attribute, so this folder does not import the one above it) beside
  :mod:`edu_parallel.strategy_map.crossover`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..core.i18n import N_
from ..core.shown import shown
from .crossover import crossover_tokens, step_sent_bytes, tp_allreduces
from .formulas import formula_messages, formula_param_bytes, formula_sent_bytes
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
                    N_("strategy"): run.name,
                    N_("rank"): r,
                    N_("params (trace, B)"): row["param_bytes"],
                    N_("params (formula, B)"): params,
                    N_("sent (trace, B)"): row["sent_bytes"],
                    N_("sent (formula, B)"): formula_sent_bytes(s, n, r, **sizes),
                }
            )
    return shown(pd.DataFrame(rows).set_index(["strategy", "rank"]))


def crossover_table(reports: Sequence[StrategyMapReport]) -> pd.DataFrame:
    """Rank 0's bytes per step under DP and TP, one row per run (each with its own batch)."""
    rows = []
    for rep in reports:
        n, sizes = rep.world_size, _sizes(rep)
        dp, tp = (rep.runs[s].per_rank[0]["sent_bytes"] for s in ("dp", "tp"))
        rows.append(
            {
                N_("tokens T"): sizes["tokens"],
                "T* = 4h + 2.5": crossover_tokens(sizes["hidden"], "mlp"),
                N_("DP sent per rank (B)"): dp,
                N_("DP formula (B)"): formula_sent_bytes("dp", n, 0, **sizes),
                N_("TP sent per rank (B)"): tp,
                N_("TP formula (B)"): formula_sent_bytes("tp", n, 0, **sizes),
                "TP/DP": tp / dp,
            }
        )
    return shown(pd.DataFrame(rows).set_index("tokens T"))


def message_table(reports: Sequence[StrategyMapReport]) -> pd.DataFrame:
    """Messages per rank (sends plus collective calls) of each dense strategy of each run, one row
    per (layers L, microbatches M, strategy), trace beside formula."""
    rows = []
    for rep in reports:
        n, c = rep.world_size, rep.config
        for s in (s for s in DENSE if s in rep.runs):
            run = rep.runs[s]
            rows.append(
                {
                    N_("layers L"): c["layers"],
                    N_("microbatches M"): rep.microbatches,
                    N_("strategy"): run.name,
                    N_("messages per rank (trace)"): run.column("messages"),
                    N_("formula"): [
                        formula_messages(s, n, r, layers=c["layers"], microbatches=rep.microbatches)
                        for r in range(n)
                    ],
                }
            )
    return shown(pd.DataFrame(rows).set_index(["layers L", "microbatches M", "strategy"]))


def layer_crossover_table(runs: Sequence[Any]) -> pd.DataFrame:
    """Rank 0's bytes per step of lesson 12's model under pure DP and pure TP, one row per number
    of accumulated microbatches k: the runs (``run_3d`` reports, ``dp = N`` or ``tp = N``) beside
    :func:`~edu_parallel.strategy_map.crossover.step_sent_bytes` and the crossover ``T*``."""
    by_k: dict[int, dict[str, Any]] = {}
    for rep in runs:
        kind = "tp" if rep.dims.tp > 1 else "dp"
        by_k.setdefault(rep.config.num_microbatches(rep.dims.pp), {})[kind] = rep
    rows = []
    for k, pair in sorted(by_k.items()):
        dp, tp = pair["dp"], pair["tp"]
        c, n = tp.config, tp.dims.tp
        tokens = c.batch // k * c.seq  # one microbatch, every TP rank (DP: 1/N on each rank)
        sizes = {"kind": "bare", "layers": c.layers, "hidden": c.hidden, "tokens": tokens}
        sizes.update(accumulation=k, input_grad=False)  # lesson 12's input is data
        dp_sent = dp.rows[0]["sent_bytes_by_group"]["dp"]
        tp_sent = tp.rows[0]["sent_bytes_by_group"]["tp"]
        rows.append(
            {
                N_("microbatches k"): k,
                N_("tokens per microbatch T"): tokens,
                N_("T* (crossover)"): crossover_tokens(
                    c.hidden, "bare", k, layers=c.layers, input_grad=False
                ),
                N_("DP sent (B)"): dp_sent,
                N_("DP formula (B)"): step_sent_bytes("dp", dp.dims.dp, **sizes),
                N_("TP all-reduces"): tp.rows[0]["messages_by_group"]["tp"],
                N_("formula"): tp_allreduces("bare", c.layers, k, input_grad=False),
                N_("TP sent (B)"): tp_sent,
                N_("TP formula (B)"): step_sent_bytes("tp", n, **sizes),
                "TP/DP": tp_sent / dp_sent,
            }
        )
    return shown(pd.DataFrame(rows).set_index("microbatches k"))
