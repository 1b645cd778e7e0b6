"""``edu-parallel run async``: synchronous against asynchronous training, with stragglers.

    edu-parallel run async --mode async-ps --straggler rank --distribution pareto --world-size 4
    edu-parallel run async --mode backup --backup 1 --straggler random --world-size 4 --json
    edu-parallel run async --mode local-sgd --local-steps 8 --world-size 3 --steps 100

The options are checked once, by :class:`~edu_parallel.async_training.config.AsyncConfig`
(torch-free), before any process starts; that config is what the run and every rank receive.
``--json`` prints ``samples_per_s``, ``staleness_histogram``, ``time_to_target_s``,
``final_loss``, ``replay_matches`` and more.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from ... import async_training
from ...async_training.config import (
    DEFAULT_BACKUP,
    DEFAULT_DELAY_MS,
    DEFAULT_DISTRIBUTION,
    DEFAULT_LOCAL_STEPS,
    DISTRIBUTIONS,
    MAX_ROWS,
    MAX_STEPS,
    MODES,
    STRAGGLERS,
    AsyncConfig,
)
from ...core.dims import ParallelDims
from ...core.errors import spelled_as
from ...core.i18n import N_, _
from .base import Concept

# AsyncConfig's fields as the command line spells them
_OPTION_NAMES = {
    "straggler_rank": "--straggler-rank",
    "delay_ms": "--delay-ms",
    "local_steps": "--local-steps",
}
# the run's defaults have one home: the config's fields
DEFAULTS = {f.name: f.default for f in fields(AsyncConfig) if f.init}


def _async_args(p: argparse.ArgumentParser) -> None:
    d = DEFAULTS
    p.add_argument(
        "--mode",
        default=d["mode"],
        help=_("one of {modes} (default {default})").format(
            modes=", ".join(MODES), default=d["mode"]
        ),
    )
    p.add_argument(
        "--steps",
        type=int,
        default=d["steps"],
        help=_("steps, 1..{max_steps} (default {default})").format(
            max_steps=MAX_STEPS, default=d["steps"]
        ),
    )
    p.add_argument(
        "--straggler",
        default=d["straggler"],
        help=_(
            "one of {stragglers}: no straggler, one slow rank, a random worker per step"
            " (default {default})"
        ).format(stragglers=", ".join(STRAGGLERS), default=d["straggler"]),
    )
    p.add_argument(
        "--straggler-rank",
        type=int,
        default=d["straggler_rank"],
        help=_("the slow rank of --straggler rank (default: the last rank)"),
    )
    p.add_argument(
        "--distribution",
        default=None,  # None: DEFAULT_DISTRIBUTION with a straggler; refused without one
        help=_("the delay's distribution: one of {distributions} (default {default})").format(
            distributions=", ".join(DISTRIBUTIONS), default=DEFAULT_DISTRIBUTION
        ),
    )
    p.add_argument(
        "--delay-ms",
        type=float,
        default=None,  # None: DEFAULT_DELAY_MS with a straggler; refused without one
        help=_("mean delay in ms (default {default})").format(default=f"{DEFAULT_DELAY_MS:g}"),
    )
    p.add_argument(
        "--local-steps",
        type=int,
        default=None,  # None: DEFAULT_LOCAL_STEPS in mode local-sgd; refused in the others
        help=_("local SGD's H >= 1 (default {default})").format(default=DEFAULT_LOCAL_STEPS),
    )
    p.add_argument(
        "--backup",
        type=int,
        default=None,  # None: DEFAULT_BACKUP in mode backup; refused in the other modes
        help=_("backup workers b of --mode backup, 1..W-1 (default {default})").format(
            default=DEFAULT_BACKUP
        ),
    )
    p.add_argument(
        "--rows",
        type=int,
        default=d["rows"],
        help=_("samples per gradient, 1..{max_rows} (default {default})").format(
            max_rows=MAX_ROWS, default=d["rows"]
        ),
    )
    p.add_argument(
        "--lr",
        type=float,
        default=d["lr"],
        help=_("SGD lr (default {lesson_lr})").format(lesson_lr=d["lr"]),
    )
    p.add_argument(
        "--seed", type=int, default=d["seed"], help=_("seed of weights, batches, delays")
    )
    p.add_argument(
        "--target",
        type=float,
        default=d["target"],
        help=_("held-out accuracy to reach (default {target_accuracy})").format(
            target_accuracy=d["target"]
        ),
    )


def _async_check(a: argparse.Namespace, dims: ParallelDims) -> AsyncConfig:
    """Every option through :class:`AsyncConfig` at once, named as the command line names them:
    the config is what the run gets."""
    with spelled_as(_OPTION_NAMES):
        return AsyncConfig(
            dims.world_size,
            mode=a.mode,
            steps=a.steps,
            straggler=a.straggler,
            straggler_rank=a.straggler_rank,
            distribution=a.distribution,
            delay_ms=a.delay_ms,
            local_steps=a.local_steps,
            backup=a.backup,
            rows=a.rows,
            lr=a.lr,
            seed=a.seed,
            target=a.target,
        )


ASYNC = Concept(
    "async",
    N_("synchronous vs asynchronous SGD (parameter server, local SGD, backup workers), stragglers"),
    _async_args,
    _async_check,
    lambda executor, config: async_training.run_async_config(executor, config),
    lambda report: async_training.format_async(report),
)
