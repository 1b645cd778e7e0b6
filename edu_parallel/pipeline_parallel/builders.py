"""The pipeline schedules, built: each rank's order of actions, placed in unit-time slots.

Builders fix each rank's *order* of actions, then :func:`run_orders` runs every action as early as
its order and dependencies allow; with one-slot actions (``t_f = t_b = t_w``, no communication
time) that gives the :class:`~edu_parallel.pipeline_parallel.schedule.Schedule` grid.

* ``gpipe``: all forwards, then all backwards (GPipe, Huang et al. 2019, §2.3, Fig. 2c; backwards
  in microbatch order, as in Megatron's Fig. 3 and ``torch.distributed.pipelining``). Any M >= 1.
* ``1f1b``: PipeDream-Flush (Narayanan et al. 2021, arXiv 2104.04473, §2.2.1, Fig. 4 top):
  rank i runs ``min(P-1-i, M)`` warm-up forwards, then alternates one forward / one backward, then
  drains the remaining backwards. Any M >= 1 (Megatron clamps the warm-up to M; with M < P it
  degenerates to GPipe's order): it stashes at most ``min(P-i, M)`` microbatches on stage i.
* ``interleaved``: Megatron's interleaved 1F1B (§2.2.2, Fig. 4 bottom): v model chunks per rank,
  stage ``s = chunk*P + rank``; forwards go through chunks in groups of P microbatches; rank i
  runs ``min(2(P-1-i) + (v-1)P, vM)`` warm-up forwards (:func:`interleaved_warmup`), the rule of
  current Megatron-LM (``get_pp_rank_microbatches`` in ``megatron/core/pipeline_parallel/
  schedules.py``, since MR !2117, commit 4295be1, 2024-11-01) and of torch 2.13
  (``ScheduleInterleaved1F1B``, ``_get_warmup_ops``): the tests check that the orders equal
  torch's. Before that commit Megatron ran *all* vM forwards first whenever M == P
  (``rule="megatron-2021"`` builds it): with P = M = 4, v = 2 every rank then peaked at 8
  microbatch-chunks, against 8, 8, 7, 5 now. M must be a multiple of P, as in Megatron. With
  ``chunks=1`` it is the ``1f1b`` order.
* ``zb-h1``: Zero Bubble ZB-H1 (Qi et al. 2023, arXiv 2401.10241, §2.1, Fig. 3 top): the 1F1B
  order with the backward split into I (input grad; the paper's "B") and W (weight grad); rank i
  delays each W by i microbatches (so every rank holds P in flight, the first rank's 1F1B peak)
  and the delayed W's fill the cool-down bubble. Any M >= 1; its bubble formula needs M >= P.
"""

from __future__ import annotations

from typing import Literal, get_args

from ..core.errors import bad_value, check_choice, check_int
from .schedule import Action, Schedule

ScheduleName = Literal["gpipe", "1f1b", "interleaved", "zb-h1"]
SCHEDULES: tuple[str, ...] = get_args(ScheduleName)
# Microbatches of a schedule that is run or drawn: 512 on 2 ranks runs in about 5 s on 2 cores
# (the run, the explorer and the command line read this one bound).
MAX_MICROBATCHES = 512
InterleavedRule = Literal["megatron-2024", "megatron-2021"]  # current warm-up rule, and the old
INTERLEAVED_RULES: tuple[str, ...] = get_args(InterleavedRule)


def run_orders(
    orders: list[list[Action]], num_stages: int, duration: dict[str, float], comm: float = 0.0
) -> list[list[float]]:
    """Event-driven run of each rank's actions in its order: an action starts when its rank is
    free and its dependencies (:func:`~edu_parallel.pipeline_parallel.schedule.dependencies`, here
    on integer ids for speed) have ended, + ``comm`` when a dependency ran on another rank.
    ``orders`` must hold every action once, each on rank ``stage % P``. Returns the start of every
    action, aligned with ``orders``; raises ValueError naming the stuck actions when the orders
    deadlock."""
    p = len(orders)
    m = 1 + max((a.microbatch for row in orders for a in row), default=0)
    kid, sm = {"F": 0, "B": 1, "I": 1, "W": 2}, 3 * m  # B or I: the pass that sends the gradient
    encoded = [
        [
            (
                (a.stage * m + a.microbatch) * 3 + kid[a.kind],
                kid[a.kind],
                duration[a.kind],
                (a.stage + (1 if a.kind == "F" else -1)) % p,
            )
            for a in row
        ]
        for row in orders
    ]
    last = (num_stages - 1) * sm  # ids >= last belong to the last stage
    ends: list[float | None] = [None] * (num_stages * sm)  # id = (stage * m + mb) * 3 + kind
    starts: list[list[float]] = [[] for _ in range(p)]
    free = [0.0] * p
    todo, queued = list(range(p)), [True] * p
    while todo:
        r = todo.pop()
        queued[r] = False
        row, out = encoded[r], starts[r]
        i, n = len(out), len(row)
        while i < n:
            ident, k, dur, nxt = row[i]
            if k == 0:
                deps: tuple[int, ...] = (ident - sm,) if ident >= sm else ()
            elif k == 1:
                deps = (ident - 1, ident + sm) if ident < last else (ident - 1,)
            else:
                deps = (ident - 1,)
            start = free[r]
            for d in deps:
                done = ends[d]
                if done is None:
                    break
                if d // sm % p != r:
                    done += comm
                if done > start:
                    start = done
            else:
                out.append(start)
                ends[ident] = free[r] = start + dur
                i += 1
                if not queued[nxt] and nxt != r:
                    queued[nxt] = True
                    todo.append(nxt)
                continue
            break
    stuck = [
        f"r{r} at {row[len(out)].text()}"
        for r, (row, out) in enumerate(zip(orders, starts, strict=True))
        if len(out) < len(row)
    ]
    if stuck:
        raise bad_value("orders", "; ".join(stuck[:8]), "orders that do not deadlock")
    return starts


def _place(name: str, orders: list[list[Action]], p: int, m: int, v: int) -> Schedule:
    """Unit-time slots: every action takes one slot, run as early as its order allows."""
    starts = run_orders(orders, p * v, {"F": 1, "B": 1, "I": 1, "W": 1})
    length = 1 + int(max(max(row, default=0) for row in starts))
    rows: list[list[Action | None]] = [[None] * length for _ in range(p)]
    for r, (order, row_starts) in enumerate(zip(orders, starts, strict=True)):
        for a, t in zip(order, row_starts, strict=True):
            rows[r][int(t)] = a
    return Schedule(name, p, m, v, tuple(tuple(row) for row in rows))


# ----------------------------------------------------------------------------- builders
def _gpipe(p: int, m: int) -> list[list[Action]]:
    return [[Action(r, kind, k) for kind in "FB" for k in range(m)] for r in range(p)]


def _one_f_one_b(p: int, m: int, defer_w: bool = False) -> list[list[Action]]:
    orders = []
    for r in range(p):
        warm, delay = min(p - 1 - r, m), r
        row = [Action(r, "F", k) for k in range(warm)]
        for k in range(m):
            if warm + k < m:
                row.append(Action(r, "F", warm + k))
            row.append(Action(r, "I" if defer_w else "B", k))
            if defer_w and k >= delay:
                row.append(Action(r, "W", k - delay))
        if defer_w:
            row += [Action(r, "W", k) for k in range(max(0, m - delay), m)]
        orders.append(row)
    return orders


def interleaved_warmup(
    num_ranks: int, num_microbatches: int, chunks: int, rank: int, rule: str = "megatron-2024"
) -> int:
    """Warm-up forwards of ``rank`` in interleaved 1F1B: ``min(2(P-1-i) + (v-1)P, vM)``.

    ``rule="megatron-2024"``: Megatron-LM's ``get_pp_rank_microbatches`` (with
    ``microbatch_group_size_per_vp_stage = P``) and torch 2.13's ``_get_warmup_ops``;
    ``"megatron-2021"``: Megatron before commit 4295be1 (2024-11-01), the same except that
    M == P runs all vM forwards first."""
    check_choice("rule", rule, INTERLEAVED_RULES)
    p, m, v = num_ranks, num_microbatches, chunks
    if rule == "megatron-2021" and m == p:
        return m * v
    return min(2 * (p - 1 - rank) + (v - 1) * p, m * v)


def _interleaved(p: int, m: int, v: int, rule: str) -> list[list[Action]]:
    total = m * v
    orders = []
    for r in range(p):

        def at(k: int, kind: str, r: int = r) -> Action:  # k-th forward or backward of rank r
            chunk = (k // p) % v
            chunk = v - 1 - chunk if kind == "B" else chunk
            return Action(chunk * p + r, kind, (k // (p * v)) * p + k % p)

        warm = interleaved_warmup(p, m, v, r, rule)
        row = [at(k, "F") for k in range(warm)]
        for k in range(total - warm):
            row += [at(warm + k, "F"), at(k, "B")]
        row += [at(k, "B") for k in range(total - warm, total)]
        orders.append(row)
    return orders


def build_schedule(
    name: str,
    num_ranks: int,
    num_microbatches: int,
    chunks: int = 1,
    *,
    rule: str = "megatron-2024",
) -> Schedule:
    """Build a named schedule for ``P = num_ranks``, ``M = num_microbatches``, ``v = chunks``.

    ``rule`` picks interleaved 1F1B's warm-up (:func:`interleaved_warmup`); other schedules
    ignore it."""
    check_choice("name", name, SCHEDULES)
    check_choice("rule", rule, INTERLEAVED_RULES)
    p = check_int("num_ranks", num_ranks, 1)
    m = check_int("num_microbatches", num_microbatches, 1)
    v = check_int("chunks", chunks, 1)
    if name != "interleaved" and v != 1:
        raise bad_value(
            "chunks", v, f"1 for schedule {name!r} (only 'interleaved' has model chunks)"
        )
    if name == "interleaved" and m % p:
        raise bad_value(
            "num_microbatches", m, f"a multiple of num_ranks={p} for 'interleaved' (v={v} chunks)"
        )
    return make_schedule(name, p, m, v, rule)


def make_schedule(
    name: str, num_ranks: int, num_microbatches: int, chunks: int = 1, rule: str = "megatron-2024"
) -> Schedule:
    """:func:`build_schedule` of arguments checked already (a
    :class:`~edu_parallel.pipeline_parallel.config.PipelineConfig`, a 3D run): nothing is checked
    again, on the parent or on a rank."""
    p, m, v = num_ranks, num_microbatches, chunks
    if name == "gpipe":
        return _place(name, _gpipe(p, m), p, m, 1)
    if name in ("1f1b", "zb-h1"):
        return _place(name, _one_f_one_b(p, m, defer_w=name == "zb-h1"), p, m, 1)
    orders = _one_f_one_b(p, m) if v == 1 else _interleaved(p, m, v, rule)
    return _place(name, orders, p, m, v)
