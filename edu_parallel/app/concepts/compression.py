"""``edu-parallel run compress``: data-parallel training with a gradient compressor.

    edu-parallel run compress --world-size 4 --method topk --ratio 0.01 --error-feedback --json
    edu-parallel run compress --world-size 2 --method powersgd --rank 2 --error-feedback

The options are checked by :class:`~edu_parallel.compression.config.CompressConfig`
(torch-free) before any process starts.
"""

from __future__ import annotations

import argparse
from typing import Any

from ... import compression
from ...compression.config import METHODS, CompressConfig
from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from ...task.targets import TARGET_ACCURACY, TARGET_STEPS, TASK_LR
from .base import Concept


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--method",
        default="none",
        help=_("one of {methods} (default none)").format(methods=", ".join(METHODS)),
    )
    p.add_argument(
        "--ratio",
        type=float,
        default=0.01,
        help=_("fraction of entries topk and randk keep, in (0, 1] (default 0.01)"),
    )
    p.add_argument("--rank", type=int, default=1, help=_("PowerSGD's rank r >= 1 (default 1)"))
    p.add_argument(
        "--error-feedback",
        action="store_true",
        help=_("keep what compression dropped and add it to the next step's gradient"),
    )
    p.add_argument(
        "--steps",
        type=int,
        default=TARGET_STEPS,
        help=_(
            "SGD steps (default {target_steps}; the target is {target_accuracy:.0%} held-out"
            " accuracy)"
        )
        .format(target_steps=TARGET_STEPS, target_accuracy=TARGET_ACCURACY)
        .replace("%", "%%"),  # argparse %-formats help texts: "80%" must reach it as "80%%"
    )
    p.add_argument(
        "--lr",
        type=float,
        default=TASK_LR,
        help=_("learning rate (default {task_lr})").format(task_lr=TASK_LR),
    )
    p.add_argument("--seed", type=int, default=0, help=_("seed of weights and data (default 0)"))
    p.add_argument(
        "--start-step",
        type=int,
        default=2,
        help=_("PowerSGD: plain all-reduce for the first steps, like torch's start_powerSGD_iter"),
    )
    p.add_argument("--no-torch", action="store_true", help=_("skip the run of torch's hook"))


def _check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    """Every option through :class:`CompressConfig` at once, named as the command line names
    them."""
    spec = {
        "method": a.method,
        "ratio": a.ratio,
        "rank": a.rank,
        "error_feedback": a.error_feedback,
        "steps": a.steps,
        "lr": a.lr,
        "seed": a.seed,
        "start_step": a.start_step,
    }
    try:
        CompressConfig(dims.world_size, **spec)
    except ValueError as exc:
        text = str(exc).replace("error_feedback=True", "--error-feedback")
        raise ValueError(text.replace("start_step=", "start-step=")) from None
    return {**spec, "compare_torch": not a.no_torch}


COMPRESS = Concept(
    "compress",
    N_("gradient compression (fp16, bf16, top-k, random-k, sign, PowerSGD) with error feedback"),
    _args,
    _check,
    lambda executor, spec: compression.run_compress(executor, **spec),
    lambda report: compression.format_compress(report),
)
