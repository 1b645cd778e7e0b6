"""Parent side of the MoE layer: a run checked against one process, its traffic read off the trace.

* A run's options are one :class:`~edu_parallel.expert_parallel.config.MoEConfig`, checked where
  the run starts. Formulas live in :mod:`edu_parallel.expert_parallel.formulas`: capacity
  ``ceil(C * T * k / E)`` per expert per source rank (GShard §2.2, Switch §2.2), the balanced and
  the padded bytes per exchange.
* Dispatch ``"variable"`` sends the kept rows; ``"padded"`` sends every rank's (E, C, h) buffer
  (GShard): ``padding_fraction`` = empty slots / slots sent, ``expert_rows_computed`` counts the
  rows the experts ran on (padding included) beside ``expert_rows_with_tokens``.
* Traffic: every ``all_to_all_single`` is followed by a ``mark`` holding the bytes the rank sent to
  and received from each peer; :func:`~edu_parallel.core.marks.traffic_matrix` builds the rank x
  rank matrix from them (entry [s][d] = bytes s sent to d; the diagonal is a local copy, not on the
  wire).
* Load imbalance: max expert load / mean expert load, load = assignments routed to the expert by
  the router (before capacity), summed over ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from ..core.errors import bad_value
from ..core.i18n import _
from ..core.marks import off_diagonal_sent, traffic_matrix
from ..core.schema import EXCHANGES
from ..core.trace import Trace
from ..core.width import fitted
from ..engine.autograd import backward_from
from ..engine.executor import Executor
from .config import MoEConfig
from .experts import MoEParams, init_moe, make_tokens
from .formulas import ATOL, DEFAULTS, ITEMSIZE, RTOL
from .layer import moe_job, moe_reference


@dataclass
class MoEReport:
    """What a lesson and ``edu-parallel run moe`` show for one MoE layer on real ranks."""

    world_size: int
    experts: int
    experts_per_rank: int
    top_k: int
    capacity_factor: float
    capacity: int  # per expert per source rank
    skew: float
    tokens_per_rank: int
    hidden: int
    seed: int
    matches_reference: bool  # forward output
    gradients_match: bool  # dx, router (summed over ranks) and expert grads
    max_abs_diff_output: float
    max_abs_diff_grads: dict[str, float]
    traffic_matrix_bytes: list[list[int]]  # dispatch, from the trace
    traffic_by_exchange: dict[str, list[list[int]]]
    traffic_matches_routing: (
        bool  # trace == kept x h x itemsize (variable) or E/N C h itemsize (padded)
    )
    per_rank_sent_bytes: list[int]  # dispatch, off the diagonal (on the wire)
    sent_bytes_by_exchange: dict[str, list[int]]
    routed_matrix: list[list[int]]  # [source rank][expert] assignments chosen by the router
    kept_matrix: list[list[int]]  # [source rank][expert] within capacity
    expert_load: list[int]  # routed per expert, all ranks
    expert_processed: list[int]
    dropped_per_expert: list[int]
    dropped_tokens: int  # token-expert assignments dropped, all ranks
    assignments: int
    load_imbalance: float  # max expert load / mean
    forward_collectives: list[str]
    dispatch: str  # "variable" or "padded"
    sent_bytes_per_exchange: float  # mean over ranks of dispatch bytes on the wire (one exchange)
    slots_dispatched: int  # rows in all ranks' dispatch buffers (padded: N E C; variable: kept)
    padding_fraction: float  # empty slots / slots_dispatched, measured on the senders
    expert_rows_computed: int  # rows all experts ran on, padding included (measured)
    expert_rows_with_tokens: int  # of those, rows holding a kept assignment
    backward_collectives: list[str]
    routing_experts: list[list[list[int]]] = field(repr=False)  # [rank][token][choice]
    routing_kept: list[list[list[bool]]] = field(repr=False)
    trace: Trace = field(repr=False)

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        return self.matches_reference and self.gradients_match and self.traffic_matches_routing

    def to_json_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "trace"}
        return {"concept": "moe", **data}


def _routing_counts(
    results: list[dict[str, Any]], experts: int
) -> tuple[list[list[int]], list[list[int]]]:
    routed = [[0] * experts for _ in results]
    kept = [[0] * experts for _ in results]
    for s, res in enumerate(results):
        for row, krow in zip(res["experts"].tolist(), res["kept"].tolist(), strict=True):
            for ex, k in zip(row, krow, strict=True):
                routed[s][ex] += 1
                kept[s][ex] += int(k)
    return routed, kept


def run_moe(
    cluster: Executor,
    experts: int = DEFAULTS["experts"],
    top_k: int = DEFAULTS["top_k"],
    capacity_factor: float = DEFAULTS["capacity_factor"],
    skew: float = DEFAULTS["skew"],
    tokens: int = DEFAULTS["tokens"],
    hidden: int = DEFAULTS["hidden"],
    seed: int = DEFAULTS["seed"],
    backward: bool = True,
    dispatch: str = "variable",
) -> MoEReport | None:
    """One MoE layer (forward, and backward with a seeded dy) on ``cluster``, checked: the options
    become one :class:`~edu_parallel.expert_parallel.config.MoEConfig` (checked here, before any
    process starts) for :func:`run_moe_config`."""
    n = cluster.world_size
    config = MoEConfig(
        n, experts, top_k, capacity_factor, skew, tokens, hidden, seed, dispatch, backward
    )
    return run_moe_config(cluster, config)


def run_moe_config(cluster: Executor, config: MoEConfig) -> MoEReport | None:
    """Run ``config`` on ``cluster`` and check it; the config is trusted.

    ``matches_reference``: every rank's output equals
    :func:`~edu_parallel.expert_parallel.layer.moe_reference` on the global batch (groups = ranks)
    within ``ATOL + RTOL |ref|``; ``gradients_match``: dx, the router gradient summed over ranks
    (the router is replicated: data-parallel) and each rank's expert gradients equal the
    reference's. ``dispatch``: ``"variable"`` or ``"padded"``
    (:mod:`edu_parallel.expert_parallel.dispatch`); the reference is the same for both.
    """
    n = cluster.world_size
    if n != config.world_size:
        valid = _("{n}, the executor's ranks").format(n=n)
        raise bad_value("config.world_size", config.world_size, valid)
    out = cluster.run(moe_job, config)
    if out is None:  # a non-zero rank under torchrun
        return None
    experts, top_k, skew, backward = config.experts, config.top_k, config.skew, config.backward
    res = out.results
    x, dy, params, ref, _routings = _reference(config)

    def diff(a: torch.Tensor, b: torch.Tensor) -> tuple[float, bool]:
        return float((a - b).abs().max()) if a.numel() else 0.0, torch.allclose(a, b, RTOL, ATOL)

    d_out, ok_out = diff(torch.cat([r["y"] for r in res]), ref.detach())
    grads: dict[str, float] = {}
    ok_grads = backward
    if backward:
        backward_from(ref, dy)  # as on the ranks
        pairs = {
            "dx": (torch.cat([r["dx"] for r in res]), x.grad),
            "router": (
                torch.cat([sum(r["router_grads"][i] for r in res).reshape(-1) for i in (0, 1)]),
                torch.cat([p.grad.reshape(-1) for p in params.router.parameters()]),
            ),
            "experts": (
                torch.cat(
                    [
                        torch.cat(
                            [
                                g.reshape(r["expert_grads"][0].shape[0], -1)
                                for g in r["expert_grads"]
                            ],
                            1,
                        )
                        for r in res
                    ]
                ),
                torch.cat([p.grad.reshape(experts, -1) for p in params.experts.parameters()], 1),
            ),
        }
        for name, (a, b) in pairs.items():
            grads[name], ok = diff(a, b)
            ok_grads = ok_grads and ok
    routed, kept = _routing_counts(res, experts)
    row = config.hidden * ITEMSIZE
    per = config.experts_per_rank
    cap = int(res[0]["capacity"])
    if config.dispatch == "padded":  # every slot travels: E/N experts x capacity rows to every rank
        expected = [[per * cap * row] * n for _ in range(n)]
    else:
        expected = [
            [sum(kept[s][d * per : (d + 1) * per]) * row for d in range(n)] for s in range(n)
        ]
    stats = [r["stats"] for r in res]
    slots = sum(st["slots_sent"] for st in stats)
    by_ex = {ex: traffic_matrix(out.trace, ex) for ex in EXCHANGES}
    load = [sum(r[e] for r in routed) for e in range(experts)]
    processed = [sum(r[e] for r in kept) for e in range(experts)]
    mean = sum(load) / experts
    ops0 = [e for e in out.trace.events if e.kind == "collective" and e.rank == 0]
    out.trace.meta.update(
        {
            "concept": "moe",
            "experts": experts,
            "top_k": top_k,
            "capacity_factor": config.capacity_factor,
            "skew": skew,
        }
    )
    return MoEReport(
        world_size=n,
        experts=experts,
        experts_per_rank=per,
        top_k=top_k,
        capacity_factor=config.capacity_factor,
        capacity=cap,
        skew=skew,
        tokens_per_rank=config.tokens,
        hidden=config.hidden,
        seed=config.seed,
        matches_reference=ok_out,
        gradients_match=ok_grads,
        max_abs_diff_output=d_out,
        max_abs_diff_grads=grads,
        traffic_matrix_bytes=by_ex["dispatch"],
        traffic_by_exchange=by_ex,
        traffic_matches_routing=by_ex["dispatch"] == expected,
        per_rank_sent_bytes=off_diagonal_sent(by_ex["dispatch"]),
        sent_bytes_by_exchange={ex: off_diagonal_sent(m) for ex, m in by_ex.items()},
        routed_matrix=routed,
        kept_matrix=kept,
        expert_load=load,
        expert_processed=processed,
        dropped_per_expert=[a - b for a, b in zip(load, processed, strict=True)],
        dropped_tokens=sum(load) - sum(processed),
        assignments=sum(load),
        load_imbalance=max(load) / mean if mean else math.nan,
        forward_collectives=[e.op for e in ops0 if e.phase != "backward"],
        backward_collectives=[e.op for e in ops0 if e.phase == "backward"],
        dispatch=config.dispatch,
        sent_bytes_per_exchange=sum(off_diagonal_sent(by_ex["dispatch"])) / n,
        slots_dispatched=slots,
        padding_fraction=1 - sum(st["slots_filled"] for st in stats) / slots if slots else 0.0,
        expert_rows_computed=sum(st["rows_computed"] for st in stats),
        expert_rows_with_tokens=sum(processed),
        routing_experts=[r["experts"].tolist() for r in res],
        routing_kept=[r["kept"].tolist() for r in res],
        trace=out.trace,
    )


@fitted
def format_moe(report: MoEReport) -> str:
    """Readable output: the check, the traffic matrix, expert load, capacity and drops."""
    r, n = report, report.world_size
    g = r.max_abs_diff_grads
    yes, no = _("yes"), _("NO")
    check = _("matches single-process reference: {ok} (max |diff| {diff});  gradients: {grads}")
    check = check.format(
        ok=yes if r.matches_reference else no,
        diff=f"{r.max_abs_diff_output:.1e}",
        grads=yes if r.gradients_match else no,
    )
    if g:
        check = _("{check} (dx {dx}, router {router}, experts {experts})").format(
            check=check,
            dx=f"{g['dx']:.1e}",
            router=f"{g['router']:.1e}",
            experts=f"{g['experts']:.1e}",
        )
    lines = [
        _(
            "MoE layer on {n} ranks: E = {experts} experts ({per} per rank), top-{top_k}, T ="
            " {tokens} tokens per rank, h = {hidden}, skew {skew}"
        ).format(
            n=n,
            experts=r.experts,
            per=r.experts_per_rank,
            top_k=r.top_k,
            tokens=r.tokens_per_rank,
            hidden=r.hidden,
            skew=f"{r.skew:g}",
        ),
        check,
        _(
            "capacity = ceil(C T k / E) = ceil({c} * {t} * {k} / {e}) = {capacity} per expert per"
            " source rank"
        ).format(
            c=f"{r.capacity_factor:g}",
            t=r.tokens_per_rank,
            k=r.top_k,
            e=r.experts,
            capacity=r.capacity,
        ),
        "",
        _(
            "dispatch traffic matrix (bytes, row = from rank, column = to rank; diagonal stays"
            " local):"
        ),
        "      " + "".join(f"{'r' + str(d):>8}" for d in range(n)),
    ]
    for s, row in enumerate(r.traffic_matrix_bytes):
        lines.append(f"  r{s:<3}" + "".join(f"{b:>8,}" for b in row))
    lines.append(
        _(
            "sent on the wire per rank (dispatch): {sent}; combine sends the transpose; backward"
            " repeats both in reverse"
        ).format(sent=r.per_rank_sent_bytes)
    )
    want = (
        _("(E/N) x capacity x h x {itemsize} B")
        if r.dispatch == "padded"
        else _("kept assignments x h x {itemsize} B")
    ).format(itemsize=ITEMSIZE)
    lines.append(
        _("matrix == {want}: {ok}").format(want=want, ok=yes if r.traffic_matches_routing else no)
    )
    lines.append(
        _(
            "dispatch {dispatch}: {sent} bytes on the wire per rank per exchange; padding"
            " {padding} of {slots} slots sent; experts computed {rows} rows, {holding} holding"
            " tokens"
        ).format(
            dispatch=r.dispatch,
            sent=f"{r.sent_bytes_per_exchange:,.0f}",
            padding=f"{r.padding_fraction:.0%}",
            slots=r.slots_dispatched,
            rows=r.expert_rows_computed,
            holding=r.expert_rows_with_tokens,
        )
    )
    lines.append("")
    lines.append(
        _("expert load (routed): {load}   imbalance max/mean = {imbalance}").format(
            load=r.expert_load, imbalance=f"{r.load_imbalance:.2f}"
        )
    )
    lines.append(
        _(
            "dropped per expert:   {dropped}   total dropped {total} of {assignments} assignments"
        ).format(dropped=r.dropped_per_expert, total=r.dropped_tokens, assignments=r.assignments)
    )
    return "\n".join(lines)


def _reference(config: MoEConfig) -> tuple[torch.Tensor, torch.Tensor, MoEParams, Any, Any]:
    """The run's tokens x (with a gradient when backward), dy, the weights, and the layer on one
    process (one routing group per rank): its output and routings."""
    c = config
    params = init_moe(c.experts, c.hidden, seed=c.seed, skew=c.skew)
    x, dy = make_tokens(c.world_size, c.tokens, c.hidden, c.seed)
    x.requires_grad_(c.backward)
    kw = {"top_k": c.top_k, "capacity_factor": c.capacity_factor, "groups": c.world_size}
    ref, routings = moe_reference(x, params.router, params.experts, **kw)
    return x, dy, params, ref, routings


def moe_routing_stats(
    world_size: int,
    experts: int = DEFAULTS["experts"],
    top_k: int = DEFAULTS["top_k"],
    capacity_factor: float = DEFAULTS["capacity_factor"],
    skew: float = DEFAULTS["skew"],
    tokens: int = DEFAULTS["tokens"],
    hidden: int = DEFAULTS["hidden"],
    seed: int = DEFAULTS["seed"],
) -> Any:
    """The same routing on one process (no ranks): dropped assignments and the dispatch matrix."""
    c = MoEConfig(world_size, experts, top_k, capacity_factor, skew, tokens, hidden, seed)
    res = [{"experts": r.experts, "kept": r.kept} for r in _reference(c)[4]]
    routed, kept = _routing_counts(res, c.experts)
    per, row = c.experts_per_rank, c.hidden * ITEMSIZE
    matrix = [[sum(k[d * per : (d + 1) * per]) * row for d in range(c.world_size)] for k in kept]
    dropped = sum(map(sum, routed)) - sum(map(sum, kept))
    return SimpleNamespace(
        dropped_tokens=dropped, traffic_matrix_bytes=matrix, routed_matrix=routed, kept_matrix=kept
    )


def moe_runner(cluster: Executor) -> Any:
    """``run(world_size, experts, top_k, capacity_factor, skew, tokens) -> MoEReport`` for
    predict-then-run quizzes: ``cluster`` when the world size matches, else a short-lived one."""

    def run(
        world_size: int, experts: int, top_k: int, capacity_factor: float, skew: float, tokens: int
    ) -> MoEReport | None:
        with cluster.sized(world_size) as ranks:
            return run_moe(ranks, experts, top_k, capacity_factor, skew, tokens)

    return run
