"""Every question of every bank, built alone by its own function (``quiz/banks/``, one function
per question): it builds without running anything, accepts its answer and rejects a wrong one, for
the teaching defaults and a few seeds. The bank's quiz is its question functions in order, and a
bank's two arguments are checked once, together (:class:`~edu_parallel.quiz.registry.BankArgs`)."""

from __future__ import annotations

import random
import sys

import pytest

from edu_parallel.quiz import (
    BANKS,
    QUESTION_SETS,
    BankArgs,
    MultipleChoice,
    Numeric,
    PredictThenRun,
    register_bank,
    ring_quiz,
)

SEEDS = (None, 0, 1)
CASES = [(name, q) for name, parts in sorted(QUESTION_SETS.items()) for q in parts.questions]


pytestmark = pytest.mark.usefixtures("fixed_learner")  # one known learner, a tmp workspace


def never(*_args, **_kwargs):
    raise AssertionError("a question must not run anything when it is built")


def rng(seed):
    return None if seed is None else random.Random(seed)


def right_and_wrong(q) -> tuple:
    """An answer ``q`` must accept and one it must reject (a predict-then-run: against its run)."""
    inner = q.predict if isinstance(q, PredictThenRun) else q
    if isinstance(inner, Numeric):
        right = q.truth(q.result()) if isinstance(q, PredictThenRun) and q.truth else inner.answer
        return right, right * 3 + 17
    if isinstance(q, PredictThenRun) and q.truth:
        good = {inner.position(int(q.truth(q.result())))}
    else:
        good = set(inner.correct_indices)
    others = [i for i in range(len(inner.choices)) if i not in good]
    if inner.multiple:
        return good, good | {others[0]} if others else good - {min(good)}
    return min(good), others[0]


def test_every_bank_is_its_question_functions_in_order():
    assert set(QUESTION_SETS) == set(BANKS) and len(CASES) >= 100
    for name, parts in QUESTION_SETS.items():
        for seed in SEEDS:
            quiz = BANKS[name](seed=seed)
            own = parts.seed_for(seed, name, quiz.learner)  # no seed: the learner's, if drawn so
            drawn = parts.draw(rng(own))
            assert drawn == parts.draw(rng(own))  # one seed, one set of parameters
            alone = [question(drawn, never) for question in parts.questions]
            assert [q.key for q in quiz] == [q.key for q in alone], name
            assert [q.prompt for q in quiz] == [q.prompt for q in alone], name
        for question in parts.questions:
            assert question.__name__.startswith("q_") and question.__qualname__ == question.__name__
            assert getattr(sys.modules[question.__module__], question.__name__) is question
            doc = (question.__doc__ or "").strip()
            assert doc and "\n" not in doc, f"{question.__name__}: a one-line docstring"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("name", "question"), CASES, ids=[f"{n}-{q.__name__}" for n, q in CASES])
def test_each_question_alone_accepts_its_answer_and_rejects_a_wrong_one(name, question, seed):
    parts = QUESTION_SETS[name]
    drawn = parts.draw(rng(seed))
    q = question(drawn, parts.runner)
    assert isinstance(q, (MultipleChoice, Numeric, PredictThenRun)) and q.key
    assert not isinstance(q, PredictThenRun) or not q.has_run
    right, wrong = right_and_wrong(q)
    fb = q.check(right)
    assert fb.correct, (q.key, right, fb.message)
    assert not q.check(wrong).correct, (q.key, wrong)
    assert fb.explanation.strip()


def test_the_bank_arguments_are_checked_once_and_together():
    with pytest.raises(ValueError, match=r"^seed='one' is not valid.*; runner=42 is not valid"):
        ring_quiz(seed="one", runner=42)
    with pytest.raises(ValueError, match=r"^seed=True is not valid: expected an int or None$"):
        BankArgs(True)
    args = BankArgs(7, None)
    assert args.rng().random() == random.Random(7).random() and BankArgs().rng() is None
    with pytest.raises(ValueError, match=r"^runner=.*runner\(stage, world_size\)"):
        BANKS["07_zero_fsdp"](runner="not callable")
    with pytest.raises(ValueError, match="^questions="):
        register_bank("99_test", ring_quiz, questions=[ring_quiz])
    assert "99_test" not in BANKS
