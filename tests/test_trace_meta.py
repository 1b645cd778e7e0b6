"""The trace's ``meta`` schema and its vocabulary: every runner writes known keys of known types,
and a trace with an unknown or mistyped key is refused when it is saved or loaded."""

from __future__ import annotations

import json

import pytest

from edu_parallel.comm import run_allreduce, run_collective, run_hierarchical
from edu_parallel.core.schema import CATEGORIES, KINDS, MARKS, META, meta_problems
from edu_parallel.core.trace import Event, Trace
from edu_parallel.expert_parallel import run_moe
from edu_parallel.models import cost_model, retime, simulate
from edu_parallel.pipeline_parallel import build_schedule, run_pipeline, time_schedule
from edu_parallel.plans import ring_allreduce_plan
from edu_parallel.strategy_map import run_strategy_map
from edu_parallel.tensor_parallel import run_tp
from edu_parallel.zero import run_zero


def test_every_key_says_its_types_writers_and_meaning() -> None:
    assert len(META) >= 40
    for key, spec in META.items():
        assert spec.types and all(isinstance(t, type) for t in spec.types), key
        assert spec.writers.strip() and spec.doc.strip(), key
    assert len(set(KINDS)) == len(KINDS) == 6
    assert len(set(MARKS)) == len(MARKS) and len(set(CATEGORIES)) == len(CATEGORIES)


def test_unknown_and_mistyped_keys_are_named_on_save_and_load(tmp_path) -> None:
    good = Trace(meta={"world_size": 2, "concept": "demo", "capacity_factor": 1})
    assert Trace.from_json(good.to_json()).meta == good.meta  # an int is a valid float
    bad = Trace(meta={"world_size": "2", "colour": "red", "reshard_after_forward": "yes"})
    problems = meta_problems(bad.meta)
    assert len(problems) == 3
    with pytest.raises(ValueError) as err:
        bad.save(tmp_path / "bad.json")
    text = str(err.value)
    assert "meta['world_size']='2' is not valid: expected int" in text
    assert "meta key 'colour' is not in the trace schema" in text
    assert "meta['reshard_after_forward']='yes' is not valid: expected bool or NoneType" in text
    assert not (tmp_path / "bad.json").exists()
    raw = {"format": "edu-parallel-trace", "version": 1, "meta": {"stage": True}, "events": []}
    (tmp_path / "raw.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="meta\\['stage'\\]=True is not valid: expected int"):
        Trace.load(tmp_path / "raw.json")


def test_events_are_built_with_keywords_only() -> None:
    assert Event(kind="send", rank=0, peer=1).peer == 1
    with pytest.raises(TypeError):
        Event("send", 0)  # type: ignore[misc]


def round_trips(trace: Trace) -> Trace:
    again = Trace.from_json(trace.to_json())
    assert again.meta == json.loads(json.dumps(trace.meta))
    assert not meta_problems(trace.meta)
    return again


def test_models_write_schema_keys() -> None:
    trace, _ = simulate(ring_allreduce_plan(4), 64, "int64", pattern="powers_of_two")
    round_trips(trace)
    round_trips(retime(trace, cost_model("nvlink4-h100")))
    round_trips(time_schedule(build_schedule("zb-h1", 2, 4), 1.0, 2.0, 1.0).to_trace())


@pytest.mark.multiprocess
def test_every_runner_writes_schema_keys(cluster2) -> None:
    """One small run of every runner on two ranks: its trace saves and loads unchanged."""
    reports = {
        "allreduce": run_allreduce(cluster2, 256, "int64"),
        "collective": run_collective(cluster2, "broadcast", 256, "int64", root=1),
        "hierarchical": run_hierarchical(cluster2, 2, 256, "int64"),
        "zero": run_zero(cluster2, 2, steps=1),
        "tp": run_tp(cluster2, "mlp"),
        "moe": run_moe(cluster2, experts=2, tokens=4),
        "pipeline": run_pipeline(cluster2, "1f1b", 2, 2),
    }
    for name, report in reports.items():
        again = round_trips(report.trace)
        assert again.meta["world_size"] == 2 and again.meta["concept"], name
        assert again.meta["source"] == "cluster" and again.meta["backend"] == "gloo", name
    for run in run_strategy_map(cluster2, ["dp", "ep"]).runs.values():
        assert round_trips(run.trace).meta["strategy"] == run.strategy
