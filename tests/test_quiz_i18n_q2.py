"""The quiz banks of lessons 05-08 in 简体中文: every text translated, every answer unchanged.

Each bank is built twice with the same seed and learner, in English and in Chinese. Every learner
text (title, prompt, choice, explanation, a predict-then-run's inner question and what its run
reveals) must differ from the English one wherever the English has letters, and contain Chinese;
the numbers, correct choices, params, units and keys must be identical. The runs are the banks'
own formula runners (no processes).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from edu_parallel.core.i18n import language
from edu_parallel.quiz import (
    MultipleChoice,
    Numeric,
    PredictThenRun,
    Quiz,
    banks_ddp,
    banks_moe,
    banks_tp,
    banks_zero,
)

SEEDS = (None, 0, 1, 2, 3)
LEARNER = "i18n-learner"
CHINESE = re.compile(r"[\u4e00-\u9fff]")
LETTERS = re.compile(r"[A-Za-z]")
BUCKET = re.compile(r"^  b\d+: ")  # data_parallel.buckets.bucket_line, shown as it is in both

BANKS = {
    "ddp": (banks_ddp.ddp_quiz, banks_ddp.formula_runner),
    "zero": (banks_zero.zero_quiz, banks_zero.formula_runner),
    "tp": (banks_tp.tp_quiz, banks_tp.formula_runner),
    "moe": (banks_moe.moe_quiz, banks_moe.formula_runner),
}


@pytest.fixture(autouse=True)
def quiet_workspace(monkeypatch, tmp_path):
    monkeypatch.setenv("EDU_PARALLEL_WORKSPACE", str(tmp_path))


def texts(quiz: Quiz) -> list[tuple[str, str]]:
    """``(where, text)`` for every learner text of ``quiz``, runs revealed."""
    out = [("title", quiz.title)]
    for q in quiz:
        out += [(f"{q.key}.prompt", q.prompt), (f"{q.key}.explanation", q.explanation)]
        inner = q
        if isinstance(q, PredictThenRun):
            inner = q.predict
            out += [(f"{q.key}.predict.prompt", inner.prompt)]
            out += [(f"{q.key}.predict.explanation", inner.explanation)]
            lines = q.reveal(q.result()).splitlines()
            out += [(f"{q.key}.reveal{i}", t) for i, t in enumerate(lines) if not BUCKET.match(t)]
        if isinstance(inner, MultipleChoice):
            out += [(f"{q.key}.choice{i}", c) for i, c in enumerate(inner.choices)]
    return out


def answers(quiz: Quiz) -> list[Any]:
    """What code compares, per question: key, params, config and the right answer."""
    out = []
    for q in quiz:
        inner = q.predict if isinstance(q, PredictThenRun) else q
        row = [q.key, q.params, getattr(q, "config", None), type(inner).__name__]
        if isinstance(inner, Numeric):
            row += [inner.answer, inner.units, inner.tolerance, inner.abs_tolerance]
        else:
            row += [inner.correct_indices, inner.order, len(inner.choices), inner.multiple]
        if isinstance(q, PredictThenRun) and q.truth is not None:
            row.append(q.truth(q.result()))
        out.append(row)
    return out


@pytest.mark.parametrize("bank", sorted(BANKS))
def test_the_bank_reads_in_chinese_with_the_same_answers(bank):
    build, runner = BANKS[bank]
    for seed in SEEDS:
        with language("en"):
            en = build(seed=seed, runner=runner, learner=LEARNER)
            en_texts = texts(en)
        with language("zh"):
            zh = build(seed=seed, runner=runner, learner=LEARNER)
            zh_texts = texts(zh)
        assert [w for w, _t in en_texts] == [w for w, _t in zh_texts]
        untranslated = [
            w
            for (w, e), (_w, z) in zip(en_texts, zh_texts, strict=True)
            if LETTERS.search(e) and (z == e or not CHINESE.search(z))
        ]
        assert not untranslated, (bank, seed, untranslated)
        assert answers(en) == answers(zh), (bank, seed)
        assert zh.name == en.name


def test_an_english_build_has_no_chinese():
    for bank, (build, runner) in BANKS.items():
        with language("en"):
            quiz = build(seed=1, runner=runner, learner=LEARNER)
            found = [w for w, t in texts(quiz) if CHINESE.search(t)]
        assert not found, (bank, found)
