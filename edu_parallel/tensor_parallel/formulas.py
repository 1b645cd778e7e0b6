"""Tensor parallelism without torch: the collectives each layer needs and the bytes they send.

The options of a run and their checks are in :mod:`edu_parallel.tensor_parallel.config`, the
layers in :mod:`edu_parallel.tensor_parallel.layers`, the runs in
:mod:`edu_parallel.tensor_parallel.report`; this module is what the quiz bank and the pictures need,
so importing it loads neither torch nor ``torch.distributed``. Formulas: Shoeybi et al. 2019 (arXiv
1909.08053) §3 (MLP and attention, Fig. 3a and 3b); Korthikanti et al. 2022 (arXiv 2205.05198)
§4.2.2; ring volumes as in :func:`edu_parallel.core.metrics.ring_sent_bytes`.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import check_choice
from ..core.metrics import ring_sent_bytes
from ..core.trace import Trace
from .config import MODES


def short_op(op: str) -> str:
    """``all_gather_single`` / ``all_gather_into_tensor`` -> ``all_gather`` (the collective's
    name)."""
    for name in ("all_reduce", "all_gather", "reduce_scatter"):
        if op.startswith(name):
            return name
    return op


def expected_collectives(
    mode: str, gather_output: bool = False, rule: str = "megatron"
) -> tuple[list[str], list[str]]:
    """(forward, backward) collectives that Megatron's (or the syllabus's) rule needs, in order."""
    if rule == "syllabus":
        return (["all_reduce"] if mode == "column" else ["all_gather"]), []
    return {
        "column": (["all_gather"] if gather_output else [], ["all_reduce"]),  # f; gather if asked
        "row": (["all_reduce"], []),  # g
        "mlp": (["all_reduce"], ["all_reduce"]),  # g after B forward; f before A backward
        # SP: g -> all-gather / reduce-scatter pairs; backward also re-gathers the column layer's X
        "mlp-sp": (
            ["all_gather", "reduce_scatter"],
            ["all_gather", "all_gather", "reduce_scatter"],
        ),
    }[mode]


def allreduce_message_bytes(batch: int, seq: int, hidden: int, itemsize: int) -> int:
    """Bytes of one all-reduce of Megatron's MLP: the activation (b, s, h), ``b*s*h*itemsize``."""
    return batch * seq * hidden * itemsize


def tp_sent_bytes(
    mode: str,
    world_size: int,
    batch: int,
    seq: int,
    hidden: int,
    itemsize: int,
    ffn: int | None = None,
    gather_output: bool = False,
) -> float:
    """Bytes one rank sends (ring algorithms) for one forward + backward of ``mode``.

    All-reduce of M bytes sends ``2(t-1)/t M``; all-gather and reduce-scatter of M bytes (the full
    tensor) ``(t-1)/t M`` each, so SP's pair costs the same as one all-reduce (Korthikanti §4.2.2).
    SP's backward gathers the column layer's input X once more (only its sequence block was kept):
    ``5 (t-1)/t M`` in all, 1.25x the MLP without SP, for activations cut by t.
    """
    check_choice("mode", mode, MODES)
    t, m = world_size, allreduce_message_bytes(batch, seq, hidden, itemsize)
    ar, half = 2 * (t - 1) / t * m, (t - 1) / t * m
    if mode == "column":
        ffn = 4 * hidden if ffn is None else ffn
        return ar + ((t - 1) / t * batch * seq * ffn * itemsize if gather_output else 0.0)
    return {"row": ar, "mlp": 2 * ar, "mlp-sp": 5 * half}[mode]


def sp_sent_bytes_per_pass(
    world_size: int, batch: int, seq: int, hidden: int, itemsize: int
) -> dict[str, float]:
    """Bytes one rank sends in each pass of the MLP with sequence parallelism (ring algorithms).

    forward: all-gather X + reduce-scatter Y, ``2 (t-1)/t M`` (one all-reduce's worth);
    backward: all-gather dY + all-gather X again + reduce-scatter dX, ``3 (t-1)/t M``.
    """
    half = (world_size - 1) / world_size * allreduce_message_bytes(batch, seq, hidden, itemsize)
    return {"forward": 2 * half, "backward": 3 * half}


# attention: g after Wo in forward; f before the QKV projections in backward
ATTENTION_COLLECTIVES = (["all_reduce"], ["all_reduce"])


def attention_sent_bytes(
    world_size: int, batch: int, seq: int, hidden: int, itemsize: int
) -> dict[str, float]:
    """Bytes one rank sends per pass of a tensor-parallel attention block (heads split, Megatron
    §3, Fig. 3b): one all-reduce of (b, s, h) forward (``g``) and one backward (``f``), each
    ``2(t-1)/t * b*s*h*itemsize``, the same as the MLP block."""
    t = world_size
    ar = 2 * (t - 1) / t * allreduce_message_bytes(batch, seq, hidden, itemsize)
    return {"forward": ar, "backward": ar}


def traced_collectives(
    trace: Trace, world_size: int
) -> tuple[list[list[tuple]], list[dict[str, Any]], list[dict[str, float]]]:
    """From a TP run's trace: each rank's ``(op, phase, nbytes)`` sequence, rank 0's collectives
    (op, phase, bytes, ring bytes sent) and each rank's ring bytes sent per phase."""
    t = world_size
    ev = sorted(
        (e for e in trace.events if e.kind == "collective"), key=lambda e: (e.rank, e.start)
    )
    seqs = [[(e.op, e.phase, e.nbytes) for e in ev if e.rank == r] for r in range(t)]
    colls = [
        {
            "op": short_op(e.op),
            "traced_op": e.op,
            "phase": e.phase,
            "nbytes": e.nbytes,
            "sent_bytes": float(ring_sent_bytes(e.op, e.nbytes, t)),
        }
        for e in ev
        if e.rank == 0
    ]
    by_phase = [{"forward": 0.0, "backward": 0.0} for _ in range(t)]
    for e in ev:
        by_phase[e.rank][e.phase] += ring_sent_bytes(e.op, e.nbytes, t)
    return seqs, colls, by_phase
