"""Topology: ranks grouped into nodes, a fast link inside a node and NICs between nodes.

``Topology(nodes=2, gpus_per_node=4, intra=LINKS["nvlink4-h100"], inter=LINKS["ib-ndr-400"],
nics_per_node=4)`` describes 8 ranks: ranks ``0..3`` on node 0, ``4..7`` on node 1 (node-major
numbering, as ``torchrun`` and NCCL number them). A message between two ranks of one node travels
on ``intra``, any other on ``inter`` through a NIC of each node.

**Ports.** Every rank has one outgoing and one incoming port on ``intra`` (NVLink/NVSwitch: a GPU's
own bandwidth). Between nodes a message leaves through a NIC of its node and enters through a NIC
of the other: NIC ``j`` of a node serves the local ranks ``l`` with ``l % nics_per_node == j``, one
outgoing and one incoming port each, ``inter``'s bandwidth per port. With ``nics_per_node ==
gpus_per_node`` every GPU has its own NIC (rail-optimised: NVIDIA DGX H100 has 8 ConnectX-7 NDR
ports for 8 GPUs); with ``nics_per_node == 1`` all of a node's cross-node traffic queues at one
port. :meth:`Topology.ports` numbers the ports; a GPU's intra port and its NIC are separate paths
(NVLink versus PCIe to the NIC), so a rank can send inside and across nodes at once.

**Channels.** NCCL does not run one ring across nodes: it runs several *channels*, each a ring of
all ranks that enters and leaves every node through its own NIC. Its topology search starts the
ring of channel ``c`` at NIC ``(c + i) % netCount``, tries that NIC's local GPU first, and reserves
the channel's bandwidth on the NIC (``net.bw -= bw``) so that channels spread over the NICs
(``ncclTopoSearchRecNet``, pattern "NET n -> GPU a -> .. -> GPU x -> NET n", NCCL 2.30.7
``src/graph/search.cc``); its tuner then counts ``busBw = nChannels * bw`` with ``bw`` the
per-channel inter-node speed (``src/graph/tuning.cc``, ``ncclTopoTuneModel``). :attr:`channels`
is this model's count across nodes: one ring per NIC, so the cross-node bus bandwidth is bounded
by ``nics_per_node x inter`` (and by ``intra``), see :func:`~edu_parallel.models.cost.predict`.

A :class:`~edu_parallel.models.retiming.CostModel` can carry a topology;
:func:`~edu_parallel.models.retiming.retime` then times each message on ``topology.link(src, dst)``
and queues it on :meth:`ports`. NCCL's tuner makes the same two-level split: its ring latency
counts ``2(nNodes-1)`` inter-node steps and the rest intra-node, its tree latency ``log2(nNodes)``
inter-node levels (``src/graph/tuning.cc``); Thakur, Rabenseifner & Gropp 2005 ("Optimization of
Collective Communication Operations in MPICH") make the same split for clusters of SMP nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import bad_value, check_int
from ..core.i18n import _
from ..core.trace import Trace
from .links import LINKS, Link

__all__ = ["LINKS", "MAX_TOPOLOGY_RANKS", "Link", "Topology"]

MAX_TOPOLOGY_RANKS = 1 << 20  # a model, not processes: a million ranks is still arithmetic


@dataclass(frozen=True)
class Topology:
    """``nodes`` nodes of ``gpus_per_node`` ranks each; ``intra`` inside a node, ``inter``
    between, through ``nics_per_node`` NICs per node (a divisor of ``gpus_per_node``: NIC ``j``
    serves local ranks ``l % nics_per_node == j``)."""

    nodes: int
    gpus_per_node: int
    intra: Link
    inter: Link
    nics_per_node: int = 1

    def __post_init__(self) -> None:
        nodes = check_int("nodes", self.nodes, 1)
        gpus = check_int("gpus_per_node", self.gpus_per_node, 1)
        nics = check_int("nics_per_node", self.nics_per_node, 1)
        if gpus % nics:
            divisors = ", ".join(str(d) for d in range(1, gpus + 1) if gpus % d == 0)
            raise bad_value(
                "nics_per_node",
                nics,
                f"a divisor of gpus_per_node={gpus} ({divisors}): NIC j serves the local ranks l"
                " with l % nics_per_node == j, the same number each",
            )
        if nodes * gpus > MAX_TOPOLOGY_RANKS:
            raise bad_value(
                "nodes * gpus_per_node",
                f"{nodes} * {gpus} = {nodes * gpus}",
                f"at most {MAX_TOPOLOGY_RANKS} ranks",
            )
        for name in ("intra", "inter"):
            if not isinstance(getattr(self, name), Link):
                raise bad_value(name, getattr(self, name), "a Link, e.g. LINKS['nvlink4-h100']")
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "gpus_per_node", gpus)
        object.__setattr__(self, "nics_per_node", nics)

    @classmethod
    def split(
        cls,
        world_size: int,
        nodes: int,
        intra: Link,
        inter: Link | None = None,
        nics_per_node: int = 1,
    ) -> Topology:
        """``world_size`` ranks as ``nodes`` equal pretend nodes (``inter`` defaults to ``intra``).

        Raises ValueError naming ``nodes``, ``world_size`` and the factors when ``nodes`` is more
        than the ranks or does not divide them."""
        n = check_int("world_size", world_size, 1, MAX_TOPOLOGY_RANKS)
        if isinstance(nodes, int) and not isinstance(nodes, bool) and nodes > n:
            raise bad_value(
                "nodes",
                nodes,
                f"at most world_size={n}: more pretend nodes than ranks leaves a node without a"
                f" rank (nodes * gpus_per_node must equal world_size={n})",
            )
        k = check_int("nodes", nodes, 1, n)
        if n % k:
            divisors = [d for d in range(1, n + 1) if n % d == 0]
            raise bad_value(
                "nodes",
                k,
                f"a divisor of world_size={n} ({', '.join(map(str, divisors))}): nodes *"
                f" gpus_per_node must equal world_size, and {k} * {n // k} = {k * (n // k)} != {n}",
            )
        return cls(k, n // k, intra, intra if inter is None else inter, nics_per_node)

    @property
    def world_size(self) -> int:
        """``nodes * gpus_per_node``."""
        return self.nodes * self.gpus_per_node

    def check_world_size(self, world_size: int, name: str = "world_size") -> int:
        """Return ``world_size`` if it is this topology's rank count, else raise naming the
        factors."""
        n = check_int(name, world_size, 1)
        if n != self.world_size:
            raise bad_value(
                name,
                world_size,
                f"nodes * gpus_per_node = {self.nodes} * {self.gpus_per_node} = {self.world_size} "
                "ranks, the size of this topology",
            )
        return n

    def node_of(self, rank: int) -> int:
        """The node holding ``rank`` (node-major: ranks ``k*g .. k*g+g-1`` are node ``k``)."""
        r = check_int("rank", rank, 0, self.world_size - 1)
        return r // self.gpus_per_node

    def local_rank(self, rank: int) -> int:
        """``rank``'s index inside its node."""
        return check_int("rank", rank, 0, self.world_size - 1) % self.gpus_per_node

    def nic_of(self, rank: int) -> int:
        """Which NIC of its node ``rank`` crosses nodes through: ``local_rank % nics_per_node``."""
        return self.local_rank(rank) % self.nics_per_node

    def ports(self, src: int, dst: int) -> tuple[int, int]:
        """The outgoing and incoming port a message from ``src`` to ``dst`` queues on.

        Inside a node: rank ``src``'s and rank ``dst``'s own ports, numbered by rank. Across nodes:
        NIC ``nic_of(src)`` of ``src``'s node and NIC ``nic_of(dst)`` of ``dst``'s node, NIC ``j``
        of node ``k`` numbered ``world_size + k * nics_per_node + j``."""
        if self.node_of(src) == self.node_of(dst):
            return src, dst
        n, c = self.world_size, self.nics_per_node
        return n + self.node_of(src) * c + self.nic_of(src), n + self.node_of(
            dst
        ) * c + self.nic_of(dst)

    @property
    def channels(self) -> int:
        """Rings a flat all-reduce runs in this model: one per NIC across nodes (NCCL's channels,
        see the module docstring), one on a single node."""
        return self.nics_per_node if self.nodes > 1 else 1

    def link(self, src: int, dst: int) -> Link:
        """The link a message from ``src`` to ``dst`` travels on: ``intra`` on one node, else
        ``inter``."""
        check_int("src", src, 0, self.world_size - 1)
        check_int("dst", dst, 0, self.world_size - 1)
        return self.intra if self.node_of(src) == self.node_of(dst) else self.inter

    def bottleneck(self) -> Link:
        """One link for algorithms that ignore the topology: the larger alpha and the smaller
        bandwidth of the links in use (only ``intra`` on one node, only ``inter`` with one rank per
        node). A one-channel ring spanning nodes has an inter-node message in every step, and every
        step waits for it: on this link its retimed time is exact when ``inter`` is the slower one
        in both alpha and bandwidth (true of every preset pair); :func:`~.cost.predict` times the
        ring on :attr:`channels` rings instead."""
        if self.nodes == 1:
            return self.intra
        if self.gpus_per_node == 1 or self.intra == self.inter:
            return self.inter
        a, b = self.intra, self.inter
        return Link(
            f"{a.name}|{b.name}",
            max(a.alpha_s, b.alpha_s),
            min(a.bandwidth_Bps, b.bandwidth_Bps),
            f"slowest of {a.name} (intra) and {b.name} (inter)",
        )

    def describe(self) -> str:
        """E.g. ``2 nodes x 4 ranks, intra nvlink4-h100, inter ib-ndr-400, 4 NICs per node``."""
        k, g, c = self.nodes, self.gpus_per_node, self.nics_per_node
        return _("{nodes} x {ranks}, intra {intra}, inter {inter}, {nics} per node").format(
            nodes=_("1 node") if k == 1 else _("{n} nodes").format(n=k),
            ranks=_("1 rank") if g == 1 else _("{n} ranks").format(n=g),
            intra=self.intra.name,
            inter=self.inter.name,
            nics=_("1 NIC") if c == 1 else _("{n} NICs").format(n=c),
        )


def sent_by_link_class(trace: Trace, topology: Topology) -> tuple[list[int], list[int]]:
    """Bytes each rank sent inside its node and across nodes (``topology.link`` of each send)."""
    topology.check_world_size(trace.world_size, "trace.world_size")
    intra, inter = [0] * trace.world_size, [0] * trace.world_size
    for e in trace.select(kind="send"):
        same = topology.node_of(e.rank) == topology.node_of(e.peer)
        (intra if same else inter)[e.rank] += int(e.nbytes)
    return intra, inter
