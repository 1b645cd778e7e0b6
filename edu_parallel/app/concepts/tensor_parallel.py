"""``edu-parallel run tp``: Megatron's column- and row-parallel layers, the MLP block and sequence
parallelism, against a dense layer.

    edu-parallel run tp --mode mlp-sp --world-size 4 --seq 8 --json

``check`` returns the run's :class:`~edu_parallel.tensor_parallel.config.TPConfig`, checked once
before any process starts; ``run`` hands it to
:func:`~edu_parallel.tensor_parallel.report.run_tp_config` unchanged.
"""

from __future__ import annotations

import argparse

from ... import tensor_parallel
from ...comm.memory import check_need
from ...core.dims import ParallelDims
from ...core.errors import spelled_as
from ...core.i18n import N_, _
from ...engine.executor import in_torchrun
from ...tensor_parallel.config import ITEMSIZE, MODES, RULES, TPConfig
from .base import Concept, int_option

TP_OPTIONS = {"gather_output": "--gather-output"}  # spelled otherwise than the config's field


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
    p.add_argument(
        "--dtype",
        default="float64",
        help=_("{dtypes} (default float64)").format(dtypes=_either(*ITEMSIZE)),
    )
    p.add_argument(
        "--rule",
        default="megatron",
        help=(
            _("{rules}: syllabus runs the outline's collectives, errata E4 (column/row)").format(
                rules=_either(*RULES)
            )
        ),
    )
    p.add_argument("--gather-output", action="store_true", help=_("column: all-gather the full Y"))


def _either(first: str, second: str) -> str:
    """``"float64 or float32"``, in the learner's language."""
    return _("{first} or {second}").format(first=first, second=second)


def _tp_check(a: argparse.Namespace, dims: ParallelDims) -> TPConfig:
    """Mode, and h, ffn and s divisible by the TP degree: the run's config, every bad option
    named as the command line spells it."""
    with spelled_as(TP_OPTIONS):
        config = TPConfig(
            dims.world_size,
            a.mode,
            a.batch,
            a.seq,
            a.hidden,
            a.ffn,
            a.seed,
            a.dtype,
            a.rule,
            a.gather_output,
        )
    if not in_torchrun():  # under torchrun the launcher placed the ranks already
        options = f"--hidden={config.hidden}, --ffn={config.ffn}"
        check_need(config.bytes_per_rank(), dims.world_size, config.reference_bytes(), options)
    return config


TP = Concept(
    "tp",
    N_("tensor parallelism: column/row-parallel linear layers, Megatron MLP, sequence parallelism"),
    _tp_args,
    _tp_check,
    lambda executor, config: tensor_parallel.run_tp_config(executor, config),
    lambda report: tensor_parallel.format_tp(report),
)
