"""Timing a pipeline schedule: when each action runs, the bubble, and live activations.

:func:`time_schedule` replays each rank's actions *in its order* (from a :class:`Schedule`, or
per-rank orders recovered from an executed trace), ignoring the idle slots of the grid: an action
starts as soon as its rank is free and its dependencies have ended (+ ``t_comm`` when a dependency
ran on another rank). The result is a :class:`Timeline`. Durations: F ``t_f``, I (input gradient,
Zero Bubble's "B") ``t_b``, W ``t_w``, and the full backward B ``t_b + t_w``.

The literature's bubble formulas, which these timelines reproduce (the tests say when exactly),
and :func:`default_times` live in :mod:`edu_parallel.pipeline_parallel.formulas` and are
re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from ..core.errors import bad_value, check_int, check_non_negative, check_positive
from ..core.schema import ACTIVATION
from ..core.trace import Event, Trace
from .builders import run_orders
from .formulas import bubble_formula as bubble_formula
from .formulas import default_times as default_times
from .formulas import gpipe_bubble as gpipe_bubble
from .formulas import interleaved_bubble as interleaved_bubble
from .formulas import megatron_bubble as megatron_bubble
from .schedule import KINDS, Action, Schedule, completeness

FREES = ("B", "W")  # the passes after which a stage drops a microbatch's stash


class Span(NamedTuple):
    """``rank`` ran ``action`` from ``start`` to ``end``."""

    rank: int
    action: Action
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    """The timed run of a schedule: spans of every action; the run starts at time 0."""

    spans: list[Span]
    num_ranks: int
    num_stages: int
    split_backward: bool
    name: str = "orders"

    @cached_property
    def makespan(self) -> float:
        return max((s.end for s in self.spans), default=0.0)

    @cached_property
    def _busy(self) -> list[float]:
        out = [0.0] * self.num_ranks
        for s in self.spans:
            out[s.rank] += s.end - s.start
        return out

    def busy(self, rank: int) -> float:
        """Time ``rank`` spends computing."""
        return self._busy[check_int("rank", rank, 0, self.num_ranks - 1)]

    def idle(self, rank: int) -> float:
        """Time ``rank`` waits, from 0 to the makespan (the bubble on that rank)."""
        return self.makespan - self.busy(rank)

    def bubble_fraction(self) -> float:
        """Total idle time / (P * makespan): the bubble as a share of total time (GPipe)."""
        total = self.num_ranks * self.makespan
        return sum(self.idle(r) for r in range(self.num_ranks)) / total if total else 0.0

    def bubble_fraction_per_rank(self) -> list[float]:
        """Each rank's idle time / makespan."""
        span = self.makespan
        return [self.idle(r) / span if span else 0.0 for r in range(self.num_ranks)]

    def live_activations(self) -> list[list[tuple[float, int]]]:
        """Per stage, the step function ``[(time, live count), ...]`` of stashed activations.

        F(s,m) stashes one microbatch's activations on stage s when it *starts*; they are freed
        when B(s,m) *ends*, or when W(s,m) ends if the backward is split into I and W (W still
        reads the stage's inputs: this counts the ZB paper's "in-flight microbatches"). At equal
        times, frees come before stashes, so back-to-back B then F does not count twice."""
        return _steps(self.spans, self.num_stages, lambda a: a.stage)

    def live_activations_per_rank(self) -> list[list[tuple[float, int]]]:
        """Per rank, the same step function summed over its stages (microbatch-chunks: with v
        chunks one microbatch on one chunk holds 1/v of a stage's layers)."""
        return _steps(self.spans, self.num_ranks, lambda a: a.stage % self.num_ranks)

    def peak_activations_per_stage(self) -> list[int]:
        """The most microbatches each stage holds stashed at once."""
        return [max(c for _, c in steps) for steps in self.live_activations()]

    def peak_activations_per_rank(self) -> list[int]:
        """The most microbatch-chunks each rank holds stashed at once (= per stage when v = 1)."""
        return [max(c for _, c in steps) for steps in self.live_activations_per_rank()]

    def to_trace(self, meta: dict[str, Any] | None = None, activation_bytes: int = 1) -> Trace:
        """A :class:`~edu_parallel.core.trace.Trace`: one ``compute`` event per action (op F/B/I/W,
        ``chunk`` = stage, ``attrs`` microbatch and stage) and ``memory`` events of category
        ``"activation"`` (``activation_bytes`` per stashed microbatch) for the renderers."""
        check_int("activation_bytes", activation_bytes, 0)
        info = {
            "concept": "pipeline",
            "schedule": self.name,
            "world_size": self.num_ranks,
            "num_stages": self.num_stages,
            "makespan": self.makespan,
            **(meta or {}),
        }
        events: list[Event] = []
        for s in sorted(self.spans, key=lambda x: (x.start, x.rank)):
            a = s.action
            labels = {"microbatch": a.microbatch, "stage": a.stage}
            events.append(
                Event(
                    kind="compute",
                    rank=s.rank,
                    op=a.kind,
                    chunk=a.stage,
                    start=s.start,
                    end=s.end,
                    phase=a.kind,
                    attrs=dict(labels),
                )
            )
            if a.kind in ("F", *FREES):
                t, sign = (s.start, 1) if a.kind == "F" else (s.end, -1)
                events.append(
                    Event(
                        kind="memory",
                        rank=s.rank,
                        op="alloc" if sign > 0 else "free",
                        chunk=a.stage,
                        nbytes=sign * activation_bytes,
                        start=t,
                        end=t,
                        attrs={"category": ACTIVATION, **labels},
                    )
                )
        events.sort(key=lambda e: (e.start, e.rank))
        return Trace(meta=info, events=events)


def _steps(spans: list[Span], groups: int, group: Any) -> list[list[tuple[float, int]]]:
    """Live stashes per ``group(action)``: +1 when an F starts, -1 when a B or W ends."""
    changes: list[list[tuple[float, int]]] = [[] for _ in range(groups)]
    for s in spans:
        if s.action.kind == "F":
            changes[group(s.action)].append((s.start, +1))
        elif s.action.kind in FREES:
            changes[group(s.action)].append((s.end, -1))
    out = []
    for events in changes:
        steps, live = [(0.0, 0)], 0
        for t, delta in sorted(events):  # (t, -1) sorts before (t, +1): frees first
            live += delta
            steps = steps[:-1] if steps[-1][0] == t else steps
            steps.append((t, live))
        out.append(steps)
    return out


def _orders_of(orders: Any) -> tuple[list[list[Action]], int, bool]:
    """Check per-rank orders: actions on their rank, each (stage, microbatch) complete."""
    if not isinstance(orders, (list, tuple)) or not orders:
        raise bad_value("orders", orders, "a Schedule or a non-empty list of per-rank Action lists")
    p = len(orders)
    rows = [list(row) for row in orders]
    seen: set[Action] = set()
    for r, row in enumerate(rows):
        for a in row:
            if not isinstance(a, Action) or a.kind not in KINDS or a.microbatch < 0:
                raise bad_value(f"orders[{r}]", a, "Action objects of kind F, B, I or W")
            if a.stage % p != r or a.stage < 0:
                raise bad_value(f"orders[{r}]", a.text(), f"stages s with s % {p} == {r}")
            seen.add(a)
    if len(seen) != sum(map(len, rows)):
        raise bad_value("orders", "an action listed twice", "each action exactly once")
    stages = 1 + max((a.stage for a in seen), default=-1)
    split = any(a.kind in "IW" for a in seen)
    if stages % p:
        raise bad_value("orders", f"{stages} stages on {p} ranks", "a multiple of the rank count")
    micro = 1 + max((a.microbatch for a in seen), default=-1)
    gaps = [msg.removesuffix(" never runs") for _, msg in completeness(seen, stages, micro)]
    if gaps:
        got = "missing " + " ".join(gaps[:8]) if all(" " not in g for g in gaps) else gaps[0]
        raise bad_value("orders", got, "every F once and every B (or I then W) once")
    return rows, stages, split


def time_schedule(
    schedule_or_orders: Schedule | list[list[Action]],
    t_f: float,
    t_b: float,
    t_w: float = 0.0,
    t_comm: float = 0.0,
) -> Timeline:
    """Time each rank executing its actions in order (event-driven, idle slots ignored).

    Durations per action: F ``t_f``, I (input gradient) ``t_b``, W ``t_w``, and the full
    backward B ``t_b + t_w``. ``t_comm`` is added to a dependency that ran on another rank (a
    point-to-point send of activations or gradients)."""
    t_f, t_b = check_positive("t_f", t_f), check_positive("t_b", t_b)
    t_w, t_comm = check_non_negative("t_w", t_w), check_non_negative("t_comm", t_comm)
    if isinstance(schedule_or_orders, Schedule):
        s = schedule_or_orders
        orders, stages, split, name = s.orders(), s.num_stages, s.split_backward, s.name
        _orders_of(orders)  # complete, each action on its rank
    else:
        orders, stages, split = _orders_of(schedule_or_orders)
        name = "orders"
    duration = {"F": t_f, "B": t_b + t_w, "I": t_b, "W": t_w}
    starts = run_orders(orders, stages, duration, t_comm)
    spans = [
        Span(r, a, t, t + duration[a.kind])
        for r, (order, row) in enumerate(zip(orders, starts, strict=True))
        for a, t in zip(order, row, strict=True)
    ]
    return Timeline(spans, len(orders), stages, split, name)
