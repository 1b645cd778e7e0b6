"""Time vs message size for all-reduce algorithms, with the crossover marked (errata E5, E9).

:func:`crossover_figure` draws the alpha-beta predictions of
:func:`edu_parallel.models.cost.predict` on log-log axes: every curve is flat while latency
dominates (``α`` terms) and rises with slope 1 once bandwidth does (``S/B`` terms). The ring's flat
part is ``2(n-1)·α``, a tree's ``2⌈log2 n⌉·α``: on many ranks the tree starts lower, the ring ends
lower, and they cross once (Thakur, Rabenseifner & Gropp 2005; NCCL ``src/graph/tuning.cc`` makes
its choice from the same model). On a :class:`~edu_parallel.models.topology.Topology` the double
tree's latency counts log2 of the nodes, as NCCL's does. NCCL's own (algorithm, protocol) choice
is drawn by :func:`edu_parallel.viz.nccl_choice.nccl_choice_figure`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.i18n import _
from ..core.units import format_bytes
from ..models.choose import crossover_size
from ..models.cost import predict
from .figure import new_figure, plain_log_ticks
from .style import ALGORITHM_COLORS


def crossover_figure(
    world_size: int,
    link: Any,
    a: str = "ring",
    b: str = "tree",
    others: tuple[str, ...] = ("double-tree",),
    sizes: Any = None,
) -> Any:
    """Predicted all-reduce time vs bytes per rank for ``a``, ``b`` (and ``others``, dashed) on
    ``world_size`` ranks over ``link`` (a Link, preset name or Topology), with the size where
    ``a`` and ``b`` cross marked. ``sizes``: the x values (default 1 B .. 16 GiB)."""
    xs = np.logspace(0, 34, 137, base=2.0) if sizes is None else np.asarray(sizes, dtype=float)
    fig = new_figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot()
    label = None
    for name in (a, b, *[o for o in others if o not in (a, b)]):
        preds = [predict(name, world_size, x, link) for x in xs]
        label = preds[0].link
        ys = [p.time_s for p in preds]
        style = "-" if name in (a, b) else "--"
        ax.loglog(
            xs,
            ys,
            style,
            color=ALGORITHM_COLORS.get(name),
            label=f"{name}: {preds[0].formula}",
            lw=2 if style == "-" else 1.2,
        )
    try:
        x = crossover_size(world_size, link, a, b)
        t = predict(a, world_size, x, link).time_s
        ax.axvline(x, color="black", lw=0.8, ls=":")
        ax.plot([x], [t], "ko")
        half = x / 2  # which one wins below the crossing
        low, high = (
            (b, a)
            if predict(b, world_size, half, link).time_s < predict(a, world_size, half, link).time_s
            else (a, b)
        )
        text = _("{a} = {b} at {size}\n{low} faster below, {high} above").format(
            a=a, b=b, size=format_bytes(x), low=low, high=high
        )
        ax.annotate(text, (x, t), xytext=(10, -30), textcoords="offset points", fontsize=9)
    except ValueError as exc:  # no crossover in range: say which one always wins
        ax.text(
            0.98,
            0.02,
            str(exc).split(" (here ")[-1].rstrip(")"),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=9,
        )
    plain_log_ticks(ax.xaxis, ax.yaxis)
    ax.set_xlabel(_("bytes per rank S"))
    ax.set_ylabel(_("predicted time (s)"))
    ax.set_title(
        _("all-reduce on {n} ranks, {link}: alpha-beta model").format(n=world_size, link=label),
        fontsize=10,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig
