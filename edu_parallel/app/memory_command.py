"""``edu-parallel memory``: how many bytes of model states each GPU holds, no processes started.

    edu-parallel memory --params 7.5e9 --gpus 64 --zero 3
    edu-parallel memory --model llama3-70b --gpus 64 --tp 8 --zero 1 --offload optimizer --json
    edu-parallel memory --model llama3-8b --gpus 8 --zero 2 --micro-batch 1 --recompute selective
    edu-parallel memory --model zero-7.5b --gpus 64 --zero 3 --offload all --convention deepspeed

Prints ``bytes_per_gpu`` and a ``breakdown`` by category (ZeRO paper §3.1, Fig. 1), the CPU bytes
under ``--offload``, the bytes each GPU sends per step, and, with ``--model``, the activation
memory (Korthikanti et al. 2022; Llama's own terms for Llama presets). ``--convention``
counts the states as the ZeRO paper (default), Megatron-LM's distributed optimizer or DeepSpeed's
estimators do (:mod:`edu_parallel.memory.conventions`). Formulas and sources:
:mod:`edu_parallel.memory.model_states`.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from ..core.errors import Problems, bad_value, conflicts, needs
from ..core.i18n import N_, _
from ..core.width import fitted, ljust
from ..core.width import width as text_width
from ..memory.activations import shape_activation_estimate
from ..memory.communication import comm_estimate
from ..memory.conventions import CONVENTIONS, largest_module_params
from ..memory.model_states import (
    OFFLOADS,
    PRECISIONS,
    RECOMPUTE,
    largest_model_that_fits,
    model_state_bytes,
)
from ..memory.presets import PRESETS, get_preset

_COUNT_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
PARAMS_RANGE = N_("a parameter count > 0, such as 7.5e9, 7.5B, 350M or 1T")
# what --micro-batch and --recompute mean when not given (None: not given; only --model's
# activations read them, see check_combinations)
DEFAULT_MICRO_BATCH, DEFAULT_RECOMPUTE = 1, "none"
ACTIVATION_OPTIONS = ("micro_batch", "seq", "recompute", "sequence_parallel")


def parse_count(text: str, name: str = "params") -> float:
    """``"7.5e9"`` or ``"7.5B"`` -> 7.5e9. Raises a ValueError naming ``name`` for anything else."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([A-Za-z]?)\s*", str(text))
    if not match or match.group(2).lower() not in _COUNT_SUFFIX:
        raise bad_value(name, text, _(PARAMS_RANGE))
    value = float(match.group(1)) * _COUNT_SUFFIX[match.group(2).lower()]
    if not value > 0:
        raise bad_value(name, text, _(PARAMS_RANGE))
    return value


def add_memory_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--params", default=None, help=_("parameters: 7.5e9, 7.5B, 350M (or use --model)")
    )
    p.add_argument(
        "--model",
        default=None,
        help=_("a preset, sets --params: {presets}").format(presets=", ".join(PRESETS)),
    )
    p.add_argument("--gpus", type=int, default=1, help=_("GPUs in all (default 1)"))
    p.add_argument("--zero", type=int, default=0, help=_("ZeRO stage 0-3 (default 0: plain DP)"))
    p.add_argument(
        "--precision",
        default="mixed",
        help=_("{precisions} (default mixed)").format(precisions=", ".join(PRECISIONS)),
    )
    p.add_argument(
        "--offload",
        default="none",
        help=_("{offloads} (default none)").format(offloads=", ".join(OFFLOADS)),
    )
    p.add_argument(
        "--convention",
        default="zero-paper",
        help=_("{conventions}: whose accounting (default zero-paper, 16 B/param)").format(
            conventions=", ".join(CONVENTIONS)
        ),
    )
    p.add_argument(
        "--gpus-per-node",
        type=int,
        default=None,
        help=_("--convention deepspeed: GPUs per node (default min(gpus, 8))"),
    )
    p.add_argument(
        "--largest-layer-params",
        default=None,
        help=_("--convention deepspeed, ZeRO-3: the largest module's parameters (--model sets it)"),
    )
    p.add_argument(
        "--no-zero-init",
        action="store_true",
        help=_("--convention deepspeed, ZeRO-3: the model is built whole before partitioning"),
    )
    p.add_argument("--tp", type=int, default=1, help=_("tensor-parallel degree (default 1)"))
    p.add_argument("--pp", type=int, default=1, help=_("pipeline-parallel degree (default 1)"))
    p.add_argument(
        "--gpu-gb",
        type=float,
        default=None,
        help=_("GPU memory in GB (1e9 B): also print the largest model that fits"),
    )
    p.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        help=_("activations (--model): sequences per micro-batch (default {n})").format(
            n=DEFAULT_MICRO_BATCH
        ),
    )
    p.add_argument(
        "--seq",
        type=int,
        default=None,
        help=_("activations (--model): sequence length (default: the preset's)"),
    )
    p.add_argument(
        "--recompute",
        default=None,
        help=_("activations (--model): {recompute} (default {default})").format(
            recompute=", ".join(RECOMPUTE), default=DEFAULT_RECOMPUTE
        ),
    )
    p.add_argument(
        "--sequence-parallel",
        action="store_true",
        help=_("activations (--model, --tp > 1): Megatron sequence parallelism"),
    )
    p.add_argument("--json", action="store_true", help=_("print one JSON object"))


def check_combinations(a: argparse.Namespace) -> None:
    """Refuse, before any work, each option that means nothing with the others: the activation
    options without --model, --sequence-parallel with --tp 1, DeepSpeed's own options under
    another convention or stage. One line names the option and the option that decides."""
    p = Problems()
    if a.model is None:
        why = _("only a --model preset's activations read it (--params counts model states)")
        for name in ACTIVATION_OPTIONS:
            value = getattr(a, name)
            if value is not None and value is not False:
                p.add(needs(name, value, "model", why))
    elif a.sequence_parallel and a.tp == 1:
        why = _("sequence parallelism splits activations across the tensor-parallel ranks")
        p.add(conflicts("sequence_parallel", True, "tp", a.tp, why))
    deepspeed_only = [("gpus_per_node", a.gpus_per_node, (2, 3))]
    deepspeed_only += [("largest_layer_params", a.largest_layer_params, (3,))]
    deepspeed_only += [("no_zero_init", True if a.no_zero_init else None, (3,))]
    for name, value, stages in deepspeed_only:
        if value is None or a.convention not in CONVENTIONS:  # a bad convention: named below
            continue
        if a.convention != "deepspeed":
            why = _("only the DeepSpeed estimators read it")
            p.add(conflicts(name, value, "convention", a.convention, why))
        elif a.zero == 2 and 2 not in stages:  # (DeepSpeed's estimators: ZeRO 2 and 3 only)
            why = _("only DeepSpeed's ZeRO-3 estimator reads it")
            p.add(conflicts(name, value, "zero", a.zero, why))
    p.raise_any()


def memory_report(a: argparse.Namespace) -> dict[str, Any]:
    """Validate the arguments and compute; every bad one raises a one-line ValueError."""
    check_combinations(a)
    shape = None
    if a.model is not None:
        shape = get_preset(a.model)
        if a.params is not None:
            raise bad_value(
                "params",
                a.params,
                _("omitted with --model (it sets {params})").format(params=shape.params),
            )
        params: float = shape.params
    elif a.params is None:
        valid = _("{valid}, or --model {{{presets}}}").format(
            valid=_(PARAMS_RANGE), presets=", ".join(PRESETS)
        )
        raise bad_value("params", None, valid)
    else:
        params = parse_count(a.params)
    largest = None
    if a.largest_layer_params is not None:
        largest = int(parse_count(a.largest_layer_params, "largest_layer_params"))
    elif shape is not None:
        largest = largest_module_params(shape)
    states = model_state_bytes(
        params,
        a.gpus,
        a.zero,
        a.precision,
        a.offload,
        a.tp,
        a.pp,
        a.convention,
        gpus_per_node=a.gpus_per_node,
        largest_layer_params=largest,
        zero_init=not a.no_zero_init,
    )
    data = states.to_json_dict()
    data["model"] = None if shape is None else shape.to_json_dict()
    data["comm"] = comm_estimate(
        params, a.gpus, a.zero, a.precision, a.tp, a.pp, a.convention
    ).to_json_dict()
    data["activations"] = None
    if shape is not None:
        seq = shape.seq if a.seq is None else a.seq
        micro_batch = DEFAULT_MICRO_BATCH if a.micro_batch is None else a.micro_batch
        recompute = DEFAULT_RECOMPUTE if a.recompute is None else a.recompute
        activations = shape_activation_estimate(
            shape, seq, micro_batch, shape.layers, a.tp, a.sequence_parallel, recompute
        )
        data["activations"] = activations.to_json_dict()
    data["gpu_bytes"] = None
    data["largest_model_that_fits"] = None
    if a.gpu_gb is not None:
        gpu_bytes = a.gpu_gb * 1e9
        data["gpu_bytes"] = gpu_bytes
        data["largest_model_that_fits"] = largest_model_that_fits(
            gpu_bytes, a.gpus, a.zero, a.precision, a.offload, a.tp, a.pp, a.convention
        )
    return data


def _gb(n: float) -> str:
    return f"{n / 1e9:.4g} GB"


@fitted
def format_memory(d: dict[str, Any]) -> str:
    name = f"{d['model']['name']} " if d["model"] else ""
    lines = [
        name
        + _(
            "{params} params on {gpus} GPUs (tp={tp}, pp={pp}, dp={dp}), ZeRO-{zero}, {precision},"
            " offload={offload}, convention={convention}"
        ).format(
            params=f"{d['params']:.4g}",
            gpus=d["gpus"],
            tp=d["tp"],
            pp=d["pp"],
            dp=d["dp"],
            zero=d["zero"],
            precision=d["precision"],
            offload=d["offload"],
            convention=d["convention"],
        ),
        f"formula        {d['formula']}",
        f"bytes_per_gpu  {d['bytes_per_gpu']:.6g}  ({_gb(d['bytes_per_gpu'])})",
    ]
    if d["offload"] != "none" or d["cpu_bytes_per_node"] is not None:
        lines.append(
            f"cpu_bytes_per_gpu  {d['cpu_bytes_per_gpu']:.6g}  ({_gb(d['cpu_bytes_per_gpu'])})"
        )
    if d["cpu_bytes_per_node"] is not None:
        per_node = d["cpu_bytes_per_node"]
        lines.append(
            f"cpu_bytes_per_node  {per_node:.12g}  "
            + _("({gb}, DeepSpeed's CPU)").format(gb=_gb(per_node))
        )
    categories = list(d["breakdown"]) + [c for c in d["cpu_breakdown"] if c not in d["breakdown"]]
    shown = [_(c) for c in categories]  # the named ones are messages (memory/conventions.py)
    width = max(12, *map(text_width, [_("category"), *shown]))
    lines.append(f"breakdown      {ljust(_('category'), width)} GPU          CPU")
    for category, label in zip(categories, shown, strict=True):
        gpu, cpu = d["breakdown"].get(category, 0), d["cpu_breakdown"].get(category, 0)
        lines.append(f"               {ljust(label, width)} {_gb(gpu):<12} {_gb(cpu)}")
    lines.append(
        "comm           "
        + _("{gb} sent per GPU per step: {formula}").format(
            gb=_gb(d["comm"]["bytes_per_gpu"]), formula=d["comm"]["formula"]
        )
    )
    if d["activations"]:
        act = d["activations"]
        lines.append(
            "activations    "
            + _("{gb} per GPU: {formula}").format(gb=_gb(act["bytes"]), formula=act["formula"])
        )
    if d["largest_model_that_fits"] is not None:
        lines.append(
            "fits           "
            + _(
                "{gb} per GPU holds the model states of up to {params} params (activations not"
                " counted)"
            ).format(gb=_gb(d["gpu_bytes"]), params=f"{d['largest_model_that_fits']:.4g}")
        )
    return "\n".join(lines)


def run_memory(a: argparse.Namespace) -> int:
    data = memory_report(a)
    print(json.dumps(data) if a.json else format_memory(data))
    return 0
