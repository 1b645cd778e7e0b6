"""Where each rank was stuck: a rank × time strip drawn from a failed job's flight records.

:func:`hang_strip` reads a :class:`~edu_parallel.core.diagnosis.Diagnosis` (never a run): one row
per rank, each operation of the rank's flight record (:attr:`RankState.ops
<edu_parallel.core.diagnosis.RankState.ops>`) a span from the moment the rank entered it to the
moment it completed, coloured by kind (collective, send, receive). An operation still waiting
when the records were read (:attr:`Diagnosis.now`) ends there, hatched and outlined: the hang.
The culprits' rows are shaded and labelled with their state (dead, stopped, idle in
``time.sleep``, working, returned), and the title says the finding. Time runs in seconds from the
earliest entry. In a job that finished (a straggler), a diamond marks the rank that entered each
collective last: the late entries the others waited for.

Plotly, like the other timelines (``rank_timeline.py``, ``async_timeline.py``), loaded at the
first figure (``plotly_figure.py``). References: PyTorch's flight recorder
(``torch.distributed.flight_recorder``, whose ``fr_trace`` analyser matches each collective's
entries across ranks); the Gantt charts of HPC trace viewers (Vampir, Perfetto).
"""

from __future__ import annotations

import re
import signal
from typing import Any

from ..core.diagnosis import Diagnosis, Op, RankState
from ..core.diagnosis_text import op_label, ranks_label
from ..core.i18n import N_, _
from .fit import fit_layout
from .plotly_figure import Figure
from .style import (
    ALERT,
    FONT,
    FONT_PX,
    INK,
    ORANGE,
    PURPLE,
    TEAL,
    WHITE,
    WIDTH,
    legend_below,
    shade,
    text_color,
    tint,
    title_layout,
)

KIND_COLORS = {"collective": PURPLE, "send": ORANGE, "recv": TEAL}
KIND_NAMES = {"collective": N_("collective"), "send": N_("send"), "recv": N_("recv")}
HIGHLIGHT = tint(ALERT, 0.85)  # the culprits' rows
ROW_PX = 46
MARGIN = dict(l=190, r=20, t=80, b=110)
CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")  # the function a source line calls first


def _span_text(op: Op) -> str:
    """``all_reduce #3``, ``send #1 → 2``, ``recv #1 ← 3``: the label on a span."""
    if op.kind == "send":
        return f"send #{op.seq} → {op.peer}"
    if op.kind == "recv":
        return f"recv #{op.seq} ← {op.peer}"
    return f"{op.name} #{op.seq}"


def state_label(s: RankState, world: int) -> str:
    """A culprit's state, short: ``dead (SIGKILL)``, ``stopped: no heartbeat for 3.0 s``,
    ``idle in time.sleep``, ``working (97% of a core)``, ``returned``, ``waiting in recv #1 from
    rank 2``."""
    if s.state == "dead":
        code = s.exitcode
        if code is not None and code < 0:
            return _("dead ({signal})").format(signal=signal.Signals(-code).name)
        return _("dead (exit code {code})").format(code=code)
    if s.state == "stopped":
        return _("stopped: no heartbeat for {seconds} s").format(seconds=f"{s.silent_s:.1f}")
    if s.state == "idle":
        call = CALL.search(s.source or "")
        if call:
            return _("idle in {call}").format(call=call.group(1))
        return _("idle ({busy:.0%} of a core)").format(busy=s.busy)
    if s.state == "working":
        return _("working ({busy:.0%} of a core)").format(busy=s.busy)
    if s.state == "finished":
        return _("returned from the job")
    if s.op is not None:
        return _("waiting in {op}").format(op=op_label(s.op, world))
    return _("waiting")


def headline(d: Diagnosis) -> str:
    """The finding in a few words: ``missing: rank 3 never entered all_reduce #3 (group world)``."""
    world = len(d.ranks)
    who = ranks_label(list(d.culprits)) if d.culprits else ""
    op = op_label(d.op, world) if d.op is not None else ""
    if not d.culprits:
        return _("no rank at fault: where each rank was")
    if d.kind == "missing" and op:
        return _("missing: {ranks} never entered {op}").format(ranks=who, op=op)
    if d.kind == "missing":
        return _("missing: {ranks} did not go on").format(ranks=who)
    if d.kind == "dead":
        return _("dead: {ranks} died").format(ranks=who)
    if d.kind == "stopped":
        return _("stopped: {ranks} sends no heartbeat").format(ranks=who)
    if d.kind == "mismatch" and d.sides:
        ranks, theirs = d.sides[-1]
        return _("mismatch: {ranks} called {op}").format(
            ranks=ranks_label(list(ranks)), op=op_label(theirs, world, sized=True)
        )
    if d.kind == "deadlock":
        cycles = _("; ").join(ranks_label(list(c)) for c in d.cycles)
        return _("deadlock: {cycles} wait for each other").format(cycles=cycles)
    if d.kind == "slow" and all(s.state == "finished" for s in d.ranks):
        return _("slow, not stuck: the others waited for {ranks}").format(ranks=who)
    return _("slow, not stuck: {ranks} still working").format(ranks=who)


def _last_entries(d: Diagnosis) -> list[tuple[int, Op]]:
    """Each collective that every rank of its group entered (as the records keep them): the rank
    that entered it last, and its entry."""
    by_key: dict[tuple[tuple[int, ...], int], dict[int, Op]] = {}
    for s in d.ranks:
        for op in s.ops:
            if op.kind == "collective" and op.entered:
                by_key.setdefault((op.group, op.seq), {})[s.rank] = op
    out = []
    for (group, _seq), ops in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if len(group) > 1 and set(ops) == set(group):
            last = max(ops, key=lambda r: (ops[r].entered, r))
            out.append((last, ops[last]))
    return out


def row_labels(d: Diagnosis) -> list[str]:
    """Each rank's row label, top to bottom; a culprit's in bold, with its state."""
    world = len(d.ranks)
    out = []
    for s in d.ranks:
        name = _("rank {rank}").format(rank=s.rank)
        if s.rank in d.culprits:
            finished = all(q.state == "finished" for q in d.ranks)  # a straggler: nothing hung
            said = _("entered each collective last") if finished else state_label(s, world)
            name = f"<b>{name}</b><br>{said}"
        out.append(name)
    return out


def _add_spans(fig: Any, d: Diagnosis, labels: list[str], t0: float) -> None:
    """One bar trace per kind of operation, completed or still waiting: each operation a span
    from its entry to its completion (or to the reading)."""
    world = len(d.ranks)
    for kind, color in KIND_COLORS.items():
        for waiting in (False, True):
            spans = [
                (labels[i], op)
                for i, s in enumerate(d.ranks)
                for op in s.ops
                if op.kind == kind and op.entered and (not op.done) == waiting
            ]
            if not spans:
                continue
            ends = [op.done if op.done else max(d.now, op.entered) for _l, op in spans]
            word = _(KIND_NAMES[kind])
            fill = tint(color, 0.35) if waiting else color
            hover = _("{op}: from {start} s to {end} s")
            if waiting:
                hover = _("{op}: entered at {start} s, still waiting at {end} s")
            fig.add_bar(
                y=[label for label, _op in spans],
                base=[op.entered - t0 for _l, op in spans],
                x=[end - op.entered for end, (_l, op) in zip(ends, spans, strict=True)],
                orientation="h",
                name=_("{kind}, still waiting").format(kind=word) if waiting else word,
                text=[_span_text(op) for _l, op in spans],
                textposition="inside",
                insidetextanchor="middle",
                textfont=dict(size=FONT_PX, color=text_color(fill)),
                marker=dict(
                    color=fill,
                    pattern=dict(shape="/", fgcolor=shade(color), solidity=0.3) if waiting else {},
                    line=dict(color=ALERT if waiting else WHITE, width=2 if waiting else 1),
                ),
                hovertext=[
                    hover.format(
                        op=op_label(op, world, sized=op.kind == "collective"),
                        start=f"{op.entered - t0:.3f}",
                        end=f"{end - t0:.3f}",
                    )
                    for end, (_l, op) in zip(ends, spans, strict=True)
                ],
                hoverinfo="text",
                meta={"kind": kind, "waiting": waiting},
            )


def _add_last_entries(fig: Any, d: Diagnosis, labels: list[str], t0: float) -> None:
    """A diamond where the last rank entered each collective that every rank of its group
    entered."""
    world = len(d.ranks)
    last = _last_entries(d)
    if not last:
        return
    fig.add_scatter(
        x=[op.entered - t0 for _r, op in last],
        y=[labels[r] for r, _op in last],
        mode="markers",
        marker=dict(symbol="diamond", size=10, color=WHITE, line=dict(color=INK, width=1.5)),
        name=_("entered last: the others waited for it"),
        hovertext=[
            _("{rank} entered {op} last").format(rank=ranks_label([r]), op=op_label(op, world))
            for r, op in last
        ],
        hoverinfo="text",
    )


def hang_strip(d: Diagnosis, title: str | None = None) -> Any:
    """A plotly rank × time strip of ``d``'s flight records (see the module doc)."""
    world = len(d.ranks)
    labels = row_labels(d)
    entries = [op.entered for s in d.ranks for op in s.ops if op.entered]
    t0 = min(entries, default=d.now)
    fig = Figure()
    fig.add_scatter(  # every row, drawn or not: a rank with no operation keeps its row
        x=[0.0] * world,
        y=labels,
        mode="markers",
        marker=dict(opacity=0),
        showlegend=False,
        hoverinfo="skip",
        name="rows",
    )
    _add_spans(fig, d, labels, t0)
    if all(s.state == "finished" for s in d.ranks):  # a straggler: nothing hung, who was late?
        _add_last_entries(fig, d, labels, t0)
    shapes = [
        dict(
            type="rect",
            xref="paper",
            x0=0,
            x1=1,
            yref="y",
            y0=r - 0.5,
            y1=r + 0.5,
            fillcolor=HIGHLIGHT,
            line=dict(width=0),
            layer="below",
        )
        for r in d.culprits
        if 0 <= r < world
    ]
    height = MARGIN["t"] + MARGIN["b"] + ROW_PX * max(world, 2) + 40
    waited = _("read {seconds} s after the first entry; hatched: still waiting then").format(
        seconds=f"{d.now - t0:.1f}"
    )
    fig.update_layout(
        title=title_layout(title or headline(d), waited),
        barmode="overlay",
        width=WIDTH,
        height=height,
        margin=MARGIN,
        font=FONT,
        shapes=shapes,
        uniformtext=dict(minsize=FONT_PX, mode="hide"),
        xaxis=dict(
            title=_("seconds since the first entry (wall clock, measured)"), rangemode="tozero"
        ),
        yaxis=dict(
            categoryorder="array",
            categoryarray=labels,
            range=[world - 0.5, -0.5],  # rank 0 on top
            tickmode="array",
            tickvals=labels,
            ticktext=labels,
        ),
        legend=legend_below(height, MARGIN, 48),
        plot_bgcolor=WHITE,
    )
    return fit_layout(fig)
