"""``edu-parallel run pipeline``: a schedule (GPipe, 1F1B, interleaved, ZB-H1) executed on real
ranks, bubble and stashed activations measured.

The world size is ``--world-size``, else ``--stages``, else 4; it is checked once, as the run's
dims (named ``stages`` when ``--stages`` set it), and every other option once, against it, into a
:class:`~edu_parallel.pipeline_parallel.config.PipelineConfig` that the ranks receive.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from ... import pipeline_parallel
from ...comm.memory import check_need
from ...core.dims import ParallelDims
from ...core.errors import spelled_as
from ...core.i18n import N_, _
from ...engine.executor import in_torchrun
from ...pipeline_parallel import memory
from ...pipeline_parallel.builders import SCHEDULES
from ...pipeline_parallel.config import PipelineConfig
from ...pipeline_parallel.formulas import default_times
from .base import Concept, int_option, run_dims

DEFAULT_RANKS = 4  # without --world-size and --stages
DEFAULTS = {f.name: f.default for f in fields(PipelineConfig) if f.init}  # the config's own
SIZES = (
    ("microbatches", N_("microbatches M")),
    ("chunks", N_("model chunks per rank v, interleaved only")),
    ("hidden", N_("hidden size h")),
    ("microbatch-size", N_("rows per microbatch")),
    ("seed", N_("seed of weights and batch")),
)


# ---------------------------------------------------------------- pipeline schedules
def _pipeline_args(p: argparse.ArgumentParser) -> None:
    p.set_defaults(world_size=None)  # default: --stages ranks
    p.add_argument(
        "--schedule",
        default=DEFAULTS["schedule"],
        help=_("one of {schedules} (default 1f1b)").format(schedules=", ".join(SCHEDULES)),
    )
    int_option(
        p,
        "stages",
        None,
        _("pipeline ranks P (default: --world-size, else {ranks})").format(ranks=DEFAULT_RANKS),
    )
    for name, what in SIZES:
        default = DEFAULTS[name.replace("-", "_")]
        int_option(
            p, name, default, _("{what} (default {default})").format(what=_(what), default=default)
        )
    int_option(p, "layers", None, _("Linear+GeLU blocks (default 2*P*v)"))
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
        default=DEFAULTS["t_comm"],
        help=_("time of one send to retime the executed order (default 0)"),
    )


def _pipeline_setup(
    a: argparse.Namespace, launched: int | None
) -> tuple[ParallelDims, PipelineConfig]:
    """The dims, then the config against them, each checked once. When ``--stages`` sets the
    local world size, that one check of it is the dims' (named ``stages``), and the config takes
    its stages from the dims."""
    from_stages = launched is None and a.world_size is None and a.stages is not None
    if from_stages:
        with spelled_as({"world_size": "--stages"}):
            dims = run_dims(None, a.stages)
    else:
        dims = run_dims(launched, DEFAULT_RANKS if a.world_size is None else a.world_size)
    config = PipelineConfig(
        a.schedule,
        None if from_stages else a.stages,
        a.microbatches,
        a.chunks,
        a.layers,
        a.hidden,
        a.microbatch_size,
        a.seed,
        a.t_f,
        a.t_b,
        a.t_w,
        a.t_comm,
        world_size=dims.world_size,
    )
    if not in_torchrun():  # under torchrun the launcher placed the ranks already
        per_rank = memory.bytes_per_rank(config)
        options = ", ".join(
            f"--{name}={getattr(config, name.replace('-', '_'))}"
            for name in ("layers", "hidden", "microbatches", "microbatch-size")
        )
        check_need(max(per_rank), len(per_rank), memory.reference_bytes(config), options)
    return dims, config


PIPELINE = Concept(
    "pipeline",
    N_("pipeline schedules on real ranks: gpipe, 1f1b, interleaved, zb-h1"),
    _pipeline_args,
    None,
    lambda executor, spec: pipeline_parallel.execute_pipeline(executor, spec),
    lambda report: pipeline_parallel.format_pipeline(report),
    setup=_pipeline_setup,
)
