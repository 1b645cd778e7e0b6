"""``edu-parallel planner``: every DP x TP x PP configuration of a model on a cluster, ranked.

    edu-parallel planner --model llama3-70b --nodes 16 --gpus-per-node 8 --gpu h100 \\
        --global-batch 1024 --seq 8192 [--intra nvlink4-h100] [--inter ib-ndr-400] \\
        [--efficiency 0.5] [--memory-gb 80] [--top 10] [--all] [--json]
    edu-parallel planner --layers 32 --hidden 4096 --heads 32 --nodes 1 --gpus-per-node 8 \\
        --global-batch 64 --seq 2048 [--experts 8 --top-k 2]
    edu-parallel planner --model mixtral-8x7b --nodes 8 --global-batch 1024 --seq 4096

A mixture-of-experts model (a preset such as ``mixtral-8x7b``, or ``--experts E --top-k K``)
adds the EP degree to the search (:mod:`edu_parallel.planner.experts`); the table then has an
``ep`` column.

``--json`` prints ``{"configs": [...], ...}`` best first, each with ``dp``, ``tp``, ``pp``, ``ep``,
``chunks``, ``zero``, ``micro_batch``, ``microbatches``, ``recompute``, ``memory_bytes_per_gpu``,
``step_time_s``, ``time_terms``, ``tokens_per_s``, ``mfu``, ``feasible``, ``reason``; ``--all``
adds the infeasible ones with their reasons. Formulas: :mod:`edu_parallel.planner.estimate`.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..core.errors import (
    Problems,
    bad_value,
    check_choice,
    check_int,
    conflicts,
    spelled_as,
    spelling,
)
from ..core.i18n import _
from ..core.width import fitted, ljust, rjust
from ..memory.presets import ARCHS, PRESETS, ModelShape, active_params
from ..models.topology import LINKS
from ..planner.hardware import GPUS, ClusterSpec
from ..planner.inputs import PlannerInputs
from ..planner.planning import PlannerResult, plan

SHAPE_OPTIONS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "experts", "top_k")
ZERO_OK = ("vocab", "experts")  # shape options that may be 0
DEFAULT_VOCAB, DEFAULT_ARCH = 50257, "gpt2"  # a custom shape's, without --vocab, --arch (GPT-2)
# what the inputs' check is given in place of a bad model or cluster (already reported)
STAND_IN_MODEL = next(iter(PRESETS))
STAND_IN_CLUSTER = ClusterSpec(1, 1)


def add_planner_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", default=None, help=_("a preset: {presets}").format(presets=", ".join(PRESETS))
    )
    p.add_argument("--layers", type=int, default=None, help=_("custom shape: layers (no --model)"))
    p.add_argument("--hidden", type=int, default=None, help=_("custom shape: hidden size"))
    p.add_argument("--heads", type=int, default=None, help=_("custom shape: attention heads"))
    p.add_argument("--kv-heads", type=int, default=None, help=_("custom shape: key/value heads"))
    p.add_argument("--ffn", type=int, default=None, help=_("custom shape: MLP width (default 4h)"))
    p.add_argument(
        "--vocab",
        type=int,
        default=None,
        help=_("custom shape: vocabulary ({vocab})").format(vocab=DEFAULT_VOCAB),
    )
    p.add_argument(
        "--experts", type=int, default=None, help=_("custom shape: MoE experts per layer")
    )
    p.add_argument("--top-k", type=int, default=None, help=_("custom shape: experts per token"))
    p.add_argument(
        "--arch",
        default=None,
        help=_("custom shape: {archs} ({arch})").format(archs=", ".join(ARCHS), arch=DEFAULT_ARCH),
    )
    p.add_argument("--nodes", type=int, required=True, help=_("nodes"))
    p.add_argument("--gpus-per-node", type=int, default=8, help=_("GPUs per node (default 8)"))
    p.add_argument(
        "--gpu", default="h100", help=_("{gpus} (default h100)").format(gpus=", ".join(GPUS))
    )
    p.add_argument(
        "--intra",
        default="nvlink4-h100",
        help=_("link in a node: {links}").format(links=", ".join(LINKS)),
    )
    p.add_argument(
        "--inter", default="ib-ndr-400", help=_("link between nodes (default ib-ndr-400)")
    )
    p.add_argument("--global-batch", type=int, required=True, help=_("sequences per step"))
    p.add_argument(
        "--seq", type=int, default=None, help=_("sequence length (default: the preset's)")
    )
    p.add_argument("--efficiency", type=float, default=0.5, help=_("fraction of peak, (0, 1]"))
    p.add_argument(
        "--memory-gb", type=float, default=None, help=_("GB per GPU (default: the GPU's)")
    )
    p.add_argument(
        "--top",
        type=int,
        default=None,
        help=_("configurations to print (default: 10 as text, every feasible one with --json)"),
    )
    p.add_argument("--all", action="store_true", help=_("include the infeasible configurations"))
    p.add_argument("--json", action="store_true", help=_("print one JSON object"))


# how the command line spells the parameters its errors name (a config's field or an option)
SPELLING = {
    name: "--" + name.replace("_", "-")
    for name in (*SHAPE_OPTIONS, "model", "arch", "nodes", "gpus_per_node", "gpu", "intra",
                 "inter", "global_batch", "seq", "efficiency", "memory_gb", "top")
}  # fmt: skip


def _model(a: argparse.Namespace, p: Problems) -> tuple[Any, int | None]:
    """The preset name or a custom ModelShape, and its default sequence length; ``(None, None)``
    with the problems recorded in ``p`` when the options do not make a model."""
    given = [k for k in (*SHAPE_OPTIONS, "arch") if getattr(a, k) is not None]
    if a.model is not None:
        if given:
            p.add(bad_value(given[0], getattr(a, given[0]), _("omitted with --model")))
            return None, None
        return a.model, None
    missing = [f"--{k}" for k in ("layers", "hidden", "heads") if getattr(a, k) is None]
    if missing:
        valid = _("--model {{{presets}}} or a custom shape ({missing} missing)").format(
            presets=", ".join(PRESETS), missing=", ".join(missing)
        )
        p.add(bad_value("model", None, valid))
        return None, None
    a = argparse.Namespace(  # a custom shape: its defaults, where not given
        **{**vars(a), "vocab": DEFAULT_VOCAB if a.vocab is None else a.vocab}
        | {"arch": DEFAULT_ARCH if a.arch is None else a.arch}
    )
    before = len(p)
    for k in SHAPE_OPTIONS:
        if getattr(a, k) is not None:
            p.check(check_int, k, getattr(a, k), 0 if k in ZERO_OK else 1)
    p.check(check_choice, "arch", a.arch, ARCHS)
    if len(p) > before:
        return None, None
    experts = a.experts or 0
    if a.hidden % a.heads:
        p.add(bad_value("hidden", a.hidden, _("a multiple of heads={heads}").format(heads=a.heads)))
    elif experts and not 1 <= (a.top_k or 0) <= experts:
        valid = _("an integer in [1, {experts}] with --experts {experts}").format(experts=experts)
        p.add(bad_value("top_k", a.top_k, valid))
    elif not experts and a.top_k is not None:
        p.add(bad_value("top_k", a.top_k, _("omitted without --experts (dense)")))
    if a.kv_heads is not None:
        _check_kv_heads(a, p)
    if len(p) > before:
        return None, None
    seq = a.seq if a.seq is not None else 2048
    shape = ModelShape(
        "custom",
        a.arch,
        a.layers,
        a.hidden,
        a.heads,
        a.vocab,
        seq,
        a.kv_heads,
        a.ffn,
        experts=experts,
        top_k=a.top_k or 0,
    )
    return shape, seq


def _check_kv_heads(a: argparse.Namespace, p: Problems) -> None:
    """--kv-heads: grouped-query attention shares each key/value head among heads/kv query
    heads, so it divides --heads; GPT-2's attention has none to share."""
    if a.arch == "gpt2":
        why = _(
            "GPT-2 attention has a key/value head per query head; --arch llama or bare for"
            " grouped-query attention"
        )
        p.add(conflicts("kv_heads", a.kv_heads, "arch", a.arch, why))
    elif a.heads % a.kv_heads:  # also kv_heads > heads
        shown = [d for d in range(1, min(a.heads, 4096) + 1) if a.heads % d == 0]
        valid = _(
            "a divisor of {option}={heads} ({divisors}): each key/value head serves whole query"
            " heads"
        ).format(option=spelling("heads"), heads=a.heads, divisors=", ".join(map(str, shown)))
        p.add(bad_value("kv_heads", a.kv_heads, valid))


def inputs_from_options(a: argparse.Namespace) -> PlannerInputs:
    """The options checked once into the planner's inputs: every bad one named in one line, as
    the command line spells it (``--global-batch=0``), before any work."""
    with spelled_as(SPELLING):
        p = Problems()
        model, default_seq = _model(a, p)
        cluster = None
        try:
            cluster = ClusterSpec(a.nodes, a.gpus_per_node, a.gpu, a.intra, a.inter)
        except ValueError as exc:
            p.add(exc)
        seq = a.seq if a.seq is not None else default_seq
        if seq is None:  # a preset (an unknown name is reported by the inputs' check)
            seq = PRESETS[model].seq if model in PRESETS else 1
        budget = None
        if a.memory_gb is not None:
            if not 0 < a.memory_gb * 1e9 < float("inf"):
                p.add(bad_value("memory_gb", a.memory_gb, _("a number of GB > 0")))
            else:
                budget = a.memory_gb * 1e9
        if a.top is not None:
            p.check(check_int, "top", a.top, 1)
        try:  # stand-ins for a bad model or cluster, so that the rest is checked all the same
            inputs = PlannerInputs(
                STAND_IN_MODEL if model is None else model,
                cluster or STAND_IN_CLUSTER,
                a.global_batch,
                seq,
                a.efficiency,
                budget,
            )
        except ValueError as exc:
            p.add(exc)
        p.raise_any()
    return inputs


def planner_result(a: argparse.Namespace) -> PlannerResult:
    """Check the options once (:func:`inputs_from_options`) and plan."""
    return plan(inputs_from_options(a))


def cluster_text(cluster: ClusterSpec) -> str:
    """``1 x 8 h100 (8 GPUs), intra nvlink4-h100, inter ib-ndr-400``, in the learner's language
    (``ClusterSpec.describe`` is the JSON's English)."""
    return _("{nodes} x {gpus} {gpu} ({world} GPUs), intra {intra}, inter {inter}").format(
        nodes=cluster.nodes,
        gpus=cluster.gpus_per_node,
        gpu=cluster.gpu.name,
        world=cluster.world_size,
        intra=cluster.intra.name,
        inter=cluster.inter.name,
    )


@fitted
def format_planner(result: PlannerResult, top: int, all: bool) -> str:  # noqa: A002
    chosen = (result.configs if all else result.feasible)[:top]
    moe = result.model.experts > 0  # an ep column only for a mixture of experts
    ep_head = f" {'ep':>3}" if moe else ""
    params = f"{result.model.params / 1e9:.4g}"
    head = (
        _(
            "{model} ({params}B params, {active}B active) on {cluster}, global batch {batch} x seq"
            " {seq}, efficiency {efficiency}, {gb} GB per GPU: {fit} of {total} configurations fit"
        )
        if moe
        else _(
            "{model} ({params}B params) on {cluster}, global batch {batch} x seq {seq}, efficiency"
            " {efficiency}, {gb} GB per GPU: {fit} of {total} configurations fit"
        )
    )
    # the option names (dp ... M), GB and MFU stay as written; the words read translated
    recompute, step_s, reason = ljust(_("recompute"), 9), rjust(_("step s"), 9), _("reason")
    lines = [
        head.format(
            model=result.model.name,
            params=params,
            active=f"{active_params(result.model) / 1e9:.4g}" if moe else "",
            cluster=cluster_text(result.cluster),
            batch=result.global_batch,
            seq=result.seq,
            efficiency=f"{result.efficiency:g}",
            gb=f"{result.memory_budget / 1e9:.4g}",
            fit=len(result.feasible),
            total=len(result.configs),
        ),
        f"{'#':>3} {'dp':>5} {'tp':>3} {'pp':>3}{ep_head} {'v':>2} {'zero':>4} {'mb':>3} {'M':>5}"
        f" {recompute} {'GB':>7} {step_s} {'MFU':>6}  {reason}",
    ]
    for i, c in enumerate(chosen, 1):
        mem = "-" if c.memory_bytes_per_gpu is None else f"{c.memory_bytes_per_gpu / 1e9:.1f}"
        step = "-" if c.step_time_s is None else f"{c.step_time_s:.3f}"
        mfu = "-" if c.mfu is None else f"{c.mfu:.1%}"
        lines.append(
            f"{i:>3} {c.dp:>5} {c.tp:>3} {c.pp:>3}{f' {c.ep:>3}' if moe else ''} {c.chunks:>2}"
            f" {c.zero:>4} {c.micro_batch:>3}"
            f" {c.microbatches:>5} {c.recompute:<9} {mem:>7} {step:>9} {mfu:>6}  {c.reason}"
        )
    return "\n".join(lines)


def run_planner(a: argparse.Namespace) -> int:
    result = planner_result(a)
    if a.json:
        print(json.dumps(result.to_json_dict(all=a.all, top=a.top)))
    else:
        print(format_planner(result, a.top or 10, a.all))
    return 0
