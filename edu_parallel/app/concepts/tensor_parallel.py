"""``edu-parallel run tp``: Megatron's column- and row-parallel layers, the MLP block, attention
and sequence parallelism, against a dense layer."""

from __future__ import annotations

import argparse
from typing import Any

from ... import tensor_parallel
from ...core.dims import ParallelDims
from ...core.i18n import N_, _
from ...tensor_parallel.formulas import MODES, RULES
from .base import Concept, int_option


# ---------------------------------------------------------------- tensor parallelism
def _tp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode", default="mlp", help=_("{modes} (default mlp)").format(modes=", ".join(MODES))
    )
    int_option(p, "batch", 2, _("batch size b (default 2)"))
    int_option(p, "seq", 4, _("sequence length s (default 4)"))
    int_option(p, "hidden", 8, _("hidden size h, a multiple of the world size (default 8)"))
    int_option(p, "ffn", None, _("MLP inner size, a multiple of the world size (default 4h)"))
    int_option(p, "seed", 0, _("seed of weights, input and dY (default 0)"))
    p.add_argument("--dtype", default="float64", help=_("float64 or float32 (default float64)"))
    p.add_argument(
        "--rule",
        default="megatron",
        help=(
            _("{rules}: syllabus runs the outline's collectives, errata E4 (column/row)").format(
                rules=" or ".join(RULES)
            )
        ),
    )
    p.add_argument("--gather-output", action="store_true", help=_("column: all-gather the full Y"))


def _tp_check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    """Mode, and h, ffn and s divisible by the TP degree."""
    spec = {
        "mode": a.mode,
        "batch": a.batch,
        "seq": a.seq,
        "hidden": a.hidden,
        "ffn": a.ffn,
        "seed": a.seed,
        "dtype": a.dtype,
        "rule": a.rule,
        "gather_output": a.gather_output,
    }
    tensor_parallel.check_tp_args(world_size=dims.world_size, **spec)
    return spec


TP = Concept(
    "tp",
    N_("tensor parallelism: column/row-parallel linear layers, Megatron MLP, sequence parallelism"),
    _tp_args,
    _tp_check,
    lambda executor, spec: tensor_parallel.run_tp(executor, **spec),
    lambda report: tensor_parallel.format_tp(report),
)
