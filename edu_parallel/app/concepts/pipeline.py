"""``edu-parallel run pipeline``: a schedule (GPipe, 1F1B, interleaved, ZB-H1) executed on real
ranks, bubble and stashed activations measured."""

from __future__ import annotations

import argparse
from typing import Any

from ... import pipeline_parallel
from ...core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from ...core.errors import check_choice, check_int
from ...core.i18n import N_, _
from ...pipeline_parallel.builders import SCHEDULES
from ...pipeline_parallel.formulas import default_times
from .base import Concept, int_option


# ---------------------------------------------------------------- pipeline schedules
def _pipeline_args(p: argparse.ArgumentParser) -> None:
    p.set_defaults(world_size=None)  # default: --stages ranks
    p.add_argument(
        "--schedule",
        default="1f1b",
        help=_("one of {schedules} (default 1f1b)").format(schedules=", ".join(SCHEDULES)),
    )
    int_option(p, "stages", None, _("pipeline ranks P (default: --world-size, else 4)"))
    int_option(p, "microbatches", 8, _("microbatches M (default 8)"))
    int_option(p, "chunks", 1, _("model chunks per rank v, interleaved only (default 1)"))
    int_option(p, "layers", None, _("Linear+GeLU blocks (default 2*P*v)"))
    int_option(p, "hidden", 32, _("hidden size h (default 32)"))
    int_option(p, "microbatch-size", 4, _("rows per microbatch (default 4)"))
    int_option(p, "seed", 0, _("seed of weights and batch (default 0)"))
    usual, zb = default_times("1f1b"), default_times("zb-h1")
    times = (
        ("f", "t_f", N_("forward (F)")),
        ("b", "t_b", N_("input-gradient pass (I; a full backward B costs t_b + t_w)")),
        ("w", "t_w", N_("weight-gradient pass (W)")),
    )
    for name, key, what in times:
        p.add_argument(
            f"--t-{name}",
            type=float,
            default=None,
            help=(
                _(
                    "time of one {what} to retime the executed order (default {value2:g}; zb-h1:"
                    " {value3:g}, Qi et al. 2023's T_F = T_B = T_W)"
                ).format(what=_(what), value2=usual[key], value3=zb[key])
            ),
        )
    p.add_argument(
        "--t-comm",
        type=float,
        default=0.0,
        help=_("time of one send to retime the executed order (default 0)"),
    )


def _pipeline_world_size(a: argparse.Namespace) -> int:
    """``--world-size``, else ``--stages`` (checked here, so its error names it), else 4."""
    if a.world_size is not None:
        return a.world_size
    if a.stages is None:
        return 4
    return check_int("stages", a.stages, 1, MAX_LOCAL_WORLD_SIZE)


def _pipeline_check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    """``--stages`` defaults to the world size; every option is checked against it."""
    stages = dims.world_size if a.stages is None else a.stages
    check_choice("schedule", a.schedule, SCHEDULES)
    given = {"t_f": a.t_f, "t_b": a.t_b, "t_w": a.t_w}
    times = {k: default_times(a.schedule)[k] if x is None else x for k, x in given.items()}
    times["t_comm"] = a.t_comm
    sizes = {"hidden": a.hidden, "microbatch_size": a.microbatch_size, "seed": a.seed}
    pipeline_parallel.check_pipeline_args(
        a.schedule, stages, a.microbatches, a.chunks, a.layers, dims.world_size, **sizes, **times
    )
    return {
        "schedule": a.schedule,
        "stages": stages,
        "microbatches": a.microbatches,
        "chunks": a.chunks,
        "layers": a.layers,
        **sizes,
        **times,
    }


PIPELINE = Concept(
    "pipeline",
    N_("pipeline schedules on real ranks: gpipe, 1f1b, interleaved, zb-h1"),
    _pipeline_args,
    _pipeline_check,
    lambda executor, spec: pipeline_parallel.run_pipeline(executor, **spec),
    lambda report: pipeline_parallel.format_pipeline(report),
    world_size=_pipeline_world_size,
)
