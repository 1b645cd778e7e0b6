"""``edu-parallel run ddp``: data-parallel training with gradient buckets, overlap, accumulation.

    edu-parallel run ddp --world-size 4 --model deep --bucket-mb 2 --link ib-ndr-400 --json
    edu-parallel run ddp --world-size 2 --no-overlap --accumulate 4

The options are checked once, by :class:`~edu_parallel.data_parallel.config.DdpRun` and its
:class:`~edu_parallel.data_parallel.config.DdpConfig` (torch-free), before any process starts;
the run gets that object.
"""

from __future__ import annotations

import argparse

from ... import data_parallel
from ...core.dims import ParallelDims
from ...core.errors import Problems, conflicts, spelled_as
from ...core.i18n import N_, _
from ...data_parallel.config import (
    DDP_MODELS,
    DEFAULT_FLOPS_PER_S,
    DEFAULT_SYNC,
    SYNCS,
    DdpRun,
    try_build,
)
from ...models.topology import LINKS
from .base import Concept


def _ddp_args(p: argparse.ArgumentParser) -> None:
    models = ", ".join(
        _("{name} ({doc})").format(name=k, doc=_(v.doc)) for k, v in DDP_MODELS.items()
    )
    p.add_argument(
        "--model", default="mlp", help=_("one of {models} (default mlp)").format(models=models)
    )
    p.add_argument(
        "--bucket-mb",
        type=float,
        default=None,
        help=_("bucket cap in MiB > 0 (default: DDP's, 25 MiB with a 1 MiB first bucket)"),
    )
    p.add_argument(
        "--sync",
        default=None,  # None: DEFAULT_SYNC, or bucketed with --no-overlap
        help=_("one of {syncs} (default {default})").format(
            syncs=", ".join(SYNCS), default=DEFAULT_SYNC
        ),
    )
    p.add_argument(
        "--no-overlap",
        action="store_true",
        help=_("all-reduce the buckets after backward (the same as --sync bucketed)"),
    )
    p.add_argument("--accumulate", type=int, default=1, help=_("micro-batches per step K >= 1"))
    p.add_argument("--steps", type=int, default=3, help=_("SGD steps (default 3)"))
    p.add_argument("--lr", type=float, default=0.01, help=_("SGD learning rate > 0 (default 0.01)"))
    p.add_argument("--seed", type=int, default=0, help=_("seed of weights and batch (default 0)"))
    p.add_argument("--freeze", type=int, default=0, help=_("first layers without gradients"))
    p.add_argument(
        "--link",
        default=None,
        help=_("retime for a GPU over one of {links} (default: no model)").format(
            links=", ".join(LINKS)
        ),
    )
    p.add_argument(
        "--flops",
        type=float,
        default=None,  # None: DEFAULT_FLOPS_PER_S with --link; without it, refused if given
        help=_("GPU FLOP/s of the model, with --link (default {default})").format(
            default=f"{DEFAULT_FLOPS_PER_S:g}"
        ),
    )
    p.add_argument(
        "--rows",
        type=int,
        default=None,
        help=_("rows per rank of the model, with --link (default: the run's)"),
    )
    p.add_argument(
        "--no-torch", action="store_true", help=_("skip torch DDP's run beside ours (faster)")
    )


# the command line's names of the options whose config field is spelled otherwise
SPELLING = {"bucket_cap_mb": "--bucket-mb", "flops_per_s": "--flops"}


def _ddp_check(a: argparse.Namespace, dims: ParallelDims) -> DdpRun:
    """The run, checked once by its configs before any process starts, every error naming the
    option as the command line spells it (``--bucket-mb=0.0``)."""
    problems = Problems()
    sync = a.sync
    if a.no_overlap:
        if sync not in (None, "bucketed"):  # --no-overlap --sync overlap says two things
            why = _("--no-overlap is --sync bucketed; give one of them")
            problems.add(conflicts("no_overlap", True, "sync", sync, why))
        sync = "bucketed"
    with spelled_as(SPELLING):
        run = try_build(
            problems,
            DdpRun.of,
            dims.world_size,
            model=a.model,
            bucket_cap_mb=a.bucket_mb,
            sync=DEFAULT_SYNC if sync is None else sync,
            accumulate=a.accumulate,
            steps=a.steps,
            lr=a.lr,
            seed=a.seed,
            freeze=a.freeze,
            link=a.link,
            flops_per_s=a.flops,
            rows=a.rows,
            compare_torch=not a.no_torch,
        )
    problems.raise_any()
    return run


DDP = Concept(
    "ddp",
    N_("data-parallel training: gradient buckets, overlap with backward, accumulation, torch DDP"),
    _ddp_args,
    _ddp_check,
    lambda executor, run: data_parallel.run_ddp_config(executor, run),
    lambda report: data_parallel.format_ddp(report),
)
