"""DDP's reducer on one rank: gradient buckets as flat buffers, reduced in order on a stream.

Li et al. 2020, "PyTorch Distributed" (VLDB, arXiv 2006.15704) §3.2.3 and torch's
``torch/csrc/distributed/c10d/reducer.cpp``; the steps are named as picotron names them
(``huggingface/picotron``, ``picotron/data_parallel/bucket.py``: ``mark_param_as_ready``,
``sync_gradient``, ``wait``, ``reset``; ``require_backward_grad_sync`` is DDP's and picotron's
flag for ``no_sync``). :class:`BucketReducer` holds
one flat buffer per bucket of the run's :class:`~edu_parallel.data_parallel.buckets.BucketPlan`
and each parameter's gradient as a view into it:

* :meth:`~BucketReducer.mark_param_as_ready`: a parameter's gradient is accumulated (its
  post-accumulate-grad hook ran); with ``overlap`` it is copied into its bucket at once, and a
  bucket whose last gradient is in is issued;
* :meth:`~BucketReducer.sync_gradients`: without ``overlap``, after backward, every gradient is
  copied into its bucket and every bucket is issued;
* :meth:`~BucketReducer.issue_ready`: full buckets go to the communication stream in index order
  (a bucket waits for the ones before it), so every rank runs the same collectives in one order;
* :meth:`~BucketReducer.wait`: the optimizer waits for every bucket's handle;
* :meth:`~BucketReducer.copy_back`: each ``.grad`` takes the average from its view;
* :meth:`~BucketReducer.reset`: nothing is ready at the start of a step.

A bucket is reduced by the comm hook ``hook(ctx, flat, step, bucket)`` (DDP's
``register_comm_hook``), with ``bucket`` a :class:`GradBucket`. :class:`LayerTimer` records one
``backward`` compute event per Linear: a layer's backward starts when its output's gradient
arrives (a tensor hook registered in forward) and ends when the next one starts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..core.schema import BUCKET_READY_MARK, GRAD_READY_MARK, GRAD_SYNC
from ..core.trace import Event
from ..engine.context import RankContext
from ..engine.stream import CommStream, Handle
from .buckets import BucketPlan


@dataclass(frozen=True)
class GradBucket:
    """What a hook learns about the bucket besides its buffer (torch's ``GradBucket``): its
    index, and its parameters' names and shapes in buffer order."""

    index: int
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Each parameter's gradient as a view of ``flat``, shaped like the parameter."""
        sizes = [math.prod(s) for s in self.shapes]
        return [v.view(s) for v, s in zip(flat.split(sizes), self.shapes, strict=True)]


CommHook = Callable[[RankContext, torch.Tensor, int, GradBucket], None]


class LayerTimer:
    """Which Linear's backward runs now, in which step and micro-batch; records its event."""

    def __init__(self, ctx: RankContext, layer_flops: list[dict[str, int]]):
        self.ctx, self.layer_flops = ctx, layer_flops
        self.step = 0
        self.micro = 0
        self.layer: int | None = None  # None outside backward
        self.layer_start = 0.0

    def watch(self, layers: list[torch.nn.Linear]) -> None:
        """A forward hook per Linear: its output's gradient starts the layer's backward."""
        for i, layer in enumerate(layers):
            layer.register_forward_hook(functools.partial(self._on_forward, i))

    def _on_forward(self, i: int, _m: Any, _inp: Any, out: torch.Tensor) -> None:
        if out.requires_grad:
            out.register_hook(lambda g: self.layer_started(i))

    def begin(self, step: int, micro: int) -> None:
        """Backward of micro-batch ``micro`` starts, with the last layer."""
        self.step, self.micro = step, micro
        self.layer, self.layer_start = len(self.layer_flops) - 1, self.ctx.tracer.now()

    def layer_started(self, i: int) -> None:
        """A Linear's output gradient has arrived: its backward starts now."""
        if i != self.layer:
            self.close()
            self.layer, self.layer_start = i, self.ctx.tracer.now()

    def close(self) -> None:
        """End the running layer's ``backward`` compute event."""
        if self.layer is not None:
            flops = self.layer_flops[self.layer]
            attrs = {"layer": self.layer, "microbatch": self.micro, **flops}
            now = self.ctx.tracer.now()
            self.ctx.record_compute(
                "backward", 0, self.layer_start, now, step=self.step, phase="backward", attrs=attrs
            )
            self.layer = None


class BucketReducer:
    """DDP's reducer for the parameters ``params`` (name -> parameter) bucketed by ``plan``;
    see the module doc. ``timer`` says the step and layer the marks name."""

    def __init__(
        self,
        ctx: RankContext,
        plan: BucketPlan,
        params: dict[str, torch.nn.Parameter],
        hook: CommHook,
        stream: CommStream,
        timer: LayerTimer,
        overlap: bool,
    ):
        self.ctx, self.plan, self.params, self.hook = ctx, plan, params, hook
        self.stream, self.timer, self.overlap = stream, timer, overlap
        self.require_backward_grad_sync = True  # False under DDP's no_sync: only accumulate
        self.flats = {b.index: torch.empty(sum(params[x].numel() for x in b.params)) for b in plan}
        shapes = {b.index: tuple(tuple(params[x].shape) for x in b.params) for b in plan}
        self.grad_buckets = {
            b.index: GradBucket(b.index, tuple(b.params), shapes[b.index]) for b in plan
        }
        self.views: dict[str, tuple[int, torch.Tensor]] = {}  # name -> (bucket, view of its flat)
        for b in plan:
            at = 0
            for name in b.params:
                p = params[name]
                self.views[name] = (b.index, self.flats[b.index][at : at + p.numel()].view_as(p))
                at += p.numel()
        self.handles: dict[int, Handle] = {}
        self.events: dict[int, Event] = {}
        self.pending: dict[int, int] = {}  # bucket -> gradients still to come
        self.ready: set[int] = set()
        self.next_bucket = 0
        for name, p in params.items():
            p.register_post_accumulate_grad_hook(functools.partial(self._on_grad, name))

    def _on_grad(self, name: str, p: torch.Tensor) -> None:
        if self.require_backward_grad_sync:
            self.mark_param_as_ready(name, p.grad)

    def reset(self) -> None:
        """A new step: no bucket ready, none issued, every gradient still to come."""
        self.handles.clear()
        self.events.clear()
        self.ready.clear()
        self.pending.update({b.index: len(b.params) for b in self.plan})
        self.next_bucket = 0

    def mark_param_as_ready(self, name: str, grad: torch.Tensor) -> None:
        """``name``'s gradient is accumulated: mark it; with overlap, copy it into its bucket
        and issue the bucket when its last gradient is in."""
        b, view = self.views[name]
        t = self.timer
        self.ctx.mark(GRAD_READY_MARK, param=name, bucket=b, step=t.step, layer=t.layer)
        if not self.overlap:
            return  # copied and issued after backward (sync_gradients)
        view.copy_(grad)
        self.pending[b] -= 1
        if self.pending[b] == 0:
            self.ready.add(b)
            self.issue_ready()

    def sync_gradients(self) -> None:
        """After backward: copy every gradient into its bucket, then issue every bucket."""
        for name, p in self.params.items():
            self.views[name][1].copy_(p.grad)
        self.ready.update(b.index for b in self.plan)
        self.timer.layer = None
        self.issue_ready()

    def issue_ready(self) -> None:
        """Issue the full buckets in index order (DDP: a bucket waits for the ones before it)."""
        t = self.timer
        while self.next_bucket in self.ready:
            b = self.next_bucket
            now = self.ctx.tracer.now()
            self.ctx.mark(BUCKET_READY_MARK, bucket=b, step=t.step, layer=t.layer)
            self.handles[b] = self.stream.issue(self._reduce, b, t.step, now, t.layer)
            self.next_bucket += 1

    def _reduce(self, b: int, step: int, issued: float, after_layer: int | None) -> None:
        """On the stream: the hook reduces bucket ``b``; one ``all_reduce`` event spans it."""
        start = self.ctx.tracer.now()
        flat = self.flats[b]
        self.hook(self.ctx, flat, step, self.grad_buckets[b])
        attrs = {"bucket": b, "issued": issued, "after_layer": after_layer}
        self.events[b] = self.ctx.record(
            "collective",
            "all_reduce",
            start,
            step=step,
            phase=GRAD_SYNC,
            nbytes=flat.numel() * flat.element_size(),
            attrs=attrs,
        )

    def wait(self) -> None:
        """Wait for every bucket (the optimizer may not run before); note when on its event."""
        for b in self.plan:
            handle = self.handles[b.index]
            handle.wait()
            self.events[b.index].attrs.update(waited=handle.waited, released=handle.released)

    def copy_back(self) -> None:
        """Each parameter's ``.grad`` takes the reduced average from its bucket."""
        for name, p in self.params.items():
            p.grad.copy_(self.views[name][1])
