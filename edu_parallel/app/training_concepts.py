"""The training concepts of ``edu-parallel run``: pipeline, zero, fsdp, moe, tp, map.

Each checks its arguments against the run's dims before any process starts and returns the
keyword arguments of its runner; the folders load (and torch with them) when a concept is checked
or run, never when the parser is built.
"""

from __future__ import annotations

import argparse
from typing import Any

from .. import (
    data_parallel,
    expert_parallel,
    pipeline_parallel,
    strategy_map,
    tensor_parallel,
)
from ..core.dims import MAX_LOCAL_WORLD_SIZE, ParallelDims
from ..core.errors import check_choice, check_int
from ..core.i18n import N_, _
from ..expert_parallel.formulas import DEFAULTS as MOE
from ..pipeline_parallel.builders import SCHEDULES
from ..pipeline_parallel.formulas import default_times
from ..strategy_map.formulas import STRATEGIES
from ..tensor_parallel.formulas import MODES, RULES
from .concept import Concept


def _int(p: argparse.ArgumentParser, name: str, default: Any, text: str) -> None:
    p.add_argument(f"--{name}", type=int, default=default, help=text)


# ---------------------------------------------------------------- pipeline schedules
def _pipeline_args(p: argparse.ArgumentParser) -> None:
    p.set_defaults(world_size=None)  # default: --stages ranks
    p.add_argument(
        "--schedule",
        default="1f1b",
        help=_("one of {schedules} (default 1f1b)").format(schedules=", ".join(SCHEDULES)),
    )
    _int(p, "stages", None, _("pipeline ranks P (default: --world-size, else 4)"))
    _int(p, "microbatches", 8, _("microbatches M (default 8)"))
    _int(p, "chunks", 1, _("model chunks per rank v, interleaved only (default 1)"))
    _int(p, "layers", None, _("Linear+GeLU blocks (default 2*P*v)"))
    _int(p, "hidden", 32, _("hidden size h (default 32)"))
    _int(p, "microbatch-size", 4, _("rows per microbatch (default 4)"))
    _int(p, "seed", 0, _("seed of weights and batch (default 0)"))
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


# ---------------------------------------------------------------- ZeRO stages
def _zero_args(p: argparse.ArgumentParser) -> None:
    _int(p, "stage", 1, _("0 (plain DP), 1, 2 or 3 (default 1)"))
    _training_args(p)


def _training_args(p: argparse.ArgumentParser) -> None:
    _int(p, "steps", 2, _("training steps K >= 1 (default 2)"))
    p.add_argument(
        "--lr", type=float, default=1e-2, help=_("Adam learning rate > 0 (default 0.01)")
    )
    _int(p, "seed", 0, _("seed of weights and batch (default 0)"))


def _zero_check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    """Stage, steps, lr, seed, and at least one parameter per rank."""
    data_parallel.check_zero_args(
        a.stage,
        a.steps,
        a.lr,
        a.seed,
        data_parallel.DEFAULT_DIMS,
        data_parallel.DEFAULT_MICROBATCH,
        dims.world_size,
    )
    return {"stage": a.stage, "steps": a.steps, "lr": a.lr, "seed": a.seed}


ZERO = Concept(
    "zero",
    N_("ZeRO stages 0-3 executed: sharded mixed-precision Adam, memory and bytes"),
    _zero_args,
    _zero_check,
    lambda executor, spec: data_parallel.run_zero(executor, **spec),
    lambda report: data_parallel.format_zero(report),
)


# ---------------------------------------------------------------- PyTorch FSDP2 against ZeRO-3
RESHARD = {"true": True, "false": False, "default": None}


def _fsdp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--granularity",
        default="layer",
        help=_("FSDP units: layer (one per Linear) or model (default layer)"),
    )
    p.add_argument(
        "--reshard-after-forward",
        default="true",
        help=_("true, false or default (torch's: not the root)"),
    )
    p.add_argument(
        "--forward-prefetch", action="store_true", help=_("unit k's forward also gathers unit k+1")
    )
    _training_args(p)


def _fsdp_check(a: argparse.Namespace, dims: ParallelDims) -> dict[str, Any]:
    """The options, and FSDP2 in the installed torch."""
    raf = RESHARD[check_choice("reshard_after_forward", a.reshard_after_forward, RESHARD)]
    spec = {
        "steps": a.steps,
        "lr": a.lr,
        "seed": a.seed,
        "granularity": a.granularity,
        "reshard_after_forward": raf,
        "forward_prefetch": a.forward_prefetch,
    }
    data_parallel.check_fsdp_args(
        **spec, dims=data_parallel.DEFAULT_DIMS, microbatch=data_parallel.DEFAULT_MICROBATCH
    )
    data_parallel.require_fsdp2()
    return spec


FSDP = Concept(
    "fsdp",
    N_("PyTorch FSDP2 (fully_shard) against ZeRO-3: params, collectives per unit, bytes"),
    _fsdp_args,
    _fsdp_check,
    lambda executor, spec: data_parallel.run_fsdp(executor, **spec),
    lambda report: data_parallel.format_fsdp(report),
)


# ---------------------------------------------------------------- expert parallelism
def _moe_args(p: argparse.ArgumentParser) -> None:
    _int(
        p,
        "experts",
        MOE["experts"],
        f"experts E, a multiple of the world size (default {MOE['experts']})",
    )
    _int(
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
    _int(
        p,
        "tokens",
        MOE["tokens"],
        _("tokens per rank T (default {tokens})").format(tokens=MOE["tokens"]),
    )
    _int(
        p,
        "hidden",
        MOE["hidden"],
        _("hidden size h (default {hidden})").format(hidden=MOE["hidden"]),
    )
    _int(p, "seed", MOE["seed"], _("seed of weights and tokens (default 0)"))
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


# ---------------------------------------------------------------- tensor parallelism
def _tp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode", default="mlp", help=_("{modes} (default mlp)").format(modes=", ".join(MODES))
    )
    _int(p, "batch", 2, _("batch size b (default 2)"))
    _int(p, "seq", 4, _("sequence length s (default 4)"))
    _int(p, "hidden", 8, _("hidden size h, a multiple of the world size (default 8)"))
    _int(p, "ffn", None, _("MLP inner size, a multiple of the world size (default 4h)"))
    _int(p, "seed", 0, _("seed of weights, input and dY (default 0)"))
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
        _int(
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

TRAINING_CONCEPTS = [PIPELINE, ZERO, FSDP, MOE_CONCEPT, TP, MAP]
