"""Exercise 06 (bucketed reducer with overlap): the reference passes on real ranks; planted wrong
solutions fail with the diagnosis a learner needs (no overlap, one all-reduce per parameter, the
sum instead of the average)."""

from __future__ import annotations

import functools

import pytest
import torch

from edu_parallel.exercises import grade
from edu_parallel.exercises.problems.bucketed_reducer import EXERCISE, bucketed_reducer, picture

pytestmark = pytest.mark.multiprocess


def bucket_views(model, buckets):
    """One flat buffer per bucket and, per parameter name, (bucket, view of its gradient)."""
    params = dict(model.named_parameters())
    flats = [torch.zeros(sum(params[x].numel() for x in names)) for names in buckets]
    slot = {}
    for b, names in enumerate(buckets):
        at = 0
        for name in names:
            slot[name] = (b, flats[b][at : at + params[name].numel()].view_as(params[name]))
            at += params[name].numel()
    return params, flats, slot


def after_backward(ctx, model, loss_fn, batch, buckets):
    """Right buckets, right average, but every all-reduce starts after backward: no overlap."""
    params, flats, slot = bucket_views(model, buckets)
    x, y = batch
    loss_fn(model(x), y).backward()
    for name, (_b, view) in slot.items():
        view.copy_(params[name].grad)
    works = [ctx.collective("all_reduce", flat, async_op=True) for flat in flats]
    for work in works:
        work.wait()
    for name, (_b, view) in slot.items():
        params[name].grad.copy_(view / ctx.world_size)


def per_parameter(ctx, model, loss_fn, batch, buckets):
    """Overlapped, but one all-reduce per parameter: latency-bound."""
    works = []

    def on_grad(p):
        works.append((p, ctx.collective("all_reduce", p.grad, async_op=True)))

    names = [name for names in buckets for name in names]
    params = dict(model.named_parameters())
    for name in names:
        params[name].register_post_accumulate_grad_hook(on_grad)
    x, y = batch
    loss_fn(model(x), y).backward()
    for p, work in works:
        work.wait()
        p.grad /= ctx.world_size


def blocking_in_the_hook(ctx, model, loss_fn, batch, buckets):
    """The reference's buckets, launched from the hook, but blocking: backward waits each time."""
    params, flats, slot = bucket_views(model, buckets)
    missing = [len(names) for names in buckets]

    def on_grad(name, p):
        b, view = slot[name]
        view.copy_(p.grad)
        missing[b] -= 1
        if missing[b] == 0:
            ctx.collective("all_reduce", flats[b])  # no async_op: returns when it is done

    for name in slot:
        params[name].register_post_accumulate_grad_hook(functools.partial(on_grad, name))
    x, y = batch
    loss_fn(model(x), y).backward()
    for name, (_b, view) in slot.items():
        params[name].grad.copy_(view / ctx.world_size)


def forgets_to_divide(ctx, model, loss_fn, batch, buckets):
    """The reference's buckets and overlap, but each .grad gets the sum over the ranks."""
    params, flats, slot = bucket_views(model, buckets)
    missing = [len(names) for names in buckets]
    works = [None] * len(buckets)

    def on_grad(name, p):
        b, view = slot[name]
        view.copy_(p.grad)
        missing[b] -= 1
        if missing[b] == 0:
            works[b] = ctx.collective("all_reduce", flats[b], async_op=True)

    for name in slot:
        params[name].register_post_accumulate_grad_hook(functools.partial(on_grad, name))
    x, y = batch
    loss_fn(model(x), y).backward()
    for work in works:
        work.wait()
    for name, (_b, view) in slot.items():
        params[name].grad.copy_(view)


def test_the_reference_passes_every_case(cluster4):
    g = grade(EXERCISE, bucketed_reducer, cluster4)
    assert g.passed, g.report()
    cases = {f.case for f in g.findings}
    assert {c.world_size for c in cases} == {2, 4}
    assert {c.option("model") for c in cases} == {"mlp", "tied", "classifier"}
    assert {f.check for f in g.findings} == {"result", "bytes", "messages", "overlap"}


def test_all_reducing_after_backward_fails_only_the_overlap(cluster4):
    g = grade(EXERCISE, after_backward, cluster4)
    assert not g.passed
    checks = {f.check: f.ok for f in g.findings if f.case == g.shown}
    assert checks == {"result": True, "bytes": True, "messages": True, "overlap": False}
    first = g.first_failure
    assert first.case.world_size == 2 and first.rank == 0
    assert "after its last gradient was ready: nothing overlapped with backward" in first.message


def test_a_blocking_all_reduce_in_the_hook_fails_the_overlap(cluster4):
    g = grade(EXERCISE, blocking_in_the_hook, cluster4)
    checks = {f.check: f.ok for f in g.findings if f.case == g.shown}
    assert checks == {"result": True, "bytes": True, "messages": True, "overlap": False}
    assert "during backward, but blocking (no async_op=True)" in g.first_failure.message


def test_one_all_reduce_per_parameter_fails_the_message_count(cluster4):
    g = grade(EXERCISE, per_parameter, cluster4)
    assert not g.passed
    checks = {f.check: f.ok for f in g.findings if f.case == g.shown}
    assert checks == {"result": True, "bytes": True, "messages": False, "overlap": True}
    assert g.first_failure.message.startswith(
        "rank 0 launched 6 all-reduces; the plan has 3 buckets: one all-reduce per bucket, "
        "2(N\u22121)\u00b73 = 6 ring messages"
    )


def test_the_sum_instead_of_the_average_fails_the_result(cluster4):
    g = grade(EXERCISE, forgets_to_divide, cluster4)
    assert not g.passed
    first = g.first_failure
    assert (first.check, first.rank, first.case.world_size) == ("result", 0, 2)
    assert "rank 0's 0.weight.grad is not the average" in first.message
    assert "N = 2 times the average: divide the sum by N" in first.message
    figures = picture(g)  # the streams of both runs and the bytes per all-reduce
    assert len(figures) == 3
    assert "your run" in figures[0].layout.title.text
    assert figures[2].axes[0].get_title() == "your run: bytes sent per rank"
