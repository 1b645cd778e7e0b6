"""Timing a pipeline schedule: when each action runs, the bubble, and live activations.

:func:`time_schedule` replays each rank's actions *in its order* (from a :class:`Schedule`, or
per-rank orders recovered from an executed trace), ignoring the idle slots of the grid: an action
starts as soon as its rank is free and its dependencies have ended (+ ``t_comm`` when a dependency
ran on another rank). The result is a :class:`Timeline`.

Two conventions for the same bubble (ERRATA E3), both exact for GPipe and 1F1B with ``t_comm = 0``
(any t_f, t_b, t_w, any M >= 1):

* share of total time, GPipe (Huang et al. 2019, §2.3): ``(P-1)/(M+P-1)``;
* relative to the ideal (bubble-free) time, Megatron-LM 2021 (Narayanan et al., arXiv 2104.04473,
  §2.2.1): ``(P-1)/M``. They are the same number: ``r = s/(1-s)``.

1F1B (PipeDream-Flush) has the *same* bubble as GPipe; it only bounds the stashed activations
(ERRATA E2). Interleaving v chunks per rank divides the bubble by v: ``(1/v)(P-1)/M`` (§2.2.2;
exact here when M is a multiple of P; with ``t_comm > 0`` the run is ``2(Pv-1) t_comm`` longer).
ZB-H1 (Qi et al. 2023, arXiv 2401.10241, §2.1) splits B from W and shrinks the bubble to
``(P-1)(t_f + t_b - t_w)`` per rank: exact here when ``M >= P`` and ``t_w <= min(t_f, t_b)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from ..core.errors import bad_value, check_choice, check_int, check_non_negative, check_positive
from ..core.schema import ACTIVATION
from ..core.trace import Event, Trace
from .builders import SCHEDULES, run_orders
from .schedule import Action, Schedule


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
        when B(s,m) *ends*, or when W(s,m) ends if the backward is split (W still reads the
        stage's inputs: this counts the ZB paper's "in-flight microbatches"). At equal times,
        frees come before stashes, so back-to-back B then F does not count twice."""
        free_kind = "W" if self.split_backward else "B"
        changes: list[list[tuple[float, int]]] = [[] for _ in range(self.num_stages)]
        for s in self.spans:
            if s.action.kind == "F":
                changes[s.action.stage].append((s.start, +1))
            elif s.action.kind == free_kind:
                changes[s.action.stage].append((s.end, -1))
        out = []
        for events in changes:
            steps, live = [(0.0, 0)], 0
            for t, delta in sorted(events):  # (t, -1) sorts before (t, +1): frees first
                live += delta
                steps = steps[:-1] if steps[-1][0] == t else steps
                steps.append((t, live))
            out.append(steps)
        return out

    def peak_activations_per_stage(self) -> list[int]:
        """The most microbatches each stage holds stashed at once."""
        return [max(c for _, c in steps) for steps in self.live_activations()]

    def to_trace(self, meta: dict[str, Any] | None = None, activation_bytes: int = 1) -> Trace:
        """A :class:`~edu_parallel.core.trace.Trace`: one ``compute`` event per action (op F/B/W,
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
        free_kind = "W" if self.split_backward else "B"
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
            if a.kind in ("F", free_kind):
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


def _orders_of(orders: Any) -> tuple[list[list[Action]], int, bool]:
    """Check per-rank orders: actions on their rank, each (stage, microbatch) complete."""
    if not isinstance(orders, (list, tuple)) or not orders:
        raise bad_value("orders", orders, "a Schedule or a non-empty list of per-rank Action lists")
    p = len(orders)
    rows = [list(row) for row in orders]
    seen: set[tuple[int, str, int]] = set()
    for r, row in enumerate(rows):
        for a in row:
            if not isinstance(a, Action) or a.kind not in ("F", "B", "W") or a.microbatch < 0:
                raise bad_value(f"orders[{r}]", a, "Action objects of kind F, B or W")
            if a.stage % p != r or a.stage < 0:
                raise bad_value(f"orders[{r}]", a.text(), f"stages s with s % {p} == {r}")
            seen.add((a.stage, a.kind, a.microbatch))
    if len(seen) != sum(map(len, rows)):
        raise bad_value("orders", "an action listed twice", "each action exactly once")
    stages = 1 + max((s for s, _, _ in seen), default=-1)
    split = any(k == "W" for _, k, _ in seen)
    if stages % p:
        raise bad_value("orders", f"{stages} stages on {p} ranks", "a multiple of the rank count")
    micro = 1 + max((m for _, _, m in seen), default=-1)
    kinds = "FBW" if split else "FB"
    if len(seen) != stages * micro * len(kinds):
        missing = [
            f"{s}{k}{m}"
            for s in range(stages)
            for m in range(micro)
            for k in kinds
            if (s, k, m) not in seen
        ]
        raise bad_value("orders", "missing " + " ".join(missing[:8]), "every F, B (and W) once")
    return rows, stages, split


def time_schedule(
    schedule_or_orders: Schedule | list[list[Action]],
    t_f: float,
    t_b: float,
    t_w: float = 0.0,
    t_comm: float = 0.0,
) -> Timeline:
    """Time each rank executing its actions in order (event-driven, idle slots ignored).

    Durations per action: F ``t_f``, B ``t_b``, W ``t_w``; when the schedule has no W, B is the
    full backward and costs ``t_b + t_w``. ``t_comm`` is added to a dependency that ran on
    another rank (a point-to-point send of activations or gradients)."""
    t_f, t_b = check_positive("t_f", t_f), check_positive("t_b", t_b)
    t_w, t_comm = check_non_negative("t_w", t_w), check_non_negative("t_comm", t_comm)
    if isinstance(schedule_or_orders, Schedule):
        s = schedule_or_orders
        orders, stages, split, name = s.orders(), s.num_stages, s.split_backward, s.name
        _orders_of(orders)  # complete, each action on its rank
    else:
        orders, stages, split = _orders_of(schedule_or_orders)
        name = "orders"
    duration = {"F": t_f, "B": t_b if split else t_b + t_w, "W": t_w}
    starts = run_orders(orders, stages, duration, t_comm)
    spans = [
        Span(r, a, t, t + duration[a.kind])
        for r, (order, row) in enumerate(zip(orders, starts, strict=True))
        for a, t in zip(order, row, strict=True)
    ]
    return Timeline(spans, len(orders), stages, split, name)


# ----------------------------------------------------------------------------- formulas
def gpipe_bubble(num_ranks: int, num_microbatches: int) -> float:
    """``(P-1)/(M+P-1)``: idle share of total time (GPipe, Huang et al. 2019, §2.3)."""
    p = check_int("num_ranks", num_ranks, 1)
    m = check_int("num_microbatches", num_microbatches, 1)
    return (p - 1) / (m + p - 1)


def megatron_bubble(num_ranks: int, num_microbatches: int) -> float:
    """``(P-1)/M``: bubble time relative to the ideal time (Narayanan et al. 2021, §2.2.1)."""
    p = check_int("num_ranks", num_ranks, 1)
    m = check_int("num_microbatches", num_microbatches, 1)
    return (p - 1) / m


def interleaved_bubble(num_ranks: int, num_microbatches: int, chunks: int) -> float:
    """``(1/v)(P-1)/M``: interleaved 1F1B, relative to ideal time (Narayanan et al. §2.2.2)."""
    v = check_int("chunks", chunks, 1)
    return megatron_bubble(num_ranks, num_microbatches) / v


def bubble_formula(
    name: str,
    num_ranks: int,
    num_microbatches: int,
    chunks: int = 1,
    t_f: float = 1.0,
    t_b: float = 1.0,
    t_w: float = 0.0,
) -> dict[str, Any]:
    """The literature's bubble for schedule ``name``, in both conventions.

    Returns ``bubble_time`` and ``ideal_time`` (per rank), ``share_of_total`` =
    bubble/(bubble+ideal), ``relative_to_ideal`` = bubble/ideal, the ``formula``, its
    ``source`` and ``exact_when`` (the conditions under which :func:`time_schedule` of
    :func:`~edu_parallel.pipeline_parallel.builders.build_schedule` reproduces it exactly; checked
    by the tests). Times are per action: for ``interleaved`` ``t_f``/``t_b`` are those of one model
    chunk."""
    check_choice("name", name, SCHEDULES)
    p = check_int("num_ranks", num_ranks, 1)
    m = check_int("num_microbatches", num_microbatches, 1)
    v = check_int("chunks", chunks, 1)
    t_f, t_b = check_positive("t_f", t_f), check_positive("t_b", t_b)
    t_w = check_non_negative("t_w", t_w)
    work = t_f + t_b + t_w
    if name in ("gpipe", "1f1b"):
        bubble, ideal = (p - 1) * work, m * work
        formula = "(P-1)(t_f+t_b+t_w) per rank: (P-1)/(M+P-1) of total, (P-1)/M of ideal"
        source = "GPipe (Huang et al. 2019) §2.3; Narayanan et al. 2021 §2.2.1 (PipeDream-Flush)"
        exact = "t_comm = 0, any t_f, t_b, t_w, any M >= 1"
    elif name == "interleaved":
        bubble, ideal = (p - 1) * work, v * m * work
        formula = "(P-1)(t_f+t_b+t_w) per rank with chunk times: (1/v)(P-1)/M of ideal"
        source = "Narayanan et al. 2021 (arXiv 2104.04473) §2.2.2"
        exact = "t_comm = 0, any t_f, t_b, t_w, M a multiple of P"
    else:
        bubble, ideal = (p - 1) * max(t_f + t_b - t_w, 0.0), m * work
        formula = "(P-1)(t_f+t_b-t_w) per rank (ZB-H1)"
        source = "Qi et al. 2023 (arXiv 2401.10241) §2.1, Zero Bubble ZB-H1"
        exact = "t_comm = 0, M >= P, t_w <= min(t_f, t_b)"
    return {
        "schedule": name,
        "bubble_time": bubble,
        "ideal_time": ideal,
        "share_of_total": bubble / (bubble + ideal),
        "relative_to_ideal": bubble / ideal,
        "formula": formula,
        "source": source,
        "exact_when": exact,
    }
