"""What every renderer draws, read from a trace: the state of each rank's chunks step by step.

:func:`build_frames` turns a :class:`~edu_parallel.core.trace.Trace` into :class:`RingFrames`: one
:class:`StepView` for the input and one per plan step, each with the chunk values (from the trace's
buffer snapshots, carried forward for ranks a step did not touch), the contributor sets (for the
``"powers_of_two"`` input, read from the values' binary digits), the step's transfers (from the
trace's send events) and a one-line title. Without snapshots (large runs) the contributor sets come
from the symbolic holdings of ``meta["plan"]`` instead, and the note says so.

Pure Python plus numpy-free helpers: no plotting library, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.errors import bad_value, one_of
from ..core.i18n import N_, _
from ..core.inputs import chunk_bounds, contributors
from ..core.phases import phase_label
from ..core.trace import SNAPSHOT_LIMIT, Trace
from ..plans.checker import holdings_after_each_step
from ..plans.plan import Plan
from .style import ALL_CONTRIBUTORS, EMPTY, FEW_CONTRIBUTORS, NEGATIVE, POSITIVE, ZERO, mix

# Bytes per rank up to which a run copies its buffers into the trace (the snapshots every value
# drawn here comes from; larger runs are drawn symbolically, from meta["plan"]): the limit of
# core/trace.py, under the name the renderers use.
SNAPSHOT_BYTES = SNAPSHOT_LIMIT

# what a learner reads for a transfer's op (the values stay English in traces), per op, so that
# the translation can name the op in its own words; a phase's name is core/phases.py's
_CHANGED = {
    "reduce": N_("changed in this step (reduce)"),
    "copy": N_("changed in this step (copy)"),
}
# What a cell's label shows (:meth:`RingFrames.legend_text`): the legend says what the cells print.
LEGEND_LABELS = {
    "ranks": N_(
        "cell colour: how many ranks' inputs are summed in (pale yellow: 1, dark green: all "
        "{n}); label: which ranks"
    ),
    "counts": N_(
        "cell colour and label: how many ranks' inputs are summed in (pale yellow: 1, dark "
        "green: all {n})"
    ),
    "none": N_(
        "cell colour: how many ranks' inputs are summed in (pale yellow: 1, dark green: all {n})"
    ),
}
_COUNTED = {"reduce": N_("{count} reduce"), "copy": N_("{count} copy")}
ARROW_HOVER = {
    "reduce": N_("{arrow} (reduce), {nbytes} B"),
    "copy": N_("{arrow} (copy), {nbytes} B"),
}


def arrow_hover(arrow: Arrow) -> str:
    """Hover text of one transfer: ``"r0->r1 c2 + (reduce), 16 B"``."""
    message = (
        _(ARROW_HOVER[arrow.op])
        if arrow.op in ARROW_HOVER
        else "{arrow} (" + arrow.op + "), {nbytes} B"
    )
    return message.format(arrow=arrow.text(), nbytes=arrow.nbytes)


@dataclass(frozen=True)
class Arrow:
    """One transfer of a step: ``src`` sent chunk ``chunk`` to ``dst``, which applied ``op``."""

    src: int
    dst: int
    chunk: int | None
    op: str
    nbytes: int

    def text(self) -> str:
        sym = {"reduce": "+", "copy": "="}.get(self.op, "?")
        where = f" c{self.chunk}" if self.chunk is not None else ""
        return f"r{self.src}->r{self.dst}{where} {sym}"


@dataclass
class StepView:
    """The state after ``step`` (``-1``: the input) and the transfers that produced it."""

    step: int
    phase: str | None
    title: str
    values: list[list[float | None]]  # [rank][chunk]: the chunk's first element (None: unknown)
    masks: list[list[int | None]]  # [rank][chunk]: bitmask of contributing ranks (None: unknown)
    arrows: list[Arrow] = field(default_factory=list)
    changed: dict[tuple[int, int], str] = field(default_factory=dict)  # (rank, chunk) -> op


@dataclass
class RingFrames:
    """All steps of a run. ``mode`` is "contributors", "value" or "symbolic"."""

    world_size: int
    num_chunks: int
    mode: str
    note: str
    steps: list[StepView]
    chunk_bytes: list[int]
    vmin: float = 0.0
    vmax: float = 1.0

    def label(self, view: StepView, rank: int, chunk: int, compact: bool = False) -> str:
        """Text for one cell: contributor set (or count when ``compact``), else the value."""
        mask, value = view.masks[rank][chunk], view.values[rank][chunk]
        if self.mode != "symbolic" and value is None and self.chunk_bytes[chunk] == 0:
            return "0 B"
        if self.mode == "value":
            return "?" if value is None else f"{value:.3g}"
        if mask is None:
            return "?" if value is None else f"{value:.3g}"
        if compact:
            return str(bin(mask).count("1")) if mask else "-"
        return ranks_text(mask)

    def color(self, view: StepView, rank: int, chunk: int) -> str:
        """Hex colour of one cell: by contributor count, or by value in "value" mode."""
        mask, value = view.masks[rank][chunk], view.values[rank][chunk]
        if self.mode != "value":
            if not mask:
                return EMPTY
            n = max(self.world_size - 1, 1)
            return mix(FEW_CONTRIBUTORS, ALL_CONTRIBUTORS, (bin(mask).count("1") - 1) / n)
        if value is None:
            return EMPTY
        span = max(abs(self.vmin), abs(self.vmax)) or 1.0
        t = value / span
        return mix(ZERO, POSITIVE, t) if t >= 0 else mix(ZERO, NEGATIVE, -t)

    def hover(self, view: StepView, rank: int, chunk: int) -> str:
        """Long description of one cell for hover text."""
        mask, value = view.masks[rank][chunk], view.values[rank][chunk]
        text = _("rank {rank}, chunk {chunk} ({nbytes} B)").format(
            rank=rank, chunk=chunk, nbytes=self.chunk_bytes[chunk]
        )
        if value is not None:
            text += "<br>" + _("value {value}").format(value=f"{value:.6g}")
        if mask is not None:
            text += "<br>" + (
                _("sum of ranks {ranks}").format(ranks=ranks_text(mask))
                if mask
                else _("holds nothing yet")
            )
        if (rank, chunk) in view.changed:
            op = view.changed[(rank, chunk)]
            text += "<br>" + (_(_CHANGED[op]) if op in _CHANGED else f"changed in this step ({op})")
        return text

    def legend_text(self, labels: str = "ranks") -> str:
        """One line saying what colour and label mean. ``labels`` is what the cells print, as
        :meth:`label` writes them: ``"ranks"`` (rank sets), ``"counts"`` (``compact``) or
        ``"none"`` (cells too small for text)."""
        if self.mode == "value":
            return _("cell: value of the chunk's first element (blue < 0 < red)")
        if labels not in LEGEND_LABELS:
            raise bad_value("labels", labels, one_of(LEGEND_LABELS))
        return _(LEGEND_LABELS[labels]).format(n=self.world_size)


def ranks_text(mask: int) -> str:
    """Bitmask -> compact rank set: ``0b1011`` -> ``"0-1,3"``; 0 -> ``"-"``."""
    members = [i for i in range(mask.bit_length()) if mask >> i & 1]
    if not members:
        return "-"
    runs: list[list[int]] = []
    for m in members:
        if runs and m == runs[-1][1] + 1:
            runs[-1][1] = m
        else:
            runs.append([m, m])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _range_text(ranks: list[int]) -> str:
    mask = sum(1 << r for r in ranks)
    return ranks_text(mask)


def describe_step(arrows: list[Arrow], world_size: int) -> str:
    """A sentence for a step's transfers, e.g. "each rank sends 1 chunk to its right neighbour,
    which adds it"."""
    if not arrows:
        return _("no transfers")
    ops = {a.op for a in arrows}
    op = ops.pop() if len(ops) == 1 else "mixed"
    srcs = sorted({a.src for a in arrows})
    dsts = sorted({a.dst for a in arrows})
    n = world_size
    if len(arrows) == n and len(srcs) == n:
        for side, shift in (("right", 1), ("left", -1)):
            if all(a.dst == (a.src + shift) % n for a in arrows):
                return _(_NEIGHBOUR[side].get(op, _NEIGHBOUR[side]["?"]))
    chunks = sorted({a.chunk for a in arrows if a.chunk is not None})
    what = _("chunk {chunks}").format(chunks=_range_text(chunks)) if chunks else _("its buffer")
    if len(dsts) == 1:
        message = _TO_ONE.get(op, _TO_ONE["?"])
        return _(message).format(srcs=_range_text(srcs), what=what, dst=dsts[0])
    if len(srcs) == 1:
        message = _FROM_ONE.get(op, _FROM_ONE["?"])
        return _(message).format(src=srcs[0], what=what, dsts=_range_text(dsts))
    counts = {o: sum(a.op == o for a in arrows) for o in sorted({a.op for a in arrows})}
    return _("{n} transfers ({counts})").format(
        n=len(arrows),
        counts=", ".join(
            _(_COUNTED[o]).format(count=c) if o in _COUNTED else f"{c} {o}"
            for o, c in counts.items()
        ),
    )


# describe_step's sentences, one per case so that the translation can order its words
_NEIGHBOUR = {
    "right": {
        "reduce": N_("each rank sends 1 chunk to its right neighbour, which adds it"),
        "copy": N_("each rank sends 1 chunk to its right neighbour, which overwrites its copy"),
        "?": N_("each rank sends 1 chunk to its right neighbour, which applies it"),
    },
    "left": {
        "reduce": N_("each rank sends 1 chunk to its left neighbour, which adds it"),
        "copy": N_("each rank sends 1 chunk to its left neighbour, which overwrites its copy"),
        "?": N_("each rank sends 1 chunk to its left neighbour, which applies it"),
    },
}
_TO_ONE = {
    "reduce": N_("ranks {srcs} send {what} to rank {dst}, which adds them"),
    "copy": N_("ranks {srcs} send {what} to rank {dst}, which keeps the last"),
    "?": N_("ranks {srcs} send {what} to rank {dst}, which applies them"),
}
_FROM_ONE = {
    "reduce": N_("rank {src} sends {what} to ranks {dsts}, which add it"),
    "copy": N_("rank {src} sends {what} to ranks {dsts}, which overwrite their copy"),
    "?": N_("rank {src} sends {what} to ranks {dsts}, which apply it"),
}


def _plan(trace: Trace) -> Plan | None:
    text = trace.meta.get("plan")
    return Plan.from_text(text) if text else None


def _arrows(trace: Trace, plan: Plan | None) -> dict[int, list[Arrow]]:
    """Send events per step, with the op read from the matching recv (or else the plan)."""
    recv_op = {}
    for e in trace.events:
        if e.kind == "recv":
            recv_op[(e.peer, e.rank, e.step, e.chunk, e.tag)] = e.op
    plan_op = {}
    if plan is not None:
        for i, s in enumerate(plan.steps):
            for t in s.transfers:
                plan_op[(t.src, t.dst, i, t.chunk)] = t.op
    out: dict[int, list[Arrow]] = {}
    for e in trace.events:
        if e.kind != "send" or e.step is None or e.peer is None:
            continue
        op = recv_op.get((e.rank, e.peer, e.step, e.chunk, e.tag)) or plan_op.get(
            (e.rank, e.peer, e.step, e.chunk), "?"
        )
        out.setdefault(e.step, []).append(Arrow(e.rank, e.peer, e.chunk, op, e.nbytes))
    return out


def build_frames(trace: Trace) -> RingFrames:
    """Read a trace into one :class:`StepView` per frame (input, then each step).

    Raises ValueError when the trace has neither snapshots nor ``meta["plan"]``.
    """
    plan = _plan(trace)
    n = trace.world_size
    arrows = _arrows(trace, plan)
    steps_seen = [e.step for e in trace.events if e.step is not None]
    steps_seen += [s.step for s in trace.snapshots]
    num_steps = len(plan.steps) if plan else (max(steps_seen) + 1 if steps_seen else 0)
    if plan is not None:
        c = plan.num_chunks
    elif trace.meta.get("chunk_bounds"):
        c = len(trace.meta["chunk_bounds"]) - 1
    else:
        c = max([e.chunk for e in trace.events if e.chunk is not None], default=0) + 1
    phase = {}
    for e in trace.events:
        if e.step is not None and e.phase is not None:
            phase.setdefault(e.step, e.phase)
    for snap in trace.snapshots:  # a step that sent nothing still has its phase
        if snap.step >= 0 and snap.phase is not None:
            phase.setdefault(snap.step, snap.phase)
    if plan is not None:
        for i, s in enumerate(plan.steps):
            phase.setdefault(i, s.phase)
    chunk_bytes = list(trace.meta.get("chunk_bytes") or [0] * c)
    pattern = trace.meta.get("input")
    if trace.snapshots:
        mode, note = ("contributors" if pattern == "powers_of_two" else "value"), ""
    elif plan is not None:
        mode, note = "symbolic", " " + _("(symbolic: this trace has no buffer snapshots)")
    else:
        raise ValueError(
            _("trace is not valid for the ring view: it has no snapshots and no meta['plan']")
        )
    grid = trace.snapshot_grid()
    held = holdings_after_each_step(plan) if mode == "symbolic" else None
    current: list[list[float] | None] = [None] * n
    views: list[StepView] = []
    per_phase_total: dict[str | None, int] = {}
    for i in range(num_steps):
        per_phase_total[phase.get(i)] = per_phase_total.get(phase.get(i), 0) + 1
    per_phase_seen: dict[str | None, int] = {}
    for i in range(-1, num_steps):
        values: list[list[float | None]] = []
        masks: list[list[int | None]] = []
        for r in range(n):
            if (r, i) in grid:
                current[r] = grid[(r, i)]
            row = _chunk_values(current[r], c, trace.meta.get("chunk_bounds"))
            values.append(row)
            if held is not None:
                masks.append(list(held[i + 1][r]))
            elif mode == "contributors":
                masks.append([_mask(v) for v in row])
            else:
                masks.append([None] * c)
        step_arrows = arrows.get(i, [])
        if i < 0:
            first = _("input, before any step")
            if pattern == "powers_of_two":
                first = _("input: rank r holds 2^r in every element, so a sum shows its ranks")
            title = first + note
        else:
            p = phase.get(i)
            per_phase_seen[p] = per_phase_seen.get(p, 0) + 1
            head = (
                _("{phase}, step {i} of {n}").format(
                    phase=phase_label(p), i=per_phase_seen[p], n=per_phase_total[p]
                )
                if p
                else _("step {i}").format(i=i + 1)
            )
            title = _("{head}: {description}").format(
                head=head, description=describe_step(step_arrows, n)
            )
            title += note
        changed = {(a.dst, a.chunk): a.op for a in step_arrows if a.chunk is not None}
        views.append(StepView(i, phase.get(i), title, values, masks, step_arrows, changed))
    known = [v for view in views for row in view.values for v in row if v is not None]
    return RingFrames(
        n, c, mode, note, views, chunk_bytes, min(known, default=0.0), max(known, default=1.0)
    )


def _chunk_values(values: list[float] | None, c: int, bounds: list[int] | None) -> list:
    """First element of each chunk (None for an empty chunk or an unknown buffer)."""
    if values is None:
        return [None] * c
    if not bounds or len(bounds) != c + 1 or bounds[-1] != len(values):
        bounds = chunk_bounds(len(values), c)
    return [values[bounds[k]] if bounds[k] < bounds[k + 1] else None for k in range(c)]


def _mask(value: float | None) -> int | None:
    if value is None:
        return None
    return sum(1 << r for r in contributors(value))
