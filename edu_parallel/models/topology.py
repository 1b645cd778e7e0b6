"""Topology: ranks grouped into nodes, a fast link inside a node and a slower one between nodes.

``Topology(nodes=2, gpus_per_node=4, intra=LINKS["nvlink4-h100"], inter=LINKS["ib-ndr-400"])``
describes 8 ranks: ranks ``0..3`` on node 0, ``4..7`` on node 1 (node-major numbering, as
``torchrun`` and NCCL number them). A message between two ranks of one node travels on ``intra``,
any other on ``inter``. Each rank has its own port on each link (a rail-optimized cluster: one NIC
per GPU, as in NVIDIA's DGX H100 with 8 ConnectX-7 ports for 8 GPUs).

A :class:`~edu_parallel.models.retiming.CostModel` can carry a topology;
:func:`~edu_parallel.models.retiming.retime` then times each message on ``topology.link(src, dst)``.
NCCL's tuner makes the same split: its ring latency counts ``2(nNodes-1)`` inter-node steps and the
rest intra-node, its tree latency ``log2(nNodes)`` inter-node levels (NCCL ``src/graph/tuning.cc``);
Thakur, Rabenseifner & Gropp 2005 ("Optimization of Collective Communication Operations in MPICH")
make the same two-level split for clusters of SMP nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import bad_value, check_int
from .links import LINKS, Link

__all__ = ["LINKS", "MAX_TOPOLOGY_RANKS", "Link", "Topology"]

MAX_TOPOLOGY_RANKS = 1 << 20  # a model, not processes: a million ranks is still arithmetic


@dataclass(frozen=True)
class Topology:
    """``nodes`` nodes of ``gpus_per_node`` ranks each; ``intra`` inside a node, ``inter``
    between."""

    nodes: int
    gpus_per_node: int
    intra: Link
    inter: Link
    nics_per_node: int = 1  # inter-node ports per node; NCCL runs a channel per NIC (issue 15)

    def __post_init__(self) -> None:
        nodes = check_int("nodes", self.nodes, 1)
        gpus = check_int("gpus_per_node", self.gpus_per_node, 1)
        object.__setattr__(self, "nics_per_node", check_int("nics_per_node", self.nics_per_node, 1))
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

    @classmethod
    def split(cls, world_size: int, nodes: int, intra: Link, inter: Link | None = None) -> Topology:
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
        return cls(k, n // k, intra, intra if inter is None else inter)

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

    def link(self, src: int, dst: int) -> Link:
        """The link a message from ``src`` to ``dst`` travels on: ``intra`` on one node, else
        ``inter``."""
        check_int("src", src, 0, self.world_size - 1)
        check_int("dst", dst, 0, self.world_size - 1)
        return self.intra if self.node_of(src) == self.node_of(dst) else self.inter

    def bottleneck(self) -> Link:
        """One link for algorithms that ignore the topology: the larger alpha and the smaller
        bandwidth of the links in use (only ``intra`` on one node, only ``inter`` with one rank per
        node). A flat ring spanning nodes has an inter-node message in every step, and every step
        waits for it: on this link its retimed time is exact when ``inter`` is the slower one in
        both alpha and bandwidth (true of every preset pair)."""
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
        """E.g. ``2 nodes x 4 ranks, intra nvlink4-h100, inter ib-ndr-400``."""
        return (
            f"{self.nodes} node{'s' if self.nodes != 1 else ''} x {self.gpus_per_node}"
            f" rank{'s' if self.gpus_per_node != 1 else ''}, intra {self.intra.name}, inter"
            f" {self.inter.name}"
        )
