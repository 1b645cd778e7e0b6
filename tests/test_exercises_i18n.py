"""The coding exercises in Chinese: the grader's verdict, its deadlock diagnosis, the feedback
panel's buttons and every exercise's title, statement and hints read in 简体中文 under
``language("zh")``, with the same rank, step and chunk numbers as in English."""

from __future__ import annotations

import re

import pytest
from test_exercise_ring import off_by_one_chunk  # the planted bug, graded in both

from edu_parallel.core.errors import JobTimeoutError
from edu_parallel.core.i18n import language
from edu_parallel.exercises import EXERCISES, Case, grade
from edu_parallel.exercises.diagnose import hang_finding
from edu_parallel.exercises.feedback import Feedback, findings_table
from edu_parallel.exercises.problems.ring_allreduce import EXERCISE as RING
from edu_parallel.exercises.session import hint, progress_table
from edu_parallel.exercises.spec import check_label

CJK = re.compile(r"[\u4e00-\u9fff]")


def chinese(text: str) -> bool:
    return bool(CJK.search(text))


def numbers(text: str) -> list[str]:
    return re.findall(r"\d+", text)


@pytest.mark.multiprocess
def test_a_wrong_ring_reads_in_chinese_with_the_same_numbers(cluster4):
    cases = [Case(4, 16)]
    english = grade(RING, off_by_one_chunk, cluster4, cases=cases)
    with language("zh"):
        zh = grade(RING, off_by_one_chunk, cluster4, cases=cases)
        summary, report = zh.summary(), zh.report()
        panel = Feedback(zh, "")
        panel.next_hint()
        hints_html, findings_html = panel.hints_html(), panel.findings_html()
    assert not english.passed and not zh.passed
    assert [f.check for f in zh.findings] == [f.check for f in english.findings]
    # the first divergence: same step, rank and chunk, said in Chinese
    en_mark, zh_mark = english.mark, zh.mark
    assert (zh_mark.step, zh_mark.rank, zh_mark.chunk) == (0, 0, 1)
    assert (en_mark.step, en_mark.rank, en_mark.chunk) == (0, 0, 1)
    assert en_mark.message.startswith("after step 0 (reduce-scatter), rank 0's chunk 1 held")
    assert chinese(zh_mark.message) and "rank 0" in zh_mark.message
    assert numbers(zh_mark.message) == numbers(en_mark.message)
    for en, cn in zip(english.failures, zh.failures, strict=True):
        assert chinese(cn.message), cn.message
        assert sorted(numbers(cn.message)) == sorted(numbers(en.message))
    assert summary.startswith("失败 练习 03（my_ring_allreduce）") and chinese(summary)
    assert english.summary().startswith("FAIL exercise 03 (my_ring_allreduce)")
    assert "运行之前" not in report and "结果" in report
    assert "提示 1（点拨）" in hints_html and chinese(hints_html)
    assert "<th>用例</th>" in findings_html and "<th>结果</th>" in findings_html
    # the table itself stays data: English headers and marks for code and tests
    assert list(findings_table(zh).columns)[0] == "case"


def test_a_deadlock_is_said_in_chinese_with_the_same_ranks_and_step():
    err = JobTimeoutError("timed out", [2], {2: "step 3: waiting on recv from rank 1"})
    english = hang_finding(err, 4, Case(4, 16), "<none>")
    with language("zh"):
        zh = hang_finding(err, 4, Case(4, 16), "<none>")
    assert english.message == (
        "rank 2 waited at step 3 for a message from rank 1, but rank 1 had returned without "
        "sending it"
    )
    assert zh.message == "rank 2 在第 3 步等待 rank 1 发来的消息，但 rank 1 没有发送就已返回"
    assert (zh.rank, zh.step) == (english.rank, english.step) == (2, 3)


def test_every_exercise_reads_in_chinese():
    for ex in EXERCISES.values():
        assert ex.shown_title() == ex.title and ex.shown_hints() == ex.hints  # English: as written
        with language("zh"):
            title, task, hints = ex.shown_title(), ex.shown_task(), ex.shown_hints()
            assert hint(ex, 2) == hints[1]
        assert chinese(title), (ex.id, title)
        assert chinese(task), (ex.id, task)
        assert len(hints) == len(ex.hints) >= 3
        for h, en in zip(hints, ex.hints, strict=True):
            prose = re.sub(r"`[^`]+`", "", en)  # a hint that is only code stays code
            assert chinese(h) or not re.search(r"[A-Za-z]{2,}", prose), (ex.id, h)
            # code spans are kept as they are (their order may change)
            assert sorted(re.findall(r"`[^`]+`", h)) == sorted(re.findall(r"`[^`]+`", en)), h
        assert sorted(re.findall(r"`[^`]+`", task)) == sorted(re.findall(r"`[^`]+`", ex.task))


def test_the_progress_table_and_the_buttons_read_in_chinese():
    with language("zh"):
        table = progress_table()
        data = progress_table(translate=False)
        labels = [check_label(c) for c in ("result", "bytes", "messages", "deadlock")]
    assert list(table.columns) == ["编号", "课", "函数", "标题", "状态", "尝试次数"]
    assert list(data.columns) == ["id", "lesson", "function", "title", "status", "tries"]
    assert all(chinese(t) for t in table["标题"])
    assert labels == ["结果", "字节数", "消息数", "死锁"]
    assert check_label("messages") == "messages"  # English shows the check's name
    assert list(progress_table().columns) == list(data.columns)
