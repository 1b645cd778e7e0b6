"""The quiz machinery and the banks of lessons 00-05 in Chinese: every learner-facing text is
translated, and nothing a grader compares (answers, correct choices, keys, params, units) changes
with the language."""

from __future__ import annotations

import re

import pytest

from edu_parallel.app.course.glossary import variants
from edu_parallel.core.i18n import language
from edu_parallel.quiz import (
    MultipleChoice,
    Numeric,
    PredictThenRun,
    algorithms_quiz,
    collectives_quiz,
    map_quiz,
    nccl_quiz,
    ring_quiz,
    run_in_terminal,
    show_quiz,
    tour_quiz,
)

SEEDS = (None, 0, 1)
LETTER = re.compile(r"[A-Za-z]")
CJK = re.compile(r"[\u4e00-\u9fff]")
# choices that are names the learner meets in code or in NCCL's output, the same in both languages
IDENTIFIERS = {"LL", "LL128", "Simple", "ring", "tree", "double-tree"}
# a collective named alone reads in Chinese as the outline writes it (notebooks/GLOSSARY.md)
OUTLINE_FORMS = {form for _variant, form in variants() if form.isascii()}


def outline_form(en: str, zh: str) -> bool:
    """``zh`` is the outline's form of the term ``en``: "reduce-scatter" as ReduceScatter."""
    return zh in OUTLINE_FORMS and en.replace("-", "").lower() == zh.replace("-", "").lower()


def never(*_args):
    raise AssertionError("a bank must not run anything when it is built")


def texts(q) -> list[tuple[str, str]]:
    """(what, text) for every learner-facing text of one question."""
    out = [("prompt", q.prompt), ("explanation", q.explanation)]
    inner = q.predict if isinstance(q, PredictThenRun) else q
    if inner is not q:
        out += [("predict.prompt", inner.prompt), ("predict.explanation", inner.explanation)]
    if isinstance(inner, MultipleChoice):
        out += [(f"choice {i}", c) for i, c in enumerate(inner.choices)]
    return out


def graded(q) -> tuple:
    """What grading depends on: identical in both languages."""
    inner = q.predict if isinstance(q, PredictThenRun) else q
    base = (q.key, type(q).__name__, q.params, getattr(q, "config", ""))
    if isinstance(inner, MultipleChoice):
        return (*base, inner.correct_indices, inner.order, inner.multiple, len(inner.choices))
    assert isinstance(inner, Numeric)
    return (*base, inner.answer, inner.tolerance, inner.abs_tolerance, inner.units)


def compare(en: list, zh: list) -> None:
    assert len(en) == len(zh)
    for q_en, q_zh in zip(en, zh, strict=True):
        assert graded(q_en) == graded(q_zh), q_en.key
        for (what, e), (_what, z) in zip(texts(q_en), texts(q_zh), strict=True):
            if e in IDENTIFIERS:
                assert z == e, (q_en.key, what)
            elif outline_form(e, z):
                continue
            elif LETTER.search(e):
                assert z != e and CJK.search(z), f"{q_en.key} {what} not translated: {e!r}"


def both(bank, seed):
    en = bank(seed=seed, runner=never, learner="i18n")
    with language("zh"):
        zh = bank(seed=seed, runner=never, learner="i18n")
    assert zh.title != en.title and CJK.search(zh.title)
    assert zh.name == en.name
    return en, zh


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("bank", [tour_quiz, ring_quiz], ids=["00_tour", "03_ring"])
def test_banks_py_in_chinese(bank, seed):
    en, zh = both(bank, seed)
    compare(en.questions, zh.questions)


@pytest.mark.parametrize("seed", SEEDS)
def test_banks_map_in_chinese(seed):
    en, zh = both(map_quiz, seed)
    compare(en.questions, zh.questions)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "bank", [collectives_quiz, algorithms_quiz, nccl_quiz], ids=["02", "04", "05"]
)
def test_banks_comm_in_chinese(bank, seed):
    en, zh = both(bank, seed)
    compare(en.questions, zh.questions)


def test_feedback_hints_and_terminal_in_chinese():
    with language("zh"):
        quiz = ring_quiz(learner="i18n")
        facts = quiz.by_key("ring_facts")
        right = "，".join("abcd"[facts.position(k)] for k in (0, 1, 3))  # full-width commas
        assert quiz.answer(quiz.questions.index(facts), right).correct
        fb = quiz.answer(0, "768 KiB")
        assert fb.correct and fb.message.startswith("正确") and "字节" in fb.expected
        fb = quiz.answer(0, "700 KiB")
        assert fb.message.startswith("不对") and "容差 1%" in fb.message
        steps = quiz.questions.index(quiz.by_key("steps"))
        assert quiz.answer(steps, "6 步").correct and quiz.answer(steps, "6 steps").correct
        with pytest.raises(ValueError, match="^answer="):
            quiz.answer(0, "很多")
        assert quiz.score_line() == "得分：2 / 9"  # the latest answer to question 1 was wrong
        out: list[str] = []
        run_in_terminal(tour_quiz(learner="i18n"), never, out.append, interactive=False)
        text = "\n".join(out)
        assert "答案：" in text and "解析：" in text and "（单位：个元素）" in text
        assert "运行结果：" in text and "rank 0 记录了" in text


def test_widget_in_chinese():
    with language("zh"):
        quiz = ring_quiz(learner="i18n")
        w = show_quiz(quiz)
        assert w.buttons[0].description == "提交" and w.buttons[8].description == "先预测，再运行"
        assert w.inputs[0].placeholder == "1536 或 1.5 KiB"
        head = w.widget.children[1].children[0].value
        assert "以字节为单位作答" in head  # the hint line starts with a full-width parenthesis
        w.inputs[0].value = "768 KiB"
        w.buttons[0].click()
        assert "正确" in w.feedback[0].value and "解析：" in w.feedback[0].value
        assert w.score_label.value == "得分：1 / 9"
