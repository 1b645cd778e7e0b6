"""Exercise 07: one ZeRO-1 optimizer step.

``my_zero1_step(ctx, params, grad, state, step, lr)`` is ZeRO stage 1's step (P_os; Rajbhandari et
al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC, §5.1):
reduce-scatter the flat gradient, update only the rank's shard [r·S, (r+1)·S) with Adam
(:func:`~edu_parallel.task.mlp.adam_update`, ``torch.optim.Adam``'s), keeping m and v
for that shard only, and all-gather the parameters; buffers are padded to N·S as in
:mod:`edu_parallel.zero.stages`. fp32 here: the parameters are the master copy, so K = 8.

Graded on the result (plain DP's step, ``all_reduce`` / N then Adam on every element, within
rtol 1e-5, atol 1e-7; bit for bit on gloo), the bytes of the trace's collectives (2(N−1)/N·Ψ·4 per
rank, an all-reduce's: ``comm_bytes_per_step``), the collectives (a reduce-scatter and an
all-gather) and the memory: the tensors left in ``state`` are 8Ψ/N bytes, 1/N of DP's
(``model_state_bytes``), drawn beside DP's with lesson 07's memory bars.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ...core.i18n import N_, _
from ...core.metrics import ring_sent_bytes
from ...core.trace import Event, Trace
from ...core.units import format_bytes
from ...engine.context import ALL_GATHER, REDUCE_SCATTER, RankContext
from ...memory.communication import comm_bytes_per_step
from ...memory.model_states import model_state_bytes
from ...task.mlp import (
    DEFAULT_MICROBATCH,
    adam_update,
    init_master,
    microbatch_of,
    mlp_backward,
    mlp_forward,
    mse_grad,
    num_params,
    padded_numel,
)
from ...viz.zero import memory_bars
from ..checks import tensor_result
from ..spec import Case, Exercise, Finding, RankOutcome
from ..volume import volume_figure

LR = 0.01  # Adam's learning rate
SEED = 0


def zero1_step(ctx, params, grad, state, step, lr):
    """The reference solution: ZeRO-1's step on flat fp32 buffers of N·S elements."""
    n, r = ctx.world_size, ctx.rank
    size = params.numel() // n  # S: the buffers are padded to a multiple of N
    mine = slice(r * size, (r + 1) * size)  # rank r owns shard r
    # 1. reduce-scatter: rank r receives shard r of the sum of every rank's gradient
    g = torch.empty(size, dtype=grad.dtype)
    ctx.collective(REDUCE_SCATTER, g, grad)
    g /= n  # the average, as plain DP's
    # 2. Adam on shard r only: m and v exist for S elements (1/N of DP's) and stay in `state`
    if not state:
        state["adam_m"], state["adam_v"] = torch.zeros(size), torch.zeros(size)
    adam_update(params[mine], g, state["adam_m"], state["adam_v"], step, lr)
    # 3. all-gather: every rank sends its updated shard and receives the others, in place
    ctx.collective(ALL_GATHER, params, params[mine].clone())
    return params


# ----------------------------------------------------------------------------- the harness
def inputs(rank: int, case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """The lesson's MLP as one padded flat fp32 vector (P,), and ``rank``'s gradient (P,) of the
    MSE on its microbatch (not yet averaged)."""
    dims, n = case.option("dims"), case.world_size
    psi = num_params(dims)
    params = torch.zeros(padded_numel(psi, n))
    params[:psi] = init_master(dims, SEED)
    x, y = microbatch_of(rank, dims, n, DEFAULT_MICROBATCH, SEED)  # (B, d_in), (B, d_out)
    out, saved = mlp_forward(params, x, dims)
    _x, dout = mse_grad(out, y)
    grad = torch.zeros_like(params)
    mlp_backward(params, saved, dout, dims, grad[:psi])
    return params, grad


def prepare(ctx: RankContext, case: Case) -> tuple[tuple, None]:
    params, grad = inputs(ctx.rank, case)
    return (params, grad, {}, 1, LR), None


def held_bytes(obj: Any, given: tuple[torch.Tensor, ...]) -> dict[str, int]:
    """Bytes of the tensors in ``obj`` (a dict, walked) by key; views of ``given`` cost none."""
    owners = {t.untyped_storage().data_ptr() for t in given}
    out: dict[str, int] = {}
    for key, value in obj.items() if isinstance(obj, dict) else []:
        tensors = value if isinstance(value, (list, tuple)) else [value]
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in owners:
                out[str(key)] = out.get(str(key), 0) + t.numel() * t.element_size()
    return out


def finish(ctx: RankContext, case: Case, args: tuple, result: object) -> dict[str, Any]:
    """What the learner left in ``state``, and plain DP's step on the same inputs."""
    params, grad, state = args[:3]
    expected, g = inputs(ctx.rank, case)
    dist.all_reduce(g)
    m, v = torch.zeros_like(expected), torch.zeros_like(expected)
    adam_update(expected, g / ctx.world_size, m, v, 1, LR)
    return {"expected": expected, "state": held_bytes(state, (params, grad))}


# ----------------------------------------------------------------------------- the judge
def check_result(case: Case, outputs: list[RankOutcome]) -> Finding:
    n, numel = case.world_size, case.numel
    size = numel // n
    for r, out in enumerate(outputs):
        got, want = out.result, out.facts["expected"]
        if torch.allclose(got, want, rtol=1e-5, atol=1e-7):
            continue
        wrong = ~torch.isclose(got, want, rtol=1e-5, atol=1e-7)
        shards = sorted({int(i) // size for i in wrong.nonzero().flatten()})
        i = int(wrong.nonzero()[0])
        msg = (
            _(
                "rank {r}'s parameters after the step differ from plain DP's (all-reduce, then "
                "Adam on every element) in shards {shards} of S = {size} elements (shard k is "
                "rank k's), first at element {i}: got {got}, expected {want}"
            )
            if len(shards) > 1
            else _(
                "rank {r}'s parameters after the step differ from plain DP's (all-reduce, then "
                "Adam on every element) in shard {shards} of S = {size} elements (shard k is "
                "rank k's), first at element {i}: got {got}, expected {want}"
            )
        ).format(
            r=r,
            shards=shards,
            size=size,
            i=i,
            got=f"{got[i].item():.6g}",
            want=f"{want[i].item():.6g}",
        )
        return Finding("result", False, msg, case, rank=r)
    ok = _("every rank's parameters equal plain DP's after the step")
    return Finding("result", True, ok, case)


def sent_bytes(trace: Trace, rank: int) -> float:
    """Bytes ``rank`` sent: its point-to-point sends and what a ring sends for its collectives."""
    n, total = trace.world_size, 0.0
    for e in trace.events:
        if e.rank == rank and e.kind == "send":
            total += e.nbytes
        elif e.rank == rank and e.kind == "collective" and e.op in COLLECTIVES:
            total += ring_sent_bytes(e.op, e.nbytes, n)
    return total


COLLECTIVES = {"all_reduce", ALL_GATHER, REDUCE_SCATTER}


def check_traffic(case: Case, trace: Trace) -> list[Finding]:
    n, numel = case.world_size, case.numel
    target = comm_bytes_per_step(numel, n, zero=1, precision="fp32")
    psi = num_params(case.option("dims"))
    formula = f"2(N\u22121)/N\u00b7\u03a8\u00b74 = {format_bytes(target)}"
    if psi != numel:
        formula += " " + _("(\u03a8 = {psi} padded to {numel})").format(psi=psi, numel=numel)
    for r in range(n):
        sent = sent_bytes(trace, r)
        if sent > target * (1 + 1e-9) or sent == 0:
            msg = (
                _(
                    "rank {r} sent {sent} (call the collectives through ctx.collective); the "
                    "target is {formula}"
                )
                if sent == 0
                else _("rank {r} sent {sent}; the target is {formula}")
            ).format(r=r, sent=format_bytes(sent), formula=formula)
            return [Finding("bytes", False, msg, case, rank=r)]
    ok = _("every rank sent {formula}, an all-reduce's volume").format(formula=formula)
    found = [Finding("bytes", True, ok, case)]
    for r in range(n):
        ops = [e.op for e in trace.events if e.rank == r and e.kind == "collective"]
        if len(ops) > 2:
            msg = _(
                "rank {r} ran {n} collectives ({ops}); one reduce-scatter and one all-gather are "
                "enough (each costs (N\u22121) latencies \u03b1)"
            ).format(r=r, n=len(ops), ops=", ".join(ops))
            return [*found, Finding("messages", False, msg, case, rank=r)]
    return [*found, Finding("messages", True, _("one reduce-scatter, one all-gather"), case)]


def state_target(case: Case) -> tuple[float, float]:
    """Adam's m and v per rank: ZeRO-1's 8Ψ/N and DP's 8Ψ (fp32, Ψ padded)."""
    est = [model_state_bytes(case.numel, case.world_size, z, "fp32") for z in (1, 0)]
    return tuple(e.breakdown["adam_m"] + e.breakdown["adam_v"] for e in est)  # type: ignore[return-value]


def check_memory(case: Case, outputs: list[RankOutcome]) -> Finding:
    target, dp = state_target(case)
    for r, out in enumerate(outputs):
        held = sum(out.facts["state"].values())
        if held == 0 or held > target:
            what = ", ".join(f"{k}: {format_bytes(b)}" for k, b in out.facts["state"].items())
            msg = (
                _(
                    "rank {r} keeps {held} of optimizer state in `state` ({what}); ZeRO-1 keeps "
                    "1/N of DP's: 8\u03a8/N = {target} (DP: 8\u03a8 = {dp})"
                )
                if what
                else _(
                    "rank {r} keeps {held} of optimizer state in `state`: keep Adam's m and v for "
                    "your shard there; ZeRO-1 keeps 1/N of DP's: 8\u03a8/N = {target} (DP: "
                    "8\u03a8 = {dp})"
                )
            ).format(
                r=r,
                held=format_bytes(held),
                what=what,
                target=format_bytes(target),
                dp=format_bytes(dp),
            )
            return Finding("memory", False, msg, case, rank=r)
    ok = _("optimizer state 8\u03a8/N = {target}").format(target=format_bytes(target))
    return Finding("memory", True, ok, case)


def judge(case: Case, outputs: list[RankOutcome], trace: Trace) -> list[Finding]:
    found = tensor_result(outputs, case, (case.numel,), torch.float32)
    if found:
        return found
    return [check_result(case, outputs), *check_traffic(case, trace), check_memory(case, outputs)]


# ----------------------------------------------------------------------------- the picture
def picture(grade: Any) -> list[Any]:
    """Lesson 07's memory bars (DP, ZeRO-1 and your rank's state) and the bytes per rank by
    collective, yours beside the reference's."""
    case, figures = grade.shown, []
    if case is None or not grade.outputs:
        return figures
    mark = grade.mark
    r = mark.rank if mark is not None and mark.check == "memory" else 0
    bars = {
        name: model_state_bytes(case.numel, case.world_size, z, "fp32")
        for z, name in ((0, "DP"), (1, "ZeRO-1"))
    }
    yours = _("yours (rank {r})").format(r=r)
    p = case.numel * 4
    bars[yours] = {"param32": p, "grad32": p, **grade.outputs[r].facts["state"]}
    title = _("model states per rank, fp32 Adam, \u03a8 = {psi}, N = {n}").format(
        psi=case.numel, n=case.world_size
    )
    figures.append(memory_bars(bars, title=title, highlight=yours))
    return figures + ([volume_figure(grade, collective_name)] if grade.trace is not None else [])


def collective_name(e: Event, _k: int) -> str:
    """ "reduce-scatter" from "reduce_scatter_tensor" (or "_single"), "all-gather", "all-reduce"
    (in the learner's language)."""
    name = "-".join(e.op.split("_")[:2])
    return _(COLLECTIVE_NAMES[name]) if name in COLLECTIVE_NAMES else name


COLLECTIVE_NAMES = {
    "reduce-scatter": N_("reduce-scatter"),
    "all-gather": N_("all-gather"),
    "all-reduce": N_("all-reduce"),
}


def _case(n: int, dims: tuple[int, ...]) -> Case:
    return Case(n, padded_numel(num_params(dims), n), "float32", (("dims", dims),))


STARTER = """\
def my_zero1_step(ctx, params, grad, state, step, lr):
    n, r = ctx.world_size, ctx.rank
    size = params.numel() // n  # the flat buffers are padded to N shards of `size` elements
    g = torch.empty(size)  # 1. your shard of the summed gradient:
    ...  #    ctx.collective(REDUCE_SCATTER, g, grad), then the average
    ...  # 2. adam_update(params[your shard], g, m, v, step, lr) with m and v for your shard
    ...  #    only, kept in state (an empty dict before the first step)
    ...  # 3. all-gather: ctx.collective(ALL_GATHER, params, a copy of your updated shard)
    return params
"""

EXERCISE = Exercise(
    lesson="07_zero_fsdp",
    title=N_("A ZeRO-1 optimizer step"),
    function="my_zero1_step",
    params=("ctx", "params", "grad", "state", "step", "lr"),
    task=N_(
        "Write `my_zero1_step(ctx, params, grad, state, step, lr)`: `params` is the whole model "
        "as one flat fp32 vector (every rank holds all of it), `grad` this rank's gradient of the "
        "same length, not yet averaged. Reduce-scatter the gradient, update only your shard "
        "(rank r owns elements [r\u00b7S, (r+1)\u00b7S)) with `adam_update`, keeping Adam's m and "
        "v for that shard in the dict `state`, then all-gather the parameters and return them. "
        "Target: the parameters plain DP gets, 2(N\u22121)/N\u00b7\u03a8\u00b74 bytes per rank "
        "(an all-reduce's), and 8\u03a8/N bytes of optimizer state instead of DP's 8\u03a8."
    ),
    starter=STARTER,
    hints=(
        N_(
            "An all-reduce is a reduce-scatter followed by an all-gather. ZeRO-1 puts the "
            "optimizer step between the two: after the reduce-scatter a rank holds the reduced "
            "gradient of its shard only, and that is all it needs to update its shard."
        ),
        N_(
            "`torch.distributed`'s reduce-scatter gives rank r shard r of the sum (the ring of "
            "lesson 03 numbered its chunks differently). Divide by N, create zeros m and v of S "
            "elements in `state` on the first step, run Adam on the view `params[r*S:(r+1)*S]`, "
            "then all-gather a copy of that view into `params`."
        ),
        N_(
            "`ctx.collective(REDUCE_SCATTER, g, grad)`; `g /= n`; `adam_update(params[mine], g, "
            "state['adam_m'], state['adam_v'], step, lr)`; "
            "`ctx.collective(ALL_GATHER, params, params[mine].clone())`"
        ),
    ),
    reference=zero1_step,
    prepare=prepare,
    finish=finish,
    judge=judge,
    cases=(
        _case(2, (16, 16, 16, 16)),  # the lesson's MLP, Ψ = 816
        _case(4, (16, 16, 16, 16)),
        _case(4, (16, 15, 7)),  # Ψ = 367: one padding element
    ),
    picture=picture,
)
