"""Communication the grader could not count, refused while the learner's function runs.

The grader judges an exercise by its result *and* by the traffic in the trace, which records
what goes through ``ctx``. A direct ``torch.distributed.all_reduce(tensor)`` gives the right
result without a byte in the trace, so the ring exercise would pass without a ring; in an
exercise that builds a collective from point-to-point messages (``Exercise.point_to_point``),
``ctx.collective("all_reduce", ...)`` would do the same, counted but not written by the learner.

:func:`refused` wraps every communication function of ``torch.distributed`` (and, for a
point-to-point exercise, ``ctx.collective``) for the duration of the call: a call made from the
learner's own code raises :class:`UntracedCall`, whose message says what to use instead; a call
from the engine, the exercise's own checks or torch itself goes through unchanged. The frame of
the caller decides: code outside this package and outside torch is the learner's.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

from ..core.i18n import _

# torch.distributed's functions that move data between ranks (or wait for them all)
COMMUNICATION = (
    "send",
    "recv",
    "isend",
    "irecv",
    "batch_isend_irecv",
    "broadcast",
    "all_reduce",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "gather",
    "scatter",
    "barrier",
    "monitored_barrier",
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "scatter_object_list",
    "send_object_list",
    "recv_object_list",
)
_OURS = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,  # edu_parallel/
    os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,  # torch/
)


class UntracedCall(RuntimeError):
    """The learner's code called communication the grader cannot count, or may not use here."""


def learners(frame_depth: int = 2) -> bool:
    """Whether the caller of the wrapped function (``frame_depth`` frames up) is the learner's
    code: a file outside this package and outside torch (a notebook cell, a learner's file)."""
    filename = os.path.abspath(sys._getframe(frame_depth).f_code.co_filename)
    return not filename.startswith(_OURS)


def _guard(name: str, original: Callable[..., Any], message: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if learners():
            raise UntracedCall(message.format(name=name))
        return original(*args, **kwargs)

    return guarded


@contextlib.contextmanager
def refused(ctx: Any, point_to_point: bool) -> Iterator[None]:
    """Within the block, the learner's direct ``torch.distributed`` communication raises
    :class:`UntracedCall`, and so does ``ctx.collective`` when ``point_to_point``."""
    direct = _(
        "torch.distributed.{name} goes around the trace, so the grader cannot count its bytes: "
        "use ctx's operations (ctx.send, ctx.recv, ctx.isend, ctx.irecv, ctx.collective)"
    )
    if point_to_point:
        direct = _(
            "torch.distributed.{name} goes around the trace and does the exercise's work for "
            "you: build it from ctx.send and ctx.recv (or ctx.isend, ctx.irecv)"
        )
    saved = []
    for module in (dist, distributed_c10d):
        for name in COMMUNICATION:
            original = getattr(module, name, None)
            if original is not None:
                saved.append((module, name, original))
                setattr(module, name, _guard(name, original, direct))
    if point_to_point:
        builtin = _(
            "ctx.collective('{name}') does the exercise's work for you: this exercise builds it "
            "from ctx.send and ctx.recv (or ctx.isend, ctx.irecv), step by step"
        )
        collective = ctx.collective

        def guarded(name: str, *args: Any, **kwargs: Any) -> Any:
            if learners():
                raise UntracedCall(builtin.format(name=name))
            return collective(name, *args, **kwargs)

        ctx.collective = guarded  # the instance's attribute hides the method until the end
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
        if point_to_point:
            del ctx.collective
