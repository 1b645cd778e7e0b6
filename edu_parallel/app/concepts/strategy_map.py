"""``edu-parallel run map``: one tiny model trained one step under DP, TP, TP+SP, PP and EP."""

from __future__ import annotations

import argparse
from typing import Any

from ... import strategy_map
from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from ...strategy_map.formulas import STRATEGIES
from .base import Concept, int_option

# ---------------------------------------------------------------- the strategy map
MAP_SIZES = (
    ("layers", 4, N_("residual MLP blocks")),
    ("hidden", 16, N_("hidden size h")),
    ("batch", 8, N_("sequences per step")),
    ("seq", 4, N_("tokens per sequence")),
    ("experts", 4, N_("experts per block (EP)")),
    ("top-k", 2, N_("experts per token (EP)")),
    ("seed", 0, N_("seed of weights and data")),
)


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
    for name, default, what in MAP_SIZES:
        int_option(
            p, name, default, _("{what} (default {default})").format(what=_(what), default=default)
        )


def _map_check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    """The strategies and the sizes against the world size."""
    sizes = {name.replace("-", "_"): getattr(a, name.replace("-", "_")) for name, *_ in MAP_SIZES}
    strategies = a.strategies.split(",")
    strategy_map.check_map_args(dims.world_size, strategies, **sizes)
    return {"strategies": strategies, **sizes}


MAP = Concept(
    "map",
    N_(
        "the strategy map: DP, TP, TP+SP, PP, EP on one tiny model; params, activations, bytes, "
        "messages per rank"
    ),
    _map_args,
    _map_check,
    lambda executor, spec: strategy_map.run_strategy_map(executor, **spec),
    lambda report: report.format(),
)
