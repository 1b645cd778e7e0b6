"""Gradient buckets as pure data: which parameters' gradients travel in one all-reduce.

DDP (Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
VLDB, arXiv 2006.15704, §3.2.3) does not all-reduce each gradient alone (one message per
parameter is latency-bound) nor all of them at the end (nothing would overlap with backward). It
packs them into buckets, and a bucket is reduced as soon as every gradient in it is ready.
:func:`assign_buckets` follows ``compute_bucket_assignment_by_size`` of torch's
``torch/csrc/distributed/c10d/reducer.cpp``, which DDP calls on the order in which gradients
become ready (after its first iteration; the first runs with one bucket and records that order):

* parameters in reverse registration order (backward produces the last layer's gradients first);
* one accumulator per (dtype, device): no bucket mixes dtypes or devices;
* a parameter joins the open bucket, and the bucket closes when its bytes *reach* the limit (so a
  bucket may exceed it by its last parameter; one bigger than the limit is a bucket alone);
* the limits: ``bucket_cap_mb`` MiB (25 by default) for every bucket; when the cap is left at its
  default, the *first* bucket is limited to ``dist._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB so that
  the first all-reduce starts early (``reducer.hpp`` ``kDefaultFirstBucketBytes``; errata E10).
  An explicit ``bucket_cap_mb`` applies to the first bucket too (``_BucketCapacityConfig``).

Text form (round-trips through :meth:`BucketPlan.to_text` / :meth:`BucketPlan.from_text`)::

    buckets first=1048576 cap=26214400
    b0 float32 cpu 1050624: 7.bias 7.weight
    b1 float32 cpu 7354368: 6.bias 6.weight ... 0.bias 0.weight

The bucket's bytes follow its dtype and device; :func:`validate_buckets` reports every problem.
A run's plan is made once, when its :class:`~edu_parallel.data_parallel.config.DdpConfig` is
checked, and travels to the ranks as this dataclass; the text form is for lessons and trace files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import bad_value, check_positive
from ..core.i18n import _
from ..core.units import MIB, format_bytes

DEFAULT_BUCKET_CAP_MB = 25  # torch.nn.parallel.distributed._DEFAULT_BUCKET_CAP_MB
DEFAULT_FIRST_BUCKET_BYTES = 1 * MIB  # dist._DEFAULT_FIRST_BUCKET_BYTES
MAX_BUCKET_CAP_MB = 1 << 20  # 1 TiB: far above any model this package runs
# one bucket per parameter: DDP is given ``bucket_cap_mb=1e-9`` (``int(1e-9 MiB)`` = 0 bytes);
# here the limits are 1 byte, which every parameter reaches alone
PER_PARAM_CAP_MB = 1e-9
PER_PARAM_LIMITS = (1, 1)
ITEMSIZE = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "int64": 8, "int32": 4}
_LINE = re.compile(r"b(\d+) (\S+) (\S+) (\d+): (.+)")


@dataclass(frozen=True)
class ParamSpec:
    """One parameter as the bucketing sees it: name, elements, dtype and device (strings)."""

    name: str
    numel: int
    dtype: str = "float32"
    device: str = "cpu"

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE[self.dtype]


@dataclass(frozen=True)
class Bucket:
    """Parameters (names, in the order their gradients become ready) reduced together."""

    index: int
    params: tuple[str, ...]
    dtype: str
    device: str
    nbytes: int


@dataclass(frozen=True)
class BucketPlan:
    """The buckets in the order they are reduced, and the limits that made them."""

    first_cap_bytes: int
    cap_bytes: int
    buckets: tuple[Bucket, ...]

    def bucket_of(self) -> dict[str, int]:
        """Parameter name -> index of its bucket."""
        return {p: b.index for b in self.buckets for p in b.params}

    @property
    def sizes(self) -> list[int]:
        """Bytes per bucket, as DDP's logging data reports them (``rebuilt_bucket_sizes``)."""
        return [b.nbytes for b in self.buckets]

    def to_text(self) -> str:
        head = f"buckets first={self.first_cap_bytes} cap={self.cap_bytes}"
        rows = [f"b{b.index} {b.dtype} {b.device} {b.nbytes}: {' '.join(b.params)}" for b in self]
        return "\n".join([head, *rows])

    def __iter__(self):  # noqa: ANN204 - iterate the buckets
        return iter(self.buckets)

    def __len__(self) -> int:
        return len(self.buckets)

    @classmethod
    def from_text(cls, text: str) -> BucketPlan:
        lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
        head = re.fullmatch(r"buckets first=(\d+) cap=(\d+)", lines[0]) if lines else None
        if head is None:
            raise bad_value("text", text[:40], "a first line 'buckets first=BYTES cap=BYTES'")
        buckets = []
        for line in lines[1:]:
            m = _LINE.fullmatch(line)
            if m is None:
                raise bad_value("line", line, "'bK DTYPE DEVICE BYTES: name name ...'")
            buckets.append(Bucket(int(m[1]), tuple(m[5].split()), m[2], m[3], int(m[4])))
        return cls(int(head[1]), int(head[2]), tuple(buckets))


def bucket_limits(bucket_cap_mb: float | None = None) -> tuple[int, int]:
    """``(first, cap)`` bytes as DDP sets them: None -> (1 MiB, 25 MiB); X -> (X MiB, X MiB).

    The one check of a bucket cap: :class:`~edu_parallel.data_parallel.config.DdpConfig` calls it
    once and keeps the plan it makes; nothing below the config calls it again."""
    if bucket_cap_mb is None:
        return DEFAULT_FIRST_BUCKET_BYTES, DEFAULT_BUCKET_CAP_MB * MIB
    mb = check_positive("bucket_cap_mb", bucket_cap_mb)
    if mb > MAX_BUCKET_CAP_MB:
        raise bad_value(
            "bucket_cap_mb",
            bucket_cap_mb,
            _("a size in MiB in (0, {limit}]").format(limit=MAX_BUCKET_CAP_MB),
        )
    cap = max(1, int(mb * MIB))  # DDP: int(bucket_cap_mb * 1024 * 1024)
    return cap, cap


def assign_buckets(params: list[ParamSpec], bucket_cap_mb: float | None = None) -> BucketPlan:
    """Buckets of ``params`` (given in registration order) by DDP's rule; see the module doc."""
    return assign_within(params, *bucket_limits(bucket_cap_mb))


def assign_within(params: list[ParamSpec], first: int, cap: int) -> BucketPlan:
    """Buckets of ``params`` (registration order) within limits already checked: ``first``
    bytes for the first bucket of each (dtype, device), ``cap`` bytes for the others."""
    open_: dict[tuple[str, str], list[ParamSpec]] = {}
    closed_count: dict[tuple[str, str], int] = {}
    done: list[list[ParamSpec]] = []
    for p in reversed(params):  # the order backward makes gradients ready
        key = (p.dtype, p.device)
        acc = open_.setdefault(key, [])
        acc.append(p)
        limit = first if closed_count.get(key, 0) == 0 else cap
        if sum(x.nbytes for x in acc) >= limit:
            done.append(acc)
            open_[key] = []
            closed_count[key] = closed_count.get(key, 0) + 1
    done += [acc for acc in open_.values() if acc]  # leftovers, one per (dtype, device)
    buckets = tuple(
        Bucket(
            i, tuple(p.name for p in acc), acc[0].dtype, acc[0].device, sum(p.nbytes for p in acc)
        )
        for i, acc in enumerate(done)
    )
    return BucketPlan(first, cap, buckets)


def validate_buckets(plan: BucketPlan, params: list[ParamSpec]) -> list[str]:
    """Every problem of ``plan`` for ``params`` (registration order); empty when it is DDP's."""
    out = []
    by_name = {p.name: p for p in params}
    seen: dict[str, int] = {}
    for i, b in enumerate(plan.buckets):
        if b.index != i:
            out.append(
                f"bucket {i} is numbered b{b.index}: buckets are numbered 0, 1, ... in order"
            )
        if not b.params:
            out.append(f"b{b.index} is empty")
        for name in b.params:
            if name not in by_name:
                out.append(f"b{b.index} holds {name!r}, which is not a parameter of the model")
                continue
            if name in seen:
                out.append(f"{name} is in b{seen[name]} and b{b.index}: it would be reduced twice")
            seen[name] = b.index
            p = by_name[name]
            if (p.dtype, p.device) != (b.dtype, b.device):
                out.append(
                    f"b{b.index} is {b.dtype} on {b.device} but holds {name} ({p.dtype} on "
                    f"{p.device}): a bucket is one flat buffer of one dtype on one device"
                )
        real = sum(by_name[n].nbytes for n in b.params if n in by_name)
        if real != b.nbytes:
            out.append(f"b{b.index} says {b.nbytes} B but its parameters hold {real} B")
    out += [
        f"{p.name} is in no bucket: its gradient would never be reduced"
        for p in params
        if p.name not in seen
    ]
    rank = {p.name: i for i, p in enumerate(reversed(params))}  # position in the ready order
    order = [rank[n] for b in plan.buckets for n in b.params if n in rank]
    per_key: dict[tuple[str, str], list[int]] = {}
    for b in plan.buckets:
        per_key.setdefault((b.dtype, b.device), []).extend(rank[n] for n in b.params if n in rank)
    if any(v != sorted(v) for v in per_key.values()):
        out.append(
            "parameters are not in reverse registration order: "
            f"ready positions {order} (backward makes the last layer's gradients first)"
        )
    return out


def bucket_line(index: int, params: list[str] | tuple[str, ...], nbytes: int) -> str:
    """``b0: 2 params, 1.002 MiB (14.bias, 14.weight)``: one bucket, for a report or a quiz."""
    shown = ", ".join(params) if len(params) <= 4 else f"{params[0]} ... {params[-1]}"
    return f"b{index}: {len(params)} params, {format_bytes(nbytes)} ({shown})"
