"""``edu-parallel run zero`` (DP and ZeRO-1/2/3 with a memory ledger) and ``edu-parallel run fsdp``
(PyTorch's FSDP2 beside ZeRO-3)."""

from __future__ import annotations

import argparse
from typing import Any

from ... import task, zero
from ...core.dims import ParallelDims
from ...core.errors import check_choice
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


def _zero_check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    """Stage, steps, lr, seed, and at least one parameter per rank."""
    zero.check_zero_args(
        a.stage,
        a.steps,
        a.lr,
        a.seed,
        task.DEFAULT_DIMS,
        task.DEFAULT_MICROBATCH,
        dims.world_size,
    )
    return {"stage": a.stage, "steps": a.steps, "lr": a.lr, "seed": a.seed}


ZERO = Concept(
    "zero",
    N_("ZeRO stages 0-3 executed: sharded mixed-precision Adam, memory and bytes"),
    _zero_args,
    _zero_check,
    lambda executor, spec: zero.run_zero(executor, **spec),
    lambda report: zero.format_zero(report),
)


# ---------------------------------------------------------------- PyTorch FSDP2 against ZeRO-3
RESHARD = {"true": True, "false": False, "default": None}


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


def _fsdp_check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    """The options, and FSDP2 in the installed torch."""
    raf = RESHARD[check_choice("reshard_after_forward", a.reshard_after_forward, RESHARD)]
    spec = {
        "steps": a.steps,
        "lr": a.lr,
        "seed": a.seed,
        "granularity": a.granularity,
        "reshard_after_forward": raf,
        "forward_prefetch": a.forward_prefetch,
    }
    zero.check_fsdp_args(**spec, dims=task.DEFAULT_DIMS, microbatch=task.DEFAULT_MICROBATCH)
    zero.require_fsdp2()
    return spec


FSDP = Concept(
    "fsdp",
    N_("PyTorch FSDP2 (fully_shard) against ZeRO-3: params, collectives per unit, bytes"),
    _fsdp_args,
    _fsdp_check,
    lambda executor, spec: zero.run_fsdp(executor, **spec),
    lambda report: zero.format_fsdp(report),
)
