"""The roofline's numbers as tables (pandas DataFrames) for lesson 11 to show; pure Python.

* :func:`sweep_table`: the measured sweep, point by point, measurement beside formula;
* :func:`strategy_time_table`: every strategy's step on this machine in time, from a strategy map
  run's bytes and messages and a ZeRO-3 run's (both read by attribute: this module imports no
  runner), with this machine's ``F``, ``α``, ``B``;
* :func:`gpu_table`: the same strategies on H100s, in a node and across nodes, modelled;
* :func:`crossover_time_table`, :func:`message_time_table`: lesson 01's byte sweeps (TP against DP
  across batches, messages across layers and microbatches) in time, on this machine and on an
  H100 node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..core.i18n import N_, _
from ..core.shown import shown
from ..strategy_map.tables import crossover_table, message_table
from .formulas import step_time
from .gpu import IN_NODE, PLACE_NAMES, gpu_rows
from .strategies import row_time, strategy_flops, transfers

MS = 1e3
STRATEGY_LABELS = {"zero3": "ZeRO-3", "dp": "DP", "tp": "TP", "tp-sp": "TP+SP", "pp": "PP"}
BOUND = {"communication": N_("communication"), "compute": N_("compute")}


def sweep_table(report: Any) -> pd.DataFrame:
    """One row per point of a :class:`~edu_parallel.roofline.sweep.SweepReport`."""
    rows = []
    for i, t in enumerate(report.tokens):
        level, compute = report.comm_level_s, report.compute_s[i]
        rows.append(
            {
                N_("microbatches k"): report.config.accumulation[i],
                N_("tokens per rank"): t,
                N_("matmuls, measured (ms)"): compute * MS,
                N_("W / F, formula (ms)"): report.formula_compute_s[i] * MS,
                N_("other compute, measured (ms)"): report.other_s[i] * MS,
                N_("all-reduce, measured (ms)"): report.comm_s[i] * MS,
                N_("all-reduce, median of the points (ms)"): level * MS,
                N_("all-reduce, formula (ms)"): report.formula_comm * MS,
                N_("bound (measured)"): _(BOUND["communication" if level > compute else "compute"]),
            }
        )
    return shown(pd.DataFrame(rows).set_index("microbatches k"))


def _map_rows(report: Any) -> list[tuple[str, float, float, int]]:
    """(name, FLOPs, bytes, messages) of rank 0 of each strategy of a strategy map report."""
    n = report.world_size
    out = []
    for s, run in report.runs.items():
        row = run.per_rank[0]
        flops = strategy_flops(s, report.config, n)
        out.append((run.name, flops, row["sent_bytes"], transfers(row["ops"], n)))
    return out


def _zero_row(zero: Any, rows: int) -> tuple[str, float, float, int]:
    """ZeRO-3's rank 0: the task MLP's FLOPs on its ``rows``, its counted sends per step."""
    flops = 6 * zero.psi * rows
    messages = zero.trace.message_counts()[0] // zero.steps
    return "ZeRO-3", flops, zero.per_rank_sent_bytes[0], messages


def strategy_time_table(
    report: Any, zero: Any, flops_per_s: float, link: Any, microbatch_rows: int
) -> pd.DataFrame:
    """Rank 0's step of each strategy in time on this machine: ``W / F`` and ``m α + D / B``
    (modelled, with the measured ``F`` and the fitted ``α``, ``B``)."""
    rows = []
    for name, flops, sent, messages in [*_map_rows(report), _zero_row(zero, microbatch_rows)]:
        t = row_time(flops, sent, messages, flops_per_s, link)
        rows.append(
            {
                N_("strategy"): name,
                N_("FLOPs per rank"): flops,
                N_("bytes sent"): sent,
                N_("messages"): messages,
                N_("FLOPs per byte"): flops / sent if sent else float("inf"),
                N_("compute, modelled (ms)"): t.compute_s * MS,
                N_("communication, modelled (ms)"): t.comm_s * MS,
                N_("bound"): _(BOUND[t.bound]),
            }
        )
    return shown(pd.DataFrame(rows).set_index("strategy"))


def gpu_table(hidden: int = 8192, tokens: int = 65536) -> pd.DataFrame:
    """Every strategy on 8 H100s, in a node and across nodes (modelled, see ``gpu.py``)."""
    rows = [
        {
            N_("strategy"): STRATEGY_LABELS.get(r.strategy, r.strategy.upper()),
            N_("placed"): _(PLACE_NAMES[r.place]),
            N_("FLOPs per byte"): r.intensity,
            N_("F / B of the link"): r.critical,
            N_("compute, modelled (ms)"): r.time.compute_s * MS,
            N_("communication, modelled (ms)"): r.time.comm_s * MS,
            N_("communication share"): r.time.comm_share,
            N_("bound"): _(BOUND[r.time.bound]),
        }
        for r in gpu_rows(hidden, tokens)
    ]
    return shown(pd.DataFrame(rows).set_index(["strategy", "placed"]))


def _comm_s(sent: float, messages: int, link: Any) -> float:
    return step_time(0, sent, messages, 1.0, link.alpha_s, link.bandwidth_Bps).comm_s


def crossover_time_table(reports: Sequence[Any], link: Any) -> pd.DataFrame:
    """Lesson 01's TP-against-DP byte sweep (:func:`~edu_parallel.strategy_map.tables.
    crossover_table`) with each strategy's communication in time: on this machine (``link``)
    and on an H100 node (modelled, nccl-tests busbw)."""
    table = pd.DataFrame(crossover_table(reports))
    times: dict[str, list[float]] = {k: [] for k in ("dp", "tp", "dp_gpu", "tp_gpu")}
    for rep in reports:
        n = rep.world_size
        for s in ("dp", "tp"):
            row = rep.runs[s].per_rank[0]
            sent, messages = row["sent_bytes"], transfers(row["ops"], n)
            times[s].append(_comm_s(sent, messages, link) * MS)
            times[f"{s}_gpu"].append(_comm_s(sent / 2, messages, IN_NODE) * 1e6)  # bf16
    table[N_("DP all-reduce here (ms)")] = times["dp"]
    table[N_("TP all-reduces here (ms)")] = times["tp"]
    table[N_("TP/DP in time here")] = [t / d for t, d in zip(times["tp"], times["dp"], strict=True)]
    table[N_("TP/DP on H100 NVLink, modelled")] = [
        t / d for t, d in zip(times["tp_gpu"], times["dp_gpu"], strict=True)
    ]
    return shown(table)


def message_time_table(reports: Sequence[Any], link: Any) -> pd.DataFrame:
    """Lesson 01's messages per rank (:func:`~edu_parallel.strategy_map.tables.message_table`)
    with what their latency costs per step: ring messages x α, here and on NVLink (modelled)."""
    table = pd.DataFrame(message_table(reports))
    here, gpu = [], []
    for rep in reports:
        for s in ("dp", "tp", "tp-sp", "pp"):
            if s in rep.runs:
                m = transfers(rep.runs[s].per_rank[0]["ops"], rep.world_size)
                here.append(m * link.alpha_s * MS)
                gpu.append(m * IN_NODE.alpha_s * 1e6)
    table[N_("rank 0's latency here (ms)")] = here
    table[N_("on NVLink, modelled (µs)")] = gpu
    return shown(table)
