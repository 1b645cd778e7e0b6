"""Lesson 04's questions on NCCL's own tuner and on the cross-node all-reduce.

The answers come from :func:`edu_parallel.models.nccl.selection.nccl_choose` (NCCL 2.30.7's
``tuning.cc`` model) and :func:`edu_parallel.plans.hierarchical.hierarchical_bytes_formula`
(reduce-scatter in the node, the shard across nodes on each GPU's own NIC, all-gather). The bank
of lesson 04 (``algorithms.py``) asks them; its drawn parameters extend :class:`NcclDraw`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core.i18n import _
from ...core.units import format_bytes
from ...models.nccl.selection import nccl_choose
from ...models.nccl.systems import NCCL_SYSTEMS
from ...plans.hierarchical import hierarchical_bytes_formula
from ..numeric import Numeric
from ..questions import MultipleChoice
from .common import pick

PROTOCOLS = ["LL", "LL128", "Simple"]
TINY, HUGE = 64, 1 << 30  # the two message sizes of the protocol questions, bytes
HIER_SIZE = 1 << 30  # bytes of the hierarchical all-reduce


@dataclass(frozen=True)
class NcclDraw:
    """The NCCL questions' parameters."""

    system: str
    """The machine NCCL's tuner models, a key of :data:`NCCL_SYSTEMS`."""
    k: int
    """Nodes of the hierarchical all-reduce."""
    g: int
    """GPUs per node (one NIC each) of the hierarchical all-reduce."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> NcclDraw:
        system = pick(rng, "8x8-h100-ndr", "8x8-h100-ndr", "2x8-a100-hdr")
        k, g = pick(rng, (8, 8), (8, 8), (4, 8), (16, 4))
        return cls(system, k, g)


def q_nccl_proto_small(d: NcclDraw, run: Any = None) -> MultipleChoice:
    """The protocol NCCL's tuner runs for a tiny all-reduce."""
    s = NCCL_SYSTEMS[d.system]
    small = nccl_choose("all_reduce", TINY, s)
    return MultipleChoice(
        _(
            "NCCL's tuner on {system}: which protocol does it run for an all-reduce of {size}?"
        ).format(system=s.describe(), size=format_bytes(TINY)),
        PROTOCOLS,
        PROTOCOLS.index(small.proto),
        _(
            "NCCL picks {pick}. A tiny message is latency-bound, and LL (8-byte flag+data"
            " stores, no separate synchronisation) has the lowest latency of the three; it pays"
            " with half the bandwidth, which does not matter at this size (tuning.cc, NCCL"
            " 2.30.7)."
        ).format(pick=f"{small.algo}/{small.proto}"),
        params={"system": d.system, "S": TINY},
        key="nccl_proto_small",
    )


def q_nccl_proto_large(d: NcclDraw, run: Any = None) -> MultipleChoice:
    """The protocol NCCL's tuner runs for a 1 GiB all-reduce."""
    large = nccl_choose("all_reduce", HUGE, NCCL_SYSTEMS[d.system])
    return MultipleChoice(
        _("And for {size} on the same machine?").format(size=format_bytes(HUGE)),
        PROTOCOLS,
        PROTOCOLS.index(large.proto),
        _(
            "NCCL picks {pick}. A large message is bandwidth-bound: Simple moves data at full"
            " bandwidth with a few synchronisations per chunk, and its higher latency no longer"
            " counts. NCCL_PROTO=^Simple would force the slower protocols."
        ).format(pick=f"{large.algo}/{large.proto}"),
        params={"system": d.system, "S": HUGE},
        key="nccl_proto_large",
    )


def q_hier_cross_bytes(d: NcclDraw, run: Any = None) -> Numeric:
    """Bytes each GPU sends across nodes in the hierarchical all-reduce."""
    return Numeric(
        _(
            "A hierarchical all-reduce of {size} on {k} nodes of {g} GPUs, one NIC per GPU:"
            " reduce-scatter in the node, each GPU all-reduces its shard across nodes over its"
            " own NIC, all-gather. How many bytes does each GPU send across nodes?"
        ).format(size=format_bytes(HIER_SIZE), k=d.k, g=d.g),
        hierarchical_bytes_formula(d.k, d.g, HIER_SIZE)["inter"],
        units="bytes",
        explanation=_(
            "Each GPU holds a 1/g shard after the reduce-scatter and ring-all-reduces it over K"
            " nodes: 2(K-1)/K · S/g, all g NICs busy at once. A leader per node would send"
            " 2(K-1)/K · S over one NIC."
        ),
        params={"K": d.k, "g": d.g, "S": HIER_SIZE},
        key="hier_cross_bytes",
    )


NCCL_QUESTIONS: tuple[Callable[..., MultipleChoice | Numeric], ...] = (
    q_nccl_proto_small,
    q_nccl_proto_large,
    q_hier_cross_bytes,
)


def nccl_questions(rng: random.Random | None) -> list[MultipleChoice | Numeric]:
    """The NCCL protocol pick at both ends of the size range, and the hierarchical bytes."""
    d = NcclDraw.draw(rng)
    return [question(d) for question in NCCL_QUESTIONS]
