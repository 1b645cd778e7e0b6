"""The quiz bank of lesson 14 (synchronous against asynchronous training): answers, choices,
the formula runner, and the predict-then-run questions on real ranks."""

from __future__ import annotations

import math

import pytest
from helpers import fresh_python

from edu_parallel import Cluster
from edu_parallel.async_training.report import async_runner
from edu_parallel.quiz import BANKS, MultipleChoice, Numeric, PredictThenRun, async_quiz, get_quiz
from edu_parallel.quiz.banks.async_training import (
    PREDICT_WORKERS,
    RUN_STEPS,
    RUN_WORKERS,
    formula_runner,
)

NAME = "14_sync_async"
SEEDS = (None, *range(12))
PSI = 32 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10  # the classifier, by hand
REQUIRED = {
    "async_sync_bytes",
    "async_local_bytes_ratio",
    "async_round_robin_staleness",
    "async_straggler_seconds",
    "async_why_sync_waits",
    "async_backup_tradeoff",
    "async_determinism",
    "async_heavy_tail",
    "predict_backup_applied",
    "predict_async_staleness",
}
# independent formulas, from the params each question keeps
FORMULAS = {
    "async_sync_bytes": lambda p: 2 * (p["W"] - 1) / p["W"] * PSI * 4,
    "async_local_bytes_ratio": lambda p: p["S"] / math.ceil(p["S"] / p["H"]),
    "async_round_robin_staleness": lambda p: p["W"] - 1,
    "async_straggler_seconds": lambda p: p["S"] * p["d_ms"] / 1000,
    "predict_backup_applied": lambda p: p["S"] * (p["W"] - p["b"]),
}
RIGHT_TEXT = {  # a fact each right choice states
    "async_why_sync_waits": "slowest rank",
    "async_backup_tradeoff": "fewer samples",
    "async_determinism": "replaying that order",
    "async_heavy_tail": "largest of the W delays",
}


pytestmark = pytest.mark.usefixtures("fixed_learner")  # one known learner, a tmp workspace


def numeric(q):
    inner = q.predict if isinstance(q, PredictThenRun) else q
    return inner if isinstance(inner, Numeric) else None


def test_registered_and_exported():
    assert BANKS[NAME] is async_quiz
    assert [q.key for q in get_quiz(NAME, seed=2)] == [q.key for q in async_quiz(seed=2)]


@pytest.mark.parametrize("seed", SEEDS)
def test_bank_covers_the_lesson(seed):
    quiz = async_quiz(seed=seed)
    assert {q.key for q in quiz} == REQUIRED and len(quiz.questions) >= 6
    assert sum(isinstance(q, PredictThenRun) for q in quiz) == 2
    assert all(len(q.explanation) >= 40 for q in quiz)


@pytest.mark.parametrize("seed", SEEDS)
def test_numeric_answers_equal_independent_formulas(seed):
    for q in async_quiz(seed=seed):
        num = numeric(q)
        if num is not None:
            assert num.answer == pytest.approx(FORMULAS[q.key](q.params), rel=1e-12), q.key


def test_seeds_draw_and_reproduce():
    params = [tuple(sorted(str(q.params) for q in async_quiz(seed=s))) for s in range(12)]
    assert len(set(params)) > 3
    assert params[4] == tuple(sorted(str(q.params) for q in async_quiz(seed=4)))


def test_right_choices_are_spread_and_not_always_the_longest():
    at, longest = set(), 0
    total = 0
    for seed in SEEDS:
        for q in async_quiz(seed=seed):
            if isinstance(q, MultipleChoice):
                q = q.source()  # the bank's own placement
                total += 1
                at.add(q.correct)
                longest += max(map(len, q.choices)) == len(q.choices[q.correct])
                assert RIGHT_TEXT[q.key] in q.choices[q.correct], q.key
    assert at == {0, 1, 2, 3} and longest < total


def test_formula_runner_predicts_applied_gradients_and_round_robin_staleness():
    b = formula_runner(mode="backup", steps=10, backup=2, world_size=5)
    assert b.applied == 10 * (4 - 2) and b.staleness_histogram == {0: 20}
    a = formula_runner(mode="async-ps", steps=10)
    assert a.config.world_size == RUN_WORKERS + 1 and a.staleness_histogram == {2: 30}
    s = formula_runner(mode="local-sgd", steps=10, local_steps=4, world_size=2)
    assert s.sent_bytes == [3 * 2 * 1 / 2 * PSI * 4] * 2


def test_predict_then_run_with_formulas_is_graded_against_the_formula_run():
    quiz = async_quiz()
    backup = next(q for q in quiz if q.key == "predict_backup_applied")
    assert PREDICT_WORKERS != RUN_WORKERS  # a worker count the lesson never runs
    assert backup.check(RUN_STEPS * (PREDICT_WORKERS - 1)).correct
    assert not backup.check(RUN_STEPS * PREDICT_WORKERS).correct
    assert not backup.check(RUN_STEPS * (RUN_WORKERS - 1)).correct  # the lesson's W
    stale = next(q for q in quiz if q.key == "predict_async_staleness")
    right, wrong = (stale.predict.position(k) for k in (PREDICT_WORKERS - 1, RUN_WORKERS - 1))
    assert stale.check(right).correct and not stale.check(wrong).correct


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="^seed="):
        async_quiz(seed="x")
    with pytest.raises(ValueError, match="^runner="):
        async_quiz(runner=3)


def test_the_bank_loads_no_torch():
    fresh_python("import edu_parallel.quiz.banks.async_training")


def test_predict_then_run_on_real_ranks():
    with Cluster(PREDICT_WORKERS + 1) as cluster:
        quiz = async_quiz(runner=async_runner(cluster))
        backup = next(q for q in quiz if q.key == "predict_backup_applied")
        fb = backup.check(RUN_STEPS * (PREDICT_WORKERS - 1))
        assert fb.correct and "late gradients dropped" in fb.reveal
        report = backup.result()
        assert report.replay_matches and report.config.mode == "backup"
        stale = next(q for q in quiz if q.key == "predict_async_staleness")
        truth = stale.truth(stale.result())
        assert 0 <= truth < len(stale.predict.choices)
        shown = stale.predict.position(truth)
        assert stale.check(shown).correct
        assert "staleness (value: count)" in stale.check(shown).reveal
