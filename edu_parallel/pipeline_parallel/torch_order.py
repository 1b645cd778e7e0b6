"""A schedule as torch's pipeline order, and back; checked by torch's own validator.

``torch.distributed.pipelining`` (torch 2.13, ``schedules.py``) describes a multi-stage schedule
by its ``pipeline_order``: ``dict[rank, list[_Action | None]]``, one action per time step,
``None`` an idle step, with the kinds of ``_ComputationType``: ``F`` forward, ``I`` input
gradient, ``W`` weight gradient, ``B`` full backward, the names :class:`Action` uses. Its text
form is the CSV that ``PipelineScheduleMulti._dump_csv`` writes and ``_load_csv`` reads: one row
per rank, each cell ``str(_Action)`` (``"0F0"``, ``"1I2"``, ``"1W2"``), an empty cell for ``None``.

* :func:`to_torch_order` / :func:`from_torch_order`: a :class:`Schedule` as that dict, and back
  (stage ``s`` on rank ``s % P``, the mapping torch's looped schedules use);
* :func:`to_torch_csv` / :func:`from_torch_csv`: the same as ``_dump_csv``'s text;
* :func:`torch_check`: the checks ``_PipelineScheduleRuntime._load_csv`` runs on a compute-only
  order: ``_validate_schedule`` (every F, and B or I+W, once per microbatch and stage, each
  after its forward, one rank per stage), then the lowering that adds the point-to-point
  ``SEND_F``/``RECV_F``/``SEND_B``/``RECV_B`` (``_add_send_recv``, which raises on orders whose
  messages cannot be matched), then ``_simulate_comms_compute``, which raises when the ranks
  deadlock (torch's ``test_schedule.py`` lowers and simulates the same way);
* :func:`mock_stages`: stand-in stages, so that a torch schedule class computes its
  ``pipeline_order`` without a process group, as ``MockPipelineStage`` does in torch's
  ``test/distributed/pipelining/test_schedule.py``; :func:`torch_interleaved` uses them to read
  ``ScheduleInterleaved1F1B``'s order.

These are torch's private functions (leading underscore); the names are those of torch 2.13.
"""

from __future__ import annotations

import csv
import io
from types import SimpleNamespace
from typing import Any

from torch.distributed.pipelining.schedules import (
    ScheduleInterleaved1F1B,
    _Action,
    _add_send_recv,
    _ComputationType,
    _format_pipeline_order,
    _simulate_comms_compute,
    _validate_schedule,
)

from ..core.errors import bad_value
from .schedule import Action, Schedule

__all__ = [
    "from_torch_csv",
    "from_torch_order",
    "mock_stages",
    "to_torch_csv",
    "to_torch_order",
    "torch_check",
    "torch_format",
    "torch_interleaved",
]


def to_torch_order(schedule: Schedule) -> dict[int, list[_Action | None]]:
    """``{rank: [_Action(stage, kind, microbatch) or None per slot]}``, idle slots kept."""
    return {
        r: [
            None if a is None else _Action(a.stage, _ComputationType(a.kind), a.microbatch)
            for a in row
        ]
        for r, row in enumerate(schedule.actions)
    }


def from_torch_order(order: dict[int, list[Any]], name: str = "torch") -> Schedule:
    """A torch pipeline order (compute actions F/I/W/B and ``None``) as a :class:`Schedule`.

    Ranks are the keys ``0..P-1``; the stages and microbatches are read off the actions, and
    stage ``s`` must sit on rank ``s % P`` (looped placement: torch's GPipe, 1F1B, interleaved
    1F1B and interleaved zero bubble; not the V-shape of ZBV or DualPipeV)."""
    p = len(order)
    if p == 0 or sorted(order) != list(range(p)):
        raise bad_value("order", sorted(order), "a dict with keys 0..P-1, one per rank")
    rows: list[tuple[Action | None, ...]] = []
    for r in range(p):
        row: list[Action | None] = []
        for a in order[r]:
            kind = None if a is None else getattr(a.computation_type, "value", None)
            if a is not None and (kind not in ("F", "B", "I", "W") or a.microbatch_index is None):
                raise bad_value(f"order[{r}]", str(a), "compute actions F, I, W or B, or None")
            row.append(None if a is None else Action(a.stage_index, kind, a.microbatch_index))
        rows.append(tuple(row))
    actions = [a for row in rows for a in row if a is not None]
    stages = 1 + max((a.stage for a in actions), default=0)
    misplaced = [(r, a) for r, row in enumerate(rows) for a in row if a and a.stage % p != r]
    if stages % p or misplaced:
        where = f"{misplaced[0][1].text()} on rank {misplaced[0][0]}" if misplaced else stages
        raise bad_value("order", where, f"stage s on rank s % {p}, a multiple of {p} stages")
    micro = 1 + max((a.microbatch for a in actions), default=0)
    return Schedule(name, p, micro, stages // p, tuple(rows))


def to_torch_csv(schedule: Schedule) -> str:
    """The schedule as torch's ``_dump_csv`` writes a compute-only order (one row per rank)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in to_torch_order(schedule).values():
        writer.writerow(row)
    return out.getvalue()


def from_torch_csv(text: str, name: str = "torch") -> Schedule:
    """Read ``_dump_csv``'s text back (cells parsed by ``_Action.from_str``, as ``_load_csv``)."""
    rows = list(csv.reader(io.StringIO(text)))
    return from_torch_order(
        {r: [_Action.from_str(c) for c in row] for r, row in enumerate(rows)}, name
    )


def mock_stages(num_ranks: int, num_stages: int) -> list[SimpleNamespace]:
    """Stand-in stages of rank 0, enough for a schedule's ``__init__`` (no process group)."""
    return [
        SimpleNamespace(num_stages=num_stages, group_size=num_ranks, group_rank=0, stage_index=s)
        for s in range(0, num_stages, num_ranks)
    ]


def torch_check(schedule: Schedule) -> dict[str, Any]:
    """Run ``schedule`` through torch's validator, its send/recv lowering and its simulator.

    Raises what torch raises (``AssertionError`` naming the rank and step, or ``ValueError``
    "Schedule is not progressing") for an order torch rejects. Returns ``stage_to_rank`` (the
    mapping ``_validate_schedule`` infers), ``comm_actions`` (the sends and receives
    ``_add_send_recv`` added) and ``simulated_steps`` (``_simulate_comms_compute``'s length)."""
    order = to_torch_order(schedule)
    stage_to_rank = _validate_schedule(
        order, schedule.num_ranks, schedule.num_stages, schedule.num_microbatches
    )
    compute = {r: [a for a in row if a is not None] for r, row in order.items()}  # popped below
    lowered = _add_send_recv(compute, lambda s: stage_to_rank[s], schedule.num_stages)
    simulated = _simulate_comms_compute(lowered, lambda s: stage_to_rank[s], schedule.num_stages)
    comms = sum(
        a.computation_type.value[:4] in ("SEND", "RECV") for r in lowered.values() for a in r
    )
    return {
        "stage_to_rank": dict(stage_to_rank),
        "comm_actions": comms,
        "simulated_steps": max(len(row) for row in simulated.values()),
    }


def torch_interleaved(num_ranks: int, num_microbatches: int, chunks: int) -> Schedule:
    """torch's own ``ScheduleInterleaved1F1B(...).pipeline_order``, computed in its ``__init__``
    from :func:`mock_stages`, as a :class:`Schedule` (its idle steps kept)."""
    stages = mock_stages(num_ranks, num_ranks * chunks)
    order = ScheduleInterleaved1F1B(stages, num_microbatches).pipeline_order
    return from_torch_order(order, "torch-interleaved")


def torch_format(schedule: Schedule) -> str:
    """torch's own picture of the order: ``_format_pipeline_order`` (steps down, ranks across)."""
    return _format_pipeline_order(to_torch_order(schedule))
