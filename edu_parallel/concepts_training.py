"""The training concepts of ``edu-parallel run``: pipeline, zero, fsdp, moe, tp, map.

Registered into :data:`edu_parallel.concepts.CONCEPTS` on import (``concepts`` imports this module
last). Each concept validates its arguments before any process starts and imports its engine
module only when it runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from .concepts import Concept, register, world_size_of
from .errors import check_choice


# ---------------------------------------------------------------- pipeline schedules (issue 4)
def _pipeline_args(p: argparse.ArgumentParser) -> None:
    from .schedule import SCHEDULES

    p.set_defaults(world_size=None)  # default: --stages ranks
    p.add_argument("--schedule", default="1f1b", help=f"one of {', '.join(SCHEDULES)} (default 1f1b)")  # fmt: skip
    p.add_argument("--stages", type=int, default=None, help="pipeline ranks P (default: --world-size, else 4)")  # fmt: skip
    p.add_argument("--microbatches", type=int, default=8, help="microbatches M (default 8)")
    p.add_argument("--chunks", type=int, default=1, help="model chunks per rank v, interleaved only (default 1)")  # fmt: skip
    p.add_argument("--layers", type=int, default=None, help="Linear+GeLU blocks (default 2*P*v)")
    p.add_argument("--hidden", type=int, default=32, help="hidden size h (default 32)")
    p.add_argument("--microbatch-size", type=int, default=4, help="rows per microbatch (default 4)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of weights and batch (default 0)")
    for name, default, what in (("f", 1.0, "forward"), ("b", 2.0, "backward (B)"),
                                ("w", 0.0, "weight-gradient (W)"), ("comm", 0.0, "send")):  # fmt: skip
        p.add_argument(f"--t-{name}", type=float, default=default,
                       help=f"time of one {what} to retime the executed order (default {default:g})")  # fmt: skip


def _pipeline_check(a: argparse.Namespace) -> None:
    """Validate before any process starts; the world size defaults to the stage count."""
    from .pipeline import check_pipeline_args

    a.world_size = world_size_of(a)
    if a.stages is None:
        a.stages = a.world_size if a.world_size is not None else 4
    if a.world_size is None:
        a.world_size = a.stages
    world = a.world_size if isinstance(a.world_size, int) and a.world_size >= 1 else None
    check_pipeline_args(a.schedule, a.stages, a.microbatches, a.chunks, a.layers, world, a.hidden,
                        a.microbatch_size, a.seed, a.t_f, a.t_b, a.t_w, a.t_comm)  # fmt: skip


def _pipeline_run(executor: Any, a: argparse.Namespace) -> Any:
    from .pipeline import run_pipeline

    return run_pipeline(executor, a.schedule, a.stages, a.microbatches, a.chunks, a.layers,
                        a.hidden, a.t_f, a.t_b, a.t_w, a.seed, microbatch_size=a.microbatch_size,
                        t_comm=a.t_comm)  # fmt: skip


def _pipeline_render(report: Any) -> str:
    from .pipeline import format_pipeline

    return format_pipeline(report)


register(Concept("pipeline", "pipeline schedules on real ranks: gpipe, 1f1b, interleaved, zb-h1",
                 _pipeline_args, _pipeline_run, _pipeline_render, _pipeline_check))  # fmt: skip


# ---------------------------------------------------------------- ZeRO stages (issue 5)
def _zero_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stage", type=int, default=1, help="0 (plain DP), 1, 2 or 3 (default 1)")
    p.add_argument("--steps", type=int, default=2, help="training steps K >= 1 (default 2)")
    p.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate > 0 (default 0.01)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and batch (default 0)")


def _zero_check(a: argparse.Namespace) -> None:
    """Validate before any process starts (stage, steps, lr, seed, world size <= Psi)."""
    from .zero_model import DEFAULT_DIMS, DEFAULT_MICROBATCH
    from .zero_report import check_zero_args

    n = world_size_of(a)
    n = n if isinstance(n, int) and n >= 1 else 1  # the executor checks the world size itself
    check_zero_args(a.stage, a.steps, a.lr, a.seed, DEFAULT_DIMS, DEFAULT_MICROBATCH, n)


def _zero_run(executor: Any, a: argparse.Namespace) -> Any:
    from .zero import run_zero

    return run_zero(executor, a.stage, a.steps, a.lr, a.seed)


def _zero_render(report: Any) -> str:
    from .zero import format_zero

    return format_zero(report)


register(Concept("zero", "ZeRO stages 0-3 executed: sharded mixed-precision Adam, memory and bytes",
                 _zero_args, _zero_run, _zero_render, _zero_check))  # fmt: skip


# ---- PyTorch FSDP2 against ZeRO-3 (issue 5)
_RESHARD = {"true": True, "false": False, "default": None}


def _fsdp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--granularity", default="layer", help="FSDP units: layer (one per Linear) or model (default layer)")  # fmt: skip
    p.add_argument("--reshard-after-forward", default="true", help="true, false or default (torch's: not the root)")  # fmt: skip
    p.add_argument("--forward-prefetch", action="store_true", help="unit k's forward also gathers unit k+1")  # fmt: skip
    p.add_argument("--steps", type=int, default=2, help="training steps K >= 1 (default 2)")
    p.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate > 0 (default 0.01)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and batch (default 0)")


def _fsdp_kwargs(a: argparse.Namespace) -> dict[str, Any]:
    raf = _RESHARD[check_choice("reshard_after_forward", a.reshard_after_forward, _RESHARD)]
    return {"steps": a.steps, "lr": a.lr, "seed": a.seed, "granularity": a.granularity,
            "reshard_after_forward": raf, "forward_prefetch": a.forward_prefetch}  # fmt: skip


def _fsdp_check(a: argparse.Namespace) -> None:
    """Validate before any process starts; FSDP2 must exist in the installed torch."""
    from .fsdp import require_fsdp2
    from .fsdp_report import check_fsdp_args
    from .zero_model import DEFAULT_DIMS, DEFAULT_MICROBATCH

    k = _fsdp_kwargs(a)
    check_fsdp_args(k["steps"], k["lr"], k["seed"], k["granularity"], k["reshard_after_forward"],
                    k["forward_prefetch"], DEFAULT_DIMS, DEFAULT_MICROBATCH)  # fmt: skip
    require_fsdp2()


def _fsdp_run(executor: Any, a: argparse.Namespace) -> Any:
    from .fsdp import run_fsdp

    return run_fsdp(executor, **_fsdp_kwargs(a))


def _fsdp_render(report: Any) -> str:
    from .fsdp import format_fsdp

    return format_fsdp(report)


register(Concept("fsdp", "PyTorch FSDP2 (fully_shard) against ZeRO-3: params, collectives per unit, bytes",
                 _fsdp_args, _fsdp_run, _fsdp_render, _fsdp_check))  # fmt: skip


# ---- expert parallelism (issue 6)
def _moe_args(p: argparse.ArgumentParser) -> None:
    from .moe_run import DEFAULTS as D

    p.add_argument("--experts", type=int, default=D["experts"], help=f"experts E, a multiple of the world size (default {D['experts']})")  # fmt: skip
    p.add_argument("--top-k", type=int, default=D["top_k"], help=f"experts per token k, 1..E (default {D['top_k']})")  # fmt: skip
    p.add_argument("--capacity-factor", type=float, default=D["capacity_factor"], help=f"C > 0: capacity = ceil(C*T*k/E) per expert per rank (default {D['capacity_factor']})")  # fmt: skip
    p.add_argument("--skew", type=float, default=D["skew"], help="router bias toward expert 0, 0..100 (default 0)")  # fmt: skip
    p.add_argument("--tokens", type=int, default=D["tokens"], help=f"tokens per rank T (default {D['tokens']})")  # fmt: skip
    p.add_argument("--hidden", type=int, default=D["hidden"], help=f"hidden size h (default {D['hidden']})")  # fmt: skip
    p.add_argument("--seed", type=int, default=D["seed"], help="seed of weights and tokens (default 0)")  # fmt: skip
    p.add_argument("--dispatch", default="variable", help="variable (counts, then the kept rows) or padded (GShard's (E, C, h) buffer, equal splits) (default variable)")  # fmt: skip


def _moe_check(a: argparse.Namespace) -> None:
    """Validate before any process starts (experts divisible by ranks, top-k <= E, C > 0, ...)."""
    from .moe_run import check_dispatch, check_moe_args

    n = world_size_of(a)
    n = n if isinstance(n, int) and n >= 1 else 0  # the executor checks the world size itself
    check_moe_args(n, a.experts, a.top_k, a.capacity_factor, a.skew, a.tokens, a.hidden, a.seed)
    check_dispatch(a.dispatch)


def _moe_run(executor: Any, a: argparse.Namespace) -> Any:
    from .moe_run import run_moe

    return run_moe(executor, a.experts, a.top_k, a.capacity_factor, a.skew, a.tokens, a.hidden, a.seed,
                   dispatch=a.dispatch)  # fmt: skip


def _moe_render(report: Any) -> str:
    from .moe_run import format_moe

    return format_moe(report)


register(Concept("moe", "expert parallelism: a top-k MoE layer, tokens dispatched by all-to-all",
                 _moe_args, _moe_run, _moe_render, _moe_check))  # fmt: skip


# ---- tensor parallelism (issue 6)
def _tp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", default="mlp", help="column, row, mlp or mlp-sp (default mlp)")
    p.add_argument("--batch", type=int, default=2, help="batch size b (default 2)")
    p.add_argument("--seq", type=int, default=4, help="sequence length s (default 4)")
    p.add_argument("--hidden", type=int, default=8, help="hidden size h, a multiple of the world size (default 8)")  # fmt: skip
    p.add_argument("--ffn", type=int, default=None, help="MLP inner size, a multiple of the world size (default 4h)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of weights, input and dY (default 0)")
    p.add_argument("--dtype", default="float64", help="float64 or float32 (default float64)")
    p.add_argument("--rule", default="megatron", help="megatron, or syllabus: the outline's collectives, errata E4 (column/row)")  # fmt: skip
    p.add_argument("--gather-output", action="store_true", help="column: all-gather the full Y")


def _tp_check(a: argparse.Namespace) -> None:
    """Validate before any process starts (mode, divisibility of h, ffn and s by the TP degree)."""
    from .tp_model import check_tp_args

    n = world_size_of(a)
    check_tp_args(a.mode, n, a.batch, a.seq, a.hidden, a.ffn, a.seed, a.dtype, a.rule, a.gather_output)  # fmt: skip


def _tp_run(executor: Any, a: argparse.Namespace) -> Any:
    from .tp_run import run_tp

    return run_tp(executor, a.mode, a.batch, a.seq, a.hidden, a.ffn, a.seed, a.dtype, a.rule, a.gather_output)  # fmt: skip


def _tp_render(report: Any) -> str:
    from .tp_run import format_tp

    return format_tp(report)


register(Concept("tp", "tensor parallelism: column/row-parallel linear layers, Megatron MLP, sequence parallelism",
                 _tp_args, _tp_run, _tp_render, _tp_check))  # fmt: skip


# ---------------------------------------------------------------- strategy map (issue 6, U1/U7)
def _map_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategies", default="dp,tp,tp-sp,pp,ep", help="comma-separated subset of dp,tp,tp-sp,pp,ep (default all; tp-sp: TP + sequence parallelism)")  # fmt: skip
    for name, default, what in (("layers", 4, "residual MLP blocks"), ("hidden", 16, "hidden size h"),
                                ("batch", 8, "sequences per step"), ("seq", 4, "tokens per sequence"),
                                ("experts", 4, "experts per block (EP)"), ("top-k", 2, "experts per token (EP)"),
                                ("seed", 0, "seed of weights and data")):  # fmt: skip
        p.add_argument(f"--{name}", type=int, default=default, help=f"{what} (default {default})")


def _map_sizes(a: argparse.Namespace) -> dict[str, Any]:
    return {"strategies": a.strategies.split(","), "layers": a.layers, "hidden": a.hidden,
            "batch": a.batch, "seq": a.seq, "experts": a.experts, "top_k": a.top_k, "seed": a.seed}  # fmt: skip


def _map_check(a: argparse.Namespace) -> None:
    """Validate before any process starts (sizes against the world size)."""
    from .strategy_map_report import check_map_args

    n = world_size_of(a)
    n = n if isinstance(n, int) and n >= 1 else 1  # the executor checks the world size itself
    sizes = _map_sizes(a)
    check_map_args(n, sizes.pop("strategies"), **sizes)


def _map_run(executor: Any, a: argparse.Namespace) -> Any:
    from .strategy_map_report import run_strategy_map

    sizes = _map_sizes(a)
    return run_strategy_map(executor, sizes.pop("strategies"), **sizes)


def _map_render(report: Any) -> str:
    return report.format()


register(Concept("map", "the strategy map: DP, TP, TP+SP, PP, EP on one tiny model; params, activations, bytes, messages per rank",
                 _map_args, _map_run, _map_render, _map_check))  # fmt: skip
