"""The planner's pictures and explorer (lesson 12): what they draw is the planner's result."""

from __future__ import annotations

import html
import re
from dataclasses import FrozenInstanceError, replace

import pytest

from edu_parallel.models.topology import MAX_TOPOLOGY_RANKS as MAX
from edu_parallel.planner import (
    JSON_KEYS,
    TERMS,
    ClusterSpec,
    PlannerInputs,
    configs_table,
    plan,
)
from edu_parallel.planner.planning import _plan_once
from edu_parallel.viz import PlannerState, PlannerWidget, pareto_figure, time_terms_figure
from edu_parallel.viz.planner import CONFIG_KEYS, layout_label


@pytest.fixture(scope="module")
def result():
    return plan("llama3-70b", ClusterSpec(8, 8, "h100"), 512, 4096)


def traces(fig, prefix):
    return [t for t in fig.data if (t.name or "").startswith(prefix)]


def test_config_keys_are_the_planners():
    assert JSON_KEYS[: len(CONFIG_KEYS)] == CONFIG_KEYS


# ----------------------------------------------------------------- Pareto figure
def test_pareto_line_is_the_planners_front(result):
    fig = pareto_figure(result)
    (front,) = traces(fig, "Pareto front")
    want = result.pareto()
    assert len(want) > 1 and front.name == f"Pareto front ({len(want)})"
    assert list(front.customdata) == [result.configs.index(c) for c in want]
    assert list(front.x) == pytest.approx([c.memory_bytes_per_gpu / 1e9 for c in want])
    assert list(front.y) == pytest.approx([c.step_time_s for c in want])
    assert front.mode == "lines+markers"


def test_every_feasible_config_is_plotted_once_and_oom_ones_beyond_the_budget(result):
    fig = pareto_figure(result)
    shown = [i for t in traces(fig, "feasible") + traces(fig, "Pareto") for i in t.customdata]
    assert len(shown) == len(set(shown)) == len(result.feasible)
    assert {result.configs[i].feasible for i in shown} == {True}
    for t in traces(fig, "feasible, recompute="):
        rc = t.name.split("=")[1]
        assert {result.configs[i].recompute for i in t.customdata} == {rc}
    (oom,) = traces(fig, "out of memory")
    budget = result.memory_budget / 1e9
    sized = [c for c in result.configs if c.memory_bytes_per_gpu is not None and not c.feasible]
    assert len(oom.customdata) == len(sized) > 0 and min(oom.x) > budget
    (line,) = traces(fig, "GPU memory")
    assert list(line.x) == [budget, budget] == [80.0, 80.0]
    assert max(x for t in traces(fig, "feasible") for x in t.x) <= budget
    assert traces(pareto_figure(result, infeasible=False), "out of memory") == []


def test_the_memory_axis_spans_the_configurations_that_fit_and_counts_the_rest(result):
    """Out-of-memory configurations reach far past the budget; the axis is ranged to the fitting
    ones and the budget line, so they are not squeezed into a corner, and its title says how many
    crosses lie off it, to the right."""
    fig = pareto_figure(result)
    lo, hi = (10**v for v in fig.layout.xaxis.range)
    fits = [c.memory_bytes_per_gpu / 1e9 for c in result.feasible]
    budget = result.memory_budget / 1e9
    assert lo < min(fits) and max(*fits, budget) < hi < 2 * budget
    (oom,) = traces(fig, "out of memory")
    off = [x for x in oom.x if x > hi]
    assert off and max(oom.x) > 10 * hi  # there were crosses to leave out
    title = fig.layout.xaxis.title.text
    assert f"{len(off):,} out-of-memory configurations (up to {max(off):,.0f} GB)" in title
    ylo, yhi = (10**v for v in fig.layout.yaxis.range)
    points = [zip(t.x, t.y, strict=True) for t in fig.data if t.customdata is not None]
    on = [y for xy in points for x, y in xy if x <= hi]
    assert ylo < min(on) and max(on) < yhi
    none_off = pareto_figure(result, infeasible=False).layout.xaxis.title.text
    assert none_off == "memory per GPU (GB, log scale)"


def test_best_is_starred_and_hover_names_the_config(result):
    fig = pareto_figure(result)
    (best,) = traces(fig, "best")
    b = result.best
    assert best.marker.symbol == "star" and best.name == f"best: {layout_label(b)}"
    assert (best.x[0], best.y[0]) == (b.memory_bytes_per_gpu / 1e9, b.step_time_s)
    hover = best.hovertext[0]
    for part in (f"dp={b.dp}", f"tp={b.tp}", f"pp={b.pp}", f"chunks={b.chunks}", f"ZeRO-{b.zero}"):
        assert part in hover
    assert f"micro_batch={b.micro_batch}" in hover and f"M={b.microbatches}" in hover
    assert f"recompute={b.recompute}" in hover and f"MFU {b.mfu:.1%}" in hover


def test_highlight_marks_the_matching_config(result):
    fig = pareto_figure(result, highlight={"dp": 8, "tp": 8, "pp": 1, "name": "8 x 8 x 1"})
    (mark,) = traces(fig, "8 x 8 x 1")
    c = result.configs[mark.customdata[0]]
    assert (c.dp, c.tp, c.pp) == (8, 8, 1) and mark.marker.symbol == "diamond-open"
    rank = result.rank_of(dp=8, tp=8, pp=1)
    assert rank is not None and rank > 1 and mark.name == f"8 x 8 x 1 (rank {rank})"
    assert c is result.feasible[rank - 1]  # the best-ranked match
    # An out-of-memory layout is drawn too, and says so.
    oom = next(c for c in result.configs if not c.feasible and c.memory_bytes_per_gpu)
    fig = pareto_figure(result, highlight={k: getattr(oom, k) for k in CONFIG_KEYS})
    assert traces(fig, "dp=")[0].name.endswith("(does not fit)")
    for bad, match in [
        ({"dp": 8, "colour": 1}, "highlight=.*unknown: colour"),
        ({"name": "x"}, "highlight=.*a dict of configuration fields"),
        ({"dp": 3}, "highlight=.*matching a configuration"),
        ("8x8", "highlight='8x8' is not valid"),
    ]:
        with pytest.raises(ValueError, match=match):
            pareto_figure(result, highlight=bad)
    with pytest.raises(ValueError, match="result='str' is not valid"):
        pareto_figure("llama3-70b")


# ----------------------------------------------------------------- time terms
def test_terms_bars_sum_to_each_step_time(result):
    fig = time_terms_figure(result, top=7)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == ["compute", "TP all-reduces", "PP sends",
                                      "DP sync (exposed)", "pipeline bubble"]  # fmt: skip
    top = result.feasible[:7]
    assert list(bars[0].y) == [f"{r}. {layout_label(c)}" for r, c in enumerate(top, 1)]
    for k, c in enumerate(top):
        assert sum(t.x[k] for t in bars) == pytest.approx(c.step_time_s, rel=1e-12)
        assert [t.x[k] for t in bars] == [c.time_terms[t] for t in TERMS if t != "ep"]  # dense
    assert fig.layout.barmode == "stack"
    over = time_terms_figure(result, top=3, overhead_only=True)
    bars = [t for t in over.data if t.type == "bar"]
    assert "compute" not in [t.name for t in bars] and len(bars) == 4
    for k, c in enumerate(result.feasible[:3]):
        want = c.step_time_s - c.time_terms["compute"]
        assert sum(t.x[k] for t in bars) == pytest.approx(want, rel=1e-9)
    with pytest.raises(ValueError, match=r"top=0 is not valid: expected an integer in \[1, 100\]"):
        time_terms_figure(result, top=0)


def test_terms_bars_of_a_mixture_of_experts_show_the_ep_all_to_alls():
    moe = plan("mixtral-8x7b", ClusterSpec(8, 8, "h100"), 1024, 4096)
    fig = time_terms_figure(moe, top=3)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars][1:3] == ["TP all-reduces", "EP all-to-alls"]
    for k, c in enumerate(moe.feasible[:3]):
        assert [t.x[k] for t in bars] == [c.time_terms[t] for t in TERMS]
    assert bars[2].x[0] > 0  # the best runs ep > 1: its all-to-alls take time


# ----------------------------------------------------------------- widget
def test_planner_state_validates_every_field_by_the_planners_rules():
    s = PlannerState("llama3-8b", 1, 8, "h100", 64, 4096, 0.5)
    for field_, value, match in [
        ("model", "gpt5", r"model='gpt5' is not valid: expected one of 'gpt2-1.5b'"),
        ("nodes", 0, r"nodes=0 is not valid: expected an integer >= 1"),
        ("gpus_per_node", 0, r"gpus_per_node=0 is not valid: expected an integer >= 1"),
        ("nodes", MAX // 4, rf"nodes \* gpus_per_node={2 * MAX} .*at most {MAX} GPUs"),
        ("gpu", "tpu", r"gpu='tpu' is not valid: expected one of 'h100'"),
        ("global_batch", 1.5, r"global_batch=1.5 is not valid"),
        ("seq", 0, r"seq=0 is not valid"),
        ("efficiency", 0, r"efficiency=0 is not valid: expected a number in \(0, 1\]"),
        ("efficiency", True, r"efficiency=True is not valid"),
        ("memory_budget_gb", -1, r"memory_budget_gb=-1 is not valid: expected a finite number > 0"),
    ]:
        with pytest.raises(ValueError, match=match) as err:
            replace(s, **{field_: value})
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError) as err:  # the planner's own message, word for word
        plan("llama3-8b", ClusterSpec(1, 8), 0, 4096)
    with pytest.raises(ValueError, match=re.escape(str(err.value))):
        replace(s, global_batch=0)
    with pytest.raises(ValueError, match=r"^nodes=0 .*; seq=0 "):  # every bad field at once
        replace(s, nodes=0, seq=0)
    with pytest.raises(FrozenInstanceError):
        s.nodes = 2  # a state changes only through dataclasses.replace, which checks it
    s = replace(s, memory_budget_gb=40)
    assert s.memory_budget == 40e9 and s.cluster.world_size == 8
    assert s == PlannerState("llama3-8b", 1, 8, "h100", 64, 4096, 0.5, 40.0)
    with pytest.raises(ValueError, match="nodes=-2 is not valid"):
        PlannerWidget(nodes=-2)  # checked before any widget is built


def test_widget_replans_on_every_change():
    w = PlannerWidget("llama3-8b", nodes=1, gpus_per_node=8, global_batch=64, seq=4096)
    want = plan("llama3-8b", ClusterSpec(1, 8, "h100"), 64, 4096)
    assert w.error is None and len(w.result.configs) == len(want.configs)
    assert w.result.best.to_json_dict() == want.best.to_json_dict()
    assert f"{len(want.feasible)} feasible of {len(want.configs)}" in w.status.value
    assert f"best: {layout_label(want.best)}" in w.status.value
    expected = configs_table(want, top=5)
    assert list(w.table["step_s"]) == list(expected["step_s"]) and len(w.table) == 5
    assert "<table" in w.table_html.value and "mfu" in w.table_html.value
    (front,) = traces(w.figure, "Pareto front")
    assert len(front.x) == len(want.pareto())
    assert len([t for t in w.terms_figure.data if t.type == "bar"][0].x) == 5
    w.nodes_slider.value = 4
    more = plan("llama3-8b", ClusterSpec(4, 8, "h100"), 64, 4096)
    assert w.state.nodes == 4 and w.result.cluster.world_size == 32
    assert len(w.result.configs) == len(more.configs) != len(want.configs)
    assert w.result.best.to_json_dict() == more.best.to_json_dict() != want.best.to_json_dict()
    (front,) = traces(w.figure, "Pareto front")
    assert list(front.y) == pytest.approx([c.step_time_s for c in more.pareto()])
    w.model_dropdown.value = "llama3-70b"
    assert w.result.model.name == "llama3-70b" and "llama3-70b" in w.figure.layout.title.text
    w.efficiency_slider.value = 0.25
    assert w.result.efficiency == 0.25


def test_the_state_builds_the_planners_inputs_once_and_the_widget_trusts_them(monkeypatch):
    s = PlannerState("llama3-8b", 1, 8, "h100", 64, 4096, 0.5, 40)
    assert s.inputs == PlannerInputs("llama3-8b", ClusterSpec(1, 8), 64, 4096, 0.5, 40e9)
    assert s.inputs.budget == 40e9 and s.cluster is s.inputs.cluster
    checks = []
    original = PlannerInputs._check

    def counted(self):
        checks.append(self)
        return original(self)

    monkeypatch.setattr(PlannerInputs, "_check", counted)
    _plan_once.cache_clear()  # planned here, from the state's inputs, not kept from another test
    w = PlannerWidget("llama3-8b", nodes=1, gpus_per_node=8, global_batch=64, seq=4096)
    assert len(checks) == 2  # the constructor's state, then the controls read once
    w.nodes_slider.value = 2
    assert len(checks) == 3 and w.result.cluster is w.state.inputs.cluster  # plan: no check


def test_widget_shows_errors_in_one_line_instead_of_a_traceback():
    w = PlannerWidget("llama3-8b", nodes=1, gpus_per_node=8, global_batch=64, seq=4096)
    w.budget_box.value = 5  # GB per GPU: nothing fits
    with pytest.raises(ValueError) as err:
        plan("llama3-8b", ClusterSpec(1, 8, "h100"), 64, 4096, memory_budget=5e9)
    line = str(err.value)
    assert "memory_budget=" in line and "\n" not in line
    assert line in w.status.value and w.error == line
    assert w.result is None and w.figure is None and w.table_html.value == ""
    assert w.state.memory_budget_gb == 5
    w.budget_box.value = -1  # a bad control: the config's message, and the last valid state kept
    with pytest.raises(ValueError) as bad:
        replace(w.state, memory_budget_gb=-1.0)
    assert html.escape(str(bad.value), quote=False) in w.status.value
    assert "memory_budget_gb=-1.0 is not valid" in w.status.value and "last valid" in w.status.value
    assert w.state.memory_budget_gb == 5
    w.budget_box.value = 0  # the GPU's memory again
    assert w.error is None and w.result.memory_budget == 80e9 and "feasible of" in w.status.value
    start = PlannerWidget("llama3-8b", nodes=1, global_batch=64, memory_budget_gb=2)
    assert start.result is None and "no configuration fits" in start.status.value
