"""The quiz bank of lesson 13 (gradient compression): answers, choices, runner, real ranks."""

from __future__ import annotations

import math

import pytest

from edu_parallel.compression import compress_runner
from edu_parallel.quiz import BANKS, MultipleChoice, Numeric, PredictThenRun, get_quiz
from edu_parallel.quiz.banks.compression import compress_quiz, formula_runner

NAME = "13_compression"
SEEDS = (None, *range(12))
PSI = 32 * 128 + 128 + 128 * 128 + 128 + 128 * 10 + 10  # the classifier, by hand
CHOICE_KEYS = (
    "compress_topk_allgather",
    "compress_error_feedback",
    "compress_randk_allreduce",
    "compress_when_it_pays",
)
WEIGHTS = ((128, 32), (128, 128), (10, 128))  # (n, m) of the classifier's weights


pytestmark = pytest.mark.usefixtures("fixed_learner")  # one known learner, a tmp workspace


def powersgd_values(r: int) -> tuple[int, int]:
    """(compressed P + Q values, uncompressed values) by hand, with torch's rate-2 rule."""
    pq = sum((n + m) * r for n, m in WEIGHTS if (n + m) * min(n, m, r) * 2 < n * m)
    whole = PSI - sum(n * m for n, m in WEIGHTS if (n + m) * min(n, m, r) * 2 < n * m)
    return pq, whole


FORMULAS = {
    "compress_topk_bytes": lambda p: (p["N"] - 1) * 8 * round(p["ratio"] * PSI),
    "compress_sign_bytes": lambda p: (p["N"] - 1) * (math.ceil(PSI / 8) + 4),
    "compress_powersgd_values": lambda p: 256 * p["rank"],
    "predict_compress_topk": lambda p: (p["N"] - 1) * 8 * round(p["ratio"] * PSI),
    "predict_compress_powersgd": lambda p: PSI / sum(powersgd_values(p["rank"])),
}


def numeric(q):
    inner = q.predict if isinstance(q, PredictThenRun) else q
    return inner if isinstance(inner, Numeric) else None


def test_registered_and_exported():
    assert BANKS[NAME] is compress_quiz
    assert [q.key for q in get_quiz(NAME, seed=3)] == [q.key for q in compress_quiz(seed=3)]


@pytest.mark.parametrize("seed", SEEDS)
def test_numeric_answers_equal_hand_arithmetic(seed):
    quiz = compress_quiz(seed=seed)
    assert len(quiz) >= 6 and sum(isinstance(q, PredictThenRun) for q in quiz) == 2
    checked = set()
    for q in quiz:
        assert len(q.explanation) >= 40, q.key
        num = numeric(q)
        if num is not None:
            assert num.answer == pytest.approx(FORMULAS[q.key](q.params), rel=1e-3), q.key
            checked.add(q.key)
    assert checked == set(FORMULAS)


def test_wrong_readings_are_marked_wrong():
    q = compress_quiz().by_key("compress_topk_bytes")
    n, k = q.params["N"], q.params["k"]
    assert q.check((n - 1) * 8 * k).correct
    assert not q.check(2 * (n - 1) / n * 8 * k).correct  # as if it were an all-reduce
    assert not q.check(8 * k).correct  # as if only its own piece left the rank


def test_when_it_pays_quotes_the_model():
    q = compress_quiz().by_key("compress_when_it_pays")
    speed = q.params["speedup"]
    assert speed["nvlink4-h100"] < 1 < speed["eth-25g"]
    assert f"{speed['eth-25g']:.1f}x" in q.prompt


def test_when_it_pays_quotes_the_figure_above_it():
    """The speed-ups are the lesson's what-if figure's: its sweep on its cluster's ranks (the
    lesson's ``Cluster(N)``), retimed the same way (counted bytes equal the formula's:
    test_compress.py), not a run on another number of ranks."""
    import json
    import re
    from pathlib import Path

    from edu_parallel.compression import what_if
    from edu_parallel.compression.config import CompressConfig, messages_per_step
    from edu_parallel.compression.config import wire_bytes_per_step as wire
    from edu_parallel.compression.runs import LESSON_RANKS
    from edu_parallel.compression.sweep import SWEEP
    from edu_parallel.compression.whatif import Measured

    lesson = Path(__file__).parents[1] / "notebooks" / f"{NAME}.ipynb"
    code = "".join("".join(c["source"]) for c in json.loads(lesson.read_text())["cells"])
    assert re.findall(r"\bcluster = Cluster\((\d+)\)", code) == [str(LESSON_RANKS)]
    assert "what_if([r.measured() for r in reports]" in code  # reports: sweep_compress(cluster)
    runs = [CompressConfig(LESSON_RANKS, **run) for run in SWEEP]
    rows = [
        Measured(c.label, c.method, LESSON_RANKS, c.ddp().psi, wire(c), messages_per_step(c))
        for c in runs
    ]
    figure = what_if(rows, links=("nvlink4-h100", "eth-25g"))
    label = next(c.label for c in runs if c.method == "topk")  # the figure's row names
    topk = figure[figure.method == label].set_index("link").speedup
    q = compress_quiz().by_key("compress_when_it_pays")
    assert q.params["speedup"] == pytest.approx(topk.to_dict(), rel=1e-12)
    assert f"on {LESSON_RANKS} ranks" in q.prompt
    assert f"{topk['eth-25g']:.1f}x" in q.prompt and f"{topk['nvlink4-h100']:.2f}x" in q.prompt


def test_right_answers_are_spread_and_not_the_longest():
    mcs = [q.source() for q in compress_quiz() if isinstance(q, MultipleChoice)]
    assert {q.key for q in mcs} == set(CHOICE_KEYS)
    assert sorted(q.correct for q in mcs) == [0, 1, 2, 3]
    for seed in SEEDS:
        mcs = [q.source() for q in compress_quiz(seed=seed) if isinstance(q, MultipleChoice)]
        longest = sum(len(q.choices[q.correct]) == max(map(len, q.choices)) for q in mcs)
        assert longest <= len(mcs) // 2, seed
    positions = {
        k: {compress_quiz(seed=s).by_key(k).source().correct for s in SEEDS} for k in CHOICE_KEYS
    }
    assert all(len(p) >= 3 for p in positions.values()), positions


@pytest.mark.multiprocess
def test_predictions_are_graded_against_real_ranks(cluster2):
    quiz = compress_quiz(seed=5, runner=compress_runner(cluster2))
    for key in ("predict_compress_topk", "predict_compress_powersgd"):
        q = quiz.by_key(key)
        formula = formula_runner(q.params["N"], **_options(q))
        feedback = q.check(q.predict.answer)
        assert feedback.correct, (key, q.result())
        measured = q.truth(q.result())
        truth_formula = q.truth(formula)
        assert measured == pytest.approx(truth_formula, rel=1e-9)
        assert q.result().ranks_agree


def _options(q):
    if q.key == "predict_compress_topk":
        return {"method": "topk", "ratio": q.params["ratio"], "error_feedback": True, "steps": 3}
    return {"method": "powersgd", "rank": q.params["rank"], "steps": 3, "start_step": 0}
