"""``lab_prose.page_problems`` in Chromium on small planted pages shaped as JupyterLab renders a
lesson: a stale count of predict-then-run questions, and a button named as the other language
labels it, are found; the same page told the truth passes. ``test_learner_path.py`` runs the same
check on every real lesson."""

from __future__ import annotations

import html

import pytest
from lab_driver import chromium_browser
from lab_prose import page_problems

from edu_parallel.core.i18n import _, language

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def page():
    with chromium_browser("the prose check's browser test") as browser:
        page = browser.new_page()
        yield page
        page.close()


def question(button: str) -> str:
    return (
        "<div class='edu-quiz-question'><div><b>1. A question?</b></div>"
        f"<button class='jupyter-button'>{html.escape(button)}</button></div>"
    )


def lesson(prose: str, buttons: list[str], play: str, intro: str = "") -> str:
    """A notebook panel: a markdown cell, an animation's play button, then a quiz widget."""
    quiz = "".join(question(b) for b in buttons)
    return f"""<div class='jp-NotebookPanel'>
      <div class='jp-Cell'><div class='jp-RenderedMarkdown'>{prose}</div></div>
      <div class='jp-Cell'><div class='jp-OutputArea'><div class='jp-OutputArea-output'>
        <svg><g class='updatemenu-button'><text>{html.escape(play)}</text></g></svg></div></div>
      </div>
      <div class='jp-Cell'><div class='jp-OutputArea'><div class='jp-OutputArea-output'>
        <h3>Quiz</h3><p class='edu-quiz-intro'>{html.escape(intro)}</p>{quiz}</div></div></div>
    </div>"""


def labels(lang: str) -> tuple[str, str, str]:
    with language(lang):
        return _("Submit"), _("Predict, then run"), _("▶ play")


def test_a_stale_count_of_predict_then_run_questions_fails_on_the_page(page):
    submit, predict, play = labels("en")
    stale = (
        "<h2>Quiz</h2><p>The last two questions ask you to predict, then run on this cluster.</p>"
    )
    page.set_content(lesson(stale, [submit, submit, submit], play))
    problems = page_problems(page, "planted", "en")
    assert len(problems) == 1 and "announces 2" in problems[0] and "shows 0 of 3" in problems[0]
    page.set_content(lesson(stale, [submit, predict, predict], play))
    assert page_problems(page, "planted", "en") == []
    page.set_content(
        lesson(
            "<h2>Quiz</h2>",
            [submit, predict],
            play,
            "Questions 2 and 3 ask you to predict, then run on this cluster.",
        )
    )
    assert page_problems(page, "planted", "en")  # the widget's own line, checked too


def test_a_button_named_as_the_other_language_labels_it_fails_on_the_page(page):
    submit, _predict, play = labels("zh")
    page.set_content(lesson("<p>按 Play 观看字节数逐渐累加。</p>", [submit], play))
    problems = page_problems(page, "planted", "zh")
    assert len(problems) == 1 and "'play'" in problems[0], problems
    page.set_content(
        lesson("<p>按 <strong>▶ 播放</strong> 观看字节数逐渐累加。</p>", [submit], play)
    )
    assert page_problems(page, "planted", "zh") == []
    page.set_content(lesson("<p>Answer, press <em>Submit</em>, read.</p>", [submit], play))
    assert page_problems(page, "planted", "zh")  # the zh quiz's button reads 提交
