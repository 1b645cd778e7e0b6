"""``edu-parallel run 3d``: one training step of DP x TP x PP (x EP) on a mesh of local ranks.

    edu-parallel run 3d --dp 2 --tp 2 --pp 2 [--zero 1] [--json]
    edu-parallel run 3d --dp 4 --tp 2 --pp 1 --ep 2 --experts 4

The world size is ``dp * tp * pp`` unless ``--world-size`` says otherwise (under torchrun: the
launcher's). The sizes are checked once (:class:`~edu_parallel.parallel_3d.config.Config3D`),
then every degree once, against the world size and the model (heads, hidden, layers,
microbatches), by the run's :class:`~edu_parallel.core.dims.ParallelDims`, before a process
starts; one line names every bad factor. The cluster, the ranks, the measures and the planner tie
receive that :class:`~edu_parallel.parallel_3d.config.Run3D` and trust it.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import fields

from ... import parallel_3d
from ...comm.memory import check_need
from ...core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from ...core.errors import bad_value
from ...core.i18n import N_, _
from ...parallel_3d.config import Config3D, Run3D
from .base import Concept

DEGREES = (("dp", 2), ("tp", 2), ("pp", 2), ("ep", 1))  # the CLI's layout: DP2 x TP2 x PP2
SIZES = (
    ("layers", N_("transformer layers")),
    ("hidden", N_("hidden size h")),
    ("heads", N_("attention heads")),
    ("batch", N_("global batch (sequences)")),
    ("seq", N_("sequence length")),
    ("microbatches", N_("microbatches per replica (default 2 * pp)")),
    ("experts", N_("experts per MoE layer (0: dense MLP)")),
    ("seed", N_("seed of the weights and the data")),
)
DEFAULTS = {f.name: f.default for f in fields(Config3D)}  # the config's own defaults


def _args(p: argparse.ArgumentParser) -> None:
    p.set_defaults(world_size=None)  # default: dp * tp * pp
    for name, default in DEGREES:
        p.add_argument(
            f"--{name}",
            type=int,
            default=default,
            help=_("{name} degree ({default})").format(name=name, default=default),
        )
    p.add_argument("--zero", type=int, default=0, help=_("0: DP all-reduce; 1: ZeRO-1 (default 0)"))
    for name, what in SIZES:
        default = DEFAULTS[name]
        text = _(what) if default is None else _("{what} (default {default})")
        p.add_argument(
            f"--{name}", type=int, default=default, help=text.format(what=_(what), default=default)
        )


def _world_size(a: argparse.Namespace) -> int:
    """``--world-size``, else dp * tp * pp. A degree below 1 counts as 1 here, so the one check
    of the degrees names it, not a world size it made up; dp = -1 takes the rest of tp * pp."""
    if a.world_size is not None:
        return a.world_size
    for name in ("dp", "tp", "pp"):  # one degree past the limit is named, not the product
        if getattr(a, name) > MAX_LOCAL_WORLD_SIZE:
            valid = _("a degree whose product with the others is at most {limit}")
            raise bad_value(name, getattr(a, name), valid.format(limit=MAX_LOCAL_WORLD_SIZE))
    return math.prod(d if d >= 1 else 1 for d in (a.dp, a.tp, a.pp))


def _setup(a: argparse.Namespace, launched: int | None) -> tuple[ParallelDims, Run3D]:
    """The sizes, then the degrees with the model's shape, then the two together: the run's
    dims are built once, here, and are the cluster's."""
    config = Config3D(**{name: getattr(a, name) for name, _what in SIZES}, zero=a.zero)
    world, limit = (_world_size(a), MAX_LOCAL_WORLD_SIZE) if launched is None else (launched, None)
    dims = config.dims(world, a.dp, a.tp, a.pp, a.ep, max_world_size=limit)
    run = Run3D(dims, config)
    if launched is None:  # under torchrun the launcher placed the ranks already
        options = ", ".join(
            f"--{name}={getattr(config, name)}" for name in ("layers", "hidden", "batch", "seq")
        )
        need = parallel_3d.bytes_per_rank(run)  # loads torch: it counts what a layer saves
        check_need(need, dims.world_size, parallel_3d.reference_bytes(run), options)
    return run.dims, run


PARALLEL_3D = Concept(
    "3d",
    N_(
        "DP x TP x PP (x EP) together: one step of a small transformer on a mesh,"
        " checked against one"
        " process; memory, bytes per group, idle per rank"
    ),
    _args,
    None,
    lambda executor, spec: parallel_3d.execute_3d(executor, spec),
    lambda report: report.format(),
    setup=_setup,
)
