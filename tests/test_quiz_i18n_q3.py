"""The quiz banks of lessons 10-15 in 简体中文: every text translated, every answer unchanged.

Each bank is built twice with the same seed and learner, in English and in Chinese. Every learner
text (title, prompt, choice, explanation, a predict-then-run's inner question and what its run
reveals) must differ from the English one wherever the English has letters, and contain Chinese;
the numbers, correct choices and their shown order, params, units, configs and keys must be
identical. The runs are the banks' own in-process runners (no processes).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from quiz_lang import answers, texts

from edu_parallel.core.i18n import language
from edu_parallel.quiz import PredictThenRun, simulation_runner
from edu_parallel.quiz.banks import async_training as banks_async
from edu_parallel.quiz.banks import compression as banks_compress
from edu_parallel.quiz.banks import landscape as banks_landscape
from edu_parallel.quiz.banks import parallel_3d as banks_3d
from edu_parallel.quiz.banks import pipeline as banks_pipeline

SEEDS = (None, 0, 1, 2, 3)
LEARNER = "i18n-learner"
CHINESE = re.compile(r"[\u4e00-\u9fff]")
LETTERS = re.compile(r"[A-Za-z]")

BANKS = {
    "pipeline": (banks_pipeline.pipeline_quiz, banks_pipeline.simulated_pipeline),
    "3d": (banks_3d.three_d_quiz, banks_3d.formula_runner),
    "compress": (banks_compress.compress_quiz, banks_compress.formula_runner),
    "async": (banks_async.async_quiz, banks_async.formula_runner),
    "landscape": (banks_landscape.landscape_quiz, simulation_runner),
}
# choices that are identifiers, the same in both languages: rank groups ("TP [4, 5], DP [5, 7],
# PP [1, 5]") and torch backend names ("'nccl'")
IDENTIFIERS = ("mesh_groups.choice", "rocm_backend.choice")


pytestmark = pytest.mark.usefixtures("quiet_workspace")  # a tmp workspace, no learner set


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
            if LETTERS.search(e)
            and not w.startswith(IDENTIFIERS)
            and (z == e or not CHINESE.search(z))
        ]
        assert not untranslated, (bank, seed, untranslated)
        assert answers(en) == answers(zh), (bank, seed)
        assert zh.name == en.name


def test_a_bank_builds_in_chinese_without_running():
    """Building never starts a run: a runner that must not be called is never called."""

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a bank ran its runner while being built")

    for build, _runner in BANKS.values():
        with language("zh"):
            quiz = build(seed=0, runner=never, learner=LEARNER)
        assert all(not q.has_run for q in quiz if isinstance(q, PredictThenRun))


def test_an_english_build_has_no_chinese():
    for bank, (build, runner) in BANKS.items():
        with language("en"):
            quiz = build(seed=1, runner=runner, learner=LEARNER)
            found = [w for w, t in texts(quiz) if CHINESE.search(t)]
        assert not found, (bank, found)
