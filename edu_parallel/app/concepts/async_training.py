"""``edu-parallel run async``: synchronous against asynchronous training, with stragglers.

    edu-parallel run async --mode async-ps --straggler rank --distribution pareto --world-size 4
    edu-parallel run async --mode backup --backup 1 --straggler random --world-size 4 --json
    edu-parallel run async --mode local-sgd --local-steps 8 --world-size 3 --steps 100

The options are checked by :class:`~edu_parallel.async_training.config.AsyncConfig`
(torch-free) before any process starts; ``--json`` prints ``samples_per_s``,
``staleness_histogram``, ``time_to_target_s``, ``final_loss``, ``replay_matches`` and more.
"""

from __future__ import annotations

import argparse
from typing import Any

from ... import async_training
from ...async_training.config import (
    DISTRIBUTIONS,
    LESSON_LR,
    MODES,
    STRAGGLERS,
    TARGET_ACCURACY,
    AsyncConfig,
)
from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from .base import Concept

# AsyncConfig's field names as the command line spells them
_OPTION_NAMES = {
    "straggler_rank=": "straggler-rank=",
    "delay_ms=": "delay-ms=",
    "local_steps=": "local-steps=",
}


def _async_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        default="sync",
        help=_("one of {modes} (default sync)").format(modes=", ".join(MODES)),
    )
    p.add_argument("--steps", type=int, default=100, help=_("steps, 1..2000 (default 100)"))
    p.add_argument(
        "--straggler",
        default="none",
        help=_(
            "one of {stragglers}: no straggler, one slow rank, a random worker per step"
            " (default none)"
        ).format(stragglers=", ".join(STRAGGLERS)),
    )
    p.add_argument(
        "--straggler-rank", type=int, default=None, help=_("the slow rank (default: the last rank)")
    )
    p.add_argument(
        "--distribution",
        default="fixed",
        help=_("the delay's distribution: one of {distributions} (default fixed)").format(
            distributions=", ".join(DISTRIBUTIONS)
        ),
    )
    p.add_argument("--delay-ms", type=float, default=10.0, help=_("mean delay in ms (default 10)"))
    p.add_argument("--local-steps", type=int, default=4, help=_("local SGD's H >= 1 (default 4)"))
    p.add_argument("--backup", type=int, default=1, help=_("backup workers b, 1..W-1 (default 1)"))
    p.add_argument("--rows", type=int, default=64, help=_("samples per gradient (default 64)"))
    p.add_argument(
        "--lr",
        type=float,
        default=LESSON_LR,
        help=_("SGD lr (default {lesson_lr})").format(lesson_lr=LESSON_LR),
    )
    p.add_argument("--seed", type=int, default=0, help=_("seed of weights, batches, delays"))
    p.add_argument(
        "--target",
        type=float,
        default=TARGET_ACCURACY,
        help=_("held-out accuracy to reach (default {target_accuracy})").format(
            target_accuracy=TARGET_ACCURACY
        ),
    )


def _async_check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    spec = {
        "mode": a.mode,
        "steps": a.steps,
        "straggler": a.straggler,
        "straggler_rank": a.straggler_rank,
        "distribution": a.distribution,
        "delay_ms": a.delay_ms,
        "local_steps": a.local_steps,
        "backup": a.backup,
        "rows": a.rows,
        "lr": a.lr,
        "seed": a.seed,
        "target": a.target,
    }
    try:
        AsyncConfig(dims.world_size, **spec)
    except ValueError as exc:
        text = str(exc)
        for field, option in _OPTION_NAMES.items():
            text = text.replace(field, option)
        raise ValueError(text) from None
    return spec


ASYNC = Concept(
    "async",
    N_("synchronous vs asynchronous SGD (parameter server, local SGD, backup workers), stragglers"),
    _async_args,
    _async_check,
    lambda executor, spec: async_training.run_async(executor, **spec),
    lambda report: async_training.format_async(report),
)
