"""``edu-parallel run moe``: a top-k MoE layer whose tokens travel by all-to-all.

    edu-parallel run moe --world-size 4 --experts 8 --top-k 2 --skew 4 --dispatch padded --json

``check`` returns the run's :class:`~edu_parallel.expert_parallel.config.MoEConfig`, checked once
before any process starts; ``run`` hands it to
:func:`~edu_parallel.expert_parallel.report.run_moe_config` unchanged.
"""

from __future__ import annotations

import argparse

from ... import expert_parallel
from ...core.dims import ParallelDims
from ...core.errors import spelled_as
from ...core.i18n import N_, _
from ...expert_parallel.config import MoEConfig
from ...expert_parallel.formulas import DEFAULTS as MOE
from .base import Concept, int_option

# the options the command line spells otherwise than the config's fields
MOE_OPTIONS = {"top_k": "--top-k", "capacity_factor": "--capacity-factor"}


# ---------------------------------------------------------------- expert parallelism
def _moe_args(p: argparse.ArgumentParser) -> None:
    int_option(
        p,
        "experts",
        MOE["experts"],
        _("experts E, a multiple of the world size (default {experts})").format(
            experts=MOE["experts"]
        ),
    )
    int_option(
        p,
        "top-k",
        MOE["top_k"],
        _("experts per token k, 1..E (default {k})").format(k=MOE["top_k"]),
    )
    p.add_argument(
        "--capacity-factor",
        type=float,
        default=MOE["capacity_factor"],
        help=(
            _("C > 0: capacity = ceil(C*T*k/E) per expert per rank (default {value})").format(
                value=MOE["capacity_factor"]
            )
        ),
    )
    p.add_argument(
        "--skew",
        type=float,
        default=MOE["skew"],
        help=_("router bias toward expert 0, 0..100 (default 0)"),
    )
    int_option(
        p,
        "tokens",
        MOE["tokens"],
        _("tokens per rank T (default {tokens})").format(tokens=MOE["tokens"]),
    )
    int_option(
        p,
        "hidden",
        MOE["hidden"],
        _("hidden size h (default {hidden})").format(hidden=MOE["hidden"]),
    )
    int_option(p, "seed", MOE["seed"], _("seed of weights and tokens (default 0)"))
    p.add_argument(
        "--dispatch",
        default="variable",
        help=(
            _(
                "variable (counts, then the kept rows) or padded (GShard's (E, C, h) buffer, "
                "equal splits) (default variable)"
            )
        ),
    )


def _moe_check(a: argparse.Namespace, dims: ParallelDims) -> MoEConfig:
    """Experts divisible by the ranks, top-k <= E, C > 0, the dispatch: the run's config, every
    bad option named as the command line spells it."""
    with spelled_as(MOE_OPTIONS):
        return MoEConfig(
            dims.world_size,
            a.experts,
            a.top_k,
            a.capacity_factor,
            a.skew,
            a.tokens,
            a.hidden,
            a.seed,
            a.dispatch,
        )


MOE_CONCEPT = Concept(
    "moe",
    N_("expert parallelism: a top-k MoE layer, tokens dispatched by all-to-all"),
    _moe_args,
    _moe_check,
    lambda executor, config: expert_parallel.run_moe_config(executor, config),
    lambda report: expert_parallel.format_moe(report),
)
