"""A collective's meaning, from a real run: every rank's buffer before and after.

:func:`before_after` draws two panels (before | after) of rows = ranks and cells = chunks, from
the buffers a run recorded (a :class:`~edu_parallel.comm.collective.CollectiveReport`'s ``before``
and ``after``, or a trace's snapshots: the input and each rank's last step). Each cell shows its
first values and where its data came from, found by comparing values with the inputs:
``r2:c0`` is rank 2's input chunk 0, ``Σ`` the sum over all ranks of that chunk. Cells are
coloured by the rank the data came from; hatched cells are not defined by the collective (e.g.
every rank but the root after a gather). Artists carry ``gid`` "cell" and "label".
"""

from __future__ import annotations

import math
from typing import Any

from ..core.i18n import _
from ..core.trace import Trace
from ..plans.collectives import defined_chunks
from ..plans.plan import Plan
from .figure import new_figure
from .fit import LABEL_PT, MAX_WIDTH_IN
from .model import SNAPSHOT_BYTES
from .style import ALL_CONTRIBUTORS, EMPTY, MUTED, SOFT_INK, series_color, text_color

SUM_COLOR = ALL_CONTRIBUTORS  # summed over every rank: the ring's "all contributors" green


def _buffers(source: Any) -> tuple[list[list[float]], list[list[float]], dict[str, Any]]:
    """(before[rank][element], after[rank][element], meta) from a report or a trace."""
    if isinstance(source, Trace):
        trace, before, after = source, None, None
    else:
        trace, before, after = source.trace, source.before, source.after
    meta = dict(trace.meta)
    if before is None or after is None:
        first = {s.rank: s.values for s in trace.snapshots if s.step == -1}
        last: dict[int, tuple[int, list[float]]] = {}
        for s in trace.snapshots:
            if s.rank not in last or s.step >= last[s.rank][0]:
                last[s.rank] = (s.step, s.values)
        n = trace.world_size
        if not n or set(first) != set(range(n)):
            raise ValueError(
                _(
                    "source has no buffers: run with size <= {limit} bytes per rank "
                    "(larger runs record no snapshots)"
                ).format(limit=SNAPSHOT_BYTES)
            )
        before = [first[r] for r in range(n)]
        after = [last[r][1] for r in range(n)]
    if "chunk_bounds" not in meta:
        raise ValueError(_("source.trace.meta has no 'chunk_bounds': expected a collective's run"))
    return before, after, meta


def _root(meta: dict[str, Any]) -> int:
    """The run's root: in ``meta`` for real runs, in the plan text for simulated ones."""
    if "root" in meta:
        return int(meta["root"])
    return Plan.from_text(meta["plan"]).root if meta.get("plan") else 0


def _defined(meta: dict[str, Any], n: int, c: int) -> list[list[int]]:
    name = meta.get("collective", "all_reduce")
    return [defined_chunks(name, r, _root(meta), c) for r in range(n)]


def _close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-4) for x, y in zip(a, b, strict=True)
    )


def provenance(
    before: list[list[float]], values: list[float], r: int, k: int, bounds: list[int]
) -> tuple[str, int | None]:
    """Where chunk ``values`` (rank r, chunk k) came from: ``("r2:c0", 2)``, ``("Σ", None)``,
    ``("0", None)`` for zeros, or ``("mixed", None)`` (a partial sum, or anything else)."""
    parts = [[b[bounds[j] : bounds[j + 1]] for j in range(len(bounds) - 1)] for b in before]
    if not values or not any(values):
        return "0", None
    if parts[r][k] == values:
        return f"r{r}:c{k}", r
    for q, row in enumerate(parts):
        for j, chunk in enumerate(row):
            if chunk == values:
                return f"r{q}:c{j}", q
    total = [sum(p[k][i] for p in parts) for i in range(len(values))]
    return ("\u03a3", None) if _close(total, values) else ("mixed", None)


def _preview(values: list[float], max_values: int) -> str:
    shown = [f"{v:.3g}" if v != int(v) else str(int(v)) for v in values[:max_values]]
    return ", ".join(shown) + (", \u2026" if len(values) > max_values else "")


def before_after(source: Any, max_values: int = 2, title: str | None = None) -> Any:
    """Matplotlib Figure: each rank's chunks before and after the run of ``source``.

    ``source`` is a CollectiveReport (or anything with ``before``, ``after`` and ``trace``) or a
    Trace with snapshots (a small run, or :func:`edu_parallel.models.simulation.simulate`).
    """
    from matplotlib.patches import Patch, Rectangle

    if max_values < 1:
        raise ValueError(
            _("max_values={value!r} is not valid: expected an integer >= 1").format(
                value=max_values
            )
        )
    before, after, meta = _buffers(source)
    bounds = list(meta["chunk_bounds"])
    n, c = len(before), len(bounds) - 1
    defined = _defined(meta, n, c)
    # At most 9.4 in at 100 dpi (the notebook's output): side by side if both fit, else stacked.
    cell_w = 1.25 + 0.12 * max_values
    wide = 2 * c * cell_w + 2.2 <= MAX_WIDTH_IN
    width = min(MAX_WIDTH_IN, (2 if wide else 1) * c * cell_w + (2.2 if wide else 1.6))
    panel_h = min(7.0, 0.62 * n + (1.9 if wide else 1.1))
    fig = new_figure(figsize=(width, panel_h * (1 if wide else 2)), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True) if wide else fig.subplots(2, 1, sharex=True)
    for ax, label, buffers in ((axes[0], "before", before), (axes[1], "after", after)):
        for r in range(n):
            for k in range(c):
                values = buffers[r][bounds[k] : bounds[k + 1]]
                if label == "before":
                    name, owner = ("0", None) if not any(values) else (f"r{r}:c{k}", r)
                else:
                    name, owner = provenance(before, values, r, k, bounds)
                undefined = label == "after" and k not in defined[r]
                color = (
                    EMPTY
                    if name == "0" or undefined
                    else (
                        SUM_COLOR
                        if name == "\u03a3"
                        else MUTED
                        if owner is None
                        else series_color(owner)
                    )
                )
                ax.add_patch(
                    Rectangle(
                        (k, -r - 1),
                        1,
                        1,
                        facecolor=color,
                        edgecolor="white",
                        linewidth=1.5,
                        hatch="//" if undefined else None,
                        gid="cell",
                        in_layout=False,  # inside the axes' limits: no layout needs its box
                    )
                )
                head = (
                    _("undefined")
                    if undefined
                    else _("zeros")
                    if name == "0"
                    else _("mixed")
                    if name == "mixed"
                    else name
                )
                text = f"{head}\n{_preview(values, max_values)}"
                ax.text(
                    k + 0.5,
                    -r - 0.5,
                    text,
                    ha="center",
                    va="center",
                    fontsize=LABEL_PT,
                    color=SOFT_INK if undefined else text_color(color),
                    gid="label",
                    in_layout=False,  # centred in its cell, inside the axes' limits
                )
        ax.set_xlim(0, c)
        ax.set_ylim(-n, 0)
        ax.set_xticks([k + 0.5 for k in range(c)], [f"c{k}" for k in range(c)])
        ax.set_yticks([-r - 0.5 for r in range(n)], [f"rank {r}" for r in range(n)])
        ax.tick_params(length=0)
        ax.tick_params(labelbottom=True)  # stacked: the upper panel keeps its chunk names
        ax.set_title(_("before") if label == "before" else _("after"), fontsize=11)
        for side in ax.spines.values():
            side.set_visible(False)
    name = meta.get("collective", "run")
    dtype = meta.get("dtype", "")
    if name in ("broadcast", "reduce", "gather", "scatter"):
        heading = _("{name} on {n} ranks, root {root}: buffers before and after ({dtype})").format(
            name=name, n=n, root=_root(meta), dtype=dtype
        )
    else:
        heading = _("{name} on {n} ranks: buffers before and after ({dtype})").format(
            name=name, n=n, dtype=dtype
        )
    fig.suptitle(title or heading, fontsize=12)
    handles = [
        Patch(facecolor=series_color(0), label=_("rq:cj = rank q's input chunk j")),
        Patch(facecolor=SUM_COLOR, label=_("\u03a3 = summed over all ranks")),
        Patch(facecolor=EMPTY, hatch="//", label=_("not defined by the collective")),
    ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=3 if wide else 2,
        fontsize=LABEL_PT,
        frameon=False,
    )
    return fig
