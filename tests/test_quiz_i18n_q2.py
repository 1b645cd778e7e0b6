"""The quiz banks of lessons 06-09 in 简体中文: every text translated, every answer unchanged.

Each bank is built twice with the same seed and learner, in English and in Chinese. Every learner
text (title, prompt, choice, explanation, a predict-then-run's inner question and what its run
reveals) must differ from the English one wherever the English has letters, and contain Chinese;
the numbers, correct choices, params, units and keys must be identical. The runs are the banks'
own formula runners (no processes).
"""

from __future__ import annotations

import re

import pytest
from quiz_lang import answers, texts

from edu_parallel.core.i18n import language
from edu_parallel.quiz.banks import ddp as banks_ddp
from edu_parallel.quiz.banks import expert_parallel as banks_moe
from edu_parallel.quiz.banks import tensor_parallel as banks_tp
from edu_parallel.quiz.banks import zero as banks_zero

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


pytestmark = pytest.mark.usefixtures("quiet_workspace")  # a tmp workspace, no learner set


@pytest.mark.parametrize("bank", sorted(BANKS))
def test_the_bank_reads_in_chinese_with_the_same_answers(bank):
    build, runner = BANKS[bank]
    for seed in SEEDS:
        with language("en"):
            en = build(seed=seed, runner=runner, learner=LEARNER)
            en_texts = texts(en, BUCKET)
        with language("zh"):
            zh = build(seed=seed, runner=runner, learner=LEARNER)
            zh_texts = texts(zh, BUCKET)
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
