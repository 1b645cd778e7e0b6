"""Every bank is fair to a learner who guesses: the right option's shown place is spread, the right
option is not given away by its length, and no predict-then-run question asks for a number the
lesson printed before it asks (its configuration never appears in an earlier cell)."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from edu_parallel.quiz import BANKS, MultipleChoice, PredictThenRun, Quiz

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
SEEDS = (None, 0, 1, 2)
LEARNERS = ("test-learner", "alice", "bob")


pytestmark = pytest.mark.usefixtures("quiet_workspace")  # a tmp workspace, no learner set


def choices(quiz: Quiz) -> list[tuple[str, MultipleChoice]]:
    out = []
    for q in quiz:
        inner = q.predict if isinstance(q, PredictThenRun) else q
        if isinstance(inner, MultipleChoice):
            out.append((q.key, inner))
    return out


# ------------------------------------------------------------------ shuffling
@pytest.mark.parametrize("learner", LEARNERS)
@pytest.mark.parametrize("seed", SEEDS)
def test_right_answer_positions_are_spread_over_the_course(learner, seed):
    at = Counter()
    for name in BANKS:
        for _key, q in choices(BANKS[name](seed=seed, learner=learner)):
            at.update(q.correct_indices)
    total = sum(at.values())
    assert total >= 30 and max(at.values()) <= 0.4 * total, at


def test_the_order_is_stable_for_a_learner_and_differs_across_learners():
    def orders(learner):
        return {(n, k): q.order for n in BANKS for k, q in choices(BANKS[n](learner=learner))}

    a = orders("alice")
    assert a == orders("alice")
    assert all(sorted(o) == list(range(len(o))) for o in a.values())
    b = orders("bob")
    assert sum(a[k] != b[k] for k in a) >= len(a) // 2


def test_the_learner_seed_comes_from_the_environment_or_a_saved_id(monkeypatch, tmp_path):
    name = "03_ring_allreduce"
    monkeypatch.setenv("EDU_PARALLEL_LEARNER", "carol")
    assert BANKS[name]().learner == "carol"
    assert BANKS[name]().by_key("errata_e1").order == BANKS[name](learner="carol")[2].order
    monkeypatch.delenv("EDU_PARALLEL_LEARNER")
    first = BANKS[name]().learner
    saved = json.loads((tmp_path / ".edu-parallel" / "learner.json").read_text())
    assert saved == {"learner": first} and BANKS[name]().learner == first
    with pytest.raises(ValueError, match="^learner="):
        BANKS[name](learner="")


def test_letters_grading_and_text_use_the_shown_order():
    quiz = BANKS["03_ring_allreduce"](learner="dave")
    q = quiz.by_key("errata_e1")
    src = q.source()
    assert q.choices == [src.choices[j] for j in q.order]
    assert q.choices[q.correct] == src.choices[src.correct]
    letter = "abcd"[q.correct]
    assert q.check(letter).correct and letter + ") " + q.choices[q.correct] in q.expected
    text = quiz.to_text(answers=True)
    assert f"Answer: {letter}) " in text and f"   {letter}) {q.choices[q.correct]}" in text
    assert "tick all that apply" in text  # the checkbox question, with how to type it
    assert q.permuted(q.order).choices == q.choices and q.source().source() == src


def test_subset_and_without_share_the_questions():
    quiz = BANKS["03_ring_allreduce"](learner="erin")
    key = "predict_allgather_rank0"
    body, rest = quiz.subset([key]), quiz.without([key])
    assert [q.key for q in body] == [key] and key not in [q.key for q in rest]
    assert len(rest) == len(quiz) - 1 and body[0] is quiz.by_key(key)
    assert rest.by_key("errata_e1").order == quiz.by_key("errata_e1").order  # not reshuffled
    with pytest.raises(ValueError, match="^key="):
        quiz.subset(["nope"])


# ------------------------------------------------------------------ option lengths
@pytest.mark.parametrize("seed", SEEDS)
def test_the_right_answer_is_the_longest_in_at_most_half_the_questions(seed):
    longest, total = [], 0
    for name in BANKS:
        for key, q in choices(BANKS[name](seed=seed, learner="x")):
            src = q.source()
            lengths = [len(c) for c in src.choices]
            top = max(lengths)
            right = [lengths[i] for i in src.correct_indices]
            if src.multiple:
                hit = lengths.count(top) == 1 and top in right  # a right option strictly longest
            else:
                hit = right[0] == top
            total += 1
            if hit:
                longest.append(f"{name}:{key}")
    assert total >= 30 and len(longest) <= total // 2, longest


# ------------------------------------------------------------------ predict-then-run configs
def code_cells(path: Path) -> list[tuple[str, str]]:
    """``(id, source)`` of each code cell, in order."""
    nb = json.loads(path.read_text())
    return [
        (c.get("id", ""), "".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "code"
    ]


def _call_name(node: ast.AST) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


def same_call(config: str, source: str) -> bool:
    """Whether ``source`` contains ``config`` verbatim (spaces aside), or a call of the same
    function with the same positional arguments and keyword arguments (in any order)."""
    if "".join(config.split()) in "".join(source.split()):
        return True
    want = ast.parse(config, mode="eval").body
    args = [ast.unparse(a) for a in want.args]
    kwargs = {k.arg: ast.unparse(k.value) for k in want.keywords}
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node) == _call_name(want):
            have = {k.arg: ast.unparse(k.value) for k in node.keywords}
            got = [ast.unparse(a) for a in node.args][: len(args)]
            if got == args and all(have.get(k) == v for k, v in kwargs.items()):
                return True
    return False


def asks(source: str, key: str) -> bool:
    """Whether ``source`` shows the question ``key`` in the body: ``keys=[..., "key", ...]``."""
    return any(f'"{key}"' in found for found in re.findall(r"keys=\[([^\]]*)\]", source))


def earlier_duplicates(cells: list[tuple[str, str]], key: str, config: str) -> list[str]:
    """Ids of code cells before the one that asks ``key`` whose source runs ``config``."""
    asks_at = [i for i, (_id, src) in enumerate(cells) if asks(src, key)]
    assert len(asks_at) == 1, f"{key} is asked in the lesson body {len(asks_at)} times, not once"
    return [cid for cid, src in cells[: asks_at[0]] if same_call(config, src)]


def predict_questions():
    """Every predict-then-run question of every bank, with or without a configuration."""
    out = []
    for name in sorted(BANKS):
        for q in BANKS[name](learner="x"):
            if isinstance(q, PredictThenRun):
                out.append(pytest.param(name, q.key, q.config, id=f"{name}:{q.key}"))
    return out


@pytest.mark.parametrize("name, key, config", predict_questions())
def test_predictions_are_asked_in_the_body_on_a_configuration_not_printed_before(name, key, config):
    assert config, f"{name}:{key} declares no config: write the run as the lesson would call it"
    call = ast.parse(config, mode="eval").body
    assert isinstance(call, ast.Call), f"{name}:{key}: config {config!r} is not one call"
    path = NOTEBOOKS / f"{name}.ipynb"
    cells = code_cells(path)
    assert earlier_duplicates(cells, key, config) == [], (name, key, config)
    final = [src for _id, src in cells if ".without(" in src and key in src]
    assert final, f"{name}: the final quiz should leave out {key}, asked in the body"


def test_a_planted_duplicate_is_caught():
    path = NOTEBOOKS / "10_pipeline.ipynb"
    key = "predict_1f1b_peak"
    q = BANKS["10_pipeline"]().by_key(key)
    cells = code_cells(path)
    at = next(i for i, (_id, src) in enumerate(cells) if asks(src, key))
    for plant in (
        q.config,  # verbatim
        "r = run_pipeline(cluster, '1f1b', microbatches=8, stages=4)",  # reordered, other quotes
    ):
        planted = [*cells[:at], ("planted", plant), *cells[at:]]
        assert earlier_duplicates(planted, key, q.config) == ["planted"], plant
    other = "run_pipeline(cluster, '1f1b', stages=4, microbatches=16)"
    planted = [*cells[:at], ("other", other), *cells[at:]]
    assert earlier_duplicates(planted, key, q.config) == []
    after = [*cells, ("later", q.config)]  # printed after the question: allowed
    assert earlier_duplicates(after, key, q.config) == []


def test_a_question_asked_with_others_in_one_widget_is_found():
    src = 'QuizWidget(q, keys=["predict_a", "predict_b"])'
    assert asks(src, "predict_a") and asks(src, "predict_b") and not asks(src, "predict_c")
    assert not asks('QuizWidget(q.without(["predict_a"]))', "predict_a")
    cells = [("c1", "run(1)"), ("c2", src), ("c3", 'QuizWidget(q, keys=["predict_a"])')]
    with pytest.raises(AssertionError, match="2 times"):
        earlier_duplicates(cells, "predict_a", "run(1)")
