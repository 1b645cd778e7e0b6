"""The failure lab's cases on real ranks: each is diagnosed with its kind and its culprit, at rank
0, at a middle rank and at the last rank; a hung job ends within its timeout plus 2 s, and the
same cluster runs a normal job correctly after every failure, with no process of the old
workers left behind."""

import inspect
import time

import pytest
from helpers import child_pids

from edu_parallel import Cluster, EngineError, debugging
from edu_parallel.core.diagnosis import Diagnosis, Op, RankState
from edu_parallel.core.i18n import language
from edu_parallel.debugging import case_jobs
from edu_parallel.debugging.case_jobs import JOBS
from edu_parallel.debugging.cases import (
    CASES,
    EXPECTED,
    check_case,
    collective_waits,
    last_to_enter,
    normal,
    normal_result,
    partner_of,
    provoke,
)

pytestmark = pytest.mark.multiprocess

N, TIMEOUT = 4, 1.0
# what the learner reads about the culprit c (p: the deadlock's partner), in English
NAMED = {
    "killed": "rank {c} died (killed by SIGKILL)",
    "skips_collective": "rank {c} never entered all_reduce #3 (group world)",
    "sleeps": "rank {c} is idle",
    "stopped": "rank {c} is stopped (SIGSTOP or frozen)",
    "mismatched_collectives": "rank {c} called all_gather",
    "mismatched_sizes": "rank {c} called all_reduce #3 (group world) with 32 float32 elements",
    "deadlock": "rank {c} waits in recv #1 from rank {p}",
    "straggler": "rank {c} entered 4 of the 4 collectives last",
    "timeout_too_short": "rank {c} is still working",
}
# where the culprit is, from its heartbeat: the function of the job and its source line
LINE = {
    "sleeps": (case_jobs.sleeps, "time.sleep(seconds)"),
    "timeout_too_short": (case_jobs.compute_for, "a = torch.tanh(a @ a)"),
}


def _line(fn, source: str) -> str:
    """``edu_parallel/debugging/case_jobs.py:119 in sleeps: time.sleep(seconds)``."""
    lines, first = inspect.getsourcelines(fn)
    n = first + next(i for i, text in enumerate(lines) if text.strip() == source)
    return f"edu_parallel/debugging/case_jobs.py:{n} in {fn.__name__}: {source}"


@pytest.fixture(scope="module")
def lab():
    with Cluster(N, timeout=TIMEOUT) as c:
        yield c


def _runs():
    """Every case with its culprit at rank 0, the last rank, and a middle one (1 or 2, by turns)."""
    for i, case in enumerate(CASES):
        for culprit in (0, 1 + i % 2, N - 1):
            yield pytest.param(case, culprit, id=f"{case}-{culprit}")


@pytest.mark.parametrize(("case", "culprit"), list(_runs()))
def test_each_case_names_its_kind_and_culprit_and_the_cluster_goes_on(lab, case, culprit):
    old = set(lab.pids) if lab.alive else set()
    t0 = time.perf_counter()
    p = provoke(lab, case, culprit)
    wall = time.perf_counter() - t0
    d = p.diagnosis
    assert (p.case, p.culprit, p.world_size, p.timeout_s) == (case, culprit, N, TIMEOUT)
    assert d.kind == EXPECTED[case], p.message
    partner = partner_of(culprit, N)
    if case == "deadlock":
        assert culprit in d.culprits and {culprit, partner} in [set(c) for c in d.cycles]
    else:
        assert d.culprits == (culprit,), p.message
    assert NAMED[case].format(c=culprit, p=partner) in p.message
    if case in LINE:
        assert _line(*LINE[case]) in p.message
    assert p.failed == (case != "straggler")
    assert p.elapsed_s <= TIMEOUT + 2.0 and wall <= TIMEOUT + 3.0  # + a restart of the workers
    if p.failed:  # the old workers are gone, the stopped one too: none left behind
        assert not lab.alive and old and not old & set(child_pids())
    assert lab.run(normal).results == [normal_result(N)] * N


def test_the_hung_cases_wait_their_timeout_and_the_others_fail_at_once(lab):
    hung = provoke(lab, "skips_collective", 2)
    died = provoke(lab, "killed", 2)
    assert TIMEOUT <= hung.elapsed_s <= TIMEOUT + 2.0
    assert died.elapsed_s < TIMEOUT / 2
    assert died.restarts == hung.restarts + 1  # the run after the hang restarted the workers


def test_a_skipped_collective_is_named_in_english_and_in_chinese(lab):
    with language("en"):
        en = provoke(lab, "skips_collective", 1).message
    with language("zh"):
        zh = provoke(lab, "skips_collective", 1).message
        slow = provoke(lab, "straggler", 1).message
    assert "rank 1 never entered all_reduce #3 (group world)" in en
    assert "rank 1 finished the job after all_reduce #2" in en
    assert "rank 1 从未进入 all_reduce #3" in zh and "never" not in zh
    assert "rank 1" in slow and "entered" not in slow and "不" in slow


@pytest.mark.parametrize(
    ("case", "culprit", "world_size", "match"),
    [
        ("nope", None, 4, r"^case='nope' is not valid: expected one of 'killed', "),
        ("killed", 4, 4, r"^culprit=4 is not valid: expected an integer in \[0, 3\]$"),
        ("killed", -1, 4, r"^culprit=-1 is not valid"),
        ("sleeps", "1", 4, r"^culprit='1' is not valid"),
        ("deadlock", None, 1, r"^world_size=1 is not valid: expected at least 2 ranks"),
        ("mismatched_sizes", 0, 2, r"^world_size=2 .*at least 3 ranks for case 'mismatched_s"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_option(case, culprit, world_size, match):
    with pytest.raises(ValueError, match=match) as info:
        check_case(case, culprit, world_size)
    assert "\n" not in str(info.value)


def test_check_case_defaults_the_culprit_to_the_last_rank_and_provoke_checks_first(lab):
    assert check_case("deadlock", None, 4) == ("deadlock", 3)
    assert check_case("deadlock", 0, 2) == ("deadlock", 0)
    jobs = lab._job_id
    with pytest.raises(ValueError, match=r"^timeout=0 is not valid"):
        provoke(lab, "killed", timeout=0)
    with pytest.raises(ValueError, match=r"^culprit=9 is not valid"):
        provoke(lab, "killed", 9)
    assert lab._job_id == jobs  # refused before any job reached the ranks


def test_a_case_that_does_not_fail_raises_a_clear_error(lab, monkeypatch):
    assert debugging.provoke is provoke and debugging.CASES == CASES  # the package's lazy names
    monkeypatch.setitem(JOBS, "killed", JOBS["straggler"])  # a job that finishes, 0 s late
    with pytest.raises(EngineError, match=r"^case 'killed' with rank 3 at fault did not fail"):
        provoke(lab, "killed")
    assert lab.alive and lab.run(normal).results == [normal_result(N)] * N


def _op(seq: int, entered: float) -> Op:
    return Op("collective", "all_reduce", seq, "float32", 16, (0, 1, 2), entered=entered)


def test_last_to_enter_blames_the_rank_the_others_waited_for_longest():
    entered = {  # rank 1 is last at #1 (0.5 s late) and #3 (0.25 s); rank 2 at #2 (0.125 s)
        0: (10.0, 11.0, 12.0),
        1: (10.5, 11.0, 12.25),
        2: (10.25, 11.125, 12.0),
    }
    ranks = tuple(
        RankState(r, "finished", ops=tuple(_op(k + 1, t) for k, t in enumerate(times)))
        for r, times in entered.items()
    )
    d = Diagnosis("missing", (), ranks)
    waits = collective_waits(d)
    assert [(w.op.seq, w.last, w.waited_s) for w in waits] == [
        (1, 1, 0.5),
        (2, 2, 0.125),
        (3, 1, 0.25),
    ]
    assert last_to_enter(d) == 1
    partial = Diagnosis("missing", (), (ranks[0], RankState(1, "finished"), ranks[2]))
    assert collective_waits(partial) == ()  # rank 1 kept no entry: no collective to judge
    with pytest.raises(ValueError, match="no collective that every rank entered"):
        last_to_enter(partial)


def test_a_stopped_rank_leaves_no_process_after_close():
    before = set(child_pids())
    with Cluster(2, timeout=TIMEOUT) as c:
        stopped = provoke(c, "stopped", 0)
        assert stopped.diagnosis.culprits == (0,)
        assert c.run(normal).results == [normal_result(2)] * 2
        assert provoke(c, "sleeps").diagnosis.culprits == (1,)
    assert set(child_pids()) - before == set()
