"""Exercise 09: the MoE dispatch, with all-to-all and GShard's capacity.

``my_moe_dispatch(ctx, tokens, expert_ids, capacity, num_experts)`` sends each of this rank's token
rows to the rank that holds its expert (rank d holds experts [d·E/N, (d+1)·E/N)), as the package's
:func:`~edu_parallel.expert_parallel.dispatch.dispatch_variable` does: an ``all_to_all_single`` of
the per-expert counts, then one of the kept rows with variable splits. An expert keeps at most
``capacity`` of one source rank's assignments in GShard's queue order, all first choices in token
order, then all second choices (Lepikhin et al. 2020, "GShard", arXiv 2006.16668, §2.2 and
Algorithm 1; Fedus et al. 2021, "Switch Transformer", arXiv 2101.03961, §2.2;
:func:`~edu_parallel.expert_parallel.router.capacity_positions`); the rest never travel.

Tokens and routing are the lesson layer's (``init_moe``, ``make_tokens``, ``route``), with a hot
expert so that tokens are dropped. Graded on the rows each local expert received against a
one-process dispatch (the same tokens in the same order, the same ones dropped: every row is traced
back to its rank and token), on the bytes that arrived on each rank (the buffers its collectives
filled) against ``kept(→ d)·h·4 + E·8`` (the kept rows, the counts), and on two collectives.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F

from ...core.i18n import N_, _
from ...core.trace import Event, Trace
from ...core.units import DTYPES, format_bytes
from ...engine.context import ALL_TO_ALL, RankContext
from ...expert_parallel.experts import init_moe, make_tokens
from ...expert_parallel.formulas import ITEMSIZE, expert_capacity
from ...expert_parallel.router import capacity_positions, route
from ...viz.moe import traffic_heatmap
from ..feedback import bytes_figure
from ..spec import Case, Exercise, Finding, RankOutcome

SEED = 0
COUNT_BYTES = DTYPES["int64"]  # one expert's count in the counts exchange


def moe_dispatch(ctx, tokens, expert_ids, capacity, num_experts):
    """The reference solution: counts, then the kept rows, with variable splits."""
    n = ctx.world_size
    per_rank = num_experts // n  # rank d holds experts [d * per_rank, (d + 1) * per_rank)
    t, k = expert_ids.shape  # (T, k): token i's experts, best first
    # 1. capacity (GShard Algorithm 1): an assignment's place in its expert's queue, all first
    #    choices in token order before all second choices; the first `capacity` are kept
    queue = expert_ids.t().reshape(-1)  # (k T,): choice-major
    onehot = F.one_hot(queue, num_experts)  # (k T, E)
    position = ((onehot.cumsum(0) - 1) * onehot).sum(1).view(k, t).t()  # (T, k)
    kept = position < capacity
    # 2. the kept (token, expert) pairs sorted by expert, hence by destination rank; the sort is
    #    stable, so each expert's tokens stay in token order
    token = torch.arange(t).unsqueeze(1).expand(t, k)[kept]  # (A,)
    expert = expert_ids[kept]
    order = torch.argsort(expert, stable=True)
    token, expert = token[order], expert[order]
    send_counts = torch.bincount(expert, minlength=num_experts)  # (E,) rows for each expert
    # 3. counts: rank d receives, from every rank s, how many rows each of its experts gets
    recv_counts = torch.empty_like(send_counts)
    ctx.collective(ALL_TO_ALL, recv_counts, send_counts, phase="counts")
    recv_counts = recv_counts.view(n, per_rank)  # [source rank, local expert]
    # 4. the rows, with variable splits: send_splits[d] rows to rank d, recv_splits[s] from s
    send_splits = send_counts.view(n, per_rank).sum(1).tolist()
    recv_splits = recv_counts.sum(1).tolist()
    rows = tokens.new_empty(sum(recv_splits), tokens.shape[1])
    ctx.collective(ALL_TO_ALL, rows, tokens[token], recv_splits, send_splits, phase="dispatch")
    # 5. they arrive grouped by (source rank, local expert): split them per local expert
    local = torch.arange(per_rank).repeat(n).repeat_interleave(recv_counts.reshape(-1))
    return [rows[local == j] for j in range(per_rank)]


# ----------------------------------------------------------------------------- the harness
@lru_cache(maxsize=16)
def routed(case: Case) -> tuple[torch.Tensor, list[torch.Tensor], int]:
    """Every rank's tokens (N, T, h), their routed experts (T, k) per rank, the capacity."""
    n, e, k, cf = case.world_size, case.option("E"), case.option("k"), case.option("cf")
    t, h = case.option("T"), case.option("h")
    params = init_moe(e, h, seed=SEED, skew=case.option("skew"))
    x, _x = make_tokens(n, t, h, SEED)
    with torch.no_grad():
        ids = [route(x[r * t : (r + 1) * t], params.router, k, cf).experts for r in range(n)]
    return x.view(n, t, h), ids, expert_capacity(t, e, k, cf)


def prepare(ctx: RankContext, case: Case) -> tuple[tuple, None]:
    x, ids, cap = routed(case)
    return (x[ctx.rank].clone(), ids[ctx.rank].clone(), cap, case.option("E")), None


Pair = tuple[int, int]  # (source rank, token)


@lru_cache(maxsize=16)
def one_process_dispatch(case: Case) -> list[list[list[Pair]]]:
    """``[d][j]``: the (source rank, token) pairs local expert j of rank d receives, in order,
    with the package's capacity rule (:func:`capacity_positions`)."""
    _x, ids, cap = routed(case)
    e = case.option("E")
    out: list[list[Pair]] = [[] for _x in range(e)]  # per global expert
    for s, choices in enumerate(ids):
        kept = (capacity_positions(choices, e) < cap).tolist()
        for tok, row in enumerate(choices.tolist()):
            for ex, ok in zip(row, kept[tok], strict=True):
                out[ex] += [(s, tok)] if ok else []
    per = e // case.world_size
    return [out[d * per : (d + 1) * per] for d in range(case.world_size)]


# ----------------------------------------------------------------------------- the judge


@lru_cache(maxsize=16)
def token_ids(case: Case) -> dict[tuple[float, ...], Pair]:
    """Every token row (its values) -> (source rank, token): rows travel bit for bit."""
    x = routed(case)[0]
    return {tuple(x[s, i].tolist()): (s, i) for s in range(x.shape[0]) for i in range(x.shape[1])}


def traced_back(case: Case, rows: torch.Tensor) -> list[Pair | None]:
    return [token_ids(case).get(tuple(r)) for r in rows.float().tolist()]


def name(pair: Pair | None) -> str:
    if pair is None:
        return _("a row that is no rank's token")
    return _("token {token} of rank {rank}").format(token=pair[1], rank=pair[0])


def why_not(case: Case, pair: Pair | None, ex: int) -> str:
    """Why ``pair`` must not reach expert ``ex``."""
    if pair is None:
        return _("(zeros, a padded slot?): send only the kept rows")
    _x, ids, cap = routed(case)
    (s, tok), per = pair, case.option("E") // case.world_size
    choices = ids[s][tok].tolist()
    if ex not in choices:
        homes = [_("{expert} (on rank {rank})").format(expert=c, rank=c // per) for c in choices]
        while len(homes) > 1:
            homes[:2] = [_("{first} and {second}").format(first=homes[0], second=homes[1])]
        msg = (
            _("routed to experts {homes}, not {ex}: expert e lives on rank e // (E/N)")
            if len(choices) > 1
            else _("routed to expert {homes}, not {ex}: expert e lives on rank e // (E/N)")
        )
        return msg.format(homes=homes[0], ex=ex)
    place = int(capacity_positions(ids[s], case.option("E"))[tok, choices.index(ex)])
    return _(
        "which is past expert {ex}'s capacity: it is number {place} in rank {s}'s queue for it "
        "and C = {cap} (GShard keeps the first C: first choices in token order, then second "
        "choices)"
    ).format(ex=ex, place=place + 1, s=s, cap=cap)


def difference(case: Case, mine: list[Pair | None], want: list[Pair], ex: int) -> str:
    """What is wrong with the rows expert ``ex`` received, first thing first."""
    wrong = next((p for p in mine if p is None or p not in want), False)
    twice = next((p for p in mine if mine.count(p) > 1), None)
    missing = next((p for p in want if p not in mine), None)
    if wrong is not False:
        return _("received {token}, {why}").format(token=name(wrong), why=why_not(case, wrong, ex))
    if twice is not None:
        return _("received {token} {n} times").format(token=name(twice), n=mine.count(twice))
    if missing is not None:
        return _("never received {token}, which is routed to it and within its capacity").format(
            token=name(missing)
        )
    return _(
        "received the right tokens in another order: got {got}, expected {want} (source rank, "
        "token): rank 0's first, then rank 1's, ...; from each rank in token order"
    ).format(got=mine, want=want)


def check_rows(case: Case, outputs: list[RankOutcome]) -> Finding:
    n, per, h = case.world_size, case.option("E") // case.world_size, case.option("h")
    for d, out in enumerate(outputs):
        got = out.result
        if not isinstance(got, (list, tuple)) or len(got) != per:
            msg = (
                _(
                    "rank {d} returned a {type} of {n}; expected a list of E/N = {per} tensors "
                    "(m_j, h)"
                )
                if hasattr(got, "__len__")
                else _(
                    "rank {d} returned a {type}; expected a list of E/N = {per} tensors (m_j, h)"
                )
            ).format(
                d=d, type=type(got).__name__, n=len(got) if hasattr(got, "__len__") else 0, per=per
            )
            return Finding("result", False, msg, case, rank=d)
        for j, rows in enumerate(got):
            where = _("rank {d}'s local expert {j} (expert {e})").format(d=d, j=j, e=d * per + j)
            if not isinstance(rows, torch.Tensor) or rows.dim() != 2 or rows.shape[1] != h:
                shape = tuple(rows.shape) if isinstance(rows, torch.Tensor) else type(rows).__name__
                msg = _("{where}: got {shape}, expected a float32 tensor (m, h = {h})").format(
                    where=where, shape=shape, h=h
                )
                return Finding("result", False, msg, case, rank=d)
            mine, want = traced_back(case, rows), one_process_dispatch(case)[d][j]
            if mine != want:
                msg = _("{where} {what}").format(
                    where=where, what=difference(case, mine, want, d * per + j)
                )
                return Finding("result", False, msg, case, rank=d)
    kept = sum(len(w) for rank in one_process_dispatch(case) for w in rank)
    total = n * case.option("T") * case.option("k")
    msg = _("every expert received its tokens in order; {dropped} of {total} dropped").format(
        dropped=total - kept, total=total
    )
    return Finding("result", True, msg, case)


def received(trace: Trace, rank: int) -> list[Event]:
    """``rank``'s collectives (an event records the buffer filled) and receives."""
    return [e for e in trace.events if e.rank == rank and e.kind in ("collective", "recv")]


def target_bytes(case: Case) -> list[int]:
    """Bytes into rank d: its experts' kept rows (h·4 each) and E counts of 8 bytes."""
    h, e = case.option("h"), case.option("E")
    rows = [sum(len(w) for w in rank) for rank in one_process_dispatch(case)]
    return [r * h * ITEMSIZE + e * COUNT_BYTES for r in rows]


def check_bytes(case: Case, trace: Trace) -> Finding:
    h, e = case.option("h"), case.option("E")
    for d, want in enumerate(target_bytes(case)):
        got = sum(ev.nbytes for ev in received(trace, d))
        if got > want:
            rows = (want - e * COUNT_BYTES) // (h * ITEMSIZE)
            msg = _(
                "{got} arrived on rank {d}; the target is its experts' kept rows and the counts, "
                "kept(\u2192 rank {d})\u00b7h\u00b74 + E\u00b78 = {sum} = {want}"
            ).format(
                got=format_bytes(got),
                d=d,
                sum=f"{rows}\u00b7{h}\u00b7{ITEMSIZE} + {e}\u00b7{COUNT_BYTES}",
                want=format_bytes(want),
            )
            return Finding("bytes", False, msg, case, rank=d)
    msg = _("no rank received more than kept(\u2192 rank)\u00b7h\u00b74 + E\u00b78")
    return Finding("bytes", True, msg, case)


def check_calls(case: Case, trace: Trace) -> Finding:
    for r in range(case.world_size):
        calls = [e for e in trace.events if e.rank == r and e.kind in ("collective", "send")]
        if len(calls) > 2:
            ops = ", ".join(e.op for e in calls[:6]) + (", ..." if len(calls) > 6 else "")
            msg = _(
                "rank {r} made {n} collective calls or sends ({ops}); two all-to-alls are enough: "
                "the counts, then the tokens (each costs a latency)"
            ).format(r=r, n=len(calls), ops=ops)
            return Finding("messages", False, msg, case, rank=r)
    ok = _("two all-to-alls per rank: the counts, then the tokens")
    return Finding("messages", True, ok, case)


def judge(case: Case, outputs: list[RankOutcome], trace: Trace) -> list[Finding]:
    return [check_rows(case, outputs), check_bytes(case, trace), check_calls(case, trace)]


# ----------------------------------------------------------------------------- the picture
def by_source(case: Case, arrived: list[list[Pair | None]]) -> list[list[int]]:
    """``[s][d]``: bytes of rank s's tokens among the rows ``arrived[d]`` (none: no token)."""
    n, row = case.world_size, case.option("h") * ITEMSIZE
    m = [[0] * n for _x in range(n)]
    for d, pairs in enumerate(arrived):
        for p in pairs:
            if p is not None:
                m[p[0]][d] += row
    return m


def returned_rows(case: Case, result: Any) -> list[Pair | None]:
    rows = result if isinstance(result, (list, tuple)) else []
    ok = [r for r in rows if isinstance(r, torch.Tensor) and r.dim() == 2]
    return [p for r in ok if r.shape[1] == case.option("h") for p in traced_back(case, r)]


def into_ranks(trace: Trace) -> Trace:
    """One ``send`` event per buffer a rank's collective or receive filled, so the byte bars
    draw the bytes that arrived on each rank, stacked by call."""
    events = []
    for r in range(trace.world_size):
        for k, e in enumerate(received(trace, r)):
            label = _("call {k}: {name}").format(k=k + 1, name=e.phase or e.op)
            events.append(Event(kind="send", rank=r, op="isend", phase=label, nbytes=e.nbytes))
    return Trace({**trace.meta, "world_size": trace.world_size}, events)


def picture(grade: Any) -> list[Any]:
    """The rows your ranks returned as a rank × rank heatmap beside the one-process dispatch's,
    and the bytes that arrived on each rank beside the reference's."""
    case, figures = grade.shown, []
    if case is None or not grade.outputs:
        return figures
    want = [[p for w in rank for p in w] for rank in one_process_dispatch(case)]
    mine = [returned_rows(case, o.result) for o in grade.outputs]
    runs = {
        _("your ranks returned"): by_source(case, mine),
        _("one process"): by_source(case, want),
    }
    title = _("token rows by source rank ({case})").format(case=case.label())
    figures.append(traffic_heatmap(runs, title=title))
    if grade.trace is not None:
        ref = None if grade.reference_trace is None else into_ranks(grade.reference_trace)
        fig = bytes_figure(
            dataclasses.replace(grade, trace=into_ranks(grade.trace), reference_trace=ref),
            arrived=True,
        )
        head, _x, tail = _("bytes sent ({unit})").partition("{unit}")  # bytes_bars' label
        for ax in fig.axes:
            label = ax.get_ylabel()
            if label.startswith(head) and label.endswith(tail) and len(label) >= len(head + tail):
                unit = label[len(head) : len(label) - len(tail)]
                ax.set_ylabel(_("bytes received ({unit})").format(unit=unit))
        figures.append(fig)
    return figures


STARTER = """\
def my_moe_dispatch(ctx, tokens, expert_ids, capacity, num_experts):
    n = ctx.world_size
    per_rank = num_experts // n  # rank d holds experts [d * per_rank, (d + 1) * per_rank)
    t, k = expert_ids.shape  # token i goes to experts expert_ids[i, 0], ..., expert_ids[i, k-1]
    ...  # 1. capacity: an expert keeps the first `capacity` assignments of its queue
    ...  # 2. the kept rows grouped by destination rank, and the number for each expert
    ...  # 3. the counts: ctx.collective(ALL_TO_ALL, recv_counts, send_counts)
    ...  # 4. the rows: ctx.collective(ALL_TO_ALL, rows, send_rows, recv_splits, send_splits)
    return [tokens[:0] for _ in range(per_rank)]  # the rows that arrived, per local expert
"""

EXERCISE = Exercise(
    lesson="09_expert_parallel",
    title=N_("MoE dispatch with all-to-all and capacity"),
    function="my_moe_dispatch",
    params=("ctx", "tokens", "expert_ids", "capacity", "num_experts"),
    task=N_(
        "Write `my_moe_dispatch(ctx, tokens, expert_ids, capacity, num_experts)`: `tokens` (T, h) "
        "are this rank's rows, `expert_ids` (T, k) their experts, best first; rank d holds "
        "experts [d·E/N, (d+1)·E/N). Drop what is past an expert's `capacity` in GShard's queue "
        "order (all first choices in token order, then all second choices), send every kept row "
        "to its expert's rank with `all_to_all_single` (the counts first, then the rows with "
        "variable splits), and return, per local expert, the rows that arrived: rank 0's first, "
        "then rank 1's, ..., each rank's in token order. Target: only the kept rows travel, "
        "in two all-to-alls."
    ),
    starter=STARTER,
    hints=(
        N_(
            "Do the drops on the sender, before anything travels: each rank caps its own tokens "
            "(one GShard group per rank). Then sort the kept (token, expert) pairs by expert: the "
            "rows for rank 0 come first, then those for rank 1, which is the layout "
            "`all_to_all_single` wants."
        ),
        N_(
            "Queue position: flatten `expert_ids.t()` (choice-major), one-hot it over E experts, "
            "and a cumulative sum counts the assignments ahead in the same expert; keep position < "
            "capacity. `torch.bincount` of the kept experts gives the E counts; an all-to-all of "
            "them tells each rank how many rows arrive from each rank for each local expert, hence "
            "its receive splits."
        ),
        N_(
            "`ctx.collective(ALL_TO_ALL, rows, tokens[token], recv_splits, send_splits)` with "
            "`send_splits = send_counts.view(n, per_rank).sum(1).tolist()` and "
            "`recv_splits = recv_counts.view(n, per_rank).sum(1).tolist()`"
        ),
    ),
    reference=moe_dispatch,
    prepare=prepare,
    judge=judge,
    cases=tuple(
        Case(n, 0, "float32", (("E", e), ("k", k), ("cf", cf), ("skew", 1.0), ("T", t), ("h", h)))
        for n, e, k, cf, t, h in (
            (2, 4, 2, 1.0, 8, 4),
            (4, 8, 2, 1.25, 16, 4),
            (4, 4, 1, 1.0, 8, 8),
        )
    ),
    picture=picture,
)
