"""Lesson 16's rank × time strip (``viz/hang.py``), drawn from findings built by hand (no
processes): each row a rank, each flight-recorded operation a span, the one still waiting ending
at the reading, the culprits' rows shaded and labelled with their state, the finding in the title.

Four ranks, all-reduces of the world group entered at t0 + 1 s apart (#1 at t0 + 0, #2 at t0 + 1,
#3 at t0 + 2), each done 0.2 s after it was entered; the reading is at t0 + 7 s."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from edu_parallel.core.diagnosis import Op, RankRecord, diagnose
from edu_parallel.core.i18n import language
from edu_parallel.viz import hang_strip
from edu_parallel.viz.fit import fit_problems
from edu_parallel.viz.hang import HIGHLIGHT, headline, state_label

T0 = 1000.0
NOW = T0 + 7.0
WORLD = (0, 1, 2, 3)
CJK = re.compile(r"[\u4e00-\u9fff]")


def ar(seq: int, done: bool = True, late: float = 0.0, numel: int = 16) -> Op:
    entered = T0 + seq - 1 + late
    end = T0 + seq - 1 + 0.2 + (0.3 if late else 0.0)
    return Op("collective", "all_reduce", seq, "float32", numel, WORLD, -1, 0, entered, end * done)


def record(r: int, done: int, waiting: bool, **kw) -> RankRecord:
    """Rank ``r`` completed all-reduces 1..``done`` and, if ``waiting``, waits in the next."""
    ops = [ar(k) for k in range(1, done + 1)]
    blocked = ar(done + 1, done=False) if waiting else None
    ops += [blocked] if blocked else []
    fields = dict(sends=(0,) * 4, recvs=(0,) * 4, beat=NOW - 0.05, busy=0.02) | kw
    return RankRecord(r, tuple(ops), blocked, {WORLD: len(ops)}, **fields)


def skipped():
    """Rank 3 returned after #2; ranks 0-2 wait in #3."""
    records = [record(r, 2, r != 3) for r in WORLD]
    return diagnose(records, NOW, finished=frozenset({3}))


def sleeping():
    """Rank 2 sleeps in its own code after #2; the others wait in #3."""
    where = dict(line="job.py:12 in f", source="time.sleep(60)", busy=0.01)
    records = [record(r, 2, r != 2, **(where if r == 2 else {})) for r in WORLD]
    return diagnose(records, NOW)


def dead_at_once():
    """Rank 1 was killed before its first operation (its record holds none); the others wait
    in all_reduce #1."""
    records = [record(r, 0, r != 1) for r in WORLD]
    return diagnose(records, NOW, dead={1: -9})


def deadlock():
    """Ranks 0 and 1 each wait in recv #1 from the other; ranks 2 and 3 wait in #3 for them."""
    records = []
    for r in WORLD:
        if r < 2:
            op = Op("recv", "recv", 1, "float32", 16, (), 1 - r, 0, T0 + 2.5)
            recvs = tuple(int(q == 1 - r) for q in WORLD)
            ops = (ar(1), ar(2), op)
            records.append(RankRecord(r, ops, op, {WORLD: 2}, (0,) * 4, recvs, beat=NOW))
        else:
            records.append(record(r, 2, True))
    return diagnose(records, NOW)


def dead():
    """Rank 1 was killed (SIGKILL) after #2; the others wait in #3."""
    records = [record(r, 2, r != 1) for r in WORLD]
    return diagnose(records, NOW, dead={1: -9})


def straggler():
    """Every rank finished all four all-reduces; rank 2 entered each 0.5 s after the others."""
    records = []
    for r in WORLD:
        ops = tuple(ar(k, late=0.5 if r == 2 else 0.0) for k in range(1, 5))
        records.append(RankRecord(r, ops, None, {WORLD: 4}, (0,) * 4, (0,) * 4, beat=NOW))
    found = diagnose(records, NOW, finished=frozenset(WORLD))
    # as the lab names a finished straggler (debugging/cases.py): slow, the late rank at fault
    return replace(found, kind="slow", culprits=(2,), op=found.ranks[2].ops[0])


def bars(fig):
    return [t for t in fig.data if t.type == "bar"]


def spans(fig) -> list[tuple[str, float, float, bool, str]]:
    """(row label, start, end, waiting, text) of every drawn span."""
    out = []
    for t in bars(fig):
        for y, base, x, text in zip(t.y, t.base, t.x, t.text, strict=True):
            out.append((y, base, base + x, t.meta["waiting"], text))
    return out


def rows(fig) -> list[str]:
    return list(fig.layout.yaxis.categoryarray)


CASES = {
    "skipped": skipped,
    "sleeping": sleeping,
    "dead_at_once": dead_at_once,
    "deadlock": deadlock,
    "dead": dead,
    "straggler": straggler,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_row_per_rank_one_span_per_operation_and_the_figure_fits(name):
    d = CASES[name]()
    fig = hang_strip(d)
    labels = rows(fig)
    assert len(labels) == 4 and list(fig.layout.yaxis.ticktext) == labels
    assert list(fig.data[0].y) == labels  # the row trace keeps every row, drawn or not
    drawn = spans(fig)
    for s in d.ranks:
        assert sum(1 for y, *_ in drawn if y == labels[s.rank]) == len(s.ops), (name, s.rank)
    t0 = min(op.entered for s in d.ranks for op in s.ops)
    for _y, start, end, _waiting, _text in drawn:
        assert start >= -1e-9 and end >= start
    done_ends = sorted(round(end + t0, 6) for *_r, end, waiting, _t in drawn if not waiting)
    assert done_ends == sorted(
        round(op.done, 6) for s in d.ranks for op in s.ops if op.done
    )  # a completed span ends where its operation completed
    assert fit_problems(fig) == []


def test_a_waiting_span_ends_at_the_reading_and_is_hatched():
    d = skipped()
    fig = hang_strip(d)
    waiting = [s for s in spans(fig) if s[3]]
    assert len(waiting) == 3  # ranks 0-2 in all_reduce #3
    assert all(end == pytest.approx(NOW - T0) for _y, _s, end, _w, _t in waiting)
    assert all(start == pytest.approx(2.0) for _y, start, *_ in waiting)
    assert {t for *_, t in waiting} == {"all_reduce #3"}
    hatched = [t for t in bars(fig) if t.meta["waiting"]]
    assert hatched and all(t.marker.pattern.shape == "/" for t in hatched)
    assert all(not t.marker.pattern.shape for t in bars(fig) if not t.meta["waiting"])


def _shaded(fig) -> list[float]:
    """The row index each highlight covers."""
    return sorted((s.y0 + s.y1) / 2 for s in fig.layout.shapes if s.fillcolor == HIGHLIGHT)


@pytest.mark.parametrize(
    ("name", "culprits", "state"),
    [
        ("skipped", [3], "returned from the job"),
        ("sleeping", [2], "idle in time.sleep"),
        ("dead", [1], "dead (SIGKILL)"),
        ("dead_at_once", [1], "dead (SIGKILL)"),
        ("straggler", [2], "entered each collective last"),
        ("deadlock", [0, 1], "waiting in recv #1 from rank"),
    ],
)
def test_the_culprits_rows_are_shaded_and_labelled_with_their_state(name, culprits, state):
    d = CASES[name]()
    assert list(d.culprits) == culprits
    fig = hang_strip(d)
    assert _shaded(fig) == culprits
    labels = rows(fig)
    for r in range(4):
        bold = labels[r].startswith("<b>")
        assert bold == (r in culprits), labels[r]
    assert all(state in labels[r] for r in culprits), labels


def test_the_title_says_the_finding():
    assert hang_strip(skipped()).layout.title.text == (
        "missing: rank 3 never entered all_reduce #3 (group world)"
    )
    assert headline(dead()) == "dead: rank 1 died"
    assert headline(deadlock()) == "deadlock: ranks 0, 1 wait for each other"
    assert headline(straggler()) == "slow, not stuck: the others waited for rank 2"
    assert hang_strip(dead(), title="lab: killed").layout.title.text == "lab: killed"
    sub = hang_strip(skipped()).layout.title.subtitle.text
    assert "7.0 s" in sub  # the reading, after the first entry


def test_a_rank_without_operations_keeps_an_empty_row():
    d = dead_at_once()
    fig = hang_strip(d)
    assert d.ranks[1].ops == () and len(rows(fig)) == 4
    assert not [s for s in spans(fig) if s[0] == rows(fig)[1]]
    assert len(spans(fig)) == 3  # the others' all_reduce #1, still waiting


def test_the_straggler_entered_every_collective_last_and_its_diamonds_say_so():
    d = straggler()
    fig = hang_strip(d)
    assert not [s for s in spans(fig) if s[3]]  # the job finished: nothing still waits
    diamonds = next(t for t in fig.data if t.type == "scatter" and t.marker.symbol == "diamond")
    assert list(diamonds.y) == [rows(fig)[2]] * 4
    assert list(diamonds.x) == pytest.approx([0.5, 1.5, 2.5, 3.5])
    # the others' spans are the wait for it: each starts 0.5 s before the straggler's
    mine = sorted(start for y, start, *_ in spans(fig) if y == rows(fig)[2])
    theirs = sorted(start for y, start, *_ in spans(fig) if y == rows(fig)[0])
    assert [a - b for a, b in zip(mine, theirs, strict=True)] == pytest.approx([0.5] * 4)


def test_a_hung_job_has_no_diamonds_its_culprit_rows_say_it():
    fig = hang_strip(skipped())  # the late entries matter where nothing hung: a straggler
    assert not [t for t in fig.data if t.type == "scatter" and t.marker.symbol == "diamond"]


def test_the_strip_reads_in_chinese():
    english = hang_strip(skipped())
    with language("zh"):
        chinese = hang_strip(skipped())
        states = [state_label(s, 4) for s in dead().ranks if s.state == "dead"]
    title = chinese.layout.title.text
    assert CJK.search(title) and title != english.layout.title.text
    assert "rank 3" in title and "all_reduce #3" in title  # names and numbers kept
    assert CJK.search(chinese.layout.xaxis.title.text)
    assert CJK.search(chinese.layout.title.subtitle.text)
    assert all(CJK.search(t.name) for t in bars(chinese))
    assert CJK.search(rows(chinese)[3]) and CJK.search(states[0])
    assert fit_problems(chinese) == []
