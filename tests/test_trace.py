import json

import pytest

from edu_parallel.core.trace import Event, Trace
from edu_parallel.models.simulation import simulate
from edu_parallel.plans.ring import ring_allreduce_plan


@pytest.fixture
def trace():
    return simulate(ring_allreduce_plan(3), 36, "float32", pattern="powers_of_two")[0]


def test_json_round_trip(trace, tmp_path):
    again = Trace.from_json(trace.to_json())
    assert again == trace
    path = trace.save(tmp_path / "t.json")
    assert Trace.load(path) == trace
    with pytest.raises(ValueError, match="format="):
        Trace.from_dict({"format": "other"})


def test_chrome_trace_has_one_track_per_rank_and_flows(trace, tmp_path):
    data = json.loads(trace.save_chrome_trace(tmp_path / "c.json").read_text())
    events = data["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert names == {0: "rank 0", 1: "rank 1", 2: "rank 2"}
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(trace.events)
    assert all(e["dur"] >= 0 and "ts" in e for e in complete)
    starts = [e for e in events if e["ph"] == "s"]
    finishes = [e for e in events if e["ph"] == "f"]
    assert len(starts) == len(finishes) == len(trace.select("send"))


def test_lines_and_summaries(trace):
    lines = trace.lines()
    assert len(lines) == len(trace.events)
    assert any(line.startswith("r0 s0 reduce-scatter") and "send ->r1 c0" in line for line in lines)
    assert trace.sent_bytes(per_phase=True) == {
        "reduce-scatter": [24, 24, 24],
        "all-gather": [24, 24, 24],
    }
    assert trace.recv_bytes() == [48, 48, 48]
    assert trace.steps_per_phase() == {"reduce-scatter": 2, "all-gather": 2}
    assert trace.message_counts() == [4, 4, 4]
    assert trace.phases() == ["reduce-scatter", "all-gather"]


def test_matching_detects_a_lost_message(trace):
    pairs = trace.matched_transfers()
    assert len(pairs) == 12
    assert all(s.peer == r.rank and r.peer == s.rank and s.tag == r.tag for s, r in pairs)
    lossy = Trace(
        trace.meta,
        [e for e in trace.events if not (e.kind == "recv" and e.rank == 2 and e.step == 1)],
    )
    with pytest.raises(ValueError, match="unmatched messages r1->r2"):
        lossy.matched_transfers()


def test_event_line_and_dict():
    e = Event(
        kind="recv",
        rank=1,
        op="reduce",
        peer=0,
        step=2,
        phase="reduce-scatter",
        chunk=3,
        nbytes=256,
        start=0.5,
        end=0.75,
        tag=11,
    )
    assert e.line() == "r1 s2 reduce-scatter  recv <-r0 (reduce) c3 256 B  [0.500000, 0.750000]"
    assert Event.from_dict(e.to_dict()) == e
    assert e.duration == 0.25
