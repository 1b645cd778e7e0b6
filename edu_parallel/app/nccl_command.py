"""``edu-parallel model nccl``: NCCL 2.30.7's own choice of algorithm and protocol, no processes.

    edu-parallel model nccl --system 8x8-h100-ndr --size 1MiB
    edu-parallel model nccl --world-size 16 --nodes 2 --link nvlink3 --inter-link ib-hdr-200 \\
        --arch ampere --size 64MiB --algo Ring --proto ^LL128 --json

Prints the (algorithm, protocol) NCCL's tuner runs and every candidate's predicted time
(:func:`edu_parallel.models.nccl.selection.nccl_choose`); ``--algo`` / ``--proto`` take the
values of ``NCCL_ALGO`` / ``NCCL_PROTO`` (``Ring``, ``Tree,Ring``, ``^LL128``,
``"ring;allreduce:tree"``).
Without ``--system``: ``--world-size`` ranks in ``--nodes`` nodes of ``--link`` inside,
``--inter-link`` across (one NIC per GPU), with ``--arch`` GPUs and no NVSwitch or SHARP.
"""

from __future__ import annotations

import argparse
import json

from ..core.errors import check_choice
from ..core.i18n import _
from ..core.units import format_bytes, parse_size
from ..core.width import fitted
from ..models.cost import link_preset
from ..models.nccl.constants import ARCHS, COLLECTIVES
from ..models.nccl.selection import NcclChoice, nccl_choose
from ..models.nccl.systems import NCCL_SYSTEMS, nccl_system
from ..models.nccl.tuning import NcclSystem
from ..models.topology import Topology

DEFAULT_COLLECTIVE, DEFAULT_ARCH = "all_reduce", "hopper"  # what --collective, --arch mean unsaid
NCCL_ONLY = ("system", "proto", "collective", "arch")  # the options no other collective reads


def add_nccl_arguments(p: argparse.ArgumentParser) -> None:
    """The options only ``model nccl`` reads (it shares --size, --algo, --world-size, ...); None
    means not given (``model_command.checked_options`` refuses them elsewhere, then resolves)."""
    p.add_argument(
        "--system",
        default=None,
        help=_("nccl: a preset, one of {nccl_systems}").format(
            nccl_systems=", ".join(NCCL_SYSTEMS)
        ),
    )
    p.add_argument("--proto", default=None, help=_("nccl: NCCL_PROTO, e.g. Simple or ^LL128"))
    p.add_argument(
        "--collective",
        default=None,
        help=_("nccl: {options} (default {default})").format(
            options=", ".join(COLLECTIVES), default=DEFAULT_COLLECTIVE
        ),
    )
    p.add_argument(
        "--arch",
        default=None,
        help=_("nccl: {options} (default {default})").format(
            options=", ".join(ARCHS), default=DEFAULT_ARCH
        ),
    )


def nccl_cli_system(a: argparse.Namespace) -> NcclSystem:
    """The preset named by --system, or one built from --world-size/--nodes/--link/--inter-link
    (the options as ``model_command.checked_options`` resolved them)."""
    if a.system is not None:
        return nccl_system(a.system)
    intra, inter = link_preset(a.link, "link"), link_preset(a.inter_link, "inter_link")
    topo = Topology.split(a.world_size, a.nodes or 1, intra, inter)
    per_node = topo.gpus_per_node
    topo = Topology(topo.nodes, per_node, intra, inter, nics_per_node=per_node)
    return NcclSystem(topo, check_choice("arch", a.arch, ARCHS))


@fitted
def format_nccl(c: NcclChoice, coll: str, nbytes: float, system: NcclSystem) -> str:
    head = _("{collective} of {size} on {system}").format(
        collective=coll, size=format_bytes(nbytes), system=system.describe()
    )
    lines = [head, c.reason, ""]
    lines.append(f"{'algorithm/protocol':20s} {'time (µs)':>11s} {'latency':>9s} {'bytes/bw':>10s}")
    for (algo, proto), t in sorted(c.times.items(), key=lambda kv: kv[1].time_us):
        lines.append(
            f"{algo + '/' + proto:20s} {t.time_us:11.2f} {t.latency_us:9.2f} {t.bandwidth_us:10.2f}"
        )
    return "\n".join(lines)


def run_nccl(a: argparse.Namespace) -> int:
    coll = check_choice("collective", a.collective, COLLECTIVES)
    nbytes = parse_size(a.size)
    system = nccl_cli_system(a)
    c = nccl_choose(coll, nbytes, system, a.algo, a.proto)
    if a.json:
        times = {f"{k[0]}/{k[1]}": t.time_us for k, t in c.times.items()}
        data = {"collective": coll, "bytes": nbytes, "system": system.describe()}
        data |= {"algo": c.algo, "proto": c.proto, "time_us": c.time_us, "times_us": times}
        print(json.dumps(data))
    else:
        print(format_nccl(c, coll, nbytes, system))
    return 0
