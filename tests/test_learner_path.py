"""The learner's path in a real browser: the course command, Run All, Play, the quiz, every lesson.

Playwright drives Debian's ``chromium`` (``apt install chromium``; Playwright's own browser
download is not used) against a real ``edu-parallel lab`` in a fresh workspace. For every lesson it
runs all cells from the Run menu and waits until the kernel is idle, then reads the page as a
learner sees it: no error or stderr box, every plotly figure drawn, every widget rendered (no
"Loading widget", no raw ``VBox(...)``), no output wider than its area, no label of a figure on
another (``lab_overlap.py``); it presses Play on every animation, sees the frame move and its marks
stay drawn (``lab_animation.py``), presses pause, and answers quiz questions right and wrong, a
predict-then-run question included, and reads the grading; no page error (``pageerror``) all
along. A failure saves a screenshot and names it.

Without Chromium or Playwright the tests skip and say why; in CI (``CI=true``) that is a failure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from lab_animation import collect_page_errors
from lab_driver import (
    FEEDBACK_WORDS,
    LabServer,
    Lesson,
    chromium_browser,
    cjk_fontconfig,
    close_unedited_tab,
)
from lab_prose import page_problems
from zh_outputs import english_in_notebook, english_in_widgets

from edu_parallel.core.i18n import _, language
from edu_parallel.quiz import MultipleChoice, PredictThenRun, get_quiz

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LESSONS = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
# every lesson in each language: the English ones, then the Chinese ones in the Chinese lab
PASS = [*LESSONS, *(f"zh/{name}" for name in LESSONS)]
# samples of a playing animation: six in English span the frames where a figure once blanked. A
# Chinese figure is the same code on the same data and frames with other labels: what the language
# changes is checked at frame 0 (the labels' fit and overlaps in the scan, the play buttons over the
# slider's label), and Play is pressed in the English pass (0: Play not pressed)
PLAY_SAMPLES = {"en": 6, "zh": 0}
RUN_ALL_LIMIT_S = 240
LEARNER = "browser-test"  # the learner seed of the lab's kernels: the same shuffled options


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    fonts = cjk_fontconfig(tmp_path_factory.mktemp("fonts"))
    with chromium_browser("the browser test", env=fonts) as b:
        yield b


def _lab_env(root: Path) -> dict[str, str]:
    env = {
        "EDU_PARALLEL_LEARNER": LEARNER,
        "JUPYTER_CONFIG_DIR": str(root / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(root / "jupyter-runtime"),
    }
    # no news toast to dismiss: the lab disables JupyterLab's announcements (app/lab.py)
    return env


@dataclass
class Course:
    """One ``edu-parallel lab`` in a language, and the one page a learner keeps open on it; each
    lesson opens in a tab of that page, as a learner opens them one after another."""

    lang: str
    server: LabServer
    page: object
    page_errors: list[str]  # the page's uncaught errors (``pageerror``); each lesson clears it


@pytest.fixture(scope="module")
def courses(tmp_path_factory, browser) -> Iterator[Callable[[str], Course]]:
    """``course(lang)``: the lab in ``lang`` (``--lang zh`` for Chinese), started the first time
    a test asks for it, and kept for the rest of the module."""
    opened: dict[str, Course] = {}
    with ExitStack() as stack:

        def course(lang: str) -> Course:
            if lang not in opened:
                root = tmp_path_factory.mktemp(f"learner-{lang}")
                args = ("--lang", lang) if lang != "en" else ()
                server = stack.enter_context(LabServer(root / "course", _lab_env(root), args))
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                stack.callback(page.close)
                page.goto(server.url("/lab/workspaces/learner"))
                page.wait_for_selector(".jp-DirListing-itemText", timeout=90_000)
                opened[lang] = Course(lang, server, page, collect_page_errors(page))
            return opened[lang]

        yield course


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def feedback_words(lang: str) -> tuple[str, str]:
    """The words that open the quiz's feedback in ``lang``, right and wrong: "Correct!" and
    "Not quite", as every question kind's feedback begins."""
    with language(lang):
        right = _("Correct! {expected}").split("{")[0].strip()
        wrong = re.split(r"[.。]", _("Not quite. You chose {given}; the answer is {expected}"))[0]
    return right, wrong


def _answer_the_quiz(lesson: Lesson, stem: str, lang: str) -> None:
    """A question answered wrong, then right, and a predict-then-run question graded by its run,
    with the feedback in the lesson's language.

    The right answers come from the lesson's bank built here, in ``lang``, with the learner seed
    the kernel has, and are found on the page by their text (the options are shuffled per
    learner)."""
    with language(lang):
        bank = get_quiz(stem, learner=LEARNER)
    right_word, wrong_word = feedback_words(lang)
    words = FEEDBACK_WORDS if lang == "en" else (right_word, wrong_word)
    on_page = []
    for block in lesson.quiz_questions():
        shown = block.text_content() or ""
        on_page += [(block, q) for q in bank if q.prompt[:60] in shown]
    assert on_page, f"{stem}: no quiz question of the bank is on the page"
    single = [(b, q) for b, q in on_page if isinstance(q, MultipleChoice) and not q.multiple]
    assert single, f"{stem}: no one-answer question to try"
    block, q = single[0]
    wrong = q.choices[min(set(range(len(q.choices))) - set(q.correct_indices))]
    assert wrong_word in lesson.answer(block, choice=wrong, words=words)
    right = q.choices[next(iter(q.correct_indices))]
    assert right_word in lesson.answer(block, choice=right, words=words)
    predicts = [(b, q) for b, q in on_page if isinstance(q, PredictThenRun)]
    assert predicts, f"{stem}: no predict-then-run question"
    block, q = predicts[0]
    if isinstance(q.predict, MultipleChoice):
        shown = lesson.answer(block, choice=q.predict.choices[0], words=words)
    else:
        shown = lesson.answer(block, text="3", words=words)
    assert right_word in shown or wrong_word in shown, f"{stem}: the run did not grade: {shown}"


@pytest.mark.parametrize("name", PASS)
def test_a_learner_runs_every_cell_and_sees_every_output(courses, shots, name, run_all_times):
    """``name``: a lesson, ``zh/…`` in Chinese, where its outputs are also read for English
    (``zh_outputs.py``) from the notebook as the lab saves it."""
    lang = "zh" if name.startswith("zh/") else "en"
    course = courses(lang)
    course.page_errors.clear()
    page, lab = course.page, course.server
    lesson = Lesson(page, lab, name, shots)
    try:
        seconds = lesson.run_all(RUN_ALL_LIMIT_S)
        run_all_times(name, seconds)
        scan = lesson.scan()
        print(f"{name}: Run All {seconds:.1f} s, {scan.cells} cells, {scan.plotly_outputs} plots")
        assert not scan.errors, f"error outputs: {scan.errors}"
        assert not scan.stderr, f"stderr boxes (they read as errors): {scan.stderr}"
        assert scan.plotly_rendered == scan.plotly_outputs, "a plotly figure was not drawn"
        assert not scan.raw_widgets, f"widgets shown as text: {scan.raw_widgets}"
        assert not scan.broken_widgets, f"widgets that did not load: {scan.broken_widgets}"
        assert not scan.too_wide, f"outputs wider than their area: {scan.too_wide}"
        assert not scan.wrapped, f"text outputs that wrap in their area: {scan.wrapped}"
        assert not scan.truncated, f"table cells cut with no hover text: {scan.truncated}"
        assert not scan.overlaps, f"figure labels that overlap: {scan.overlaps}"
        if lang == "zh":
            prose = page.evaluate(
                """() => [...document.querySelectorAll(
                       '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown')]
                   .map(e => e.textContent).join(' ')"""
            )
            assert _has_chinese(prose), "the lesson's prose is not in Chinese"
            english = english_in_notebook(lesson.save())
            assert not english, f"English in the Chinese outputs: {english[:10]}"
        assert not (said := page_problems(page, name, lang)), f"prose against screen: {said}"
        played = lesson.play_every_animation(PLAY_SAMPLES[lang])
        assert not played, f"animations that blank, or hide a label, or stay: {played}"
        errors = course.page_errors
        assert not errors, f"page errors in Run All, Play and pause: {errors}"
        _answer_the_quiz(lesson, Path(name).stem, lang)
        if lang == "zh":  # what the widgets show, the quiz's feedback and a run's report included
            english = english_in_widgets(lesson.widget_texts())
            assert not english, f"English in the Chinese widgets: {english[:10]}"
    except BaseException:
        print(f"screenshot: {lesson.screenshot('failure')}")
        raise
    finally:
        lesson.close()


def test_the_lab_opens_on_the_index_and_its_links_lead_through_the_course(browser, courses):
    lab = courses("en").server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(lab.url("/"))
        page.wait_for_selector(".lm-TabBar-tab.lm-mod-current:has-text('index.ipynb')")
        listing = page.inner_text(".jp-DirListing-content")
        assert "LESSON_TEMPLATE" not in listing and "00_tour.ipynb" in listing
        page.click(f".jp-RenderedMarkdown a[href*='/files/{LESSONS[0]}?']")
        page.wait_for_selector(f".lm-TabBar-tab.lm-mod-current:has-text('{LESSONS[0]}')")
        panel = ".jp-NotebookPanel:not(.lm-mod-hidden)"
        nav = page.locator(f"{panel} a[href*='/files/{LESSONS[1]}?']").last
        nav.scroll_into_view_if_needed()
        nav.click()
        page.wait_for_selector(f".lm-TabBar-tab.lm-mod-current:has-text('{LESSONS[1]}')")
    finally:
        page.close()
        for name in ("index.ipynb", *LESSONS[:2]):
            lab.shutdown_kernels(name)


def _has_chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_the_chinese_lab_opens_on_the_chinese_index(browser, courses):
    """`edu-parallel lab --lang zh` opens the Chinese index, in the folder ``zh``; its lessons run
    above, in the Chinese lab (``PASS``), their prose, outputs and quiz feedback in Chinese."""
    lab = courses("zh").server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(lab.url("/"))
        page.wait_for_selector(".lm-TabBar-tab.lm-mod-current:has-text('index.ipynb')")
        page.wait_for_selector(".jp-BreadCrumbs:has-text('zh')")  # the Chinese index
        page.wait_for_selector(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown:has-text('课程目录')",
            timeout=60_000,
        )
        assert _has_chinese("".join(feedback_words("zh"))), "the quiz feedback has no Chinese"
        close_unedited_tab(page)
    finally:
        page.close()
        lab.shutdown_kernels("zh/index.ipynb")
