"""Lesson 16's quiz, "which rank is at fault, and why", graded from a finding, never a fixed
answer: the drawn case and culprit vary with the seed, the right choice is read from the
:class:`~edu_parallel.core.diagnosis.Diagnosis` the runner returns (a runner that blames another
rank moves the right answer with it), and a wrong choice is graded wrong. The simulated cases
(``quiz/banks/debugging_sim.py``) give the lab's kind and culprit for every case and culprit,
and the bank reads in Chinese with the same answers. No processes: the runner is the simulation.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from quiz_lang import answers, texts

from edu_parallel.core.diagnosis import KINDS
from edu_parallel.core.i18n import language
from edu_parallel.debugging import cases as lab
from edu_parallel.quiz import BANKS, QUESTION_SETS, MultipleChoice, PredictThenRun, debugging_quiz
from edu_parallel.quiz.banks import debugging as bank
from edu_parallel.quiz.banks.debugging_sim import (
    CASES,
    EXPECTED,
    evidence,
    finding,
    partner,
    simulated_diagnosis,
    simulated_runner,
)

SEEDS = (None, 0, 1, 2, 3, 4, 5, 6, 7)
LEARNER = "debugging-learner"
CHINESE = re.compile(r"[\u4e00-\u9fff]")
LETTERS = re.compile(r"[A-Za-z]")
PREDICT_KEYS = ("predict_culprit", "predict_kind", "predict_stuck_or_slow", "predict_cycle")

pytestmark = pytest.mark.usefixtures("quiet_workspace")


class Recording:
    """A runner that simulates each case, records the calls, and may blame another rank."""

    def __init__(self, shift: int = 0) -> None:
        self.calls: list[tuple[str, int]] = []
        self.shift = shift

    def __call__(self, case: str, culprit: int) -> Any:
        self.calls.append((case, culprit))
        return simulated_diagnosis(case, (culprit + self.shift) % 4)


def right_choice(q: PredictThenRun) -> int:
    """The shown position of the choice the run's finding makes right."""
    return q.predict.position(q.truth(q.result()))


# ------------------------------------------------------------------ the simulated cases
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("culprit", range(4))
def test_each_simulated_case_names_the_lab_kind_and_culprit(case, culprit):
    d = simulated_diagnosis(case, culprit)
    assert d.kind == EXPECTED[case]
    if case == "deadlock":
        pair = tuple(sorted((culprit, partner(culprit, 4))))
        assert d.culprits == pair and d.cycles == (pair,)
    else:
        assert d.culprits == (culprit,)
    assert len(d.ranks) == 4 and finding(d)
    lines = evidence(d)
    assert len(lines) == 4 and all(line.startswith(f"rank {r}: ") for r, line in enumerate(lines))
    assert not any(EXPECTED[case] in line for line in lines)  # the verdict is left out


def test_the_simulation_agrees_with_the_lab_on_ranks():
    """The lab (``debugging/cases.py``) and the quiz's simulation name the same kinds, and the
    deadlock pairs the culprit with the same partner."""
    assert EXPECTED == lab.EXPECTED and CASES == lab.CASES
    assert all(partner(c, n) == lab.partner_of(c, n) for n in (3, 4, 8) for c in range(n))


def test_bad_arguments_name_the_option_and_the_valid_values():
    with pytest.raises(ValueError, match=r"^case='hang' is not valid: expected one of 'killed'"):
        simulated_diagnosis("hang", 0)
    with pytest.raises(
        ValueError, match=r"^culprit=4 is not valid: expected an integer in \[0, 3\]"
    ):
        simulated_diagnosis("sleeps", 4)
    with pytest.raises(ValueError, match=r"^world_size=2 is not valid"):
        simulated_diagnosis("sleeps", 0, world_size=2)
    with pytest.raises(ValueError, match=r"^runner=42 is not valid.*runner\(case, culprit\)"):
        debugging_quiz(runner=42)


def test_a_straggler_finishes_and_is_named_slow_by_its_late_entries():
    d = simulated_diagnosis("straggler", 1)
    assert all(s.state == "finished" for s in d.ranks) and (d.kind, d.culprits) == ("slow", (1,))
    assert "rank 1 entered 4 of the 4 collectives last" in finding(d)
    assert "entered 4 of the 4 collectives last" in evidence(d)[1]
    assert "entered none of the 4 collectives last" in evidence(d)[0]


# ------------------------------------------------------------------ the bank
def test_the_bank_is_registered_with_its_questions():
    assert BANKS[bank.NAME] is debugging_quiz and bank.NAME == "16_debugging"
    quiz = debugging_quiz(learner=LEARNER)
    assert [q.key for q in quiz] == [*PREDICT_KEYS, "fix", "torch_tool"]
    assert QUESTION_SETS[bank.NAME].share_runs
    assert all(isinstance(q, PredictThenRun) and q.truth for q in quiz if q.key in PREDICT_KEYS)


def test_the_draw_varies_the_case_and_the_culprit():
    draws = [bank.DebuggingDraw.draw(random.Random(seed)) for seed in range(12)]
    assert len({d.culprit for d in draws}) > 1 and len({d.culprit_case for d in draws}) > 1
    assert len({d.cycle_culprit for d in draws}) > 1 and len({d.kind_case for d in draws}) > 1


@pytest.mark.parametrize("seed", SEEDS)
def test_each_prediction_is_graded_by_the_runs_finding(seed):
    runner = Recording()
    quiz = debugging_quiz(seed=seed, runner=runner, learner=LEARNER)
    assert runner.calls == []  # nothing runs before an answer
    for key in PREDICT_KEYS:
        q = quiz.by_key(key)
        d = q.result()
        case, culprit = q.params["case"], q.params["culprit"]
        assert (case, culprit) in runner.calls
        right = q.predict.choices[right_choice(q)]
        if key == "predict_culprit":
            assert right == f"rank {d.culprits[0]} is at fault" and d.culprits == (culprit,)
        elif key == "predict_kind":
            assert right.startswith(f"{d.kind}: ") and d.kind == EXPECTED[case]
        elif key == "predict_stuck_or_slow":
            assert right.startswith("slow" if d.kind == "slow" else "stuck")
        else:
            a, b = d.cycles[0]
            assert right == f"ranks {a} and {b}" and culprit in (a, b)
        fb = q.check(right_choice(q))
        assert fb.correct and finding(d) in fb.reveal
        wrong = next(i for i in range(len(q.predict.choices)) if i != right_choice(q))
        assert not q.check(wrong).correct
    assert len(runner.calls) == len(set(runner.calls))  # one run per distinct case and culprit


def test_the_answer_moves_with_the_finding_not_with_the_draw():
    """A runner whose finding blames the next rank: the right answer follows the finding."""
    quiz = debugging_quiz(seed=3, runner=Recording(shift=1), learner=LEARNER)
    q = quiz.by_key("predict_culprit")
    drawn = q.params["culprit"]
    assert q.predict.choices[right_choice(q)] == f"rank {(drawn + 1) % 4} is at fault"
    assert not q.check(q.predict.position(drawn)).correct


@pytest.mark.parametrize("seed", SEEDS)
def test_the_evidence_questions_are_graded_from_the_simulated_finding(seed):
    quiz = debugging_quiz(seed=seed, learner=LEARNER)
    fix, tool = quiz.by_key("fix"), quiz.by_key("torch_tool")
    src = fix.source()
    assert src.choices[src.correct] == bank.FIXES[fix.params["kind"]]
    assert fix.params["kind"] in bank.FIX_KINDS
    src = tool.source()
    expected = {"missing": "dist.monitored_barrier()", "mismatch": "TORCH_DISTRIBUTED_DEBUG"}
    assert src.choices[src.correct].startswith(expected[tool.params["kind"]])
    for q in (fix, tool):
        assert isinstance(q, MultipleChoice) and q.check(q.correct).correct
        assert not q.check((q.correct + 1) % len(q.choices)).correct
        assert "The engine: " in q.explanation


def test_the_kinds_are_the_diagnosis_kinds():
    assert set(bank.KIND_WORDS) == set(KINDS) and set(bank.FIX_KINDS) <= set(KINDS)


# ------------------------------------------------------------------ in Chinese
@pytest.mark.parametrize("seed", (None, 0, 1, 2, 3))
def test_the_bank_reads_in_chinese_with_the_same_answers(seed):
    with language("en"):
        en = debugging_quiz(seed=seed, runner=simulated_runner, learner=LEARNER)
        en_texts = texts(en)
    with language("zh"):
        zh = debugging_quiz(seed=seed, runner=simulated_runner, learner=LEARNER)
        zh_texts = texts(zh)
    assert [w for w, _t in en_texts] == [w for w, _t in zh_texts]
    untranslated = [
        w
        for (w, e), (_w, z) in zip(en_texts, zh_texts, strict=True)
        if LETTERS.search(e) and (z == e or not CHINESE.search(z))
    ]
    assert not untranslated, untranslated
    assert answers(en) == answers(zh)
    assert not [w for w, t in en_texts if CHINESE.search(t)]


def test_the_evidence_and_the_reveal_read_in_chinese_line_by_line():
    with language("zh"):
        for case in CASES:
            d = simulated_diagnosis(case, 2)
            lines = [*evidence(d), *evidence(d, verdict=True), finding(d)]
            english = [line for line in lines if not CHINESE.search(line)]
            assert not english, (case, english)


def test_each_learner_draws_other_cases_and_keeps_them():
    """No seed: the cases and culprits are the learner's own, stable for one learner."""
    keys = ("predict_culprit", "predict_kind", "predict_stuck_or_slow", "predict_cycle")

    def configs(learner: str) -> list[str]:
        quiz = debugging_quiz(learner=learner)
        return [quiz.by_key(k).config for k in keys]

    assert configs("alice") == configs("alice")
    drawn = {tuple(configs(f"learner-{i}")) for i in range(8)}
    assert len(drawn) >= 4  # eight learners, at least four different answer keys
