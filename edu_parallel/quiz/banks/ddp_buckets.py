"""Lesson 06's drawn parameters and its questions on buckets: bytes per step, messages, DDP's
default buckets, why reverse order, why a U-shaped step time.

Every number comes from :class:`~edu_parallel.data_parallel.config.DdpConfig` and its bucket plan
(:mod:`edu_parallel.data_parallel.buckets`), both torch-free. The bank is ``ddp.py``; references:
Li et al. 2020 (PyTorch Distributed, VLDB), PyTorch's ``reducer.cpp``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core.i18n import _
from ...data_parallel.buckets import ITEMSIZE
from ...data_parallel.config import DTYPE, DdpConfig
from ..numeric import Numeric
from ..questions import MultipleChoice
from .common import pick, place, with_right

DdpRunner = Callable[..., Any]
DEFAULT_WORLD = 4  # ranks of the formula runner when none is given (the lesson's cluster)
ITEM = ITEMSIZE[DTYPE]


@dataclass(frozen=True)
class DdpDraw:
    """Lesson 06's parameters, drawn in one go."""

    n_bytes: int
    """Ranks of the bytes-per-step question."""
    cap_bytes: float
    """Its bucket_cap_mb (the bytes do not depend on it)."""
    model_msg: str
    """The model of the messages question (one all-reduce per parameter)."""
    n_msg: int
    """Ranks of the messages question."""
    n_acc: int
    """Ranks of the gradient-accumulation question."""
    k_acc: int
    """Micro-batches accumulated per optimizer step."""
    n_tied: int
    """Ranks of the tied-weights question."""
    n_run: int
    """Ranks of the predict-then-run questions (one run shared by both)."""
    cap_run: float
    """bucket_cap_mb of that run (a configuration the lesson does not print)."""
    reverse_at: int
    """Where the right option of 'why reverse order' goes."""
    u_at: int
    """Where the right option of 'why a U-shaped step time' goes."""
    first_at: int
    """Where the right option of 'why one bucket in the first iteration' goes."""
    no_sync_at: int
    """Where the right option of 'what no_sync() does' goes."""

    @classmethod
    def draw(cls, rng: random.Random | None) -> DdpDraw:
        n_bytes, cap_bytes = pick(rng, 8, 2, 8, 16, 32), pick(rng, 4.0, 0.5, 4.0, 10.0)
        model_msg, n_msg = pick(rng, "mlp", "mlp", "deep", "tied"), pick(rng, 4, 2, 4, 8)
        n_acc, k_acc = pick(rng, 4, 2, 4, 8), pick(rng, 4, 2, 4, 8)
        n_tied = pick(rng, 2, 2, 4, 8, 16)
        n_run, cap_run = pick(rng, 2, 2, 4), pick(rng, 2.5, 0.5, 1.5, 2.5, 5.0, 7.0)
        return cls(
            n_bytes,
            cap_bytes,
            model_msg,
            n_msg,
            n_acc,
            k_acc,
            n_tied,
            n_run,
            cap_run,
            reverse_at=place(rng, 1),
            u_at=place(rng, 3),
            first_at=place(rng, 0),
            no_sync_at=place(rng, 2),
        )


def q_bytes_per_step(d: DdpDraw, run: DdpRunner) -> Numeric:
    """Bytes each rank sends per optimizer step, whatever the bucketing."""
    bucketed = DdpConfig(d.n_bytes, "deep", bucket_cap_mb=d.cap_bytes)
    return Numeric(
        _(
            "The deep model (8 Linear 512x512 layers with biases, fp32) trains on N = {n_bytes}"
            " ranks with bucket_cap_mb = {cap_bytes}. How many bytes does each rank send per"
            " optimizer step? (And would one all-reduce per parameter change it?)"
        ).format(n_bytes=d.n_bytes, cap_bytes=f"{d.cap_bytes:g}"),
        bucketed.bytes_per_step(),
        units="bytes",
        explanation=_(
            "Ring all-reduce: each rank sends 2(N-1)/N of every bucket, and the buckets hold"
            " every gradient once, so 2(N-1)/N * Psi * 4 bytes whatever the cap (Psi = 8 *"
            " (512*512 + 512)). The bucketing changes how many messages carry them, not the"
            " bytes."
        ),
        params={"psi": bucketed.psi, "N": d.n_bytes, "itemsize": ITEM, "cap": d.cap_bytes},
        key="ddp_bytes_per_step",
    )


def q_messages_per_param(d: DdpDraw, run: DdpRunner) -> Numeric:
    """Messages per rank and step with one all-reduce per parameter tensor."""
    per_param = DdpConfig(d.n_msg, d.model_msg, sync="per-param")
    return Numeric(
        _(
            "The {model_msg} model on N = {n_msg} ranks with sync='per-param': one ring"
            " all-reduce per parameter tensor (each weight and each bias). How many messages"
            " does each rank send per optimizer step?"
        ).format(model_msg=d.model_msg, n_msg=d.n_msg),
        per_param.messages_per_step(),
        tolerance=0.0,
        units="messages",
        explanation=_(
            "A ring all-reduce sends 2(N-1) messages per rank (N-1 in reduce-scatter, N-1 in"
            " all-gather), once per bucket; here every tensor is a bucket (a tied weight is one"
            " tensor). Each message pays the link latency, which is why DDP packs tensors into"
            " buckets."
        ),
        params={"N": d.n_msg, "model": d.model_msg, "buckets": len(per_param.buckets())},
        key="ddp_messages_per_param",
    )


def q_default_buckets(d: DdpDraw, run: DdpRunner) -> Numeric:
    """How many buckets DDP's default cap makes for the deep model."""
    default_plan = DdpConfig(DEFAULT_WORLD, "deep").buckets()
    return Numeric(
        _(
            "DDP's default bucketing (bucket_cap_mb left at None: 25 MiB, with a 1 MiB first"
            " bucket) on the deep model, whose weights are exactly 1 MiB each. How many buckets"
            " does it make?"
        ),
        len(default_plan),
        tolerance=0.0,
        units="buckets",
        explanation=_(
            "Gradients are packed in reverse registration order and a bucket closes when its"
            " bytes reach the limit: 7.bias then 7.weight reach the 1 MiB first limit, so the"
            " last layer is bucket 0; the other 7 layers (7 MiB + biases) stay under 25 MiB and"
            " form bucket 1."
        ),
        params={"model": "deep", "cap": None, "sizes": default_plan.sizes},
        key="ddp_default_buckets",
    )


def q_reverse_order(d: DdpDraw, run: DdpRunner) -> MultipleChoice:
    """Why DDP fills its buckets in reverse registration order."""
    right = _(
        "Backward makes the last layer's gradients first, so bucket 0 fills and is sent while"
        " backward still runs"
    )
    wrong = [
        _(
            "The ring visits the ranks in reverse order, so the last rank's layer must come"
            " first in every bucket"
        ),
        _(
            "The optimizer updates the last layer first, so its averaged gradient is needed"
            " before any of the others"
        ),
        _(
            "Reverse order puts the biggest tensors together, which removes most of the padding"
            " that each bucket would carry"
        ),
    ]
    return MultipleChoice(
        _(
            "DDP fills its buckets with the parameters in reverse registration order (the last"
            " layer first). Why?"
        ),
        with_right(right, wrong, d.reverse_at),
        d.reverse_at,
        _(
            "Autograd runs the layers backwards, so the last layer's gradients are ready first."
            " Packing them first lets bucket 0 fill and its all-reduce overlap with the rest of"
            " backward (Li et al. 2020, §3.2.3)."
        ),
        key="ddp_reverse_order",
    )


def q_bucket_u_shape(d: DdpDraw, run: DdpRunner) -> MultipleChoice:
    """Why the step time against bucket_cap_mb is U-shaped."""
    right = _(
        "Tiny buckets each pay 2(N-1) message latencies; one huge bucket fills only when"
        " backward ends, so none of it overlaps"
    )
    wrong = [
        _(
            "Tiny buckets send more bytes in all, and one huge bucket sends fewer bytes but"
            " needs a flat buffer as big as the whole model"
        ),
        _(
            "Tiny buckets overflow the network's queues; one huge bucket is cut by the ring"
            " into chunks too big to send"
        ),
        _(
            "The optimizer waits for every bucket twice, once per ring phase, and both extremes"
            " make the second wait grow with the model"
        ),
    ]
    return MultipleChoice(
        _(
            "Sweeping bucket_cap_mb on the deep model gives a U-shaped step time: slow with"
            " tiny buckets and slow with one bucket for everything. Why?"
        ),
        with_right(right, wrong, d.u_at),
        d.u_at,
        _(
            "The bytes are the same at every cap. Tiny buckets multiply the messages, and each"
            " one pays the latency alpha; a single bucket waits for the whole backward, so its"
            " all-reduce is fully exposed. In between, buckets are sent as they fill and hide"
            " under backward (Li et al. 2020, Figure 2 and §5)."
        ),
        key="ddp_bucket_u_shape",
    )
