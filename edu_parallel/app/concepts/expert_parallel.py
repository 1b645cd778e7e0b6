"""``edu-parallel run moe``: a top-k MoE layer whose tokens travel by all-to-all."""

from __future__ import annotations

import argparse
from typing import Any

from ... import expert_parallel
from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from ...expert_parallel.formulas import DEFAULTS as MOE
from .base import Concept, int_option


# ---------------------------------------------------------------- expert parallelism
def _moe_args(p: argparse.ArgumentParser) -> None:
    int_option(
        p,
        "experts",
        MOE["experts"],
        f"experts E, a multiple of the world size (default {MOE['experts']})",
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


def _moe_check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    """Experts divisible by the ranks, top-k <= E, C > 0, and the dispatch."""
    spec = {
        "experts": a.experts,
        "top_k": a.top_k,
        "capacity_factor": a.capacity_factor,
        "skew": a.skew,
        "tokens": a.tokens,
        "hidden": a.hidden,
        "seed": a.seed,
    }
    expert_parallel.check_moe_args(dims.world_size, **spec)
    expert_parallel.check_dispatch(a.dispatch)
    return {**spec, "dispatch": a.dispatch}


MOE_CONCEPT = Concept(
    "moe",
    N_("expert parallelism: a top-k MoE layer, tokens dispatched by all-to-all"),
    _moe_args,
    _moe_check,
    lambda executor, spec: expert_parallel.run_moe(executor, **spec),
    lambda report: expert_parallel.format_moe(report),
)
