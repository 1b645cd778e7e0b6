"""The mesh picture of a 3D run and its bars, from real 8-rank runs (DP2 x TP2 x PP2, and an MoE
run DP4 x TP2 x EP2 with 4 experts).

Expected groups come from :meth:`ParallelDims.groups`, expected bytes from the report's measured
rows; the figures are read back through their traces' ``meta`` and frames.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

from edu_parallel import Cluster
from edu_parallel.core.trace import Trace
from edu_parallel.viz import group_bytes_figure, memory_figure, mesh_figure
from edu_parallel.viz.mesh import DARK, LIT
from edu_parallel.viz.mesh_data import mesh_data

pytestmark = pytest.mark.multiprocess


@functools.cache
def reports_3d() -> tuple:
    """One dense and one MoE step on 8 ranks (run once per test session)."""
    from edu_parallel.parallel_3d import run_3d

    with Cluster(8, timeout=120) as c:
        dense = run_3d(c, dp=2, tp=2, pp=2)
        moe = run_3d(c, dp=4, tp=2, pp=1, ep=2, experts=4)
    return dense, moe


@pytest.fixture(scope="module", params=["dense", "moe"])
def rep(request):
    dense, moe = reports_3d()
    assert dense.matches_reference and moe.matches_reference
    return dense if request.param == "dense" else moe


def shown(rep) -> list[str]:
    d = rep.dims
    return [k for k in ("tp", "pp", "dp", "ep") if getattr(d, k) > 1]


def role(fig, name: str) -> list:
    return [t for t in fig.data if t.meta and t.meta["role"] == name]


def components(edges: list[tuple[int, int]]) -> set[frozenset[int]]:
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b in edges:
        parent[find(a)] = find(b)
    out: dict[int, set[int]] = {}
    for x in list(parent):
        out.setdefault(find(x), set()).add(x)
    return {frozenset(s) for s in out.values()}


def test_one_marker_per_rank_labelled_with_its_coordinates(rep):
    fig = mesh_figure(rep)
    n = rep.dims.world_size
    ranks = role(fig, "ranks")
    assert [t.meta["dim"] for t in ranks] == shown(rep)
    for t in ranks:
        assert len(t.x) == n and list(t.text) == [f"<b>r{r}</b>" for r in range(n)]
    (coords,) = role(fig, "coords")
    want = [rep.dims.coords(r) for r in range(n)]
    assert list(coords.text) == [f"({c['pp']},{c['dp']},{c['tp']})" for c in want]
    # stages left to right, replicas top to bottom, TP ranks side by side
    xy = list(zip(ranks[0].x, ranks[0].y, strict=True))
    for r, c in enumerate(want):
        for q, d in enumerate(want):
            if c["dp"] == d["dp"] and (c["pp"], c["tp"]) < (d["pp"], d["tp"]):
                assert xy[r][0] < xy[q][0]
            if (c["pp"], c["tp"]) == (d["pp"], d["tp"]) and c["dp"] < d["dp"]:
                assert xy[r][1] > xy[q][1]


def test_each_button_draws_exactly_its_dimensions_groups(rep):
    fig = mesh_figure(rep)
    buttons = fig.layout.updatemenus[1].buttons
    assert [b.label for b in buttons] == [k.upper() for k in shown(rep)]
    for b in buttons:
        dim = b.label.lower()
        visible = [t for t, v in zip(fig.data, b.args[0]["visible"], strict=True) if v]
        assert {t.meta["dim"] for t in visible if "dim" in t.meta} == {dim}
        edges = [tuple(t.meta["ranks"]) for t in visible if t.meta["role"] == "edge"]
        groups = {frozenset(g) for g in rep.dims.groups(dim) if len(g) > 1}
        assert components(edges) == groups
        (ranks,) = [t for t in visible if t.meta["role"] == "ranks"]
        colour = list(ranks.marker.color)
        for g in rep.dims.groups(dim):
            assert len({colour[r] for r in g}) == 1
        assert len(set(colour)) == len(rep.dims.groups(dim))


def test_edge_bytes_add_up_to_each_ranks_measured_bytes(rep):
    fig, data = mesh_figure(rep), rep.to_json_dict()
    mesh = mesh_data(rep)
    for dim in shown(rep):
        sent = [row[dim] for row in data["per_rank_sent_bytes_by_group"]]
        edges = [t.meta for t in role(fig, "edge") if t.meta["dim"] == dim]
        assert sum(e["bytes"] for e in edges) == pytest.approx(sum(sent)) and sum(sent) > 0
        per_rank = [0.0] * rep.dims.world_size
        for edge in mesh.edges(dim).values():
            for r, b in edge["sent"].items():
                per_rank[r] += b
        assert per_rank == pytest.approx(sent)
        msgs = sum(row[dim] for row in data["per_rank_messages_by_group"])
        peers = rep.dims.ep - 1 if dim == "ep" else 1  # an all-to-all reaches every peer
        assert sum(e["messages"] for e in edges) == msgs * peers


def test_frames_are_cumulative_and_end_at_the_totals(rep):
    fig = mesh_figure(rep, frames=12)
    totals = {(t.meta["dim"], tuple(t.meta["ranks"])): t.meta["bytes"] for t in role(fig, "edge")}
    assert len(fig.frames) == len(fig.layout.sliders[0].steps) == 12
    before = dict.fromkeys(totals, 0.0)
    for frame in fig.frames:
        now = {
            (d.meta["dim"], tuple(d.meta["ranks"])): d.meta["bytes"] for d in frame.data if d.meta
        }
        assert now.keys() == totals.keys()
        for key, b in now.items():
            assert before[key] <= b <= totals[key]
        opacity = {(d.meta["dim"], tuple(d.meta["ranks"])): d.opacity for d in frame.data if d.meta}
        for key, b in now.items():
            if b > before[key]:
                assert opacity[key] == LIT  # it moved bytes in this frame: lit
            if b == 0:
                assert opacity[key] == DARK
        before = now
    assert before == totals
    first = {
        (d.meta["dim"], tuple(d.meta["ranks"])): d.meta["bytes"]
        for d in fig.frames[0].data
        if d.meta
    }
    assert sum(first.values()) < sum(totals.values())  # the animation shows traffic growing


def test_a_report_dict_with_its_trace_draws_the_same_figure(rep):
    a = mesh_figure(rep).to_plotly_json()
    b = mesh_figure(rep.to_json_dict(), rep.trace).to_plotly_json()
    assert a == b


@pytest.mark.parametrize(
    "args, message",
    [
        (("mesh",), "report='str' is not valid"),
        (({"dims": {}},), "report='dict' is not valid"),
        (("report_dict",), "trace='NoneType' is not valid"),
        (("report", None, 1), "frames=1 is not valid"),
    ],
)
def test_bad_input_is_one_line(rep, args, message):
    args = tuple(
        rep.to_json_dict() if a == "report_dict" else rep if a == "report" else a for a in args
    )
    with pytest.raises(ValueError, match=message) as exc:
        mesh_figure(*args)
    assert "\n" not in str(exc.value)


def _planted(rep, change) -> Trace:
    events = list(rep.trace.events)
    i = next(i for i, e in enumerate(events) if change(e) is not None)
    events[i] = change(events[i])
    return Trace(dict(rep.trace.meta), events)


def test_a_planted_wrong_trace_is_named():
    dense, moe = reports_3d()
    data = dense.to_json_dict()

    def off_group(e):  # a TP all-reduce recorded on ranks that form no TP or DP group
        if e.kind == "collective" and e.rank == 0 and e.attrs["group"] == [0, 1]:
            return replace(e, attrs={"group": [0, 3]})

    with pytest.raises(ValueError, match=r"rank 0 all_reduce .*\[0, 3\], not a TP or DP group"):
        mesh_figure(data, _planted(dense, off_group))

    def far_send(e):  # a stage sending to a rank of another pipeline
        if e.kind == "send" and e.rank == 0:
            return replace(e, peer=5)

    with pytest.raises(ValueError, match="rank 0 isend .*send to rank 5, not a neighbour stage"):
        mesh_figure(data, _planted(dense, far_send))

    def more_bytes(e):
        if e.kind == "collective" and e.rank == 2 and e.phase == "grad_sync":
            return replace(e, nbytes=e.nbytes * 2)

    with pytest.raises(ValueError, match="trace and report disagree: rank 2 sent .* in DP"):
        mesh_figure(data, _planted(dense, more_bytes))
    with pytest.raises(ValueError, match="rank 0 all_to_all_single .*not an EP group"):
        mesh_figure(data, moe.trace)  # another run's trace


def test_group_bytes_bars_are_the_measured_bytes_with_the_planner_on_top(rep):
    fig, data = group_bytes_figure(rep), rep.to_json_dict()
    bars = {t.name: list(t.y) for t in fig.data if t.type == "bar"}
    assert list(bars) == [k.upper() for k in ("tp", "pp", "dp", "ep") if k in shown(rep)]
    for name, ys in bars.items():
        assert ys == [row[name.lower()] for row in data["per_rank_sent_bytes_by_group"]]
    ticks = [t for t in fig.data if t.type == "scatter"]
    predicted = data["predicted_sent_bytes_by_group"]
    if predicted is None:  # MoE: the planner predicts no bytes
        assert ticks == []
        return
    below = [0.0] * rep.dims.world_size
    for tick, name in zip(ticks, bars, strict=True):
        values = [p[name.lower()] for p in predicted]
        below = [b + v for b, v in zip(below, values, strict=True)]
        assert list(tick.y) == below and list(tick.customdata) == values


def test_memory_bars_are_the_reports_numbers(rep):
    fig, data = memory_figure(rep), rep.to_json_dict()
    states = data["per_rank_model_state_bytes"]
    assert [list(t.y) for t in fig.data] == [
        [s["param_bytes"] for s in states],
        [s["grad_bytes"] for s in states],
        [s["optimizer_bytes"] for s in states],
        data["per_rank_activation_bytes"],
    ]
    assert all(y > 0 for t in fig.data for y in t.y)
    with pytest.raises(ValueError, match="report='list' is not valid"):
        memory_figure([data])
