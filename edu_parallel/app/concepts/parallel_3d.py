"""``edu-parallel run 3d``: one training step of DP x TP x PP (x EP) on a mesh of local ranks.

    edu-parallel run 3d --dp 2 --tp 2 --pp 2 [--zero 1] [--json]
    edu-parallel run 3d --dp 4 --tp 2 --pp 1 --ep 2 --experts 4

The world size is ``dp * tp * pp`` unless ``--world-size`` says otherwise; every degree is
checked against it and against the model (heads, hidden, layers, microbatches) before a process
starts, and one line names every bad factor.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from ... import parallel_3d
from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from .base import Concept

SIZES = (
    ("layers", 4, N_("transformer layers")),
    ("hidden", 16, N_("hidden size h")),
    ("heads", 4, N_("attention heads")),
    ("batch", 16, N_("global batch (sequences)")),
    ("seq", 4, N_("sequence length")),
    ("microbatches", None, N_("microbatches per replica (default 2 * pp)")),
    ("experts", 0, N_("experts per MoE layer (0: dense MLP)")),
    ("seed", 0, N_("seed of the weights and the data")),
)


def _args(p: argparse.ArgumentParser) -> None:
    p.set_defaults(world_size=None)  # default: dp * tp * pp
    for name, default in (("dp", 2), ("tp", 2), ("pp", 2), ("ep", 1)):
        p.add_argument(
            f"--{name}",
            type=int,
            default=default,
            help=_("{name} degree ({default})").format(name=name, default=default),
        )
    p.add_argument("--zero", type=int, default=0, help=_("0: DP all-reduce; 1: ZeRO-1 (default 0)"))
    for name, default, what in SIZES:
        p.add_argument(
            f"--{name}",
            type=int,
            default=default,
            help=_("{what} (default {default})").format(what=_(what), default=default),
        )


def _spec(a: argparse.Namespace, world_size: int) -> dict[str, Any]:
    sizes = {name: getattr(a, name) for name, *_ in SIZES}
    degrees = {k: getattr(a, k) for k in ("dp", "tp", "pp", "ep")}
    parallel_3d.check_3d_args(world_size, **degrees, zero=a.zero, **sizes)
    return {**degrees, "zero": a.zero, **sizes}


def _world_size(a: argparse.Namespace) -> int:
    """``--world-size``, else dp * tp * pp; a bad degree is named here, before the cluster."""
    if a.world_size is not None:
        return a.world_size
    degrees = [a.dp, a.tp, a.pp]
    n = math.prod(degrees) if all(isinstance(d, int) and d >= 1 for d in degrees) else 0
    _spec(a, n or 8)
    return n


def _check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    return _spec(a, dims.world_size)


PARALLEL_3D = Concept(
    "3d",
    N_(
        "DP x TP x PP (x EP) together: one step of a small transformer on a mesh,"
        " checked against one"
        " process; memory, bytes per group, idle per rank"
    ),
    _args,
    _check,
    lambda executor, spec: parallel_3d.run_3d(executor, **spec),
    lambda report: report.format(),
    world_size=_world_size,
)
