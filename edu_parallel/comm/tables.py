"""Collective and all-reduce runs as tables (pandas DataFrames): counted bytes beside formulas.

* :func:`builtin_table`: each collective checked against its torch builtin;
* :func:`volume_table`: bytes each rank sent (counted from the trace) beside
  :func:`~edu_parallel.plans.collectives.volume_formula` and the nccl-tests bus factor
  (nccl-tests ``doc/PERFORMANCE.md``);
* :func:`ring_volume_table`, :func:`phase_table`: ring all-reduce bytes per phase and in all,
  against ``(N-1)/N D`` and ``2(N-1)/N D`` (Patarasuk & Yuan 2009);
* :func:`bandwidth_table`: algbw and busbw of runs of several sizes;
* :func:`calibration_table`: measured times beside the alpha-beta model fitted on this machine;
* :func:`topology_table`: hierarchical and flat all-reduce traces retimed on a two-level
  topology, beside the closed-form prediction;
* :func:`link_class_table`: bytes each rank of a hierarchical run sent inside its node and across
  nodes, counted, beside ``2(g-1)/g·S`` and ``2(K-1)/K·S/g``;
* :func:`nics_table`: the predicted all-reduce on one cluster shape with 1, 2, ... NICs per node
  (:func:`~edu_parallel.models.predict`: one ring per NIC, NCCL's channels).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from ..core.i18n import N_
from ..core.metrics import bus_factor
from ..core.shown import shown
from ..models import CostModel, Link, Topology, predict, retime
from ..plans import ring_sent_bytes_formula, volume_formula
from .allreduce import AllReduceReport
from .collective import CollectiveReport
from .hierarchical import HierarchicalReport


def builtin_table(reports: Mapping[str, CollectiveReport]) -> pd.DataFrame:
    """One row per collective: does the plan's result equal the torch builtin's?"""
    rows = [
        {
            N_("collective"): name,
            N_("matches torch builtin"): r.matches_builtin,
            N_("reference"): r.reference,
        }
        for name, r in reports.items()
    ]
    return shown(pd.DataFrame(rows).set_index("collective"))


def volume_table(reports: Mapping[str, CollectiveReport]) -> pd.DataFrame:
    """Bytes each rank sent (counted), the formula's per rank (rounded), and the bus factor."""
    rows = []
    for name, r in reports.items():
        formula = volume_formula(name, r.world_size, r.nbytes, r.root)["sent"]
        rows.append(
            {
                N_("collective"): name,
                N_("sent per rank (counted, B)"): list(r.per_rank_sent_bytes),
                N_("sent per rank (formula, B)"): [round(x) for x in formula],
                N_("busbw factor"): r.bus_factor,
            }
        )
    return shown(pd.DataFrame(rows).set_index("collective"))


def ring_volume_table(reports: Sequence[AllReduceReport]) -> pd.DataFrame:
    """Ring all-reduce runs on different N: reduce-scatter and total bytes per rank vs formula."""
    rows = []
    for r in reports:
        f = ring_sent_bytes_formula(r.world_size, r.nbytes)
        rows.append(
            {
                "N": r.world_size,
                N_("reduce-scatter sent (counted, B)"): list(
                    r.per_phase_sent_bytes["reduce-scatter"]
                ),
                "(N-1)/N·D (B)": f["reduce-scatter"],
                N_("total sent (counted, B)"): list(r.per_rank_sent_bytes),
                "2(N-1)/N·D (B)": f["total"],
            }
        )
    return shown(pd.DataFrame(rows).set_index("N"))


def phase_table(report: AllReduceReport, rank: int = 0) -> pd.DataFrame:
    """One rank's bytes sent and received per ring phase and in all, beside the formulas and the
    outline's per-phase figure (errata E1)."""
    n, d = report.world_size, report.nbytes
    sent = report.trace.sent_bytes(per_phase=True)
    recv = report.trace.recv_bytes(per_phase=True)
    rows = [
        {
            N_("phase"): phase,
            N_("sent (B)"): sent[phase][rank],
            N_("received (B)"): recv[phase][rank],
            N_("formula (B)"): (n - 1) / n * d,
            N_("outline's 2(N-1)/N·D (B)"): 2 * (n - 1) / n * d,
        }
        for phase in ("reduce-scatter", "all-gather")
    ]
    rows.append(
        {
            N_("phase"): N_("both phases"),
            N_("sent (B)"): report.per_rank_sent_bytes[rank],
            N_("received (B)"): report.per_rank_recv_bytes[rank],
            N_("formula (B)"): 2 * (n - 1) / n * d,
            N_("outline's 2(N-1)/N·D (B)"): 2 * (n - 1) / n * d,
        }
    )
    return shown(pd.DataFrame(rows).set_index("phase"), values=(N_("both phases"),))


def bandwidth_table(reports: Sequence[AllReduceReport]) -> pd.DataFrame:
    """Time, algbw and busbw per all-reduce run; busbw/algbw beside the factor 2(N-1)/N."""
    rows = [
        {
            N_("bytes per rank"): r.nbytes,
            N_("time (ms)"): r.time_s * 1e3,
            N_("algbw (GB/s)"): r.algbw_gbps,
            N_("busbw (GB/s)"): r.busbw_gbps,
            "busbw / algbw": r.busbw_gbps / r.algbw_gbps,
            "2(N-1)/N": bus_factor("all_reduce", r.world_size),
        }
        for r in reports
    ]
    return shown(pd.DataFrame(rows).set_index("bytes per rank"))


def calibration_table(reports: Sequence[AllReduceReport], link: Any) -> pd.DataFrame:
    """Measured all-reduce times beside :func:`~edu_parallel.models.predict` on ``link`` (a fitted
    :func:`~edu_parallel.comm.calibrate` result or a preset name)."""
    rows = []
    for r in reports:
        predicted = predict(r.algo, r.world_size, r.nbytes, link).time_s
        rows.append(
            {
                N_("bytes per rank"): r.nbytes,
                N_("measured (ms)"): r.time_s * 1e3,
                N_("alpha-beta model (ms)"): predicted * 1e3,
                N_("measured / model"): r.time_s / predicted,
            }
        )
    return shown(pd.DataFrame(rows).set_index("bytes per rank"))


def topology_table(
    hierarchical: HierarchicalReport, flat: AllReduceReport, topology: Topology
) -> pd.DataFrame:
    """The two runs' traces retimed on ``topology`` beside :func:`~edu_parallel.models.predict`.

    The flat run is one ring: it crosses each node boundary on one NIC, so its model is the ring
    on one channel (``nics_per_node=1``), whatever ``topology.nics_per_node`` is."""
    model = CostModel(topology.intra, topology=topology)
    n = flat.world_size
    one_ring = replace(topology, nics_per_node=1)
    rows = [
        {
            N_("algorithm"): name,
            N_("matches dist.all_reduce"): r.matches_builtin,
            N_("trace retimed (µs)"): retime(r.trace, model).duration * 1e6,
            N_("alpha-beta model (µs)"): predict(algo, n, r.nbytes, topo).time_s * 1e6,
        }
        for name, algo, r, topo in (
            (N_("hierarchical"), "hierarchical", hierarchical, topology),
            (N_("flat ring"), "ring", flat, one_ring),
        )
    ]
    return shown(
        pd.DataFrame(rows).set_index("algorithm"), values=(N_("hierarchical"), N_("flat ring"))
    )


def link_class_table(report: HierarchicalReport) -> pd.DataFrame:
    """Per rank of a hierarchical run: bytes sent inside its node and across nodes (counted from
    the trace) beside :func:`~edu_parallel.plans.hierarchical.hierarchical_bytes_formula`."""
    g = report.gpus_per_node
    rows = [
        {
            "rank": r,
            N_("node"): r // g,
            N_("intra sent (counted, B)"): report.per_rank_intra_bytes[r],
            "2(g-1)/g·S (B)": report.formula_bytes["intra"],
            N_("inter sent (counted, B)"): report.per_rank_inter_bytes[r],
            "2(K-1)/K·S/g (B)": report.formula_bytes["inter"],
        }
        for r in range(len(report.per_rank_intra_bytes))
    ]
    return shown(pd.DataFrame(rows).set_index("rank"))


def nics_table(
    nodes: int,
    gpus_per_node: int,
    intra: Link,
    inter: Link,
    nbytes: float,
    nics: Iterable[int] | None = None,
) -> pd.DataFrame:
    """Predicted ring (one channel per NIC) and hierarchical all-reduce of ``nbytes`` per rank on
    ``nodes x gpus_per_node`` ranks for each NIC count (default: every divisor of the GPUs)."""
    g = gpus_per_node
    counts = [d for d in range(1, g + 1) if g % d == 0] if nics is None else list(nics)
    rows = []
    for c in counts:
        topo = Topology(nodes, g, intra, inter, c)
        for algo in ("ring", "hierarchical"):
            p = predict(algo, topo.world_size, nbytes, topo)
            rows.append(
                {
                    N_("NICs per node"): c,
                    N_("algorithm"): algo,
                    N_("time (ms)"): p.time_s * 1e3,
                    N_("busbw (GB/s)"): p.busbw_gbps,
                    N_("NICs x per-NIC (GB/s)"): c * inter.bandwidth_Bps / 1e9,
                }
            )
    return shown(pd.DataFrame(rows).set_index(["NICs per node", "algorithm"]))
