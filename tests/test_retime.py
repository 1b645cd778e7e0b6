"""Retiming traces with an alpha-beta cost model (edu_parallel.models.retiming): no processes,
fast."""

from __future__ import annotations

import copy
import math

import pytest

from edu_parallel.core.trace import Event, Trace
from edu_parallel.models.retiming import (
    CostModel,
    collective_time,
    cost_model,
    naive_allreduce_time,
    per_rank_busy,
    retime,
    ring_allreduce_time,
)
from edu_parallel.models.simulation import simulate
from edu_parallel.models.topology import LINKS, Link
from edu_parallel.plans.naive import naive_allreduce_plan
from edu_parallel.plans.ring import ring_allreduce_plan

LINK = Link("test", alpha_s=1e-6, bandwidth_Bps=1e9)  # round numbers: easy to reason about
REDUCE_BPS = 4e9


def ring_trace(n: int, nbytes: int) -> Trace:
    return simulate(ring_allreduce_plan(n), nbytes, with_data=False)[0]


def naive_trace(n: int, nbytes: int) -> Trace:
    return simulate(naive_allreduce_plan(n), nbytes, with_data=False)[0]


def posted_at(trace: Trace, e: Event) -> float:
    """When a step's events are posted: the end of the rank's earlier steps (0 for the first)."""
    ends = [x.end for x in trace.select(rank=e.rank) if x.step is not None and x.step < e.step]
    return max(ends, default=0.0)


# ------------------------------------------------------------------ formulas on simulated plans
@pytest.mark.parametrize("reduce_Bps", [None, REDUCE_BPS])
@pytest.mark.parametrize("n", range(2, 9))
def test_ring_allreduce_matches_textbook_formula(n: int, reduce_Bps: float | None) -> None:
    model = CostModel(LINK, reduce_Bps=reduce_Bps)
    nbytes = 4 * 1000 * n  # divisible by n: equal chunks
    out = retime(ring_trace(n, nbytes), model)
    assert min(e.start for e in out) == 0.0
    assert out.duration == pytest.approx(ring_allreduce_time(n, nbytes, model), rel=1e-12)
    chunk = nbytes / n
    by_hand = 2 * (n - 1) * (1e-6 + chunk / 1e9) + (
        (n - 1) * chunk / reduce_Bps if reduce_Bps else 0.0
    )
    assert out.duration == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("reduce_Bps", [None, REDUCE_BPS])
@pytest.mark.parametrize("n", range(3, 8))
def test_ring_uneven_chunks_follow_the_largest_chunk(n: int, reduce_Bps: float | None) -> None:
    # The largest chunk travels through every one of the 2(N-1) steps (reduce-scatter passes it
    # on, and the rank that finishes it starts the all-gather with it), and no step on any rank
    # takes longer than alpha + Cmax/bw (+ Cmax/reduce_Bps): the total is exactly the even-size
    # formula applied to N * Cmax bytes.
    model = CostModel(LINK, reduce_Bps=reduce_Bps)
    nbytes = 4 * (100 * n + 1)
    trace = ring_trace(n, nbytes)
    cmax = max(trace.meta["chunk_bytes"])
    assert cmax > min(trace.meta["chunk_bytes"])  # really uneven
    out = retime(trace, model)
    assert out.duration == pytest.approx(ring_allreduce_time(n, n * cmax, model), rel=1e-12)
    assert out.duration > ring_allreduce_time(n, nbytes, model)


@pytest.mark.parametrize("reduce_Bps", [None, REDUCE_BPS])
@pytest.mark.parametrize("n", range(2, 9))
def test_naive_allreduce_serializes_on_the_root(n: int, reduce_Bps: float | None) -> None:
    model = CostModel(LINK, reduce_Bps=reduce_Bps)
    nbytes = 8192
    out = retime(naive_trace(n, nbytes), model)
    assert out.duration == pytest.approx(naive_allreduce_time(n, nbytes, model), rel=1e-12)
    msg = 1e-6 + nbytes / 1e9
    for kind in ("recv", "send"):  # root's incoming messages, then outgoing, back to back
        spans = sorted((e.start, e.end) for e in out.select(kind=kind, rank=0))
        assert len(spans) == n - 1
        for (_, b0), (a1, _) in zip(spans, spans[1:], strict=False):
            assert a1 == pytest.approx(b0, rel=1e-12)
        assert all(b - a == pytest.approx(msg, rel=1e-9) for a, b in spans)
    order = [e.peer for e in sorted(out.select(kind="recv", rank=0), key=lambda e: e.start)]
    assert order == list(range(1, n))  # equal readiness: ties broken by source rank
    busy = per_rank_busy(out)
    assert busy[0] == pytest.approx(out.duration, rel=1e-12)
    assert busy[1:] == pytest.approx([2 * msg] * (n - 1), rel=1e-12)


def test_ring_ranks_are_always_busy_without_compute_cost() -> None:
    out = retime(ring_trace(5, 4 * 5 * 64), CostModel(LINK))
    assert per_rank_busy(out) == pytest.approx([out.duration] * 5, rel=1e-12)


# ------------------------------------------------------------------ causality and bookkeeping
@pytest.mark.parametrize("make", [ring_trace, naive_trace])
def test_messages_respect_posting_ports_and_durations(make) -> None:
    model = CostModel(LINK, reduce_Bps=REDUCE_BPS)
    out = retime(make(5, 4 * 5 * 77), model)
    pairs = out.matched_transfers()
    assert pairs
    for s, r in pairs:
        assert (s.start, s.end) == (r.start, r.end)
        assert s.end - s.start == pytest.approx(1e-6 + s.nbytes / 1e9, rel=1e-9)
        assert s.start >= posted_at(out, s) - 1e-15
        assert r.start >= posted_at(out, r) - 1e-15
    for rank in range(5):  # one outgoing and one incoming port per rank: no overlap on either
        for kind in ("send", "recv"):
            spans = sorted((e.start, e.end) for e in out.select(kind=kind, rank=rank))
            assert all(b0 <= a1 + 1e-15 for (_, b0), (a1, _) in zip(spans, spans[1:], strict=False))
    for e in out.select(kind="compute"):  # a reduce runs after the step's recvs, for Cbytes/rate
        recvs = [r for r in out.select(kind="recv", rank=e.rank) if r.step == e.step]
        assert e.start >= max(r.end for r in recvs) - 1e-15
        assert e.duration == pytest.approx(e.nbytes / REDUCE_BPS, rel=1e-9)


def test_retime_is_deterministic_and_leaves_the_input_alone() -> None:
    trace = ring_trace(4, 4096)
    before = copy.deepcopy(trace.to_dict())
    model = cost_model("nvlink4-h100", reduce_Bps=1e12)
    a, b = retime(trace, model), retime(trace, model)
    assert a.to_dict() == b.to_dict()
    assert trace.to_dict() == before
    assert len(a) == len(trace)
    key = [(e.kind, e.rank, e.peer, e.step, e.tag, e.chunk, e.nbytes) for e in trace]
    assert [(e.kind, e.rank, e.peer, e.step, e.tag, e.chunk, e.nbytes) for e in a] == key
    changed = ("source", "time_unit")
    kept = {k: v for k, v in before["meta"].items() if k not in changed}
    assert {k: a.meta[k] for k in kept} == kept
    assert a.meta["time_unit"] == "s"
    assert a.meta["retimed_with"] == "nvlink4-h100"
    assert a.meta["retimed_from"] == "simulation"
    assert Trace.from_json(a.to_json()).to_dict() == a.to_dict()  # meta stays JSON-friendly


# ------------------------------------------------------------------ hand-built traces
def ev(kind: str, rank: int, op: str = "", **kw) -> Event:
    return Event(kind=kind, rank=rank, op=op, **kw)


def test_collectives_start_together_at_the_latest_poster() -> None:
    s, n = 3_000_000, 3
    model = CostModel(LINK, compute_Bps=1e6)
    trace = Trace(
        {"world_size": n},
        [
            ev("compute", 0, "matmul", nbytes=1000, start=0.0, end=0.5),
            ev("collective", 0, "all_reduce", nbytes=s, start=0.5, end=0.9),
            ev("collective", 1, "all_reduce", nbytes=s, start=0.0, end=0.9),
            ev("mark", 1, "after", start=1.0, end=1.0),
            ev("compute", 2, "matmul", nbytes=3000, start=0.0, end=0.1),
            ev("collective", 2, "all_reduce", nbytes=s, start=0.2, end=0.9),
            ev("collective", 0, "barrier", start=1.0, end=1.1),
            ev("collective", 1, "barrier", start=1.1, end=1.2),
            ev("collective", 2, "barrier", start=1.2, end=1.3),
        ],
    )
    out = retime(trace, model)
    comp = [e for e in out if e.kind == "compute"]
    assert [t for e in comp for t in (e.start, e.end)] == pytest.approx([0.0, 1e-3, 0.0, 3e-3])
    ar = [e for e in out if e.op == "all_reduce"]
    ar_time = 2 * (n - 1) * 1e-6 + 2 * (n - 1) / n * s / 1e9
    assert len({e.start for e in ar}) == 1  # one start for all ranks: the latest poster's
    assert ar[0].start == pytest.approx(3e-3, rel=1e-12)
    assert all(e.end == pytest.approx(3e-3 + ar_time, rel=1e-12) for e in ar)
    mark = next(e for e in out if e.kind == "mark")
    assert mark.start == mark.end == ar[0].end
    bar = [e for e in out if e.op == "barrier"]
    assert all(e.start == ar[0].end for e in bar)
    assert all(e.duration == pytest.approx(math.ceil(math.log2(n)) * 1e-6) for e in bar)


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_builtin_allreduce_costs_what_the_ring_plan_costs(n: int) -> None:
    model = CostModel(LINK, reduce_Bps=REDUCE_BPS)
    s = 4 * 1000 * n
    trace = Trace({}, [ev("collective", r, "all_reduce", nbytes=s) for r in range(n)])
    out = retime(trace, model)
    assert out.duration == pytest.approx(ring_allreduce_time(n, s, model), rel=1e-12)
    if n > 1:
        plan_time = retime(ring_trace(n, s), model).duration
        assert out.duration == pytest.approx(plan_time, rel=1e-12)


def test_collective_time_formulas() -> None:
    model = CostModel(LINK)
    s, n, a, bw = 8e6, 4, 1e-6, 1e9
    assert collective_time("all_gather", n, s, model) == pytest.approx(3 * a + 0.75 * s / bw)
    assert collective_time("reduce_scatter", n, s, model) == pytest.approx(3 * a + 0.75 * s / bw)
    assert collective_time("broadcast", n, s, model) == pytest.approx(3 * a + s / bw)
    assert collective_time("barrier", 5, s, model) == pytest.approx(3 * a)
    assert collective_time("all_to_all", n, s, model) == pytest.approx(a + s / bw)
    assert collective_time("all_reduce", 1, s, model) == 0.0


def test_memory_event_inside_a_step_keeps_the_group_together() -> None:
    # Step 0: rank 0 sends to rank 1. Step 1: both send then receive, with a memory event in
    # between on rank 0: still one group (split in two, each rank's send would wait forever).
    msg = 1e-6 + 1000 / 1e9
    events = [
        ev("send", 0, "isend", peer=1, step=0, nbytes=1000, tag=9, start=0.0),
        ev("recv", 1, "copy", peer=0, step=0, nbytes=1000, tag=9, start=0.0),
        ev("send", 0, "isend", peer=1, step=1, nbytes=1000, tag=0, start=1.0),
        ev("memory", 0, "alloc", step=1, nbytes=64, start=1.1),
        ev("recv", 0, "copy", peer=1, step=1, nbytes=1000, tag=0, start=1.2),
        ev("send", 1, "isend", peer=0, step=1, nbytes=1000, tag=0, start=1.0),
        ev("recv", 1, "copy", peer=0, step=1, nbytes=1000, tag=0, start=1.1),
        ev("memory", 1, "free", nbytes=-64, start=1.3),
    ]
    out = retime(Trace({"world_size": 2}, events), CostModel(LINK))
    m2 = 2 * msg
    assert [t for e in out for t in (e.start, e.end)] == pytest.approx(
        [0, msg, 0, msg, msg, m2, msg, msg, msg, m2, msg, m2, msg, m2, m2, m2],
        rel=1e-12,
    )


def test_waiting_messages_start_in_order_of_readiness() -> None:
    # Rank 0 receives a long message from rank 3; meanwhile rank 2's message becomes ready, then
    # rank 1's. When the port frees, rank 2's goes first although rank 1 has the smaller id.
    model = CostModel(LINK, compute_Bps=1e9)
    events = [
        ev("recv", 0, "copy", peer=p, step=0, nbytes=nb, tag=0)
        for p, nb in ((3, 10**6), (2, 1000), (1, 1000))
    ]
    events += [
        ev("send", 3, "isend", peer=0, step=0, nbytes=10**6, tag=0),
        ev("compute", 2, "pack", nbytes=1000, step=0),
        ev("send", 2, "isend", peer=0, step=1, nbytes=1000, tag=0, start=1.0),
        ev("compute", 1, "pack", nbytes=2000, step=0),
        ev("send", 1, "isend", peer=0, step=1, nbytes=1000, tag=0, start=1.0),
    ]
    out = retime(Trace({"world_size": 4}, events), model)
    big, small = 1e-6 + 1e-3, 1e-6 + 1e-6
    starts = {e.peer: e.start for e in out.select("recv")}
    assert starts == pytest.approx({3: 0.0, 2: big, 1: big + small}, rel=1e-12)


def test_uncosted_compute_takes_no_time() -> None:
    trace = Trace({}, [ev("compute", 0, "matmul", nbytes=10**6, start=0.0, end=5.0)])
    assert retime(trace, CostModel(LINK)).events[0].duration == 0.0
    assert retime(trace, CostModel(LINK, compute_Bps=1e9)).events[0].duration == pytest.approx(1e-3)


# ------------------------------------------------------------------ presets and errors
def test_presets_have_sources_and_datasheet_bandwidths() -> None:
    expected = {
        "nvlink4-h100": 450e9,
        "nvlink3-a100": 300e9,
        "pcie5-x16": 63e9,
        "ib-ndr-400": 50e9,
        "ib-xdr-800": 100e9,
        "eth-25g": 3.125e9,
    }
    assert set(expected) <= set(LINKS)  # lesson 15 adds more (tests/test_links.py)
    for name, bw in expected.items():
        assert LINKS[name].name == name
        assert LINKS[name].bandwidth_Bps == pytest.approx(bw, rel=0.01)
        assert LINKS[name].source
        assert 0 < LINKS[name].alpha_s < 1e-4
    assert cost_model("ib-ndr-400", reduce_Bps=1e11) == CostModel(LINKS["ib-ndr-400"], 1e11)
    assert cost_model(LINK).link is LINK


def test_unmatched_messages_are_named() -> None:
    trace = ring_trace(3, 1200)
    no_recv = Trace(trace.meta, [e for e in trace.events if e != trace.select("recv")[0]])
    with pytest.raises(ValueError, match="send.*no matching recv"):
        retime(no_recv, CostModel(LINK))
    no_send = Trace(trace.meta, [e for e in trace.events if e != trace.select("send")[-1]])
    with pytest.raises(ValueError, match="recv.*no matching send"):
        retime(no_send, CostModel(LINK))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha_s": -1e-6}, "alpha_s"),
        ({"alpha_s": float("nan")}, "alpha_s"),
        ({"bandwidth_Bps": 0}, "bandwidth_Bps"),
        ({"bandwidth_Bps": float("inf")}, "bandwidth_Bps"),
        ({"bandwidth_Bps": "fast"}, "bandwidth_Bps"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_link_fields_are_named(kwargs: dict, name: str) -> None:
    fields = {"name": "x", "alpha_s": 1e-6, "bandwidth_Bps": 1e9, **kwargs}
    with pytest.raises(ValueError, match=rf"^{name}=.*is not valid"):
        Link(**fields)


def test_bad_cost_model_and_preset_names() -> None:
    with pytest.raises(ValueError, match=r"^reduce_Bps=0 is not valid"):
        CostModel(LINK, reduce_Bps=0)
    with pytest.raises(ValueError, match=r"^name_or_link='nvlink9'.*'nvlink4-h100'.*'ib-xdr-800'"):
        cost_model("nvlink9")
    with pytest.raises(ValueError, match=r"^model="):
        retime(ring_trace(2, 64), LINK)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^world_size=0 is not valid"):
        ring_allreduce_time(0, 64, CostModel(LINK))


def test_mismatched_collectives_and_deadlocks_are_errors() -> None:
    uneven = Trace(
        {},
        [
            ev("collective", 0, "all_reduce"),
            ev("collective", 0, "all_reduce"),
            ev("collective", 1, "all_reduce"),
        ],
    )
    with pytest.raises(ValueError, match="different numbers of collective"):
        retime(uneven, CostModel(LINK))
    mixed = Trace({}, [ev("collective", 0, "all_reduce"), ev("collective", 1, "broadcast")])
    with pytest.raises(ValueError, match="different ops"):
        retime(mixed, CostModel(LINK))
    # Each rank receives first, in a step of its own: nobody ever sends.
    stuck = Trace(
        {},
        [
            ev("recv", 0, peer=1, tag=0, start=0.0),
            ev("send", 0, peer=1, tag=0, start=1.0),
            ev("recv", 1, peer=0, tag=0, start=0.0),
            ev("send", 1, peer=0, tag=0, start=1.0),
        ],
    )
    with pytest.raises(ValueError, match="deadlock"):
        retime(stuck, CostModel(LINK))
