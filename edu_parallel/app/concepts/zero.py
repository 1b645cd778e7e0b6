"""``edu-parallel run zero`` (DP and ZeRO-1/2/3 with a memory ledger) and ``edu-parallel run fsdp``
(PyTorch's FSDP2 beside ZeRO-3).

    edu-parallel run zero --stage 3 --world-size 4 --steps 2 --json
    edu-parallel run fsdp --granularity model --reshard-after-forward default

``check`` returns the run's :class:`~edu_parallel.zero.config.ZeroConfig` or
:class:`~edu_parallel.zero.config.FsdpConfig`, checked once before any process starts; ``run``
hands it to :func:`~edu_parallel.zero.report.run_zero_config` or
:func:`~edu_parallel.zero.fsdp_report.run_fsdp_config` unchanged.
"""

from __future__ import annotations

import argparse

from ... import zero
from ...core.dims import ParallelDims
from ...core.errors import Problems, check_choice, spelled_as
from ...core.i18n import N_, _
from .base import Concept, int_option


# ---------------------------------------------------------------- ZeRO stages
def _zero_args(p: argparse.ArgumentParser) -> None:
    int_option(p, "stage", 1, _("0 (plain DP), 1, 2 or 3 (default 1)"))
    _training_args(p)


def _training_args(p: argparse.ArgumentParser) -> None:
    int_option(p, "steps", 2, _("training steps K >= 1 (default 2)"))
    p.add_argument(
        "--lr", type=float, default=1e-2, help=_("Adam learning rate > 0 (default 0.01)")
    )
    int_option(p, "seed", 0, _("seed of weights and batch (default 0)"))


def _zero_check(a: argparse.Namespace, dims: ParallelDims) -> zero.ZeroConfig:
    """Stage, steps, lr, seed, and at least one parameter per rank: the run's config."""
    return zero.ZeroConfig(dims.world_size, a.stage, a.steps, a.lr, a.seed)


ZERO = Concept(
    "zero",
    N_("ZeRO stages 0-3 executed: sharded mixed-precision Adam, memory and bytes"),
    _zero_args,
    _zero_check,
    lambda executor, config: zero.run_zero_config(executor, config),
    lambda report: zero.format_zero(report),
)


# ---------------------------------------------------------------- PyTorch FSDP2 against ZeRO-3
RESHARD = {"true": True, "false": False, "default": None}
# the options the command line spells otherwise than the config's fields
FSDP_OPTIONS = {
    "reshard_after_forward": "--reshard-after-forward",
    "forward_prefetch": "--forward-prefetch",
}


def _fsdp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--granularity",
        default="layer",
        help=_("FSDP units: layer (one per Linear) or model (default layer)"),
    )
    p.add_argument(
        "--reshard-after-forward",
        default="true",
        help=_("true, false or default (torch's: not the root)"),
    )
    p.add_argument(
        "--forward-prefetch", action="store_true", help=_("unit k's forward also gathers unit k+1")
    )
    _training_args(p)


def _fsdp_check(a: argparse.Namespace, dims: ParallelDims) -> zero.FsdpConfig:
    """Every option at once, named as the command line spells it, and FSDP2 in the installed
    torch: the run's config."""
    with spelled_as(FSDP_OPTIONS):
        problems = Problems()
        raf = problems.check(
            check_choice, "reshard_after_forward", a.reshard_after_forward, RESHARD
        )
        try:
            config = zero.FsdpConfig(
                dims.world_size,
                a.steps,
                a.lr,
                a.seed,
                a.granularity,
                RESHARD.get(raf),
                a.forward_prefetch,
            )
        except ValueError as exc:
            problems.add(exc)
        problems.raise_any()
    zero.require_fsdp2()
    return config


FSDP = Concept(
    "fsdp",
    N_("PyTorch FSDP2 (fully_shard) against ZeRO-3: params, collectives per unit, bytes"),
    _fsdp_args,
    _fsdp_check,
    lambda executor, config: zero.run_fsdp_config(executor, config),
    lambda report: zero.format_fsdp(report),
)
