"""What a lesson says agrees with what its widgets show, read from the notebooks and the banks.

* every count of "predict, then run" questions a lesson's prose announces (English and Chinese)
  equals the number of predict-then-run questions of the quiz widget below it, as that cell shows
  the bank (``QuizWidget(q, keys=[...])``, ``QuizWidget(q.without([...]))``), and the widget's
  own generated line (``predict_line``) names them;
* every button the prose names (``press Play``, ``按 **▶ 播放**``) is a label the course's widgets
  carry in the lesson's language.

The checks are ``lab_prose.py``'s, which ``test_learner_path.py`` also runs on the rendered
page; each is shown to fail on a planted stale sentence.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from lab_prose import (
    Segment,
    all_label_words,
    announced_after_last_quiz,
    announced_predicts,
    button_labels,
    button_mentions,
    button_name_problems,
    predict_count_problems,
)

from edu_parallel.app.course.links import load
from edu_parallel.core.i18n import language
from edu_parallel.quiz import PredictThenRun, get_quiz
from edu_parallel.quiz.widget import predict_line

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LESSONS = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
PAGES = ("index", "syllabus", "errata")


def _text(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _shown(call: ast.Call, quiz):
    """The quiz a ``QuizWidget(...)`` call shows, as the widget builds it."""
    arg = call.args[0]
    keys = next((ast.literal_eval(k.value) for k in call.keywords if k.arg == "keys"), None)
    if isinstance(arg, ast.Call) and getattr(arg.func, "attr", "") == "without":
        quiz = quiz.without(ast.literal_eval(arg.args[0]))
    return quiz.subset(keys) if keys is not None else quiz


def segments(stem: str, lang: str) -> tuple[list[Segment], str]:
    """The lesson's quiz widgets with the prose before each, and the prose after the last."""
    path = NOTEBOOKS / ("zh" if lang == "zh" else "") / f"{stem}.ipynb"
    nb = load(path)
    with language(lang):
        bank = get_quiz(stem, learner="prose-test")
        out, prose = [], []
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                prose.append(_text(cell))
                continue
            calls = [
                node
                for node in ast.walk(ast.parse(_text(cell)))
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "QuizWidget"
            ]
            for call in calls:
                shown = _shown(call, bank)
                predicts = sum(isinstance(q, PredictThenRun) for q in shown)
                where = f"{lang}/{stem} cell {cell['id']}"
                out.append(
                    Segment(where, "\n".join(prose), predict_line(shown), len(shown), predicts)
                )
                prose = []
    return out, "\n".join(prose)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("stem", LESSONS)
def test_announced_predict_counts_equal_the_quiz_below(stem, lang):
    found, tail = segments(stem, lang)
    assert found, f"{lang}/{stem}: no quiz widget"
    problems = predict_count_problems(found) + announced_after_last_quiz(stem, tail)
    assert not problems, problems


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("stem", LESSONS + list(PAGES))
def test_the_prose_names_buttons_as_the_widgets_label_them(stem, lang):
    path = NOTEBOOKS / ("zh" if lang == "zh" else "") / f"{stem}.ipynb"
    prose = "\n".join(_text(c) for c in load(path)["cells"] if c["cell_type"] == "markdown")
    problems = button_name_problems(f"{lang}/{stem}", prose, all_label_words(), button_labels(lang))
    assert not problems, problems


def test_the_widget_line_names_its_predict_then_run_questions():
    bank = get_quiz("06_dp_bucketing_overlap", learner="prose-test")
    assert predict_line(bank.without(["predict_ddp_buckets", "predict_ddp_messages"])) == ""
    assert predict_line(bank.subset(["predict_ddp_buckets"])) == ""  # the prose above says it
    mixed = bank.subset([bank[0].key, "predict_ddp_buckets", "predict_ddp_messages"])
    line = predict_line(mixed)
    assert announced_predicts(line) == [2] and "2 and 3" in line
    seg = Segment("05", "", line, len(mixed), 2)
    assert not predict_count_problems([seg])
    with language("zh"):
        zh = predict_line(
            get_quiz("06_dp_bucketing_overlap", learner="prose-test").subset(
                [bank[0].key, "predict_ddp_messages"]
            )
        )
    assert announced_predicts(zh) == [1], zh


# ----------------------------------------------------------------- planted stale sentences
STALE = [
    ("The last two questions ask you to predict, then run on this cluster.", 2),
    ("The last question runs the engine: predict, then press run.", 1),
    ("Questions 3 and 4 ask you to predict, then run on this cluster.", 2),
    ("Question 5 asks you to predict, then run on this cluster.", 1),
    ("最后两道题要求先预测，再运行：在这个集群上跑一遍来验证。", 2),
    ("最后一道题会运行引擎：先预测，再点击运行。", 1),
    ("第 8、9 题要求先预测，再在这个集群上运行。", 2),
]


@pytest.mark.parametrize("sentence, count", STALE)
def test_a_stale_count_of_predict_then_run_questions_fails(sentence, count):
    assert announced_predicts("## Quiz\n\n" + sentence) == [count]
    stale = Segment("planted", "## Quiz\n\n" + sentence, "", 7, 0)
    assert predict_count_problems([stale]), sentence
    right = Segment("planted", "## Quiz\n\n" + sentence, "", 7, count)
    assert not predict_count_problems([right])
    assert announced_after_last_quiz("planted", sentence)


def test_plain_prose_announces_no_count():
    plain = (
        "**Predict first.** With 4 workers, how many gradients does the server apply? The next"
        " cell prints the count; the button runs your case. Every lesson has a quiz, and a"
        ' "predict, then run" question checks your prediction.'
    )
    assert announced_predicts(plain) == []


def test_a_button_named_as_the_other_language_labels_it_fails():
    zh = button_labels("zh")
    assert button_name_problems("planted", "按 Play 观看", all_label_words(), zh)
    assert button_name_problems("planted", "动画图有 **Play** 按钮", all_label_words(), zh)
    assert not button_name_problems("planted", "按 **▶ 播放** 观看", all_label_words(), zh)
    en = button_labels("en")
    assert not button_name_problems("planted", "press Play to watch", all_label_words(), en)
    assert button_name_problems("planted", "press 播放 to watch", all_label_words(), en)
    assert button_mentions("Answer, press *Submit*, read", all_label_words()) == ["submit"]
    assert button_name_problems("planted", "press Play", all_label_words(), ["Submit"])
