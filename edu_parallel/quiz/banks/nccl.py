"""Lesson 04's questions on NCCL's own tuner and on the cross-node all-reduce.

The answers come from :func:`edu_parallel.models.nccl.selection.nccl_choose` (NCCL 2.30.7's
``tuning.cc`` model) and :func:`edu_parallel.plans.hierarchical.hierarchical_bytes_formula`
(reduce-scatter in the node, the shard across nodes on each GPU's own NIC, all-gather).
"""

from __future__ import annotations

import random

from ...core.i18n import _
from ...core.units import format_bytes
from ...models.nccl.selection import nccl_choose
from ...models.nccl.systems import NCCL_SYSTEMS
from ...plans.hierarchical import hierarchical_bytes_formula
from ..questions import MultipleChoice, Numeric

PROTOCOLS = ["LL", "LL128", "Simple"]


def nccl_questions(rng: random.Random | None) -> list[MultipleChoice | Numeric]:
    """The NCCL protocol pick at both ends of the size range, and the hierarchical bytes."""
    system = "8x8-h100-ndr" if rng is None else rng.choice(("8x8-h100-ndr", "2x8-a100-hdr"))
    s = NCCL_SYSTEMS[system]
    tiny, huge = 64, 1 << 30
    small, large = (nccl_choose("all_reduce", size, s) for size in (tiny, huge))
    k, g = (8, 8) if rng is None else rng.choice(((8, 8), (4, 8), (16, 4)))
    size = 1 << 30
    cross = hierarchical_bytes_formula(k, g, size)["inter"]
    return [
        MultipleChoice(
            _(
                "NCCL's tuner on {system}: which protocol does it run for an all-reduce of {size}?"
            ).format(system=s.describe(), size=format_bytes(tiny)),
            PROTOCOLS,
            PROTOCOLS.index(small.proto),
            _(
                "NCCL picks {pick}. A tiny message is latency-bound, and LL (8-byte flag+data"
                " stores, no separate synchronisation) has the lowest latency of the three; it pays"
                " with half the bandwidth, which does not matter at this size (tuning.cc, NCCL"
                " 2.30.7)."
            ).format(pick=f"{small.algo}/{small.proto}"),
            params={"system": system, "S": tiny},
            key="nccl_proto_small",
        ),
        MultipleChoice(
            _("And for {size} on the same machine?").format(size=format_bytes(huge)),
            PROTOCOLS,
            PROTOCOLS.index(large.proto),
            _(
                "NCCL picks {pick}. A large message is bandwidth-bound: Simple moves data at full"
                " bandwidth with a few synchronisations per chunk, and its higher latency no longer"
                " counts. NCCL_PROTO=^Simple would force the slower protocols."
            ).format(pick=f"{large.algo}/{large.proto}"),
            params={"system": system, "S": huge},
            key="nccl_proto_large",
        ),
        Numeric(
            _(
                "A hierarchical all-reduce of {size} on {k} nodes of {g} GPUs, one NIC per GPU:"
                " reduce-scatter in the node, each GPU all-reduces its shard across nodes over its"
                " own NIC, all-gather. How many bytes does each GPU send across nodes?"
            ).format(size=format_bytes(size), k=k, g=g),
            cross,
            units="bytes",
            explanation=_(
                "Each GPU holds a 1/g shard after the reduce-scatter and ring-all-reduces it over K"
                " nodes: 2(K-1)/K · S/g, all g NICs busy at once. A leader per node would send"
                " 2(K-1)/K · S over one NIC."
            ),
            params={"K": k, "g": g, "S": size},
            key="hier_cross_bytes",
        ),
    ]
