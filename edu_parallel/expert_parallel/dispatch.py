"""How an expert-parallel MoE layer moves tokens: variable splits, or GShard's padded buffer.

* :func:`exchange` / :class:`AllToAll`: a traced ``all_to_all_single`` of rows (and its autograd
  function, whose backward is the reverse exchange), each followed by a ``mark`` with the bytes
  sent to and received from every peer (:func:`~edu_parallel.expert_parallel.report.traffic_matrix`
  reads them).
* :func:`dispatch_variable` ("variable", the default): exchange the per-expert counts, then send
  exactly the kept token rows (variable splits). Bytes follow the routing; the capacity factor
  only decides drops. Dropless MoE keeps this and drops nothing (MegaBlocks, Gale et al. 2023,
  arXiv 2211.15841).
* :func:`dispatch_padded` ("padded"): GShard (Lepikhin et al. 2020, arXiv 2006.16668, §2.2 and
  its einsum dispatch ``"GSEC,GSM->EGCM"``) and Switch (Fedus et al. 2021, arXiv 2101.03961,
  §2.2): every group (source rank) fills a fixed (E, C, h) buffer, slot = the assignment's place
  in its expert's queue, empty slots zero, and sends it with equal splits. Static shapes, no
  counts exchange; every slot travels and is computed, filled or not: bytes per rank per
  exchange are ``(N-1)/N * E * C * h * itemsize`` whatever the routing
  (:func:`~edu_parallel.expert_parallel.formulas.padded_dispatch_bytes`).

Both return the layer output (T, h) and a :class:`DispatchStats` measured on this rank.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist

from ..core.schema import SPLITS_MARK
from ..engine.context import ALL_TO_ALL, RankContext
from .experts import ExpertBank
from .router import DispatchStats, Routing


def exchange(
    ctx: RankContext,
    x: torch.Tensor,
    out_splits: list[int],
    in_splits: list[int],
    *,
    step: int | None,
    phase: str,
    name: str,
    group: Any = None,
) -> torch.Tensor:
    """``all_to_all_single`` of rows: ``in_splits[d]`` rows of ``x`` go to peer d, ``out_splits[s]``
    rows arrive from peer s. (A, ...) -> (R, ...). Traced, plus a mark with the bytes per peer
    (``send_bytes[d]``, ``recv_bytes[s]``; with a ``group``, ``peers[d]`` is peer d's global rank).
    """
    out = x.new_empty((sum(out_splits), *x.shape[1:]))
    kw = {} if group is None else {"group": group}
    ctx.collective(ALL_TO_ALL, out, x, out_splits, in_splits, step=step, phase=phase, **kw)
    row = math.prod(x.shape[1:]) * x.element_size()  # bytes per row (works for 0 rows too)
    where = {} if group is None else {"peers": dist.get_process_group_ranks(group)}
    ctx.mark(
        SPLITS_MARK,
        exchange=name,
        phase=phase,
        step=step,
        **where,
        send_bytes=[s * row for s in in_splits],
        recv_bytes=[s * row for s in out_splits],
    )
    return out


class AllToAll(torch.autograd.Function):
    """Differentiable ``all_to_all_single``: backward sends the gradient rows back the way they came
    (the reverse all-to-all, splits swapped), traced with phase ``"backward"``."""

    @staticmethod
    def forward(
        fctx: RankContext,
        x: torch.Tensor,
        ctx: RankContext,
        out_splits: list[int],
        in_splits: list[int],
        step: int | None,
        name: str,
        group: Any = None,
    ) -> torch.Tensor:
        fctx.args = (ctx, out_splits, in_splits, step, name, group)
        return exchange(
            ctx, x, out_splits, in_splits, step=step, phase=name, name=name, group=group
        )

    @staticmethod
    def backward(fctx: RankContext, grad: torch.Tensor) -> tuple[Any, ...]:
        ctx, out_splits, in_splits, step, name, group = fctx.args
        dx = exchange(
            ctx,
            grad.contiguous(),
            in_splits,
            out_splits,
            step=step,
            phase="backward",
            name=f"{name}_grad",
            group=group,
        )
        return dx, None, None, None, None, None, None


def dispatch_variable(
    ctx: RankContext,
    x: torch.Tensor,
    routing: Routing,
    experts: ExpertBank,
    n: int,
    *,
    step: int | None,
    group: Any,
) -> tuple[torch.Tensor, DispatchStats]:
    """Counts, then the kept rows with variable splits: (T, h) -> (T, h).

    Three traced ``all_to_all_single`` forward (counts, dispatch, combine), two backward.
    """
    e_local = experts.num
    e = n * e_local
    t, top_k = routing.experts.shape
    # Kept assignments, sorted by expert (so by destination rank); stable: token order inside.
    tok = torch.arange(t, device=x.device).unsqueeze(1).expand(t, top_k)  # (T, k)
    a_exp, a_tok, a_gate = (v[routing.kept] for v in (routing.experts, tok, routing.gates))  # (A,)
    order = torch.argsort(a_exp, stable=True)
    a_exp, a_tok, a_gate = a_exp[order], a_tok[order], a_gate[order]
    per_expert = torch.bincount(a_exp, minlength=e)  # (E,) rows this rank sends to each expert
    # 1. counts: (E,) -> (N * E/N,): recv_counts[s, j] = rows from rank s for local expert j
    counts = exchange(
        ctx,
        per_expert,
        [e_local] * n,
        [e_local] * n,
        step=step,
        phase="counts",
        name="counts",
        group=group,
    ).view(n, e_local)
    send_splits = per_expert.view(n, e_local).sum(1).tolist()  # rows to each rank
    recv_splits = counts.sum(1).tolist()  # rows from each rank
    # 2. dispatch: (A, h) rows grouped by destination -> (R, h) grouped by (source, local expert)
    recv_x = AllToAll.apply(x[a_tok], ctx, recv_splits, send_splits, step, "dispatch", group)
    # 3. local experts: row i of recv_x belongs to local expert local_id[i]
    local_id = torch.repeat_interleave(
        torch.arange(e_local, device=x.device).repeat(n), counts.reshape(-1)
    )  # (R,)
    with ctx.compute("experts", recv_x.numel() * recv_x.element_size(), step=step, phase="experts"):
        y_recv = torch.zeros_like(recv_x)  # (R, h)
        for j in range(e_local):
            rows = (local_id == j).nonzero().squeeze(1)
            y_recv = y_recv.index_copy(0, rows, experts.expert(j, recv_x[rows]))
    # 4. combine: (R, h) -> (A, h), back in the order they were sent
    back = AllToAll.apply(y_recv, ctx, send_splits, recv_splits, step, "combine", group)
    # 5. y[t] = sum over t's kept assignments of gate * expert output: (A, h) -> (T, h)
    y = torch.zeros_like(x).index_add(0, a_tok, back * a_gate.unsqueeze(1))
    a = int(a_tok.numel())
    return y, DispatchStats(slots_sent=a, slots_filled=a, rows_computed=int(recv_x.shape[0]))


def dispatch_padded(
    ctx: RankContext,
    x: torch.Tensor,
    routing: Routing,
    experts: ExpertBank,
    n: int,
    *,
    step: int | None,
    group: Any,
) -> tuple[torch.Tensor, DispatchStats]:
    """GShard's fixed-capacity dispatch: an (E, C, h) buffer per rank, equal splits: (T, h) -> (T,
    h).

    Slot ``e * C + position`` holds the assignment of queue position ``position`` for expert e
    (GShard Algorithm 1's dispatch mask); dropped assignments are absent and empty slots are zero.
    Rank d receives slots of experts ``[d E/N, (d+1) E/N)`` from every rank: E/N * C rows per peer.
    Two traced ``all_to_all_single`` forward (dispatch, combine), two backward; no counts.
    """
    e_local, cap = experts.num, routing.capacity
    e = n * e_local
    t, top_k = routing.experts.shape
    h = x.shape[1]
    tok = torch.arange(t, device=x.device).unsqueeze(1).expand(t, top_k)  # (T, k)
    slot = routing.experts * cap + routing.positions  # (T, k); < E C where kept
    # kept assignments only, (A,) each; kept positions are < C, so no two share a slot
    a_slot, a_tok, a_gate = (v[routing.kept] for v in (slot, tok, routing.gates))
    # 1. the dispatch buffer (E C, h) = (E, C, h) flattened: kept rows in their slots, zeros
    # elsewhere
    buf = x.new_zeros(e * cap, h).index_add(0, a_slot, x[a_tok])  # (E C, h)
    per_peer = [e_local * cap] * n  # equal splits: E/N experts x C slots to every rank
    recv = AllToAll.apply(buf, ctx, per_peer, per_peer, step, "dispatch", group)  # (N E/N C, h)
    recv = recv.view(n, e_local, cap, h)  # (source, local expert, slot, h)
    # 2. every local expert runs on all N C of its slots, empty ones too (compute on padding)
    with ctx.compute("experts", recv.numel() * recv.element_size(), step=step, phase="experts"):
        y_recv = torch.stack(
            [
                experts.expert(j, recv[:, j].reshape(n * cap, h)).view(n, cap, h)
                for j in range(e_local)
            ],
            1,
        )  # (N, E/N, C, h)
    # 3. combine: the same fixed shape back: (N E/N C, h) -> (E C, h), in this rank's slot order
    back = AllToAll.apply(
        y_recv.reshape(n * e_local * cap, h), ctx, per_peer, per_peer, step, "combine", group
    )
    # 4. y[t] = sum over t's kept assignments of gate * the output in its slot: (A, h) -> (T, h)
    y = torch.zeros_like(x).index_add(0, a_tok, back[a_slot] * a_gate.unsqueeze(1))
    return y, DispatchStats(
        slots_sent=e * cap, slots_filled=int(a_slot.numel()), rows_computed=n * e_local * cap
    )


DISPATCH = {"variable": dispatch_variable, "padded": dispatch_padded}
