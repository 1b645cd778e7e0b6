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

from pathlib import Path

import pytest
from lab_animation import collect_page_errors
from lab_driver import (
    ZH_LESSON,
    LabServer,
    Lesson,
    chromium_browser,
    cjk_fontconfig,
    close_unedited_tab,
)
from lab_prose import page_problems

from edu_parallel.core.i18n import _, language
from edu_parallel.quiz import MultipleChoice, PredictThenRun, get_quiz

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LESSONS = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
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


@pytest.fixture(scope="module")
def lab(tmp_path_factory, browser):
    root = tmp_path_factory.mktemp("learner")
    with LabServer(root / "course", _lab_env(root)) as server:
        yield server


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def page(browser, lab):
    """One JupyterLab page for the whole pass; each lesson opens in a tab, as a learner does."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(lab.url("/lab/workspaces/learner"))
    page.wait_for_selector(".jp-DirListing-itemText", timeout=90_000)
    yield page
    page.close()


@pytest.fixture(scope="module")
def page_errors(page) -> list[str]:
    """The page's uncaught errors (``pageerror``); each lesson clears it first."""
    return collect_page_errors(page)


def _answer_the_quiz(lesson: Lesson, stem: str) -> None:
    """A question answered wrong, then right, and a predict-then-run question graded by its run.

    The right answers come from the lesson's bank built here, with the learner seed the kernel
    has, and are found on the page by their text (the options are shuffled per learner)."""
    bank = get_quiz(stem, learner=LEARNER)
    on_page = []
    for block in lesson.quiz_questions():
        shown = block.text_content() or ""
        on_page += [(block, q) for q in bank if q.prompt[:60] in shown]
    assert on_page, f"{stem}: no quiz question of the bank is on the page"
    single = [(b, q) for b, q in on_page if isinstance(q, MultipleChoice) and not q.multiple]
    assert single, f"{stem}: no one-answer question to try"
    block, q = single[0]
    wrong = q.choices[min(set(range(len(q.choices))) - set(q.correct_indices))]
    assert "Not quite" in lesson.answer(block, choice=wrong)
    right = q.choices[next(iter(q.correct_indices))]
    assert "Correct!" in lesson.answer(block, choice=right)
    predicts = [(b, q) for b, q in on_page if isinstance(q, PredictThenRun)]
    assert predicts, f"{stem}: no predict-then-run question"
    block, q = predicts[0]
    if isinstance(q.predict, MultipleChoice):
        shown = lesson.answer(block, choice=q.predict.choices[0])
    else:
        shown = lesson.answer(block, text="3")
    assert "Correct!" in shown or "Not quite" in shown, f"{stem}: the run did not grade: {shown}"


@pytest.mark.parametrize("name", LESSONS)
def test_a_learner_runs_every_cell_and_sees_every_output(
    page, page_errors, lab, shots, name, run_all_times
):
    page_errors.clear()
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
        assert not (said := page_problems(page, name, "en")), f"prose against screen: {said}"
        played = lesson.play_every_animation()
        assert not played, f"animations that blank, or hide a label, or stay: {played}"
        assert not page_errors, f"page errors in Run All, Play and pause: {page_errors}"
        _answer_the_quiz(lesson, Path(name).stem)
    except BaseException:
        print(f"screenshot: {lesson.screenshot('failure')}")
        raise
    finally:
        lesson.close()


def test_the_lab_opens_on_the_index_and_its_links_lead_through_the_course(browser, lab):
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


def test_a_chinese_learner_runs_a_lesson_and_answers_in_chinese(
    browser, tmp_path_factory, shots, run_all_times
):
    """`edu-parallel lab --lang zh` opens the Chinese index; the Chinese lesson 03 runs with no
    error, its prose, figures and quiz read in Chinese, and a question answered wrong, then right,
    is graded in Chinese."""
    root = tmp_path_factory.mktemp("learner-zh")
    with LabServer(root / "course", _lab_env(root), args=("--lang", "zh")) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        lesson = None
        try:
            page.goto(server.url("/"))
            page.wait_for_selector(".lm-TabBar-tab.lm-mod-current:has-text('index.ipynb')")
            page.wait_for_selector(".jp-BreadCrumbs:has-text('zh')")  # the Chinese index
            page.wait_for_selector(
                ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown:has-text('课程目录')",
                timeout=60_000,
            )
            close_unedited_tab(page)
            page.click(".jp-BreadCrumbs-home")
            errors = collect_page_errors(page)
            lesson = Lesson(page, server, ZH_LESSON, shots)
            run_all_times(ZH_LESSON, lesson.run_all(RUN_ALL_LIMIT_S))
            scan = lesson.scan()
            assert not scan.errors, f"error outputs: {scan.errors}"
            assert not scan.stderr, f"stderr boxes: {scan.stderr}"
            assert scan.plotly_rendered == scan.plotly_outputs, "a plotly figure was not drawn"
            assert not scan.wrapped, f"text outputs that wrap in their area: {scan.wrapped}"
            assert not scan.truncated, f"table cells cut with no hover text: {scan.truncated}"
            assert not scan.overlaps, f"figure labels that overlap: {scan.overlaps}"
            panel = page.inner_text(".jp-NotebookPanel:not(.lm-mod-hidden)")
            assert "环形 AllReduce" in panel, "the lesson's prose is not in Chinese"
            assert not (said := page_problems(page, ZH_LESSON, "zh")), f"prose vs screen: {said}"
            played = lesson.play_every_animation()
            assert not played, f"animations that blank, or hide a label, or stay: {played}"
            assert not errors, f"page errors in Run All, Play and pause: {errors}"
            with language("zh"):
                bank = get_quiz("03_ring_allreduce", learner=LEARNER)
                right_word = _("Correct! {expected}").split("{")[0].strip()
                wrong_word = _("Not quite. You chose {given}; the answer is {expected}")
                wrong_word = wrong_word.split("{")[0].strip()
            assert _has_chinese(right_word + wrong_word), "the quiz feedback has no Chinese"
            on_page = [
                (block, q)
                for block in lesson.quiz_questions()
                for q in bank
                if isinstance(q, MultipleChoice)
                and not q.multiple
                and q.prompt[:40] in (block.text_content() or "")
            ]
            assert on_page, "no Chinese quiz question of the bank is on the page"
            block, q = on_page[0]
            assert _has_chinese(q.prompt), f"the question is not in Chinese: {q.prompt!r}"
            words = (right_word, wrong_word)
            wrong = q.choices[min(set(range(len(q.choices))) - set(q.correct_indices))]
            assert wrong_word in lesson.answer(block, choice=wrong, words=words)
            right = q.choices[next(iter(q.correct_indices))]
            assert right_word in lesson.answer(block, choice=right, words=words)
            print(f"screenshot: {lesson.screenshot('zh')}")
        except BaseException:
            if lesson is not None:
                print(f"screenshot: {lesson.screenshot('failure')}")
            raise
        finally:
            if lesson is not None:
                lesson.close()
            page.close()
