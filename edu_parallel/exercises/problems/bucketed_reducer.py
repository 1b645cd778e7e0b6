"""Exercise 06: DDP's bucketed gradient reducer, its all-reduces overlapped with backward.

``my_bucketed_reducer(ctx, model, loss_fn, batch, buckets)`` runs forward and backward of the rank's
``batch`` and leaves in each ``.grad`` the average over the ranks, as ``DistributedDataParallel``
does (Li et al. 2020, "PyTorch Distributed", VLDB, arXiv 2006.15704, §3.2.3): a post-accumulate-grad
hook copies each gradient into its bucket, a full bucket's all-reduce is launched asynchronously
while backward goes on, and the optimizer step waits for every bucket. ``buckets`` is the package's
plan (:mod:`edu_parallel.data_parallel.buckets`: torch's rule, reverse registration order).

Graded on the result (torch's ``all_reduce`` of the ranks' gradients / N), the messages (one
all-reduce per bucket), the bytes (the k-th all-reduce carries bucket k; 2(N−1)/N·Ψ·4 per rank,
``DdpConfig.bytes_per_step``) and the overlap: an all-reduce launched before the rank's last
gradient was ready (the harness's hooks mark each gradient and time each layer's backward).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch
import torch.distributed as dist

from ...core.i18n import N_, _
from ...core.metrics import ring_sent_bytes
from ...core.schema import GRAD_READY_MARK, GRAD_SYNC, STEP_START_MARK
from ...core.trace import Event, Trace
from ...core.units import format_bytes
from ...data_parallel.config import DdpConfig
from ...data_parallel.model import build_model, loss_of, microbatch, trained_params
from ...engine.context import RankContext
from ...viz.ddp import streams_figure
from ...viz.style import title_layout
from ..spec import Case, Exercise, Finding, RankOutcome
from ..volume import volume_figure


def bucketed_reducer(ctx, model, loss_fn, batch, buckets):
    """The reference solution: DDP's reducer in one function."""
    n = ctx.world_size
    params = dict(model.named_parameters())
    flats = [torch.zeros(sum(params[name].numel() for name in names)) for names in buckets]
    slot = {}  # parameter name -> (its bucket, the view of its gradient in the bucket's buffer)
    for b, names in enumerate(buckets):
        at = 0
        for name in names:
            p = params[name]
            slot[name] = (b, flats[b][at : at + p.numel()].view_as(p))
            at += p.numel()
    missing = [len(names) for names in buckets]  # gradients each bucket still waits for
    works = [None] * len(buckets)  # one handle per launched all-reduce

    def on_grad(name, p):  # runs inside backward, as soon as p.grad is final
        b, view = slot[name]
        view.copy_(p.grad)
        missing[b] -= 1
        if missing[b] == 0:  # full: launch it and let backward go on (buckets fill in order)
            works[b] = ctx.collective("all_reduce", flats[b], async_op=True)

    hooks = [  # name=name binds each hook to its own parameter's name
        params[name].register_post_accumulate_grad_hook(lambda p, name=name: on_grad(name, p))
        for name in slot
    ]
    x, y = batch
    loss_fn(model(x), y).backward()
    for work in works:  # the optimizer step may not start before every bucket is reduced
        work.wait()
    for name, (_b, view) in slot.items():
        params[name].grad.copy_(view / n)  # the sum over ranks -> the average
    for hook in hooks:
        hook.remove()


# ----------------------------------------------------------------------------- the harness
def config_of(case: Case) -> DdpConfig:
    """The lesson's DDP run for ``case``: its model, bucket cap and frozen layers."""
    opt = case.option
    return DdpConfig(case.world_size, opt("model"), opt("bucket_cap_mb"), freeze=opt("freeze", 0))


def layer_of(name: str) -> int:
    """Linear ``i`` is module ``2 i`` of the Sequential: "4.weight" -> 2."""
    return int(name.split(".")[0]) // 2


def time_backward(ctx: RankContext, model: torch.nn.Module, plan: Any) -> None:
    """Hooks registered before the learner's, so they run first: a ``grad_ready`` mark per
    gradient, and a ``backward`` compute event per layer, from the end of forward or of the layer
    before until its last gradient is in: the times the overlap check and the picture read."""
    bucket, names = plan.bucket_of(), [name for name, _x in trained_params(model)]
    left = {i: sum(1 for x in names if layer_of(x) == i) for i in map(layer_of, names)}
    last = [0.0]

    def forward_end(_m: Any, _inp: Any, _out: Any) -> None:
        last[0] = ctx.tracer.now()
        ctx.mark(STEP_START_MARK, step=1)  # the picture's time zero

    def ready(name: str, _p: torch.Tensor) -> None:
        i = layer_of(name)
        ctx.mark(GRAD_READY_MARK, param=name, bucket=bucket[name], step=1, layer=i)
        left[i] -= 1
        if left[i] == 0:
            now, attrs = ctx.tracer.now(), {"layer": i, "microbatch": 0}
            ctx.record_compute("backward", 0, last[0], now, step=1, phase="backward", attrs=attrs)
            last[0] = now

    model.register_forward_hook(forward_end)
    for name, p in trained_params(model):
        p.register_post_accumulate_grad_hook(functools.partial(ready, name))


def prepare(ctx: RankContext, case: Case) -> tuple[tuple, None]:
    config = config_of(case)
    model = build_model(config)
    time_backward(ctx, model, config.buckets())
    batch = microbatch(config, 1, ctx.rank, 0)  # this rank's rows of the global batch
    buckets = [list(b.params) for b in config.buckets()]
    return (model, functools.partial(loss_of, config), batch, buckets), None


def finish(ctx: RankContext, case: Case, args: tuple, result: object) -> dict[str, Any]:
    """The learner's ``.grad`` s, and torch's ``all_reduce`` / N of a fresh model's gradients."""
    config = config_of(case)
    mine = trained_params(args[0])
    missing = [name for name, p in mine if p.grad is None]
    got = None if missing else torch.cat([p.grad.detach().reshape(-1) for _x, p in mine])
    fresh = build_model(config)
    x, y = microbatch(config, 1, ctx.rank, 0)
    loss_of(config, fresh(x), y).backward()
    expected = torch.cat([p.grad.reshape(-1) for _x, p in trained_params(fresh)])
    dist.all_reduce(expected)
    sizes = [(name, p.numel()) for name, p in mine]
    return {"grads": got, "missing": missing, "expected": expected / ctx.world_size, "sizes": sizes}


# ----------------------------------------------------------------------------- the judge
def all_reduces(trace: Trace, rank: int) -> list[Event]:
    """``rank``'s all-reduces through ``ctx.collective``, in the order launched."""
    mine = [e for e in trace.events if e.rank == rank and e.kind == "collective"]
    return sorted((e for e in mine if e.op == "all_reduce"), key=lambda e: e.start)


def check_result(case: Case, outputs: list[RankOutcome]) -> Finding:
    """Every rank's ``.grad`` s equal the average; else the first wrong parameter, and whether
    it holds N times the average (the sum)."""
    for r, out in enumerate(outputs):
        facts, at = out.facts, 0
        if facts["missing"]:
            msg = _("rank {r}: {name}.grad is None when your function returns").format(
                r=r, name=facts["missing"][0]
            )
            return Finding("result", False, msg, case, rank=r)
        for name, size in facts["sizes"]:
            got, want = facts["grads"][at : at + size], facts["expected"][at : at + size]
            at += size
            if not torch.allclose(got, want, rtol=1e-5, atol=1e-7):
                n = case.world_size
                why = _("got {got}, expected {want} (element 0)").format(
                    got=f"{got[0].item():.6g}", want=f"{want[0].item():.6g}"
                )
                if torch.allclose(got, want * n, rtol=1e-4, atol=1e-6):
                    why = _("N = {n} times the average: divide the sum by N").format(n=n)
                msg = _(
                    "rank {r}'s {name}.grad is not the average of the ranks' gradients: {why}"
                ).format(r=r, name=name, why=why)
                return Finding("result", False, msg, case, rank=r)
    return Finding("result", True, _("every .grad holds the average over the ranks"), case)


def check_buckets(case: Case, trace: Trace) -> list[Finding]:
    """Bytes: at most 2(N-1)/N·Ψ·4 per rank, and the k-th all-reduce carries bucket k. Messages:
    one all-reduce per bucket of the plan."""
    config = config_of(case)
    plan, n, target = config.buckets(), case.world_size, config.bytes_per_step()
    volume = f"2(N\u22121)/N\u00b7\u03a8\u00b74 = {format_bytes(target)}"
    launched = [all_reduces(trace, r) for r in range(n)]
    for r, mine in enumerate(launched):
        sent = sum(ring_sent_bytes("all_reduce", e.nbytes, n) for e in mine)
        msg = _("rank {r}'s all-reduces send {sent}; the target is {volume}").format(
            r=r, sent=format_bytes(sent), volume=volume
        )
        if sent <= target * (1 + 1e-9) and len(mine) == len(plan):
            k = next((k for k, e in enumerate(mine) if e.nbytes != plan.sizes[k]), None)
            if k is None:
                continue
            msg = _(
                "rank {r}'s all-reduce #{k} carried {carried}; bucket {k} ({params}) holds {holds}"
            ).format(
                r=r,
                k=k,
                carried=format_bytes(mine[k].nbytes),
                params=" ".join(plan.buckets[k].params),
                holds=format_bytes(plan.sizes[k]),
            )
        elif sent <= target * (1 + 1e-9):
            continue  # too many or too few all-reduces: the messages check says so
        return [Finding("bytes", False, msg, case, rank=r)]
    ok = _("every rank sent {volume}, bucket by bucket").format(volume=volume)
    found = [Finding("bytes", True, ok, case)]
    r = next((r for r, mine in enumerate(launched) if len(mine) != len(plan)), None)
    if r is None:
        ok = _("one all-reduce per bucket ({n})").format(n=len(plan))
        return [*found, Finding("messages", True, ok, case)]
    if launched[r]:
        msg = _(
            "rank {r} launched {count} all-reduces; the plan has {n} buckets: one all-reduce per "
            "bucket, 2(N\u22121)\u00b7{n} = {messages} ring messages (each costs a latency \u03b1)"
        )
    else:
        msg = _(
            "rank {r} launched {count} all-reduces (call it through ctx.collective so the trace "
            "sees it); the plan has {n} buckets: one all-reduce per bucket, 2(N\u22121)\u00b7{n} "
            "= {messages} ring messages (each costs a latency \u03b1)"
        )
    msg = msg.format(r=r, count=len(launched[r]), n=len(plan), messages=config.messages_per_step())
    return [*found, Finding("messages", False, msg, case, rank=r)]


def check_overlap(case: Case, trace: Trace) -> Finding:
    """At least one all-reduce launched before the rank's last gradient was accumulated."""
    for r in range(case.world_size):
        ready = [e.start for e in trace.events if e.rank == r and e.op == GRAD_READY_MARK]
        launched = all_reduces(trace, r)
        if not ready or not launched:
            continue
        if min(e.start for e in launched) >= max(ready):
            late = (min(e.start for e in launched) - max(ready)) * 1e6
            msg = _(
                "rank {r} launched its first all-reduce {late} \u00b5s after its last gradient "
                "was ready: nothing overlapped with backward. Launch a bucket from a gradient "
                "hook as soon as it is full (async_op=True), wait after backward"
            ).format(r=r, late=f"{late:.0f}")
            return Finding("overlap", False, msg, case, rank=r)
        early = [e for e in launched if e.start < max(ready)]
        if not any((e.attrs or {}).get("async") for e in early):
            msg = _(
                "rank {r} ran its all-reduces during backward, but blocking (no async_op=True): "
                "backward stopped until each finished, so nothing overlapped. Launch with "
                "async_op=True and wait on the handles after backward"
            ).format(r=r)
            return Finding("overlap", False, msg, case, rank=r)
    return Finding("overlap", True, _("all-reduces launched while backward was running"), case)


def judge(case: Case, outputs: list[RankOutcome], trace: Trace) -> list[Finding]:
    found = [check_result(case, outputs)]
    found += check_buckets(case, trace)
    if all(all_reduces(trace, r) for r in range(case.world_size)):
        found.append(check_overlap(case, trace))
    return found


# ----------------------------------------------------------------------------- the picture
def streams_trace(trace: Trace) -> Trace:
    """``trace`` as lesson 06's stream view reads it: the k-th all-reduce of a rank is bucket k's,
    phase ``grad_sync``, launched at its start (its bar spans the launch only: the wait is not
    traced)."""
    events, seen = [], {}
    for e in sorted(trace.events, key=lambda e: e.start):
        if e.kind == "collective" and e.op == "all_reduce":
            k = seen[e.rank] = seen.get(e.rank, -1) + 1
            attrs = {"bucket": k, "issued": e.start, "after_layer": None}
            e = dataclasses.replace(e, phase=GRAD_SYNC, step=1, attrs=attrs)
        events.append(e)
    return Trace(dict(trace.meta), events)


def nth_all_reduce(_e: Event, k: int) -> str:
    return _("all-reduce #{k}").format(k=k)


def picture(grade: Any) -> list[Any]:
    """Backward and the all-reduce launches on each rank (yours, then the reference's), and the
    bytes per rank stacked by all-reduce."""
    figures: list[Any] = []
    heads = (
        (N_("your run ({case}): backward and all-reduce launches"), grade.trace),
        (N_("the reference ({case}): backward and all-reduce launches"), grade.reference_trace),
    )
    for head, trace in heads:
        if trace is not None and any(e.op == "backward" for e in trace.events):
            fig = streams_figure(streams_trace(trace))
            head = _(head).format(case=grade.shown.label())
            sub = _(
                "\u25bc a bucket's all-reduce launched; shaded: backward (launched inside: overlap)"
            )
            figures.append(fig.update_layout(title=title_layout(head, sub)))
    return figures + ([volume_figure(grade, nth_all_reduce)] if grade.trace is not None else [])


def _case(n: int, model: str, cap_mb: float, freeze: int = 0) -> Case:
    options: tuple[tuple[str, Any], ...] = (("model", model), ("bucket_cap_mb", cap_mb))
    options += (("freeze", freeze),) if freeze else ()
    psi = DdpConfig(n, model=model, bucket_cap_mb=cap_mb, freeze=freeze).psi
    return Case(n, psi, "float32", options)


STARTER = """\
def my_bucketed_reducer(ctx, model, loss_fn, batch, buckets):
    n = ctx.world_size
    params = dict(model.named_parameters())
    # one flat buffer per bucket (buckets: lists of parameter names, in the order DDP reduces them)
    flats = [torch.zeros(sum(params[name].numel() for name in names)) for names in buckets]
    ...  # a hook per parameter (p.register_post_accumulate_grad_hook): copy p.grad into its
    ...  # bucket; when the bucket is full: ctx.collective("all_reduce", flat, async_op=True)
    x, y = batch
    loss_fn(model(x), y).backward()
    ...  # wait for every all-reduce, then put the average into each p.grad
"""

EXERCISE = Exercise(
    lesson="06_dp_bucketing_overlap",
    title=N_("A bucketed gradient reducer with overlap"),
    function="my_bucketed_reducer",
    params=("ctx", "model", "loss_fn", "batch", "buckets"),
    task=N_(
        "Write `my_bucketed_reducer(ctx, model, loss_fn, batch, buckets)`: run forward and "
        "backward of `loss_fn(model(x), y)` on this rank's `batch = (x, y)` and, when it returns, "
        "every parameter's `.grad` holds the average over the ranks, as after DDP's backward. "
        "`buckets` lists parameter names per bucket, in the order DDP reduces them. Launch each "
        "bucket's all-reduce from a gradient hook as soon as its last gradient is in "
        "(`ctx.collective('all_reduce', flat, async_op=True)` returns a handle; `.wait()` it "
        "after backward). Target: one all-reduce per bucket carrying its bytes, "
        "2(N\u22121)/N\u00b7\u03a8\u00b74 bytes per rank in all, launched during backward."
    ),
    starter=STARTER,
    hints=(
        N_(
            "`p.register_post_accumulate_grad_hook(fn)` calls `fn(p)` during backward, the moment "
            "`p.grad` is final. Backward produces the last layer's gradients first: bucket 0 fills "
            "first, while the earlier layers are still computing."
        ),
        N_(
            "Give each parameter a view into its bucket's flat buffer and count, per bucket, the "
            "gradients still missing. In the hook: copy `p.grad` into the view, decrement the "
            "count, and at zero launch the bucket's all-reduce with `async_op=True`, keeping the "
            "handle. After `backward()`: wait on every handle, then copy view / N into each "
            "`p.grad`."
        ),
        N_(
            "`if missing[b] == 0: works[b] = ctx.collective('all_reduce', flats[b], "
            "async_op=True)` in the hook; after backward `for w in works: w.wait()` and "
            "`params[name].grad.copy_(view / n)`"
        ),
    ),
    reference=bucketed_reducer,
    prepare=prepare,
    finish=finish,
    judge=judge,
    cases=(
        _case(2, "mlp", 0.001),  # 3 buckets, one layer each
        _case(4, "mlp", 0.002),  # 2 buckets: the last two layers, then the first
        _case(4, "tied", 0.001),  # first and last layer share a weight: reduced once
        _case(4, "classifier", 0.004, freeze=1),  # cross-entropy; the frozen layer in no bucket
    ),
    picture=picture,
)
