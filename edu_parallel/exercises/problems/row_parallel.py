"""Exercise 08: a row-parallel linear layer, forward and backward, as an autograd Function.

``my_row_parallel_linear(ctx, x_shard, w_shard)`` is Megatron-LM's row-parallel ``nn.Linear``
(Shoeybi et al. 2019, arXiv 1909.08053, §3 and Fig. 3; the package's
:class:`~edu_parallel.tensor_parallel.layers.RowParallelLinearFn`): X arrives split along its last
(hidden) dimension, rank r multiplies its slice by its shard of the weight (rows r of ``A = Wᵀ``,
columns r of ``nn.Linear``'s W), and Megatron's ``g`` all-reduces the partial sums ``X_r A_r`` in
forward; its backward is the identity.

The harness gives every rank the same seeded problem (``make_problem``, mode "row", no bias), runs
the learner's forward, then backward with a fixed upstream gradient dY (the exercise's traced
``drive`` step, behind a mark). Graded on the output against a dense ``nn.Linear`` on one process
(``allclose`` with ``TOLERANCES``), the gradients of both shards against the dense gradients'
slices, the collectives per pass (one all-reduce of b·s·h forward, none backward:
``expected_collectives("row")``), and the bytes each rank sent as a ring runs them against
``tp_sent_bytes("row", ...)`` = 2(t−1)/t·b·s·h·itemsize.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

import torch

from ...core.i18n import N_, _
from ...core.metrics import ring_sent_bytes
from ...core.trace import Event, Trace
from ...core.units import DTYPES, format_bytes, torch_dtype
from ...engine.autograd import backward_from
from ...engine.context import RankContext
from ...tensor_parallel.config import TOLERANCES
from ...tensor_parallel.formulas import (
    allreduce_message_bytes,
    expected_collectives,
    short_op,
    tp_sent_bytes,
)
from ...tensor_parallel.job import classify_local, dense_reference, expected_piece, make_problem
from ...tensor_parallel.layers import own_block, shard_linear
from ...viz.rank_timeline import timeline
from ..checks import tensor_result
from ..feedback import bytes_figure
from ..spec import Case, Exercise, Finding, RankOutcome

SEED = 0
BACKWARD = "harness: backward"  # the mark between the two passes in each rank's trace


def row_parallel_linear(ctx, x_shard, w_shard):
    """The reference solution: Megatron's row-parallel linear, ``Y = g(X_r A_r)``."""

    class RowParallelLinear(torch.autograd.Function):
        # `fc` is autograd's context (what it saves for backward); `ctx` is the rank context.
        @staticmethod
        def forward(fc, x_shard, w_shard, ctx):
            fc.save_for_backward(x_shard, w_shard)
            # (b, s, h_in/t) @ (h_in/t, h_out) -> (b, s, h_out): Y's shape, but a PARTIAL SUM
            partial = x_shard @ w_shard.t()
            # g's forward: sum the partial sums over the ranks; every rank then holds all of Y
            ctx.collective("all_reduce", partial, phase="forward")
            return partial

        @staticmethod
        def backward(fc, dy):
            # g's backward is the identity: dY (b, s, h_out) is already the same on every rank
            x_shard, w_shard = fc.saved_tensors
            dx = dy @ w_shard  # (b, s, h_out) @ (h_out, h_in/t): this rank's slice of dX
            dw = dy.flatten(0, -2).t() @ x_shard.flatten(0, -2)  # (h_out, h_in/t): rows r of dA
            return dx, dw, None  # no gradient for ctx; no communication in backward

    return RowParallelLinear.apply(x_shard, w_shard, ctx)


# ----------------------------------------------------------------------------- the harness
def dims(case: Case) -> tuple[int, int, int, int]:
    """(b, s, h, ffn): the layer is ``nn.Linear(ffn, h)``, split along ffn."""
    return tuple(case.option(k) for k in ("batch", "seq", "hidden", "ffn"))  # type: ignore[return-value]


@lru_cache(maxsize=16)
def problem(case: Case) -> dict[str, torch.Tensor]:
    """The seeded full weight W (h, ffn), input X (b, s, ffn) and upstream gradient dY (b, s, h)."""
    b, s, h, ffn = dims(case)
    return make_problem("row", b, s, h, ffn, SEED, case.dtype)


@lru_cache(maxsize=16)
def dense(case: Case) -> dict[str, torch.Tensor]:
    """The same layer without bias, dense, on one process: y, dx, dw2."""
    p = problem(case)
    return dense_reference("row", {**p, "b2": torch.zeros_like(p["b2"])})


def prepare(ctx: RankContext, case: Case) -> tuple[tuple[torch.Tensor, torch.Tensor], None]:
    """Rank r's slice of X along its last dim and its shard of W (columns r), both leaves."""
    r, t, p = ctx.rank, ctx.world_size, problem(case)
    x_shard = own_block(p["x"], r, t, -1).clone().requires_grad_()
    w_shard = shard_linear(p["w2"], None, r, t, "row")[0].clone().requires_grad_()
    return (x_shard, w_shard), None


def drive(ctx: RankContext, case: Case, args: tuple, result: Any) -> dict[str, Any] | None:
    """The harness's backward with the fixed dY (when the output has Y's shape and a graph), traced
    behind a mark, so the judge can count each pass's collectives; the shards' gradients."""
    x_shard, w_shard = args
    dy = problem(case)["dy"]
    if not isinstance(result, torch.Tensor) or result.shape != dy.shape:
        return None
    if result.grad_fn is None:
        return {"graph": False}
    ctx.mark(BACKWARD)
    ctx.tracer.where("backward of your layer (the harness's y.backward(dY))")
    with ctx.step(1, "backward"):
        backward_from(result, dy.to(result.dtype))  # dL/dY = dY
    grads = {"dx": x_shard.grad, "dw": w_shard.grad}
    return {"graph": True, **{k: None if g is None else g.detach() for k, g in grads.items()}}


# ----------------------------------------------------------------------------- the judge
def passes(trace: Trace, rank: int) -> dict[str, list[Event]]:
    """``rank``'s collectives by pass: before the backward mark, and after it."""
    mine = sorted((e for e in trace.events if e.rank == rank), key=lambda e: e.start)
    split = next((e.start for e in mine if e.kind == "mark" and e.op == BACKWARD), float("inf"))
    out: dict[str, list[Event]] = {"forward": [], "backward": []}
    for e in mine:
        if e.kind == "collective":
            out["forward" if e.start < split else "backward"].append(e)
    return out


def close(a: torch.Tensor, b: torch.Tensor, case: Case) -> bool:
    rtol, atol = TOLERANCES[case.dtype]
    return a.shape == b.shape and torch.allclose(a.to(b.dtype), b, rtol=rtol, atol=atol)


def check_output(case: Case, outputs: list[RankOutcome]) -> list[Finding]:
    b, s, h, ffn = dims(case)
    t, want = case.world_size, dense(case)["y"]
    found = tensor_result(outputs, case, tuple(want.shape), torch_dtype(case.dtype))
    if found:
        got = outputs[found[0].rank].result
        if isinstance(got, torch.Tensor) and tuple(got.shape) == (b, s, t * h):
            msg = _(
                "{message}: the partial sums side by side along the hidden dimension (an "
                "all-gather, the outline's collective: errata E4). Y is their SUM: all-reduce them"
            ).format(message=found[0].message)
            found[0] = dataclasses.replace(found[0], message=msg)
        return found[:1]
    got = [o.result for o in outputs]
    for r, y in enumerate(got):
        if not close(y, want, case):
            kind = classify_local(got, want, *TOLERANCES[case.dtype])[r]
            diff = f"{(y.to(want.dtype) - want).abs().max().item():.3g}"
            msg = (
                _(
                    "rank {r}'s output is not the dense layer's Y = X A (max |diff| {diff}): it is "
                    "X_r A_r, one of the partial sums, which add up to Y; g's forward all-reduces "
                    "them"
                )
                if kind == "partial_sum"
                else _("rank {r}'s output is not the dense layer's Y = X A (max |diff| {diff})")
            ).format(r=r, diff=diff)
            return [Finding("result", False, msg, case, rank=r)]
    return [Finding("result", True, _("every rank's output equals the dense layer's Y"), case)]


GRADIENTS = (  # (key in the facts, the argument, the dense gradient, which part of it)
    ("dx", "x_shard", "dx", N_("block r of the dense dX along its last dim")),
    ("dw", "w_shard", "dw2", N_("columns r of the dense dW")),
)


def check_gradients(case: Case, outputs: list[RankOutcome]) -> Finding:
    t, full = case.world_size, dense(case)
    for r, out in enumerate(outputs):
        facts = out.facts or {}
        if not facts.get("graph"):
            msg = _(
                "rank {r}'s output has no autograd graph, so backward cannot run: return "
                "YourFunction.apply(x_shard, w_shard, ctx)"
            ).format(r=r)
            return Finding("result", False, msg, case, rank=r)
        for key, arg, dense_name, what in GRADIENTS:
            got, want = facts.get(key), expected_piece("row", dense_name, full, r, t)
            if got is None:
                msg = _("rank {r}'s {arg} got no gradient: backward returned None for it").format(
                    r=r, arg=arg
                )
                return Finding("result", False, msg, case, rank=r, step=1)
            if close(got, want, case):
                continue
            if close(got, t * want, case):
                msg = _(
                    "rank {r}'s gradient of {arg} is not {what}: it is t = {t} times the dense "
                    "one. dY was summed over the ranks in backward, but it is already the same on "
                    "every rank: g's backward is the identity"
                ).format(r=r, arg=arg, what=_(what), t=t)
            elif got.shape != want.shape:
                msg = _(
                    "rank {r}'s gradient of {arg} is not {what}: shape {shape}, expected {want}"
                ).format(r=r, arg=arg, what=_(what), shape=tuple(got.shape), want=tuple(want.shape))
            else:
                diff = f"{(got.to(want.dtype) - want).abs().max().item():.3g}"
                msg = _("rank {r}'s gradient of {arg} is not {what} (max |diff| {diff})").format(
                    r=r, arg=arg, what=_(what), diff=diff
                )
            return Finding("result", False, msg, case, rank=r, step=1)
    return Finding(
        "result", True, _("the gradients of x_shard and w_shard are the dense slices"), case
    )


def check_collectives(case: Case, trace: Trace) -> Finding:
    b, s, h, _x = dims(case)
    message = allreduce_message_bytes(b, s, h, DTYPES[case.dtype])
    fwd, bwd = expected_collectives("row")
    for r in range(case.world_size):
        ran = passes(trace, r)
        ops = {k: [short_op(e.op) for e in v] for k, v in ran.items()}
        if ops["backward"] != bwd:
            msg = _(
                "rank {r} ran {ops} in backward; g's backward is the identity: dY is the same on "
                "every rank, so dX_r = dY A_r\u1d40 and dA_r = X_r\u1d40 dY need no communication"
            ).format(r=r, ops=", ".join(ops["backward"]))
            return Finding("messages", False, msg, case, rank=r, step=1)
        if ops["forward"] != fwd:
            names = ", ".join(ops["forward"]) or _("no collective")
            msg = _(
                "rank {r} ran {names} in forward; g's forward is one all_reduce of Y's "
                "b\u00b7s\u00b7h\u00b7itemsize = {size} (through ctx.collective, so it is traced)"
            ).format(r=r, names=names, size=format_bytes(message))
            return Finding("messages", False, msg, case, rank=r, step=0)
    return Finding(
        "messages", True, _("one all_reduce of b\u00b7s\u00b7h forward, none backward"), case
    )


def ring_bytes(e: Event, n: int) -> float:
    """Bytes a rank sends for one traced event: a ring's volume for a collective (its buffer
    for one the ring formulas do not cover, a broadcast, an all-to-all)."""
    ring = e.kind == "collective" and e.op.startswith(("all_reduce", "all_gather", "reduce_s"))
    return (
        ring_sent_bytes(e.op, e.nbytes, n)
        if ring
        else e.nbytes * (e.kind in ("send", "collective"))
    )


def check_bytes(case: Case, trace: Trace) -> Finding:
    b, s, h, _x = dims(case)
    n = case.world_size
    target = tp_sent_bytes("row", n, b, s, h, DTYPES[case.dtype])
    formula = f"2(t\u22121)/t\u00b7b\u00b7s\u00b7h\u00b7itemsize = {format_bytes(target)}"
    for r in range(n):
        sent = sum(ring_bytes(e, n) for e in trace.events if e.rank == r)
        if sent > target * (1 + 1e-9):
            msg = _("rank {r} sent {sent} (ring volume); the target is {formula}").format(
                r=r, sent=format_bytes(sent), formula=formula
            )
            return Finding("bytes", False, msg, case, rank=r)
    ok = _("every rank sent at most {formula}, one all-reduce").format(formula=formula)
    return Finding("bytes", True, ok, case)


def judge(case: Case, outputs: list[RankOutcome], trace: Trace) -> list[Finding]:
    found = check_output(case, outputs)
    if not found[0].failed:
        found.append(check_gradients(case, outputs))
    return [*found, check_collectives(case, trace), check_bytes(case, trace)]


# ----------------------------------------------------------------------------- the picture
def by_pass(trace: Trace) -> Trace:
    """``trace``'s collectives labelled with their pass, plus one ``send`` event per collective
    of the bytes a ring sends for it (what the byte bars stack)."""
    n, events = trace.world_size, []
    for r in range(n):
        for phase, evs in passes(trace, r).items():
            for e in evs:
                events.append(dataclasses.replace(e, phase=phase))
                sent = int(ring_bytes(e, n))
                events.append(Event(kind="send", rank=r, op="isend", phase=phase, nbytes=sent))
    return Trace({**trace.meta, "world_size": n}, events)


def picture(grade: Any) -> list[Any]:
    """Bytes per rank by pass (yours beside the reference's) and your collectives on a
    timeline, coloured by pass."""
    if grade.trace is None:
        return []
    mine = by_pass(grade.trace)
    ref = None if grade.reference_trace is None else by_pass(grade.reference_trace)
    bars = bytes_figure(dataclasses.replace(grade, trace=mine, reference_trace=ref))
    only = Trace(mine.meta, [e for e in mine.events if e.kind == "collective"])
    return [bars, timeline(only, title=_("your collectives, by pass"))]


STARTER = """\
class MyRowParallelLinear(torch.autograd.Function):
    @staticmethod
    def forward(fc, x_shard, w_shard, ctx):  # fc: autograd's context; ctx: the RankContext
        fc.save_for_backward(x_shard, w_shard)
        partial = x_shard @ w_shard.t()  # (b, s, h_in/t) @ (h_in/t, h_out): a partial sum of Y
        ...  # g's forward: ctx.collective("all_reduce", tensor) sums a tensor over the ranks
        return partial

    @staticmethod
    def backward(fc, dy):  # dy: (b, s, h_out), the gradient of the output
        x_shard, w_shard = fc.saved_tensors
        ...  # g's backward, then the gradients of x_shard and of w_shard
        return torch.zeros_like(x_shard), torch.zeros_like(w_shard), None  # None: for ctx


def my_row_parallel_linear(ctx, x_shard, w_shard):
    return MyRowParallelLinear.apply(x_shard, w_shard, ctx)
"""

EXERCISE = Exercise(
    lesson="08_tensor_parallel",
    title=N_("A row-parallel linear, forward and backward"),
    function="my_row_parallel_linear",
    params=("ctx", "x_shard", "w_shard"),
    task=N_(
        "Write Megatron's row-parallel `nn.Linear(ffn, h)` (no bias) as a "
        "`torch.autograd.Function` and return its `.apply(x_shard, w_shard, ctx)` from "
        "`my_row_parallel_linear(ctx, x_shard, w_shard)`: `x_shard` (b, s, ffn/t) is X split "
        "along its last dim, `w_shard` (h, ffn/t) the matching columns of W. Forward: every rank "
        "returns all of Y = X Wᵀ (Megatron's `g`); backward: the gradients of your two shards. "
        "Target: one all-reduce of b·s·h elements in forward, none in backward, "
        "2(t−1)/t·b·s·h·itemsize bytes per rank."
    ),
    starter=STARTER,
    hints=(
        N_(
            "Each rank's `x_shard @ w_shard.t()` has Y's full shape but holds only its share of "
            "the sum over ffn: Y = Σ_r X_r A_r. What makes every rank hold the sum? And once it "
            "does, which rank's dY differs from the others'?"
        ),
        N_(
            "Megatron's `g`: all-reduce in forward, identity in backward. The upstream dY is the "
            "same on every rank, so dX_r = dY · w_shard and dW_r = dYᵀ X_r (tokens flattened) are "
            "local: backward needs no collective at all."
        ),
        N_(
            "forward: `ctx.collective('all_reduce', partial)`; backward: `return dy @ w_shard, "
            "dy.flatten(0, -2).t() @ x_shard.flatten(0, -2), None`"
        ),
    ),
    reference=row_parallel_linear,
    prepare=prepare,
    drive=drive,
    judge=judge,
    cases=tuple(
        Case(n, b * s * h, dtype, (("batch", b), ("seq", s), ("hidden", h), ("ffn", ffn)))
        for n, b, s, h, ffn, dtype in (
            (2, 2, 4, 8, 32, "float64"),
            (4, 2, 4, 8, 32, "float64"),
            (4, 1, 3, 4, 16, "float32"),
        )
    ),
    picture=picture,
)
