"""Every step at once, for print: a matplotlib grid of steps (rows) x ranks (columns).

Each cell of the grid is a row of chunk boxes coloured as in the animation (contributor count, or
value); boxes changed by the step get a thick outline in the op's colour, and a line under them
says what the rank sent (``->r1 c3 +``). Built on :class:`matplotlib.figure.Figure` (no pyplot
global state), so it renders headless. Artists carry ``gid`` "cell", "transfer" or "caption".
"""

from __future__ import annotations

from typing import Any

from ..core.i18n import _
from ..core.phases import phase_label
from ..core.trace import Trace
from .figure import new_figure
from .fit import LABEL_PT, MAX_WIDTH_IN
from .model import Arrow, build_frames
from .style import ALERT, LABEL, MUTED, OP_COLORS, text_color

_COL_GAP = 1.4  # data units between ranks
_ROW_H = 2.3  # box (1) + transfer text + gap


def _sent_text(arrows: list[Arrow]) -> str:
    """What one rank sent in one step, grouped by chunk and op: '->r1,r2 c0 ='."""
    groups: dict[tuple[int | None, str], list[int]] = {}
    for a in arrows:
        groups.setdefault((a.chunk, a.op), []).append(a.dst)
    parts = []
    for (chunk, op), dsts in groups.items():
        sym = {"reduce": "+", "copy": "="}.get(op, "?")
        where = f" c{chunk}" if chunk is not None else ""
        parts.append(f"\u2192{','.join(f'r{d}' for d in sorted(dsts))}{where} {sym}")
    return "; ".join(parts)


def step_grid(
    trace: Trace,
    ax: Any = None,
    title: str | None = None,
    mark: tuple[int, int, int] | None = None,
    mark_label: str | None = None,
) -> Any:
    """Draw all steps of ``trace`` into ``ax`` (a new Figure when None) and return the Figure.

    ``mark = (step, rank, chunk)`` circles one cell in red with ``mark_label`` (gid "mark",
    default "first divergence"): where a learner's run first parted from the reference's."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    fr = build_frames(trace)
    n, c, rows = fr.world_size, fr.num_chunks, len(fr.steps)
    col_w = c + _COL_GAP
    width_units = n * col_w
    # inches per data unit: the figure fits the notebook's output (labels too small to read at
    # 11 px are left out: cells keep their colours)
    inch = min(0.5, max(0.075, (MAX_WIDTH_IN - 2.6) / width_units))
    if ax is None:
        fig = new_figure(
            figsize=(width_units * inch + 2.6, rows * _ROW_H * inch + 1.6), layout="constrained"
        )
        ax = fig.add_subplot()
    fig = ax.figure
    box_pt = inch * 72
    font = min(9.0, box_pt * 0.55)
    gap_pt = (_ROW_H - 1.2) * box_pt  # room for the transfer text under a row of boxes
    compact = any(
        len(fr.label(v, r, k)) * 0.62 * font > box_pt * 0.9
        for v in fr.steps
        for r in range(n)
        for k in range(c)
    )
    for i, view in enumerate(fr.steps):
        y0 = -i * _ROW_H
        for r in range(n):
            x0 = r * col_w
            for k in range(c):
                op = view.changed.get((r, k))
                ax.add_patch(
                    Rectangle(
                        (x0 + k, y0),
                        1,
                        1,
                        facecolor=fr.color(view, r, k),
                        edgecolor=OP_COLORS.get(op, MUTED) if op else MUTED,
                        linewidth=min(2.2, box_pt / 6) if op else min(0.6, box_pt / 15),
                        gid="cell",
                        in_layout=False,  # inside the axes' limits: no layout needs its box
                    )
                )
                if font >= LABEL_PT:
                    ax.text(
                        x0 + k + 0.5,
                        y0 + 0.5,
                        fr.label(view, r, k, compact),
                        ha="center",
                        va="center",
                        fontsize=font,
                        gid="label",
                        in_layout=False,  # centred in its box, inside the axes' limits
                        color=text_color(fr.color(view, r, k)),
                    )
            sent = [a for a in view.arrows if a.src == r]
            text = _sent_text(sent) if sent else ""
            size = min(9.0, gap_pt, col_w * box_pt / (0.62 * len(text) + 1))
            if sent and size >= LABEL_PT:
                ax.text(
                    x0 + c / 2,
                    y0 - 0.15,
                    text,
                    ha="center",
                    va="top",
                    fontsize=size,
                    color=OP_COLORS.get(sent[0].op, LABEL),
                    gid="transfer",
                )
    if mark is not None:
        label = _("first divergence") if mark_label is None else mark_label
        _mark_cell(ax, fr.steps, mark, col_w, label)
    ax.set_xlim(-0.3, width_units - _COL_GAP + 0.3)
    ax.set_ylim(-(rows - 1) * _ROW_H - 1.1, 1.3)
    ax.set_xticks([r * col_w + c / 2 for r in range(n)], [f"rank {r}" for r in range(n)])
    ax.xaxis.tick_top()
    ax.set_yticks(
        [-i * _ROW_H + 0.5 for i in range(rows)], [_row_label(fr.steps, i) for i in range(rows)]
    )
    ax.tick_params(length=0, labelsize=max(LABEL_PT, min(9.0, 0.8 * _ROW_H * box_pt)))
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_aspect("equal")
    heading = (
        title
        or _("{concept}: every step").format(concept=trace.meta.get("concept", _("run"))) + fr.note
    )
    ax.set_title(heading, fontsize=11)
    shown = "none" if font < LABEL_PT else "counts" if compact else "ranks"
    handles = [
        Line2D([], [], color=OP_COLORS["reduce"], lw=2.2, label=_("changed by reduce (+: adds)")),
        Line2D([], [], color=OP_COLORS["copy"], lw=2.2, label=_("changed by copy (=: overwrites)")),
        Patch(facecolor="none", edgecolor="none", label=fr.legend_text(shown)),
    ]
    wide = fig.get_figwidth() >= 11
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=3 if wide else 1,
        fontsize=LABEL_PT,
        frameon=False,
    )
    return fig


def _mark_cell(ax: Any, steps: list, mark: tuple[int, int, int], col_w: float, label: str) -> None:
    from matplotlib.patches import Rectangle

    step, rank, chunk = mark
    row = next((i for i, v in enumerate(steps) if v.step == step), None)
    if row is None:
        return
    x0, y0 = rank * col_w + chunk, -row * _ROW_H
    ax.add_patch(
        Rectangle((x0 - 0.12, y0 - 0.12), 1.24, 1.24, fill=False, edgecolor=ALERT, lw=3, gid="mark")
    )
    ax.text(x0 + 1.2, y0 + 1.15, label, color=ALERT, fontsize=8, gid="mark")


def _row_label(steps: list, i: int) -> str:
    view = steps[i]
    if view.step < 0:
        return _("input")
    total = sum(1 for v in steps if v.step >= 0 and v.phase == view.phase)
    seen = sum(1 for v in steps[: i + 1] if v.step >= 0 and v.phase == view.phase)
    return f"{phase_label(view.phase) if view.phase else _('step')} {seen}/{total}"
