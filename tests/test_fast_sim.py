"""Columnar plans and the fast simulation (plan_arrays.py, fast_sim.py) against the event path."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from edu_parallel.models.fast_simulation import SimSummary, chunk_bytes_for, simulate_fast
from edu_parallel.models.retiming import CostModel, cost_model, retime, ring_allreduce_time
from edu_parallel.models.simulation import simulate
from edu_parallel.models.topology import LINKS, Link
from edu_parallel.plans.arrays import (
    OP_COPY,
    OP_REDUCE,
    PlanArrays,
    naive_allreduce_arrays,
    ring_allreduce_arrays,
)
from edu_parallel.plans.naive import naive_allreduce_plan
from edu_parallel.plans.plan import Plan, Step, Transfer
from edu_parallel.plans.ring import ring_allreduce_plan

LINK = Link("test", alpha_s=1e-6, bandwidth_Bps=1e9)
MODELS = [CostModel(LINK), CostModel(LINK, reduce_Bps=4e9), cost_model("nvlink4-h100", 2e12)]
PLANS = {"ring": ring_allreduce_plan, "naive": naive_allreduce_plan}


def random_plan(rng: random.Random, n: int, chunks: int, steps: int) -> Plan:
    """Any transfers at all: fan-in, fan-out, self-sends, moved chunks, empty steps."""
    out = []
    for _ in range(steps):
        transfers = tuple(
            Transfer(
                rng.randrange(n),
                rng.randrange(n),
                rng.randrange(chunks),
                rng.choice(["reduce", "copy"]),
                rng.choice([None, rng.randrange(chunks)]),
            )
            for _ in range(rng.randint(0, 2 * n))
        )
        out.append(Step(rng.choice(["one", "two", "three"]), transfers))
    return Plan("random", "all_reduce", n, chunks, tuple(out))


def assert_same_counts(summary: SimSummary, plan: Plan, nbytes: int, dtype: str = "float32"):
    trace = simulate(plan, nbytes, dtype, with_data=False)[0]
    assert summary.sent_bytes() == trace.sent_bytes()
    assert summary.recv_bytes() == trace.recv_bytes()
    assert summary.sent_bytes(per_phase=True) == trace.sent_bytes(per_phase=True)
    assert summary.recv_bytes(per_phase=True) == trace.recv_bytes(per_phase=True)
    assert list(summary.sent_bytes(per_phase=True)) == trace.phases()  # same order too
    assert summary.steps_per_phase() == trace.steps_per_phase()
    assert summary.message_counts() == trace.message_counts()
    assert summary.nbytes == trace.meta["nbytes"]
    assert summary.chunk_bytes.tolist() == trace.meta["chunk_bytes"]
    return trace


def event_finish(trace, n: int) -> list[float]:
    return [max((e.end for e in trace.events if e.rank == r), default=0.0) for r in range(n)]


# ------------------------------------------------------------------ columns
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 13, 16, 31, 64])
def test_generators_equal_the_object_plans(n: int) -> None:
    assert ring_allreduce_arrays(n).equals(PlanArrays.from_plan(ring_allreduce_plan(n)))
    for root in {0, n // 2, n - 1}:
        want = PlanArrays.from_plan(naive_allreduce_plan(n, root))
        assert naive_allreduce_arrays(n, root).equals(want)
    assert ring_allreduce_arrays(n).to_plan() == ring_allreduce_plan(n)
    assert naive_allreduce_arrays(n, n - 1).to_plan() == naive_allreduce_plan(n, n - 1)


def test_ring_columns_by_hand() -> None:
    pa = ring_allreduce_arrays(3)
    assert pa.phases == ("reduce-scatter",) * 2 + ("all-gather",) * 2
    assert pa.step.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert pa.src.tolist() == [0, 1, 2] * 4
    assert pa.dst.tolist() == [1, 2, 0] * 4
    assert pa.chunk.tolist() == [0, 1, 2, 2, 0, 1, 1, 2, 0, 0, 1, 2]
    assert pa.op.tolist() == [OP_REDUCE] * 6 + [OP_COPY] * 6
    assert pa.step_offsets().tolist() == [0, 3, 6, 9, 12]


@pytest.mark.parametrize("seed", range(40))
def test_round_trip_is_exact_for_any_plan(seed: int) -> None:
    rng = random.Random(seed)
    plan = random_plan(rng, rng.randint(1, 6), rng.randint(1, 4), rng.randint(0, 5))
    pa = PlanArrays.from_plan(plan)
    assert pa.to_plan() == plan  # including dst_chunk=None vs an explicit dst_chunk
    assert PlanArrays.from_plan(pa.to_plan()).equals(pa)
    assert pa.num_steps == len(plan.steps)
    assert pa.num_rows == sum(len(s.transfers) for s in plan.steps)


def test_explicit_dst_chunk_equal_to_chunk_survives() -> None:
    plan = Plan("p", "all_to_all", 2, 2, (Step("x", (Transfer(0, 1, 1, "copy", 1),)),))
    pa = PlanArrays.from_plan(plan)
    assert pa.dst_chunk_given is not None and pa.to_plan() == plan
    assert PlanArrays.from_plan(ring_allreduce_plan(4)).dst_chunk_given is None


def test_columns_are_read_only_and_checked() -> None:
    pa = ring_allreduce_arrays(4)
    with pytest.raises(ValueError):
        pa.src[0] = 3
    mine = np.array([0, 1])
    PlanArrays("p", "all_reduce", 2, 1, ("x",), [0, 0], mine, [1, 0], [0, 0], [0, 0], [0, 0])
    assert mine.flags.writeable  # the caller's array is left alone
    with pytest.raises(ValueError, match="dst"):
        PlanArrays("p", "all_reduce", 2, 1, ("x",), [0], [0], [2], [0], [0], [0])
    with pytest.raises(ValueError, match="sorted"):
        PlanArrays(
            "p", "all_reduce", 2, 1, ("x", "y"), [1, 0], [0, 1], [1, 0], [0, 0], [0, 0], [0, 0]
        )
    with pytest.raises(ValueError, match="op"):
        PlanArrays.from_plan(
            Plan("p", "all_reduce", 2, 1, (Step("x", (Transfer(0, 1, 0, "max"),)),))
        )


# ------------------------------------------------------------------ bytes, steps, messages
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("kind", PLANS)
@pytest.mark.parametrize(
    "nbytes", [4096, 4000 * 7 + 12, 4]
)  # even, uneven, fewer elements than chunks
def test_counts_equal_the_event_path(kind: str, n: int, nbytes: int) -> None:
    plan = PLANS[kind](n)
    assert_same_counts(simulate_fast(plan, nbytes), plan, nbytes)
    arrays = ring_allreduce_arrays(n) if kind == "ring" else naive_allreduce_arrays(n)
    assert (
        simulate_fast(arrays, nbytes).to_json_dict() == simulate_fast(plan, nbytes).to_json_dict()
    )


@pytest.mark.parametrize("dtype", ["float64", "float16", "int32"])
def test_counts_for_other_dtypes(dtype: str) -> None:
    plan = ring_allreduce_plan(5)
    assert_same_counts(simulate_fast(plan, 1003, dtype), plan, 1003, dtype)


def test_chunk_bytes_like_simulate() -> None:
    assert chunk_bytes_for(3, 40).tolist() == [16, 12, 12]  # 10 float32 elements: 4, 3, 3
    assert chunk_bytes_for(4, 4).tolist() == [4, 0, 0, 0]


# ------------------------------------------------------------------ modelled time
@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("kind", PLANS)
@pytest.mark.parametrize("nbytes", [4096 * 16, 4000 * 7 + 12])  # even and uneven chunks
@pytest.mark.parametrize("model", MODELS, ids=["link", "link+reduce", "nvlink"])
def test_time_equals_retime_exactly(kind: str, n: int, nbytes: int, model: CostModel) -> None:
    plan = PLANS[kind](n)
    summary = simulate_fast(plan, nbytes, model=model)
    retimed = retime(simulate(plan, nbytes, with_data=False)[0], model)
    assert summary.timed_by == "columns"
    assert summary.time_s == retimed.duration  # bit for bit, not approx
    assert summary.finish_s.tolist() == event_finish(retimed, n)


@pytest.mark.parametrize("seed", range(60))
def test_time_equals_retime_on_random_plans(seed: int) -> None:
    """Ports shared inside a step (fan-in, fan-out, both), several reduces per rank, self-sends."""
    rng = random.Random(seed)
    n, chunks = rng.randint(2, 7), rng.randint(1, 4)
    plan = random_plan(rng, n, chunks, rng.randint(1, 6))
    nbytes = rng.choice([4 * chunks, 4 * 7 * chunks + 8, 1000])
    model = CostModel(Link("x", rng.choice([0.0, 1e-6]), 1e9), rng.choice([None, 4e9, 7e9]))
    summary = simulate_fast(plan, nbytes, model=model)
    retimed = retime(assert_same_counts(summary, plan, nbytes), model)
    assert summary.timed_by == "columns"
    assert summary.time_s == retimed.duration
    assert summary.finish_s.tolist() == event_finish(retimed, n)


@pytest.mark.parametrize("kind", PLANS)
@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_time_with_a_topology_equals_retime(kind: str, nodes: int) -> None:
    from edu_parallel.models.topology import Topology

    topo = Topology.split(8, nodes, LINKS["nvlink4-h100"], LINKS["ib-ndr-400"])
    model = cost_model(topo, reduce_Bps=2e12)
    plan, nbytes = PLANS[kind](8), 4000 * 7 + 12
    summary = simulate_fast(plan, nbytes, model=model)
    retimed = retime(simulate(plan, nbytes, with_data=False)[0], model)
    assert summary.time_s == retimed.duration
    assert summary.finish_s.tolist() == event_finish(retimed, 8)
    assert summary.cost_model["topology"]["nodes"] == nodes
    with pytest.raises(ValueError, match="world_size"):
        simulate_fast(ring_allreduce_arrays(6), nbytes, model=model)


def test_zero_time_messages_use_the_event_path() -> None:
    """alpha = 0 and empty chunks: retime orders same-instant events by creation; so do we."""
    plan = Plan.from_text(
        "plan z all_reduce n=6 chunks=2\n"
        "a | 5>2:c1>c1+\n"
        "c | 3>4:c1+ 4>1:c1= 4>5:c1>c1= 0>3:c0>c0= 0>3:c0+ 2>3:c0>c0+ 2>1:c0= 5>0:c0+ 1>4:c1>c0="
    )
    model = CostModel(Link("free", 0.0, 1e9))
    summary = simulate_fast(plan, 4, model=model)  # one float32: chunk 1 is empty
    retimed = retime(simulate(plan, 4, with_data=False)[0], model)
    assert summary.timed_by == "events"
    assert summary.time_s == retimed.duration
    assert summary.finish_s.tolist() == event_finish(retimed, 6)


def test_ring_time_matches_the_formula() -> None:
    model = cost_model("nvlink4-h100")
    summary = simulate_fast(ring_allreduce_arrays(64), 64 * 4096, model=model)
    assert summary.time_s == pytest.approx(ring_allreduce_time(64, 64 * 4096, model), rel=1e-12)


def test_no_model_no_time_and_one_rank() -> None:
    summary = simulate_fast(ring_allreduce_arrays(8), 4096)
    assert summary.time_s is None and summary.finish_s is None and summary.timed_by is None
    one = simulate_fast(ring_allreduce_arrays(1), 4096, model=MODELS[0])
    assert one.time_s == 0.0 and one.sent_bytes() == [0] and one.steps_per_phase() == {}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="nbytes"):
        simulate_fast(ring_allreduce_arrays(2), 0)
    with pytest.raises(ValueError, match="dtype"):
        simulate_fast(ring_allreduce_arrays(2), 8, dtype="float7")
    with pytest.raises(ValueError, match="model"):
        simulate_fast(ring_allreduce_arrays(2), 8, model=LINKS["nvlink4-h100"])
    with pytest.raises(ValueError, match="plan_or_arrays"):
        simulate_fast("ring", 8)


# ------------------------------------------------------------------ 1024 ranks
def test_1024_rank_ring() -> None:
    n, nbytes = 1024, 1024**3
    summary = simulate_fast(ring_allreduce_arrays(n), nbytes, model=cost_model("nvlink4-h100"))
    want = 2 * (n - 1) / n * nbytes
    chunk = int(summary.chunk_bytes.max())
    assert np.all(np.abs(summary.sent - want) <= chunk)
    assert np.all(np.abs(summary.recv - want) <= chunk)
    assert summary.steps_per_phase() == {"reduce-scatter": n - 1, "all-gather": n - 1}
    assert sum(summary.steps_per_phase().values()) == 2 * (n - 1)
    assert summary.message_counts() == [2 * (n - 1)] * n
    for per_phase in summary.sent_by_phase.values():
        assert np.all(np.abs(per_phase - want / 2) <= chunk)
    formula = ring_allreduce_time(n, nbytes, cost_model("nvlink4-h100"))
    assert summary.time_s == pytest.approx(formula, rel=1e-9)
    encoded = json.loads(json.dumps(summary.to_json_dict()))
    assert encoded["world_size"] == n and len(encoded["sent_bytes"]) == n
    assert encoded["time_s"] == summary.time_s and encoded["timed_by"] == "columns"
