"""``edu-parallel run map``: one tiny model trained one step under DP, TP, TP+SP, PP and EP.

The options are checked once, against the run's world size, into a
:class:`~edu_parallel.strategy_map.formulas.MapRun` that the ranks and the report receive.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from ... import strategy_map
from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from ...strategy_map.formulas import STRATEGIES, MapConfig, MapRun
from .base import Concept, int_option

# ---------------------------------------------------------------- the strategy map
MAP_SIZES = (
    ("layers", N_("residual MLP blocks")),
    ("hidden", N_("hidden size h")),
    ("batch", N_("sequences per step")),
    ("seq", N_("tokens per sequence")),
    ("experts", N_("experts per block (EP)")),
    ("top-k", N_("experts per token (EP)")),
    ("seed", N_("seed of weights and data")),
)
DEFAULTS = {f.name: f.default for f in fields(MapConfig)}  # the config's own defaults


def _field(option: str) -> str:
    return option.replace("-", "_")


def _map_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--strategies",
        default=",".join(STRATEGIES),
        help=(
            _(
                "comma-separated subset of {strategies} (default all; tp-sp: TP + sequence"
                " parallelism)"
            ).format(strategies=",".join(STRATEGIES))
        ),
    )
    for name, what in MAP_SIZES:
        default = DEFAULTS[_field(name)]
        int_option(
            p, name, default, _("{what} (default {default})").format(what=_(what), default=default)
        )


def _map_check(a: argparse.Namespace, dims: ParallelDims) -> MapRun:
    """The strategies and the sizes against the world size, checked once."""
    sizes = {_field(name): getattr(a, _field(name)) for name, _what in MAP_SIZES}
    return MapRun.build(dims.world_size, a.strategies.split(","), **sizes)


MAP = Concept(
    "map",
    N_(
        "the strategy map: DP, TP, TP+SP, PP, EP on one tiny model; params, activations, bytes, "
        "messages per rank"
    ),
    _map_args,
    _map_check,
    lambda executor, spec: strategy_map.execute_strategy_map(executor, spec),
    lambda report: report.format(),
)
