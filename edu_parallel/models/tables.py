"""Alpha-beta predictions as tables (pandas DataFrames) for the lessons to show.

* :func:`prediction_table`: each algorithm's predicted time split into its latency and bandwidth
  terms, with the busbw it implies (Thakur, Rabenseifner & Gropp 2005; nccl-tests
  ``doc/PERFORMANCE.md``);
* :func:`choice_table`: what :func:`~edu_parallel.models.choose.choose_allreduce` picks per size,
  with every candidate's predicted time;
* :func:`nccl_choice_table`: NCCL's (algorithm, protocol) per size on one system, with every
  candidate's time (NCCL 2.30.7 ``src/graph/tuning.cc``, via
  :func:`~edu_parallel.models.nccl.selection.nccl_choose`); :func:`nccl_winner_table`: the winner
  per size on each system (errata E9: it changes with size and topology);
  :func:`nccl_applicability_table`: where each (algorithm, protocol) runs, and why not elsewhere;
* :func:`links_table`: each link preset beside its datasheet and the arithmetic from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..core.i18n import N_, _
from ..core.shown import shown
from .choose import choose_allreduce
from .cost import predict
from .links import ARITHMETIC, LINKS
from .nccl.constants import ALGOS, ARRIVED, PROTOS
from .nccl.selection import nccl_choose
from .nccl.tuning import NcclSystem


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
                    N_("bytes per rank"): size,
                    N_("algorithm"): algo,
                    N_("time (µs)"): p.time_s * 1e6,
                    N_("latency (µs)"): p.latency_s * 1e6,
                    N_("bandwidth (µs)"): p.bandwidth_s * 1e6,
                    N_("busbw (GB/s)"): p.busbw_gbps,
                }
            )
    return shown(pd.DataFrame(rows).set_index(["bytes per rank", "algorithm"]))


def choice_table(sizes: Sequence[float], world_size: int, topology_or_link: Any) -> pd.DataFrame:
    """One row per size: the chosen all-reduce and every candidate's predicted time (µs)."""
    rows = []
    for size in sizes:
        c = choose_allreduce(size, world_size, topology_or_link)
        rows.append(
            {
                N_("bytes per rank"): size,
                N_("chosen"): c.algo,
                **{f"{algo} (µs)": t * 1e6 for algo, t in c.times.items()},
            }
        )
    return shown(pd.DataFrame(rows).set_index("bytes per rank"))


def nccl_choice_table(coll: str, sizes: Sequence[float], system: NcclSystem) -> pd.DataFrame:
    """One row per size: NCCL's pick, its latency and bandwidth terms, every candidate's µs."""
    rows = []
    for size in sizes:
        c = nccl_choose(coll, size, system)
        best = c.times[(c.algo, c.proto)]
        rows.append(
            {
                N_("bytes"): size,
                N_("algorithm"): c.algo,
                N_("protocol"): c.proto,
                N_("time (µs)"): best.time_us,
                N_("latency (µs)"): best.latency_us,
                N_("bandwidth (µs)"): best.bandwidth_us,
                **{f"{a}/{p} (µs)": t.time_us for (a, p), t in c.times.items()},
            }
        )
    return shown(pd.DataFrame(rows).set_index("bytes"))


def nccl_winner_table(
    coll: str, sizes: Sequence[float], systems: Sequence[NcclSystem]
) -> pd.DataFrame:
    """Rows: sizes; columns: systems (by name); cells: NCCL's ``algorithm/protocol``."""
    columns = {}
    for s in systems:
        picks = [nccl_choose(coll, x, s) for x in sizes]
        columns[s.name or s.describe()] = [f"{c.algo}/{c.proto}" for c in picks]
    return shown(pd.DataFrame(columns, index=pd.Index(list(sizes), name=N_("bytes"))))


def nccl_applicability_table(coll: str, systems: Sequence[NcclSystem]) -> pd.DataFrame:
    """Rows: NCCL's (algorithm, protocol) pairs with the release each algorithm arrived in;
    columns: systems; cells: "runs" or why NCCL would not run it there."""
    rows = []
    picks = {s.name or s.describe(): nccl_choose(coll, 1 << 20, s) for s in systems}
    for algo in ALGOS:
        for proto in PROTOS:
            row = {N_("algorithm/protocol"): f"{algo}/{proto}", N_("since NCCL"): ARRIVED[algo]}
            for name, c in picks.items():
                row[name] = _("runs") if (algo, proto) in c.times else c.excluded[(algo, proto)]
            rows.append(row)
    return shown(pd.DataFrame(rows).set_index("algorithm/protocol"))


def links_table() -> pd.DataFrame:
    """One row per link preset: the datasheet figure, the arithmetic that turns it into bytes per
    second in one direction, the result, its source and what the model leaves out (each cell
    whole: a :class:`~edu_parallel.core.shown.ShownFrame` never cuts a citation to '...')."""
    rows = [
        {
            N_("preset"): name,
            N_("datasheet"): _(ARITHMETIC[name][0]),
            N_("arithmetic (B/s)"): ARITHMETIC[name][1],
            N_("GB/s each way"): round(link.bandwidth_Bps / 1e9, 3),
            N_("source"): _(link.source),
            N_("what the model leaves out"): _(link.note),
        }
        for name, link in LINKS.items()
    ]
    return shown(pd.DataFrame(rows).set_index("preset"))
