"""Published NCCL bus bandwidths, with citations: what real systems reach, beside the model.

The link presets of :mod:`~edu_parallel.models.links` are datasheet line rates, and a trace
retimed on one of them is a model. :data:`PUBLISHED_BUSBW` keeps what NCCL reaches on real
hardware as its developers published it, one entry per system and algorithm, each with its
``source``; :func:`published_busbw_table` shows them, so a lesson puts them beside a modelled
figure without typing a number.

* 8 x H100 SXM on NVSwitch (NVLink 4, 450 GB/s line rate each way), all-reduce, large messages,
  as nccl-tests' ``all_reduce_perf`` reports busbw: about 370 GB/s with ``NCCL_ALGO=RING`` (about
  20 % protocol overhead below the line rate) and a peak of about 480 GB/s with NVLink SHARP
  (NVLS, NCCL's default there; algbw about 275 GB/s). Sylvain Jeaugey (NVIDIA, NCCL team),
  https://github.com/NVIDIA/nccl-tests/issues/212, comment of 2024-05-06. With NVLS the switch
  reduces, so busbw's ``2(n-1)/n`` factor no longer counts bytes on the wire and busbw can pass
  the line rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..core.errors import check_choice
from ..core.i18n import N_, _
from ..core.shown import shown
from .links import LINKS

NCCL_TESTS_212 = N_(
    "Sylvain Jeaugey (NVIDIA, NCCL team), NVIDIA/nccl-tests issue #212, comment of 2024-05-06:"
    " https://github.com/NVIDIA/nccl-tests/issues/212"
)


@dataclass(frozen=True)
class PublishedBusbw:
    """What NCCL reaches on ``system``: ``busbw_gbps`` (nccl-tests' busbw, GB/s) for
    ``collective`` on ``ranks`` GPUs with ``algorithm`` (``NCCL_ALGO``), large messages.

    ``link``: the preset of :data:`~edu_parallel.models.links.LINKS` whose line rate the system's
    GPUs have; ``source``: where it is published (a gettext message)."""

    name: str
    system: str
    link: str
    collective: str
    ranks: int
    algorithm: str
    busbw_gbps: float  # "about", as published
    source: str


PUBLISHED_BUSBW: dict[str, PublishedBusbw] = {
    m.name: m
    for m in (
        PublishedBusbw(
            "h100x8-ring",
            N_("8 x H100 SXM, NVSwitch"),
            "nvswitch-h100",
            "all_reduce",
            8,
            "Ring",
            370.0,
            NCCL_TESTS_212,
        ),
        PublishedBusbw(
            "h100x8-nvls",
            N_("8 x H100 SXM, NVSwitch"),
            "nvswitch-h100",
            "all_reduce",
            8,
            "NVLS",
            480.0,
            NCCL_TESTS_212,
        ),
    )
}


def published_busbw_table(link: str | None = None) -> pd.DataFrame:
    """One row per published measurement (those on ``link``'s GPUs when given), with its source."""
    if link is not None:
        check_choice("link", link, LINKS)
    columns = (
        N_("system"),
        N_("collective"),
        N_("ranks"),
        "NCCL_ALGO",
        N_("busbw, published (GB/s, about)"),
        N_("source"),
    )
    rows = [
        {
            N_("system"): _(m.system),
            N_("collective"): m.collective,
            N_("ranks"): m.ranks,
            "NCCL_ALGO": m.algorithm,
            N_("busbw, published (GB/s, about)"): m.busbw_gbps,
            N_("source"): _(m.source),
        }
        for m in PUBLISHED_BUSBW.values()
        if link is None or m.link == link
    ]
    return shown(pd.DataFrame(rows, columns=list(columns)).set_index("NCCL_ALGO"))
