"""The diagnosis of a failed job, from flight records built by hand (no processes): each kind,
its culprit and its text; and the flight record's layout, written by a rank and read back."""

from __future__ import annotations

import time

import pytest

from edu_parallel.core.diagnosis import Op, RankRecord, diagnose
from edu_parallel.core.diagnosis_text import explain, ranks_label
from edu_parallel.engine.flight import FLIGHT_BYTES, FlightRecorder, read_record

NOW = 1000.0
WORLD = (0, 1, 2, 3)


def ar(seq: int, numel: int = 4, done: bool = True, name: str = "all_reduce") -> Op:
    return Op(
        "collective", name, seq, "float32", numel, WORLD, entered=NOW - 5, done=NOW if done else 0
    )


def rank(r: int, n_ops: int, waiting: bool, **kw) -> RankRecord:
    """Rank ``r`` completed ``n_ops`` all-reduces of the world, and waits in the next one."""
    ops = [ar(k) for k in range(1, n_ops + 1)]
    blocked = None
    if waiting:
        blocked = ar(n_ops + 1, done=False)
        ops.append(blocked)
    entered = {WORLD: len(ops)}
    fields = dict(beat=NOW - 0.05, sends=(0,) * 4, recvs=(0,) * 4)
    fields.update(kw)
    return RankRecord(r, tuple(ops), blocked, entered, **fields)


@pytest.mark.parametrize("culprit", [0, 2, 3])
def test_a_rank_that_never_enters_is_missing_and_named_with_the_line_it_is_at(culprit):
    records = [
        rank(r, 6, r != culprit, line="job.py:12 in f", source="time.sleep(60)", busy=0.01)
        for r in range(4)
    ]
    d = diagnose(records, NOW)
    assert (d.kind, d.culprits) == ("missing", (culprit,))
    assert d.op is not None and (d.op.name, d.op.seq) == ("all_reduce", 7)
    others = [r for r in range(4) if r != culprit]
    assert d.ranks[culprit].state == "idle" and all(d.ranks[r].state == "waiting" for r in others)
    text = explain(d)
    assert f"rank {culprit} never entered all_reduce #7 (group world)" in text
    assert f"{ranks_label(others)} have waited for 5.0 s" in text
    assert "job.py:12 in f: time.sleep(60)" in text


def test_a_rank_that_finished_early_is_missing_and_said_to_have_finished():
    records = [rank(r, 6, r != 3) for r in range(4)]
    d = diagnose(records, NOW, finished=frozenset({3}))
    assert (d.kind, d.culprits) == ("missing", (3,))
    assert "rank 3 finished the job after all_reduce #6 (group world)" in explain(d)


def test_a_busy_rank_is_slow_not_missing_and_the_timeout_is_named():
    records = [
        rank(r, 2, r != 1, busy=0.97 if r == 1 else 0.02, line="job.py:20 in f") for r in range(4)
    ]
    d = diagnose(records, NOW, timeout_s=2)
    assert (d.kind, d.culprits) == ("slow", (1,))
    text = explain(d)
    assert "rank 1 is still working (97% of a core) at job.py:20 in f" in text
    assert "the timeout (2 s) is shorter than its work" in text


def test_a_silent_or_stopped_rank_is_stopped_before_anything_else():
    silent = [rank(r, 1, r != 2, beat=NOW - (3.0 if r == 2 else 0.05)) for r in range(4)]
    d = diagnose(silent, NOW)
    assert (d.kind, d.culprits) == ("stopped", (2,))
    assert "rank 2 is stopped (SIGSTOP or frozen): no heartbeat for 3.0 s" in explain(d)
    reported = [rank(r, 1, r != 0) for r in range(4)]  # the system says it, heartbeat fresh
    assert diagnose(reported, NOW, stopped=frozenset({0})).culprits == (0,)


def test_a_dead_rank_is_named_with_its_exit_and_the_ranks_left_waiting():
    records = [rank(r, 2, r != 1) for r in range(4)]
    d = diagnose(records, NOW, dead={1: -9})
    assert (d.kind, d.culprits) == ("dead", (1,))
    text = explain(d)
    assert "rank 1 died (killed by SIGKILL) after all_reduce #2 (group world)" in text
    assert "ranks 0, 2, 3 have waited in all_reduce #3 (group world) for 5.0 s" in text


@pytest.mark.parametrize(
    ("theirs", "said"),
    [
        (ar(3, numel=8, done=False), "rank 2 called all_reduce #3 (group world) with 8 float32"),
        (ar(3, name="all_gather_single", done=False), "rank 2 called all_gather_single #3"),
    ],
)
def test_a_mismatched_collective_names_both_sides(theirs, said):
    records = [rank(r, 2, True) for r in range(4)]
    bad = records[2]
    records[2] = RankRecord(2, (*bad.ops[:-1], theirs), theirs, bad.entered, bad.sends, bad.recvs)
    d = diagnose(records, NOW, dead={2: -6})  # a mismatch explains an abort: it comes first
    assert (d.kind, d.culprits) == ("mismatch", (2,))
    assert [ranks for ranks, _op in d.sides] == [(0, 1, 3), (2,)]
    text = explain(d)
    assert "ranks 0, 1, 3 called all_reduce #3 (group world) with 4 float32 elements" in text
    assert said in text


def test_an_all_to_all_may_differ_in_size_by_rank():
    sizes = [Op("collective", "all_to_all_single", 1, "float32", 4 + r, WORLD) for r in range(4)]
    records = [RankRecord(r, (sizes[r],), None, {WORLD: 1}) for r in range(4)]
    assert diagnose(records, NOW).kind != "mismatch"


def recv_from(r: int, peer: int) -> RankRecord:
    op = Op("recv", "recv", 1, "float32", 4, (), peer, entered=NOW - 2)
    recvs = tuple(1 if q == peer else 0 for q in range(4))
    return RankRecord(r, (op,), op, {}, (0,) * 4, recvs, beat=NOW)


def test_receives_in_a_cycle_are_a_deadlock_with_every_cycle_named():
    d = diagnose([recv_from(r, r ^ 1) for r in range(4)], NOW)
    assert (d.kind, d.culprits, d.cycles) == ("deadlock", (0, 1, 2, 3), ((0, 1), (2, 3)))
    text = explain(d)
    assert "rank 0 waits in recv #1 from rank 1, rank 1 waits in recv #1 from rank 0" in text
    ring = diagnose([recv_from(r, (r - 1) % 4) for r in range(4)], NOW)
    assert ring.cycles == ((0, 3, 2, 1),)


def test_a_receive_whose_sender_already_sent_waits_for_nobody():
    waiting = recv_from(0, 1)
    sender = RankRecord(1, (), None, {}, (1, 0, 0, 0), (0,) * 4, beat=NOW, busy=0.9)
    d = diagnose([waiting, sender, rank(2, 0, False), rank(3, 0, False)], NOW)
    assert d.ranks[0].waits_for == ()  # the message is on its way: not rank 1's fault
    assert d.ranks[1].state == "working" and d.kind != "deadlock"


def test_ranks_label_writes_runs_as_ranges():
    assert ranks_label([3]) == "rank 3"
    assert ranks_label([0, 1, 2, 5, 7, 8]) == "ranks 0–2, 5, 7, 8"


def test_the_flight_record_reads_back_what_a_rank_wrote():
    buf = bytearray(FLIGHT_BYTES * 2)
    rec = FlightRecorder(buf, 1, 2)
    rec.reset(7)
    first = rec.collective("all_reduce", None, "float32", 16)
    rec.done(first)
    sub = rec.collective("all_gather_single", (1,), "bfloat16", 8)
    rec.block(sub)
    rec.p2p("send", 0, 3, "float32", 4)
    back = read_record(buf, 1, 2)
    assert [(o.name, o.seq, o.group, o.numel) for o in back.ops] == [
        ("all_reduce", 1, (0, 1), 16),
        ("all_gather_single", 1, (1,), 8),
        ("send", 1, (), 4),
    ]
    assert back.ops[0].done > 0 and back.blocked == back.ops[1] and not back.blocked.done
    assert back.entered == {(0, 1): 1, (1,): 1} and back.sends == (1, 0) and back.recvs == (0, 0)
    thread = rec.start_heartbeat()
    time.sleep(0.25)
    beat = read_record(buf, 1, 2)
    assert thread.is_alive() and beat.beat > time.time() - 1
    assert beat.line.startswith(f"{__file__}:") and "time.sleep(0.25)" in beat.source
