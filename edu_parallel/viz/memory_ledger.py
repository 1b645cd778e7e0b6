"""The memory ledger of a run: each rank's bytes by category after every memory event.

Reads the ``memory`` events a run records (``attrs["category"]``, signed ``nbytes``) in time order;
:class:`Ledger` gives running sums, peaks and frames for the ZeRO animation. Pure Python, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _
from ..core.trace import Event, Trace
from ..core.units import format_bytes
from .style import MEMORY_COLORS, MEMORY_EXTRA

CATEGORIES = (
    "param16",
    "param32",
    "grad16",
    "grad32",
    "master32",
    "adam_m",
    "adam_v",
    "gathered_params",
    "comm_buffer",
)
MODEL_STATE = ("param16", "grad16", "master32", "adam_m", "adam_v")
CATEGORY_COLORS = {c: MEMORY_COLORS[c] for c in CATEGORIES}  # style.py: one colour per category
CATEGORY_NAMES = {  # shown through category_name() (translated)
    "param16": N_("bf16 parameters"),  # the engine's PARAM_DTYPE (task/mlp.py)
    "grad16": N_("bf16 gradients"),
    "master32": N_("fp32 master weights"),
    "adam_m": N_("Adam m (fp32)"),
    "adam_v": N_("Adam v (fp32)"),
    "gathered_params": N_("gathered parameters (temporary)"),
    "comm_buffer": N_("communication buffer"),
    "param32": N_("fp32 parameters"),
    "grad32": N_("fp32 gradients"),
}


def category_name(category: str) -> str:
    """What a learner reads for a memory category (the category itself when unknown)."""
    return _(CATEGORY_NAMES[category]) if category in CATEGORY_NAMES else category


def category_color(category: str, index: int = 0) -> str:
    """The fixed colour of ``category``; unknown categories cycle through spare colours."""
    return CATEGORY_COLORS.get(category, MEMORY_EXTRA[index % len(MEMORY_EXTRA)])


def order_categories(names: Any) -> list[str]:
    """Known categories in :data:`CATEGORIES` order, then the others in order of appearance."""
    seen = list(dict.fromkeys(names))
    return [c for c in CATEGORIES if c in seen] + [c for c in seen if c not in CATEGORIES]


# ----------------------------------------------------------------- the ledger
@dataclass(frozen=True)
class LedgerFrame:
    """The bytes every rank holds right after one memory event (``event`` None: before any).

    ``per_rank[rank][category]`` is a byte count (every category of the ledger is present).
    """

    index: int
    time: float
    label: str
    per_rank: dict[int, dict[str, int]]
    event: Event | None = None

    @property
    def step(self) -> int | None:
        return self.event.step if self.event is not None else None

    def total(self, rank: int) -> int:
        """All bytes ``rank`` holds in this snapshot."""
        return sum(self.per_rank[rank].values())


def event_delta(event: Event) -> int:
    """The signed change of a memory event: ``free`` is negative, ``alloc`` positive.

    ``nbytes`` is already signed in traces of :mod:`edu_parallel.zero.stages`; an unsigned
    ``free`` is read as a release too, so either convention gives the same ledger.
    """
    if event.op == "free":
        return -abs(int(event.nbytes))
    if event.op == "alloc":
        return abs(int(event.nbytes))
    return int(event.nbytes)


def event_label(event: Event) -> str:
    """A short text for one memory event, e.g. ``r1 +2 MiB gathered_params (forward, step 0)``."""
    delta = event_delta(event)
    sign = "+" if delta >= 0 else "-"
    where = ", ".join(
        x
        for x in (
            event.phase,
            _("step {i}").format(i=event.step) if event.step is not None else None,
        )
        if x
    )
    cat = (event.attrs or {}).get("category", "?")
    return f"r{event.rank} {sign}{format_bytes(abs(delta))} {cat}" + (
        f" ({where})" if where else ""
    )


class Ledger:
    """Running bytes per rank and category after every memory event of a trace (time order).

    ``ranks`` and ``categories`` list what appears; :meth:`frames` gives one
    :class:`LedgerFrame` per event plus the initial (all zero) one.
    """

    def __init__(self, trace: Trace) -> None:
        events = [e for e in trace.events if e.kind == "memory"]
        order = sorted(range(len(events)), key=lambda i: (events[i].start, i))
        self.events: list[Event] = [events[i] for i in order]
        self.categories: list[str] = order_categories(
            (e.attrs or {}).get("category", "unknown") for e in self.events
        )
        world = trace.world_size
        ranks = set(range(world)) | {e.rank for e in self.events}
        self.ranks: list[int] = sorted(ranks)
        current = {r: dict.fromkeys(self.categories, 0) for r in self.ranks}
        start = self.events[0].start if self.events else 0.0
        self._frames = [LedgerFrame(0, start, "start", _copy(current))]
        for i, e in enumerate(self.events, start=1):
            cat = (e.attrs or {}).get("category", "unknown")
            current[e.rank][cat] += event_delta(e)
            self._frames.append(LedgerFrame(i, e.start, event_label(e), _copy(current), e))

    def __len__(self) -> int:
        return len(self._frames)

    def frames(self) -> list[LedgerFrame]:
        """Snapshots: the start (all zero), then one after every memory event (time order)."""
        return list(self._frames)

    def bytes(self, rank: int, category: str | None = None, index: int = -1) -> int:
        """Bytes ``rank`` holds of ``category`` (None: all) after frame ``index`` (-1: the end)."""
        held = self._frames[index].per_rank[self._rank(rank)]
        return sum(held.values()) if category is None else held.get(category, 0)

    def peaks_by_category(self, rank: int) -> dict[str, int]:
        """The most bytes ``rank`` held of each category at any moment."""
        r = self._rank(rank)
        return {c: max(f.per_rank[r][c] for f in self._frames) for c in self.categories}

    def peak_model_state(self, rank: int) -> int:
        """The most bytes of model states (bf16 params and grads, fp32 master, Adam m and v)
        ``rank`` held at one moment (the peak of the sum, not the sum of the peaks)."""
        r = self._rank(rank)
        return max(sum(f.per_rank[r].get(c, 0) for c in MODEL_STATE) for f in self._frames)

    def peak_total(self, rank: int) -> int:
        """The most bytes of all categories ``rank`` held at one moment."""
        r = self._rank(rank)
        return max(f.total(r) for f in self._frames)

    def steps(self) -> list[int]:
        """Step numbers of the memory events, in order of appearance."""
        return list(dict.fromkeys(e.step for e in self.events if e.step is not None))

    def step_range(self, step: int | None) -> tuple[int, int]:
        """``(first, last)`` frame indices that animate ``step``: the frame before its first
        event, through its last event (None: the whole run)."""
        if step is None:
            return 0, len(self._frames) - 1
        hits = [i for i, f in enumerate(self._frames) if f.step == step]
        if not hits:
            raise bad_value(
                "step",
                step,
                _("one of {options}").format(
                    options=", ".join(map(str, self.steps())) or _("no steps")
                ),
            )
        return hits[0] - 1, hits[-1]

    def _rank(self, rank: int) -> int:
        if rank not in self.ranks:
            raise bad_value("rank", rank, _("one of {options}").format(options=self.ranks))
        return rank


def _copy(current: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
    return {r: dict(c) for r, c in current.items()}


def ledger(trace: Trace) -> Ledger:
    """The running bytes per rank and category after every ``memory`` event of ``trace``."""
    return Ledger(trace)
