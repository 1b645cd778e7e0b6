"""Interconnects side by side: one trace retimed on every link preset and on rail-optimised fabrics.

:data:`FABRICS` describes whole servers as they are cabled: GPUs joined by NVLink, NVSwitch or
Infinity Fabric inside a node, and **one NIC per GPU** between nodes, each NIC on its own *rail*:
local rank ``i`` of every node plugs into leaf switch ``i``, so same-rank GPUs of different nodes
are one switch hop apart (NVIDIA DGX SuperPOD reference architecture, "rail-optimized" compute
fabric; NCCL's PXN moves other traffic over NVLink to the GPU on the right rail first).
:func:`rail_optimized` builds such a :class:`~edu_parallel.models.topology.Topology`
(``nics_per_node == gpus_per_node``), :func:`rail_of` says which rail a rank uses.

:func:`interconnect_table` retimes one trace (:func:`~edu_parallel.models.retiming.retime`) on
every preset of :data:`~edu_parallel.models.links.LINKS` as if all its ranks were joined by that
link, and on every fabric split into pretend nodes: the same events, the same causal order, timed
as each interconnect would time them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..core.errors import bad_value, check_choice, check_int
from ..core.i18n import N_, _
from ..core.metrics import bus_factor
from ..core.shown import shown
from ..core.trace import Trace
from .links import LINKS
from .retiming import cost_model, retime
from .topology import Topology

MEASURED = "measured here"  # the scope of the table's first row: the trace as it ran
FABRIC = "fabric"


@dataclass(frozen=True)
class Fabric:
    """A server design: ``gpus_per_node`` GPUs on ``intra``, one ``inter`` NIC per GPU."""

    name: str
    gpus_per_node: int
    intra: str
    inter: str
    source: str


FABRICS: dict[str, Fabric] = {
    f.name: f
    for f in (
        Fabric(
            "dgx-a100-rail",
            8,
            "nvlink3-a100",
            "ib-hdr-200",
            N_(
                "NVIDIA DGX A100 user guide: 8 A100 on NVSwitch, 8 ConnectX-6 HDR 200 Gb/s compute"
                " ports, one per GPU (DGX SuperPOD: rail-optimized)"
            ),
        ),
        Fabric(
            "dgx-h100-rail",
            8,
            "nvswitch-h100",
            "ib-ndr-400",
            N_(
                "NVIDIA DGX H100 user guide: 8 H100 on 4 NVSwitch, 8 ConnectX-7 NDR 400 Gb/s"
                " compute ports, one per GPU (DGX SuperPOD reference architecture: rail-optimized)"
            ),
        ),
        Fabric(
            "hgx-h100-roce-rail",
            8,
            "nvswitch-h100",
            "roce-400g",
            N_(
                "NVIDIA Spectrum-X reference architecture: HGX H100, 8 x 400GbE RoCE NICs per node,"
                " one per GPU, rail-optimized"
            ),
        ),
        Fabric(
            "dgx-b200-rail",
            8,
            "nvlink5-b200",
            "ib-ndr-400",
            N_(
                "NVIDIA DGX B200 user guide: 8 B200 on NVLink 5, 8 ConnectX-7 400 Gb/s compute"
                " ports"
            ),
        ),
        Fabric(
            "mi300x-rail",
            8,
            "xgmi-mi300x-gpu",
            "ib-ndr-400",
            N_(
                "AMD MI300X platform (ROCm docs mi300.md: 8 GPUs, 7 Infinity Fabric links each);"
                " Azure ND MI300X v5: 8 x 400 Gb/s NDR InfiniBand per VM, one per GPU"
            ),
        ),
    )
}


def rail_optimized(
    nodes: int, gpus_per_node: int = 8, intra: str = "nvlink4-h100", inter: str = "ib-ndr-400"
) -> Topology:
    """``nodes`` nodes of ``gpus_per_node`` GPUs, one ``inter`` NIC per GPU (a rail each)."""
    g = check_int("gpus_per_node", gpus_per_node, 1)
    for name, value in (("intra", intra), ("inter", inter)):
        check_choice(name, value, LINKS)
    return Topology(check_int("nodes", nodes, 1), g, LINKS[intra], LINKS[inter], nics_per_node=g)


def fabric(name: str, nodes: int, gpus_per_node: int | None = None) -> Topology:
    """Fabric preset ``name`` (:data:`FABRICS`) with ``nodes`` nodes (``gpus_per_node``: fewer
    GPUs per node than the real server, for pretend nodes of a small cluster)."""
    f = FABRICS[check_choice("name", name, FABRICS)]
    g = f.gpus_per_node if gpus_per_node is None else gpus_per_node
    return rail_optimized(nodes, g, f.intra, f.inter)


def rail_of(topology: Topology, rank: int) -> int:
    """The rail (leaf switch) ``rank``'s NIC plugs into: its local rank, on a rail-optimised
    topology (one NIC per GPU)."""
    if not isinstance(topology, Topology):
        raise bad_value("topology", topology, "a Topology")
    if topology.nics_per_node != topology.gpus_per_node:
        raise bad_value(
            "topology",
            topology.describe(),
            f"a rail-optimised topology: nics_per_node = gpus_per_node ({topology.gpus_per_node}),"
            f" not {topology.nics_per_node}",
        )
    return topology.local_rank(rank)


def _row(name: str, scope: str, bw: float, alpha: float, t: float, busbw: float, src: str):
    return {
        N_("interconnect"): name,
        N_("scope"): scope,
        N_("GB/s each way"): bw,
        N_("α (µs, assumed)"): alpha,
        N_("time (µs)"): t * 1e6,
        N_("busbw (GB/s)"): busbw,
        N_("source"): src,
    }


def interconnect_table(
    trace: Trace, nbytes: float, collective: str = "all_reduce", nodes: int = 2
) -> pd.DataFrame:
    """``trace`` as it ran, then retimed on every link of :data:`LINKS` (all ranks on that link)
    and on every fabric of :data:`FABRICS` split into ``nodes`` pretend nodes (rail-optimised).

    ``nbytes``: the collective's buffer ``S``; busbw = ``S / t`` times nccl-tests' factor for
    ``collective`` on the trace's ranks. One row per interconnect, indexed by its name."""
    if not isinstance(trace, Trace) or not trace.events:
        raise bad_value("trace", trace, "a Trace with events (a run's report.trace)")
    n = trace.world_size
    factor = bus_factor(collective, n)
    k = check_int("nodes", nodes, 1, n)
    if n % k:
        raise bad_value("nodes", nodes, f"a divisor of the trace's {n} ranks")

    def busbw(t: float) -> float:
        return nbytes / t * factor / 1e9 if t > 0 else float("nan")

    measured = trace.duration
    rows = [
        _row(
            N_("this machine"),
            MEASURED,
            float("nan"),
            float("nan"),
            measured,
            busbw(measured),
            _("the trace as it ran: {n} processes, {backend}").format(
                n=n, backend=trace.meta.get("backend", "gloo")
            ),
        )
    ]
    for link in LINKS.values():
        t = retime(trace, cost_model(link)).duration
        rows.append(
            _row(
                link.name,
                link.scope,
                link.bandwidth_Bps / 1e9,
                link.alpha_s * 1e6,
                t,
                busbw(t),
                _(link.source),
            )
        )
    for f in FABRICS.values():
        topo = fabric(f.name, k, n // k)
        t = retime(trace, cost_model(topo)).duration
        label = f"{f.name} ({k}x{n // k})"
        rows.append(
            _row(
                label,
                FABRIC,
                topo.inter.bandwidth_Bps / 1e9,
                topo.inter.alpha_s * 1e6,
                t,
                busbw(t),
                _("{topology}, one NIC per GPU; {source}").format(
                    topology=topo.describe(), source=_(f.source)
                ),
            )
        )
    return shown(pd.DataFrame(rows).set_index("interconnect"), values=(N_("this machine"),))
