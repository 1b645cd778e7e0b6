"""``edu-parallel run compress``: data-parallel training with a gradient compressor.

    edu-parallel run compress --world-size 4 --method topk --ratio 0.01 --error-feedback --json
    edu-parallel run compress --world-size 2 --method powersgd --rank 2 --error-feedback

The options are checked once, by :class:`~edu_parallel.compression.config.CompressConfig`
(torch-free), before any process starts; that config is what the run and every rank receive.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from ... import compression
from ...compression.config import (
    DEFAULT_POWERSGD_RANK,
    DEFAULT_RATIO,
    DEFAULT_START_STEP,
    MAX_POWERSGD_RANK,
    METHODS,
    CompressConfig,
)
from ...core.dims import ParallelDims
from ...core.errors import spelled_as
from ...core.i18n import N_, _
from ...task.targets import TARGET_ACCURACY
from .base import Concept

# the run's defaults have one home: the config's fields, and for the options of some methods
# only (None there: the method's default) the config module's constants
DEFAULTS = {f.name: f.default for f in fields(CompressConfig) if f.init}


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--method",
        default=DEFAULTS["method"],
        help=_("one of {methods} (default {default})").format(
            methods=", ".join(METHODS), default=DEFAULTS["method"]
        ),
    )
    p.add_argument(
        "--ratio",
        type=float,
        default=None,  # None: DEFAULT_RATIO with topk and randk; refused with the others
        help=_("fraction of entries topk and randk keep, in (0, 1] (default {default})").format(
            default=DEFAULT_RATIO
        ),
    )
    p.add_argument(
        "--rank",
        type=int,
        default=None,  # None: DEFAULT_POWERSGD_RANK with powersgd; refused with the others
        help=_("PowerSGD's rank r, 1..{top} (default {default})").format(
            top=MAX_POWERSGD_RANK, default=DEFAULT_POWERSGD_RANK
        ),
    )
    p.add_argument(
        "--error-feedback",
        action="store_true",
        help=_("keep what compression dropped and add it to the next step's gradient"),
    )
    p.add_argument(
        "--steps",
        type=int,
        default=DEFAULTS["steps"],
        help=_(
            "SGD steps (default {target_steps}; the target is {target_accuracy:.0%} held-out"
            " accuracy)"
        )
        .format(target_steps=DEFAULTS["steps"], target_accuracy=TARGET_ACCURACY)
        .replace("%", "%%"),  # argparse %-formats help texts: "80%" must reach it as "80%%"
    )
    p.add_argument(
        "--lr",
        type=float,
        default=DEFAULTS["lr"],
        help=_("learning rate (default {task_lr})").format(task_lr=DEFAULTS["lr"]),
    )
    p.add_argument(
        "--seed",
        type=int,
        default=DEFAULTS["seed"],
        help=_("seed of weights and data (default {default})").format(default=DEFAULTS["seed"]),
    )
    p.add_argument(
        "--start-step",
        type=int,
        default=None,  # None: DEFAULT_START_STEP with powersgd; refused with the others
        help=_(
            "PowerSGD: plain all-reduce for the first steps, like torch's start_powerSGD_iter"
            " (default {default}; fewer than --steps)"
        ).format(default=DEFAULT_START_STEP),
    )
    p.add_argument("--no-torch", action="store_true", help=_("skip the run of torch's hook"))


# CompressConfig's fields as the command line spells them
_OPTION_NAMES = {"error_feedback": "--error-feedback", "start_step": "--start-step"}


def _check(a: argparse.Namespace, dims: ParallelDims) -> CompressConfig:
    """Every option through :class:`CompressConfig` at once, named as the command line names
    them: the config is what the run gets."""
    with spelled_as(_OPTION_NAMES):
        return CompressConfig(
            dims.world_size,
            method=a.method,
            ratio=a.ratio,
            rank=a.rank,
            error_feedback=a.error_feedback,
            steps=a.steps,
            lr=a.lr,
            seed=a.seed,
            start_step=a.start_step,
            compare_torch=not a.no_torch,
        )


COMPRESS = Concept(
    "compress",
    N_("gradient compression (fp16, bf16, top-k, random-k, sign, PowerSGD) with error feedback"),
    _args,
    _check,
    lambda executor, config: compression.run_compress_config(executor, config),
    lambda report: compression.format_compress(report),
)
