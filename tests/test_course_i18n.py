"""The course in 简体中文: the Chinese pages and lessons in ``notebooks/zh/``, from the same data.

* the Chinese index, syllabus and errata pages and every Chinese lesson equal what
  ``edu_parallel.app.course.lessons`` builds now (same cell ids as the English pages);
* every erratum quotes the outline in its own Chinese words, then corrects it, in both languages;
  each quote is checked word for word against the outline's text where the outline is present
  (``../shared/syllabus/`` beside the repository), and is Chinese everywhere;
* the Chinese index links every Chinese lesson and the English index (and back); every link of a
  Chinese notebook lands; ``下一课`` leads through every lesson and back, ``上一课`` one step back;
* a planted change to an English lesson's prose is reported for its Chinese counterpart.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from edu_parallel.app.course import notebook_i18n
from edu_parallel.app.course.errata import ERRATA
from edu_parallel.app.course.lessons import (
    INDEX,
    LESSONS,
    NAV_ID,
    NOTEBOOKS,
    WRITE,
    build,
    chinese_lesson,
    nav_line,
    stale,
    with_nav,
)
from edu_parallel.app.course.links import broken_links, chain_problems, links, load, markdown
from edu_parallel.app.course.outline import UNITS
from edu_parallel.app.course.pages import ERRATA_PAGE, SYLLABUS, ZH
from edu_parallel.core.i18n import language

ROOT = NOTEBOOKS.parent
ZH_NOTEBOOKS = NOTEBOOKS / ZH
PAGES = (INDEX, SYLLABUS, ERRATA_PAGE)
FILES = [lesson.file for lesson in LESSONS]
OUTLINE = ROOT.parent / "shared" / "syllabus" / "000_d46bf2010048fc24.txt"
HAN = re.compile(r"[\u4e00-\u9fff]")
GLOSS = re.compile(r"（[^（）]*[A-Za-z][^（）]*）")  # 流水线并行（Pipeline Parallelism）


def _text(nb: dict) -> str:
    return "\n\n".join(markdown(nb))


def test_the_chinese_pages_and_lessons_exist_and_are_current():
    for name in (*PAGES, *FILES):
        assert (ZH_NOTEBOOKS / name).is_file(), f"zh/{name} is missing: run `{WRITE}`"
    zh_stale = [name for name in stale() if name.startswith(f"{ZH}/")]
    assert zh_stale == [], f"out of date: {zh_stale}; run `{WRITE}` and commit them"


def test_the_chinese_pages_have_the_english_cells_in_chinese():
    english, chinese = build(lang="en"), build(lang="zh")
    for name in PAGES:
        ids_en = [c["id"] for c in english[name]["cells"]]
        ids_zh = [c["id"] for c in chinese[name]["cells"] if c["id"] != "zh-language"]
        assert ids_zh == ids_en, name
        for c in chinese[name]["cells"]:
            if c["cell_type"] == "markdown":
                assert HAN.search("".join(c["source"])), f"{name}: cell {c['id']} has no Chinese"
        code_en = [c for c in english[name]["cells"] if c["cell_type"] == "code"]
        code_zh = [c for c in chinese[name]["cells"] if c["cell_type"] == "code"]
        if code_en:  # the same code, after the cell that switches the kernel to Chinese
            assert code_zh == [notebook_i18n.language_cell(), *code_en], name


def test_the_english_pages_stay_english_whatever_the_environment(monkeypatch):
    monkeypatch.setenv("EDU_PARALLEL_LANG", "zh")
    english = build(lang="en")
    assert markdown(english[INDEX])[0].startswith("# Distributed training, run for real")
    assert "| unit | topic | taught in |" in _text(english[SYLLABUS])
    nb = with_nav(load(NOTEBOOKS / LESSONS[0].file), LESSONS[0].stem)  # English by default
    assert "".join(nb["cells"][-1]["source"]).startswith("Previous: [Course index](index.ipynb)")


def test_every_erratum_quotes_the_outline_in_chinese_with_an_english_rendering():
    for erratum in ERRATA:
        assert erratum.outline_zh, erratum.id
        for quote in erratum.outline_zh:
            assert quote.strip() == quote and len(HAN.findall(quote)) >= 5, (erratum.id, quote)
        assert len(erratum.outline_en) == len(erratum.outline_zh), erratum.id
        assert all(e and not HAN.search(e) for e in erratum.outline_en), erratum.id


@pytest.mark.skipif(not OUTLINE.is_file(), reason="the outline (../shared/syllabus) is not here")
def test_every_quote_is_the_outlines_own_words():
    text = OUTLINE.read_text(encoding="utf-8")
    for erratum in ERRATA:
        for quote in erratum.outline_zh:
            assert quote in text, f"{erratum.id}: not word for word in the outline: {quote!r}"
    for unit in UNITS:
        for line in unit.objectives_zh:
            assert f"• {line}\n" in text, f"{unit.id}: not an objectives line: {line!r}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_errata_box_shows_the_quote_first_then_the_correction(lang):
    page = build(lang=lang)[ERRATA_PAGE]
    cells = {c["id"]: "".join(c["source"]) for c in page["cells"]}
    right = "**What is right.**" if lang == "en" else "**正确的说法。**"
    for erratum in ERRATA:
        box = cells[f"errata-{erratum.id.lower()}"]
        assert box.startswith(f"## {erratum.id}\n"), erratum.id  # the anchor errata.ipynb#E1
        at = [box.index(f"> {quote}") for quote in erratum.outline_zh]
        assert at == sorted(at) and at[-1] < box.index(right), erratum.id
        if lang == "en":
            rendering = box.index("In English: ")
            assert at[-1] < rendering < box.index(right), erratum.id
            assert all(e in box for e in erratum.outline_en), erratum.id
        else:
            assert "In English" not in box and not any(e in box for e in erratum.outline_en)


def test_the_chinese_index_links_every_lesson_and_the_english_index():
    index = load(ZH_NOTEBOOKS / INDEX)
    targets = links(index)
    assert "../index.ipynb" in targets and "../GLOSSARY.md" in targets
    assert set(FILES) <= set(targets) and {SYLLABUS, ERRATA_PAGE} <= set(targets)
    assert {"zh/index.ipynb", "GLOSSARY.md"} <= set(links(load(NOTEBOOKS / INDEX)))
    with language("zh"):
        labels = [lesson.label for lesson in LESSONS]
    text = _text(index)
    for label, file in zip(labels, FILES, strict=True):
        assert f"[{label}]({file})" in text and HAN.search(label), file


def test_every_link_of_every_chinese_notebook_lands():
    assert broken_links(ZH_NOTEBOOKS) == []
    assert broken_links(NOTEBOOKS) == []


def test_next_leads_through_every_chinese_lesson_and_back():
    assert chain_problems(ZH_NOTEBOOKS, INDEX, FILES) == []
    with language("zh"):
        first, last = nav_line(LESSONS[0].stem), nav_line(LESSONS[-1].stem)
    assert first.startswith("上一课：[课程目录](index.ipynb) · 下一课：[01 · ")
    assert last.endswith("下一课：[课程目录](index.ipynb) · [课程目录](index.ipynb)")
    for lesson in LESSONS:
        nb = load(ZH_NOTEBOOKS / lesson.file)
        assert nb["cells"][-1]["id"] == NAV_ID, lesson.file
        assert "".join(nb["cells"][-1]["source"]).startswith("上一课："), lesson.file


def test_a_translated_lesson_title_is_the_title_of_the_course_data():
    """Where a lesson's H1 is translated, it is the lesson's label in Chinese (an English term in
    full-width parentheses, as at a first use, may be added)."""
    for lesson in LESSONS:
        h1 = markdown(load(ZH_NOTEBOOKS / lesson.file))[0].split("\n")[0]
        if not HAN.search(h1):
            continue  # not translated yet: notebook_i18n's checks report it
        with language("zh"):
            label = lesson.label
        assert GLOSS.sub("", h1) == f"# {label}", (
            f"zh/{lesson.file}: its title {h1!r} differs from the course's {label!r}: make the"
            " translation of the title in locale/zh_CN/package/app/course.po the same"
        )


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A copy of both course folders to break."""
    for path in [*NOTEBOOKS.glob("*.ipynb"), NOTEBOOKS / "GLOSSARY.md"]:
        shutil.copy(path, tmp_path / path.name)
    shutil.copytree(ZH_NOTEBOOKS, tmp_path / ZH)
    return tmp_path


def test_a_planted_change_to_an_english_lesson_is_reported_for_its_chinese(course: Path):
    stem = "03_ring_allreduce"
    path = course / f"{stem}.ipynb"
    nb = load(path)
    prose = notebook_i18n.prose_cells(nb)
    translated = {
        cid
        for cid, m in notebook_i18n.entries(
            notebook_i18n.read(notebook_i18n.catalog_path(stem))
        ).items()
        if m.string
    }
    target = next((c for c in prose if c["id"] in translated), prose[0])
    before = [p for p in notebook_i18n.problems(stem, course) if f"cell {target['id']} " in p]
    target["source"] = ["".join(target["source"]) + "\n\nA sentence planted in English only."]
    path.write_text(json.dumps(nb), encoding="utf-8")
    found = [p for p in notebook_i18n.problems(stem, course) if f"cell {target['id']} " in p]
    assert len(found) == 1
    if target["id"] in translated and not before:  # its translation was current, now it is not
        assert "changed in English since it was translated" in found[0]
    # the Chinese build no longer uses the outdated translation, and says the lesson is stale
    zh = chinese_lesson(load(path), stem)
    cell = next(c for c in zh["cells"] if c["id"] == target["id"])
    assert "".join(cell["source"]).endswith("A sentence planted in English only.")
    assert f"{ZH}/{stem}.ipynb" in stale(course)


def test_a_planted_english_comment_is_reported_and_stays_english_in_the_chinese(course: Path):
    stem = "03_ring_allreduce"
    path = course / f"{stem}.ipynb"
    assert notebook_i18n.problems(stem, course) == []
    nb = load(path)
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
    cell["source"] = ["".join(cell["source"]) + "\nx = 1  # a comment planted in English only"]
    path.write_text(json.dumps(nb), encoding="utf-8")
    found = notebook_i18n.problems(stem, course)
    assert found == [
        f"{stem}: code cell {cell['id']}: the comment 'a comment planted in English only' has no"
        " Chinese translation"
    ]
    zh = chinese_lesson(load(path), stem)
    shown = "".join(next(c for c in zh["cells"] if c["id"] == cell["id"])["source"])
    assert shown.endswith("x = 1  # a comment planted in English only")
    assert f"{ZH}/{stem}.ipynb" in stale(course)


def test_a_planted_broken_link_across_the_languages_is_caught(course: Path):
    assert broken_links(course) == [] and broken_links(course / ZH) == []
    for folder, link in ((course, "zh/nope.ipynb"), (course / ZH, "../index.ipynb#Nowhere")):
        nb = load(folder / INDEX)
        nav = next(c for c in nb["cells"] if c["id"] == "index-nav")
        nav["source"] = [f"[x]({link})"]
        (folder / INDEX).write_text(json.dumps(nb), encoding="utf-8")
    assert broken_links(course) == [
        "index.ipynb: link zh/nope.ipynb: no such notebook in the course"
    ]
    assert broken_links(course / ZH) == [
        "index.ipynb: link ../index.ipynb#Nowhere: ../index.ipynb has no heading #Nowhere"
    ]
