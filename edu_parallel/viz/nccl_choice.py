"""NCCL's choice per message size on one system: every (algorithm, protocol)'s predicted time and
the winner's bands (errata E9: the choice follows size and topology).

:func:`nccl_choice_figure` draws :func:`edu_parallel.models.nccl.tuning.nccl_time` for every
(algorithm, protocol) NCCL would run on an :class:`~edu_parallel.models.nccl.tuning.NcclSystem`
(colour: algorithm; line style: protocol), on log-log axes, and under it a strip of the winner per
size (:func:`edu_parallel.models.nccl.selection.nccl_choose`, NCCL 2.30.7 ``src/graph/tuning.cc``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.i18n import _
from ..core.units import format_bytes
from ..models.nccl.selection import nccl_choose
from ..models.nccl.systems import nccl_system
from .figure import new_figure, plain_log_ticks
from .style import ALGORITHM_COLORS

PROTO_STYLES = {"LL": ":", "LL128": "--", "Simple": "-"}


def winner_bands(
    coll: str, sizes: Any, system: Any, picks: Any = None
) -> list[tuple[float, float, str]]:
    """``(first size, last size, "Algo/Proto")`` for each run of sizes with the same winner;
    ``picks``: :func:`nccl_choose` of each size when the caller has them already."""
    if picks is None:
        picks = [nccl_choose(coll, float(x), system) for x in sizes]
    bands: list[tuple[float, float, str]] = []
    for x, c in zip(sizes, picks, strict=True):
        label = f"{c.algo}/{c.proto}"
        if bands and bands[-1][2] == label:
            bands[-1] = (bands[-1][0], float(x), label)
        else:
            bands.append((float(x), float(x), label))
    return bands


def nccl_choice_figure(system: Any, coll: str = "all_reduce", sizes: Any = None) -> Any:
    """Predicted time vs bytes of every (algorithm, protocol) NCCL runs for ``coll`` on
    ``system`` (an ``NcclSystem`` or a preset name), with the winner per size in a strip below.
    ``sizes``: default 8 B .. 8 GiB."""
    system = nccl_system(system)
    xs = np.logspace(3, 33, 121, base=2.0) if sizes is None else np.asarray(sizes, dtype=float)
    picks = [nccl_choose(coll, float(x), system) for x in xs]  # each size's choice, once
    fig = new_figure(figsize=(8.6, 5.4))
    grid = fig.add_gridspec(2, 1, height_ratios=(5, 1), hspace=0.08)
    ax, strip = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
    for algo, proto in picks[0].times:
        ys = [p.times[(algo, proto)].time_us for p in picks]
        ax.loglog(
            xs,
            ys,
            PROTO_STYLES[proto],
            color=ALGORITHM_COLORS[algo],
            lw=1.6,
            label=f"{algo}/{proto}",
        )
    ax.loglog(
        xs, [p.time_us for p in picks], color="black", lw=3, alpha=0.25, label=_("NCCL's pick")
    )
    ax.set_ylabel(_("predicted time (µs)"), fontsize=10)
    ax.set_xscale("log", base=2)
    plain_log_ticks(ax.yaxis)
    ax.tick_params(labelbottom=False, labelsize=9)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8.5, loc="upper left", ncol=2)
    ax.set_title(
        _("{collective}, {system}: NCCL 2.30.7 tuning model").format(
            collective=coll, system=system.describe().replace(" (", "\n(", 1)
        ),
        fontsize=10,
    )
    for lo, hi, label in winner_bands(coll, xs, system, picks):
        algo = label.split("/")[0]
        left, right = lo / 2**0.125, hi * 2**0.125  # a band covers its sizes' grid cells
        strip.axvspan(left, right, color=ALGORITHM_COLORS[algo], alpha=0.55)
        if np.log2(right / left) >= 2.5:
            mid = (left * right) ** 0.5
            strip.text(mid, 0.5, label, ha="center", va="center", fontsize=8.5)
    strip.set_xscale("log", base=2)
    strip.set_xlim(ax.get_xlim())
    strip.set_yticks([])
    strip.set_ylabel(_("winner"), fontsize=9)
    ticks = [2.0**k for k in range(int(np.log2(xs[0])), int(np.log2(xs[-1])) + 1, 5)]
    strip.set_xticks(ticks, [format_bytes(t) for t in ticks], fontsize=9)
    strip.set_xlabel(_("bytes (NCCL's nBytes)"), fontsize=10)
    return fig
