"""Tensor-parallel stories: what each rank holds of X, A (= W^T), Y, dY and dX, frame by frame.

:func:`tp_story` turns a run's report into :class:`TPFrame` s: what every rank holds before the
first collective, then after each step of each collective that ran (ring all-gather steps, the
reduce-scatter half of an all-reduce, then its all-gather steps). The collectives are checked
against the report's ``forward_collectives`` / ``backward_collectives`` (what the trace recorded),
and the kind of each rank's local output ("slice" or "partial_sum") is the one the run measured
(``local_output_kind``). A mismatch raises instead of drawing a story that did not happen. The
matrices and their shapes are Megatron-LM's (Shoeybi et al. 2019, arXiv 1909.08053, §3: the
column-parallel A, the row-parallel B, the f and g operators); the sequence-parallel frames are
Korthikanti et al. 2022 (arXiv 2205.05198, §4.2.2).

Reads a :class:`~edu_parallel.tensor_parallel.report.TPReport` or its ``to_json_dict()``; pure
Python, no plotting library, no torch. :mod:`edu_parallel.viz.tp` draws the frames.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import bad_value
from ..core.i18n import N_, _

KINDS = ("replicated", "shard", "slice", "partial", "full", "wrong")  # what a region holds
PHASE_WORDS = {"forward": N_("forward"), "backward": N_("backward")}
# the forward frame after the local matmul, by what each rank's output is
_LOCAL = {
    "slice": N_("forward, local matmul: each rank's {output} is a slice of Y (measured)"),
    "partial": N_("forward, local matmul: each rank's {output} is a partial sum of Y (measured)"),
    "full": N_("forward, local matmul: each rank's {output} is all of Y (measured)"),
    "wrong": N_("forward, local matmul: each rank's {output} is not Y (measured)"),
}
MEASURED = {"slice": "slice", "partial_sum": "partial", "full": "full", "other": "wrong"}
Region = tuple[str, str, int]  # (kind, "all" | "col" | "row", block)


@dataclass
class TPFrame:
    """One picture: ``label``, the collective drawn (``op``, ``phase``; None for local compute) and
    ``holds[matrix][rank]``: the regions that rank holds."""

    label: str
    phase: str
    op: str | None
    holds: dict[str, list[list[Region]]]


def report_field(report: Any, key: str) -> Any:
    """``report[key]`` of a report's JSON, or the attribute of the report itself."""
    return report[key] if isinstance(report, Mapping) else getattr(report, key)


def matrices(report: Any) -> dict[str, str]:
    """The matrices drawn for the report's mode, with their shapes in the paper's notation."""
    if report_field(report, "mode") == "column":
        return {"X": "(s, h)", "A": "(h, ffn)", "Y": "(s, ffn)", "dY": "(s, ffn)", "dX": "(s, h)"}
    if report_field(report, "mode") == "row":
        return {"X": "(s, ffn)", "A": "(ffn, h)", "Y": "(s, h)", "dY": "(s, h)", "dX": "(s, ffn)"}
    return {
        "X": "(s, h)",
        "A": "(h, ffn)",
        "Z": "(s, ffn)",
        "B": "(ffn, h)",
        "Y": "(s, h)",
        "dY": "(s, h)",
        "dX": "(s, h)",
    }


def tp_story(report: Any) -> list[TPFrame]:
    """The frames of a run (see the module docstring); ValueError if the report disagrees."""
    mode, rule = report_field(report, "mode"), report_field(report, "rule")
    t = int(report_field(report, "world_size"))
    kinds = set(report_field(report, "local_output_kind"))
    if len(kinds) != 1:
        raise bad_value("report.local_output_kind", sorted(kinds), _("the same kind on every rank"))
    local = MEASURED[kinds.pop()]
    names = list(matrices(report))
    state: dict[str, list[list[Region]]] = {m: [[] for _ in range(t)] for m in names}
    frames: list[TPFrame] = []
    ran = [("forward", op) for op in report_field(report, "forward_collectives")]
    ran += [("backward", op) for op in report_field(report, "backward_collectives")]
    done: list[tuple[str, str]] = []

    def put(m: str, kind: str, axis: str = "all", blocks: Any = None) -> None:
        for r in range(t):
            held = [r] if blocks is None else blocks(r)
            state[m][r] = [(kind, axis, 0)] if axis == "all" else [(kind, axis, b) for b in held]

    def snap(label: str, phase: str, op: str | None = None) -> None:
        frames.append(
            TPFrame(label, phase, op, {m: [list(x) for x in v] for m, v in state.items()})
        )

    def collective(op: str, phase: str, m: str, axis: str, what: str) -> None:
        done.append((phase, op))
        call = f"{op}({m})"
        when = _(PHASE_WORDS[phase])
        if rule == "syllabus":
            put(m, "wrong")
            return snap(
                _("{phase}: {call} as the outline says: {what}").format(
                    phase=when, call=call, what=what
                ),
                phase,
                op,
            )
        # ring reduce-scatter: rank r owns the summed block r
        if op in ("all_reduce", "reduce_scatter"):
            put(m, "slice", axis)
            snap(
                _("{phase}: {call}, reduce-scatter part: rank r holds the SUM of block r").format(
                    phase=when, call=call
                ),
                phase,
                op,
            )
            if op == "reduce_scatter":
                return
        for k in range(1, t):  # ring all-gather: after step k rank r holds blocks r, r-1, .., r-k
            if k == t - 1:
                put(m, "full")
            else:
                put(m, "slice", axis, lambda r, k=k: [(r - j) % t for j in range(k + 1)])
            now = what if k == t - 1 else _("rank r holds blocks r .. r-{k}").format(k=k)
            snap(
                _("{phase}: {call}, all-gather step {k}/{n}: {now}").format(
                    phase=when, call=call, k=k, n=t - 1, now=now
                ),
                phase,
                op,
            )

    # forward, local compute
    sp, mlp = mode == "mlp-sp", mode in ("mlp", "mlp-sp")
    put("A", "shard", "row" if mode == "row" else "col")  # column: A_r = W_r^T; row: rows of A
    if mlp:
        put("B", "shard", "row")
    if sp:
        put("X", "slice", "row")
        snap(_("forward: X split along the sequence (rank r: tokens block r)"), "forward")
        collective("all_gather", "forward", "X", "row", _("every rank gets the whole sequence"))
    elif mode == "row":
        put("X", "slice", "col")
    else:
        put("X", "replicated")
    if mlp:
        put("Z", "slice", "col")  # GeLU(X A_r): whole columns of XA, no communication
    put("Y", local, "col" if local == "slice" else "all")
    snap(_(_LOCAL[local]).format(output="GeLU(X A_r) B_r" if mlp else "Y_r"), "forward")
    if mode == "column" and report_field(report, "gather_output"):
        collective("all_gather", "forward", "Y", "col", _("the full Y on every rank"))
    elif mode == "column" and rule == "syllabus":
        collective("all_reduce", "forward", "Y", "col", _("sum of slices, shape (s, ffn/t): not Y"))
    elif mode == "row" and rule == "syllabus":
        collective(
            "all_gather", "forward", "Y", "col", _("partial sums side by side, (s, t*h): not Y")
        )
    elif mode in ("row", "mlp"):
        collective("all_reduce", "forward", "Y", "col", _("g: the full Y on every rank"))
    elif sp:
        collective(
            "reduce_scatter", "forward", "Y", "row", _("rank r keeps the summed sequence block r")
        )
        put("X", "slice", "row")
        snap(
            _("forward done: the gathered X is dropped; each rank saved only its sequence block"),
            "forward",
        )
    if rule == "megatron":  # backward
        if sp:
            put("dY", "slice", "row")
            snap(_("backward: dY arrives split along the sequence"), "backward")
            collective("all_gather", "backward", "dY", "row", _("the whole sequence's dY"))
        elif mode == "column" and not report_field(report, "gather_output"):
            put("dY", "slice", "col")
        else:
            put("dY", "replicated")
        if mode == "row":
            put("dX", "slice", "col")
            snap(_("backward: dX_r = dY A_r^T is a slice of dX: no communication"), "backward")
        else:
            if sp:  # dW = dZ^T X needs every token: gather X again instead of having kept it
                collective(
                    "all_gather",
                    "backward",
                    "X",
                    "row",
                    _("X gathered again for dW (SP saved only its block)"),
                )
            put("dX", "partial")
            snap(
                _("backward: dX_r = {grad} A_r^T is a PARTIAL SUM of dX").format(
                    grad="dZ_r" if mlp else "dY_r"
                ),
                "backward",
            )
            if sp:
                collective(
                    "reduce_scatter",
                    "backward",
                    "dX",
                    "row",
                    _("rank r keeps its sequence block of dX"),
                )
            else:
                collective("all_reduce", "backward", "dX", "col", _("f: the full dX on every rank"))
    if done != ran:
        raise bad_value(
            "report collectives",
            ran,
            _("the collectives of mode={mode!r} rule={rule!r}: {done}").format(
                mode=mode, rule=rule, done=done
            ),
        )
    return frames
