"""Tensor parallelism without torch: modes, argument checks and the communication formulas.

The layers are in :mod:`edu_parallel.tensor_parallel.layers`, the runs in
:mod:`edu_parallel.tensor_parallel.report`; this module is what the quiz bank and the pictures need,
so importing it loads neither torch nor ``torch.distributed``. Formulas: Shoeybi et al. 2019 (arXiv
1909.08053) §3 (MLP and attention, Fig. 3a and 3b); Korthikanti et al. 2022 (arXiv 2205.05198)
§4.2.2; ring volumes as in :func:`edu_parallel.core.metrics.ring_sent_bytes`.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import bad_value, check_choice, check_int
from ..core.metrics import ring_sent_bytes
from ..core.trace import Trace
from ..core.units import DTYPES

MODES = ("column", "row", "mlp", "mlp-sp")
RULES = ("megatron", "syllabus")
# bytes per element of the run's dtype: the layers run in double (exact checks) or single precision
ITEMSIZE = {dtype: DTYPES[dtype] for dtype in ("float64", "float32")}
TOLERANCES = {"float64": (1e-10, 1e-12), "float32": (1e-4, 1e-5)}  # (rtol, atol) of allclose
MAX_ELEMENTS = 2**22  # b * s * max(h, ffn): a teaching run on CPU


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


def check_attention_args(
    world_size: Any,
    batch: Any = 2,
    seq: Any = 4,
    hidden: Any = 16,
    heads: Any = 4,
    causal: Any = True,
    seed: Any = 0,
    dtype: Any = "float64",
) -> tuple[Any, ...]:
    """Validate a tensor-parallel attention run before any process starts."""
    t = check_int("world_size", world_size, 1, 64)
    batch, seq = check_int("batch", batch, 1, 1024), check_int("seq", seq, 1, 4096)
    hidden, heads = check_int("hidden", hidden, 1, 8192), check_int("heads", heads, 1, 8192)
    if hidden % heads:
        raise bad_value("heads", heads, f"a divisor of hidden={hidden} (head size h/a)")
    if heads % t:
        raise bad_value(
            "heads", heads, f"a multiple of the TP degree world_size={t} (whole heads per rank)"
        )
    if not isinstance(causal, bool):
        raise bad_value("causal", causal, "True or False")
    seed = check_int("seed", seed, 0)
    check_choice("dtype", dtype, ITEMSIZE)
    if batch * seq * max(hidden, seq * heads) > MAX_ELEMENTS:
        raise bad_value(
            "batch*seq*max(hidden, seq*heads)",
            batch * seq * max(hidden, seq * heads),
            f"at most {MAX_ELEMENTS}",
        )
    return t, batch, seq, hidden, heads, causal, seed, dtype


def check_tp_args(
    mode: Any,
    world_size: Any,
    batch: Any = 2,
    seq: Any = 4,
    hidden: Any = 8,
    ffn: Any = None,
    seed: Any = 0,
    dtype: Any = "float64",
    rule: Any = "megatron",
    gather_output: Any = False,
) -> tuple[Any, ...]:
    """Validate before any process starts; a ValueError names parameter, value and valid range."""
    check_choice("mode", mode, MODES)
    check_choice("rule", rule, RULES)
    check_choice("dtype", dtype, ITEMSIZE)
    t = check_int("world_size", world_size, 1, 64)
    batch, seq = check_int("batch", batch, 1, 1024), check_int("seq", seq, 1, 4096)
    hidden = check_int("hidden", hidden, 1, 8192)
    ffn = 4 * hidden if ffn is None else check_int("ffn", ffn, 1, 32768)
    seed = check_int("seed", seed, 0)
    if not isinstance(gather_output, bool):
        raise bad_value("gather_output", gather_output, "True or False")
    if rule == "syllabus" and mode not in ("column", "row"):
        raise bad_value(
            "rule",
            rule,
            f"'megatron' with mode={mode!r} (the syllabus rule is run for 'column' and 'row')",
        )
    if gather_output and (mode != "column" or rule != "megatron"):
        raise bad_value(
            "gather_output", gather_output, "False unless mode='column' with rule='megatron'"
        )
    if hidden % t:
        raise bad_value(
            "hidden",
            hidden,
            f"a multiple of the TP degree world_size={t} (Megatron "
            "splits the attention heads, hence h, over the ranks)",
        )
    if ffn % t:
        raise bad_value(
            "ffn", ffn, f"a multiple of the TP degree world_size={t} (A and B are split along ffn)"
        )
    if mode == "mlp-sp" and seq % t:
        raise bad_value("seq", seq, f"a multiple of world_size={t} (sequence parallelism splits s)")
    if batch * seq * max(hidden, ffn) > MAX_ELEMENTS:
        raise bad_value(
            "batch*seq*max(hidden, ffn)", batch * seq * max(hidden, ffn), f"at most {MAX_ELEMENTS}"
        )
    return mode, t, batch, seq, hidden, ffn, seed, dtype, rule, gather_output


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
