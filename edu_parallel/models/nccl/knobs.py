"""The NCCL environment variables a cluster user meets first, and what this course's model does
with each: reads it, stands in for it with a parameter, or leaves it out.

Source: the NCCL 2.30.7 user guide, "Environment Variables"
(``docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html``); PXN arrived in NCCL 2.12 (its
release notes, and NVIDIA's "Doubling all2all Performance with NVIDIA Collective Communication
Library 2.12", 2022). Set a knob in the job's environment, or in ``os.environ`` before
``torch.distributed.init_process_group("nccl")``: NCCL reads it when the communicator is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import pandas as pd

from ...core.i18n import N_, _
from ...core.metrics import busbw_gbps
from ...core.shown import ShownFrame, shown
from .rules import NcclSystem
from .selection import nccl_choose
from .tuning import nccl_graph


@dataclass(frozen=True)
class Knob:
    """One environment variable (or a pair that work together)."""

    name: str
    examples: str  # values as a user types them, never translated
    effect: str  # what it changes, English marked N_()
    model: str  # what the course's model does with it, English marked N_()


KNOBS: tuple[Knob, ...] = (
    Knob(
        "NCCL_ALGO",
        "Ring · Tree,Ring · ^NVLS · ring;allreduce:tree",
        N_("the algorithms the tuner may pick, per collective after ';'; '^' excludes"),
        N_("read: nccl_choose(nccl_algo=...)"),
    ),
    Knob(
        "NCCL_PROTO",
        "Simple · ^LL128",
        N_("the protocols the tuner may pick"),
        N_("read: nccl_choose(nccl_proto=...)"),
    ),
    Knob(
        "NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS",
        "4 · 16",
        N_(
            "bounds on the channels (rings or trees side by side, one CUDA block each): more"
            " channels drive more links at once and take more SMs from compute"
        ),
        N_("read: NcclSystem(max_channels=...), the channels table below"),
    ),
    Knob(
        "NCCL_IB_HCA",
        "mlx5_0:1,mlx5_1:1 · ^mlx5_4 · =mlx5_0",
        N_("the InfiniBand adapters (and ports) NCCL uses: name prefixes, '^' excludes, '=' exact"),
        N_("a parameter: Topology(nics_per_node=...), the NICs table above"),
    ),
    Knob(
        "NCCL_NET_GDR_LEVEL",
        "LOC · PIX · PXB · PHB · SYS",
        N_(
            "the farthest PCIe distance between NIC and GPU at which the NIC reads and writes GPU"
            " memory directly (GPUDirect RDMA); farther, data is staged through host memory"
        ),
        N_("left out: every preset assumes GPUDirect RDMA"),
    ),
    Knob(
        "NCCL_PXN_DISABLE, NCCL_P2P_PXN_LEVEL",
        "1 · 0, 1, 2",
        N_(
            "PXN (NCCL 2.12+): a GPU hands a message over NVLink to the GPU on the destination's"
            " rail, which sends it from its own NIC, so traffic stays on one rail; 1 turns it off"
        ),
        N_("left out: the model's rings already leave each node on one rail"),
    ),
    Knob(
        "NCCL_NVLS_ENABLE, NCCL_COLLNET_ENABLE",
        "0 · 1",
        N_("allow NVLink SHARP (the NVSwitch reduces) and CollNet (SHARP switches reduce)"),
        N_("a parameter: each NcclSystem says whether it has NVLS or CollNet"),
    ),
    Knob(
        "NCCL_SOCKET_IFNAME",
        "eth0 · ^docker,lo",
        N_("the IP interfaces for bootstrap, and for data where there is no InfiniBand"),
        N_("left out"),
    ),
    Knob(
        "NCCL_BUFFSIZE",
        "4194304",
        N_("bytes of each channel's buffer per peer (4 MiB by default)"),
        N_("left out"),
    ),
    Knob(
        "NCCL_DEBUG, NCCL_DEBUG_SUBSYS",
        "INFO · INIT,GRAPH,TUNING",
        N_("print what NCCL found and chose: its topology, rings and trees, the tuner's table"),
        N_("this lesson's tables are the model's TUNING output"),
    ),
)

COLUMNS = (N_("variable"), N_("values"), N_("what it changes"), N_("in this course's model"))


def nccl_knobs_table() -> ShownFrame:
    """:data:`KNOBS` as a table, in the learner's language (the names and values as typed)."""
    rows = [
        dict(zip(COLUMNS, (k.name, k.examples, _(k.effect), _(k.model)), strict=True))
        for k in KNOBS
    ]
    return shown(pd.DataFrame(rows).set_index(COLUMNS[0]))


CHANNEL_COLUMNS = (
    "NCCL_MAX_NCHANNELS",
    N_("channels"),
    N_("time (µs, modelled)"),
    N_("busbw (GB/s, modelled)"),
)


def max_channels_table(
    system: NcclSystem, nbytes: int, caps: Sequence[int | None] = (1, 2, 4, 8, None)
) -> ShownFrame:
    """A ring all-reduce of ``nbytes`` (``NCCL_ALGO=Ring NCCL_PROTO=Simple``) on ``system`` with
    ``NCCL_MAX_NCHANNELS`` set to each of ``caps`` (None: unset): the channels NCCL's model runs,
    its time and its bus bandwidth (nccl-tests' busbw, 2(n-1)/n of the algorithm bandwidth)."""
    rows = []
    for cap in caps:
        s = replace(system, max_channels=cap)
        t = nccl_choose("all_reduce", nbytes, s, nccl_algo="Ring", nccl_proto="Simple").time_us
        values = (
            _("(unset)") if cap is None else str(cap),
            nccl_graph(s, "Ring").channels,
            round(t, 1),
            round(busbw_gbps("all_reduce", s.ranks, nbytes, t * 1e-6), 1),
        )
        rows.append(dict(zip(CHANNEL_COLUMNS, values, strict=True)))
    return shown(pd.DataFrame(rows).set_index(CHANNEL_COLUMNS[0]))
