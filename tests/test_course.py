"""The way in and the way through: the course index, syllabus and errata pages, and the path.

* the committed pages and every lesson's navigation cell equal what
  ``edu_parallel.app.course.lessons`` builds from its data now (the failure names the command that
  regenerates them);
* every link of every notebook lands on a notebook of the course folder (and its heading);
* Next, from the index, visits every lesson once in the order of ``LESSONS`` and returns;
* the data matches the lessons: files, titles, the units and errata each objectives line names;
* the checkers catch a planted broken link and a planted broken path.

Nothing here reads the outline outside the repository: the course carries its own quotes.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from edu_parallel.app.course.errata import ERRATA
from edu_parallel.app.course.lessons import (
    INDEX,
    LESSONS,
    NAV_ID,
    NOTEBOOKS,
    PLANNED,
    TIMES,
    WRITE,
    build,
    load_times,
    main,
    nav_line,
    shown_in,
    stale,
    taught_in,
    write,
)
from edu_parallel.app.course.links import broken_links, chain_problems, load, markdown
from edu_parallel.app.course.outline import UNITS
from edu_parallel.app.course.pages import ERRATA_PAGE, SYLLABUS

ROOT = NOTEBOOKS.parent
PAGES = (INDEX, SYLLABUS, ERRATA_PAGE)
FILES = [lesson.file for lesson in LESSONS]
HAN = re.compile(r"[\u4e00-\u9fff]")


def test_the_committed_pages_equal_what_the_builder_writes():
    assert stale() == [], f"the course pages are out of date: run `{WRITE}` and commit them"
    assert main([]) == 0


def test_every_link_of_every_notebook_lands():
    assert broken_links(NOTEBOOKS) == []


def test_next_from_the_index_visits_every_lesson_once_in_order_and_returns():
    assert chain_problems(NOTEBOOKS, INDEX, FILES) == []
    assert nav_line(LESSONS[0].stem).startswith("Previous: [Course index](index.ipynb) · Next:")
    assert nav_line(LESSONS[-1].stem).endswith(
        "Next: [Course index](index.ipynb) · [Course index](index.ipynb)"
    )


def test_the_lessons_in_the_folder_are_the_lessons_of_the_data():
    on_disk = {p.name for p in NOTEBOOKS.glob("*.ipynb")} - set(PAGES)
    assert on_disk == set(FILES)
    assert len(FILES) == len(set(FILES))
    assert [lsn.number for lsn in LESSONS] == sorted(lsn.number for lsn in LESSONS)
    for lesson in LESSONS:
        nb = load(NOTEBOOKS / lesson.file)
        assert markdown(nb)[0].split("\n")[0] == f"# {lesson.label}", lesson.file
        assert nb["cells"][-1]["id"] == NAV_ID, f"{lesson.file}: the navigation cell is not last"
        code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
        assert any("QuizWidget(" in c for c in code), f"{lesson.file}: the index promises a quiz"


def test_each_objectives_line_names_the_units_and_errata_of_the_data():
    for lesson in LESSONS:
        first = markdown(load(NOTEBOOKS / lesson.file))[0]
        line = next(x for x in first.split("\n") if x.startswith("**Objectives**"))
        units = re.findall(r"\[(U\d+)\]\(syllabus\.ipynb#\1\)", line)
        errata = re.findall(r"\[(E\d+)\]\(errata\.ipynb#\1\)", line)
        bare = re.sub(r"\[([UE]\d+)\]\((?:syllabus|errata)\.ipynb#\1\)", "", line)
        assert not re.search(r"\b[UE]\d+\b", bare), f"{lesson.file}: a unit or erratum unlinked"
        assert units == list(lesson.units + lesson.partly), lesson.file
        assert set(errata) == set(lesson.errata), lesson.file
        partly = re.findall(r"part of (?:\[)?(U\d+)", line)
        assert set(partly) == set(lesson.partly), lesson.file


def test_every_unit_and_erratum_is_in_the_data_and_has_a_place():
    assert [u.id for u in UNITS] == [f"U{i}" for i in range(1, 20)]
    assert [e.id for e in ERRATA] == [f"E{i}" for i in range(1, 11)]
    for unit in UNITS:
        assert len(unit.objectives_zh) == 3 and all(HAN.search(x) for x in unit.objectives_zh)
        assert taught_in()[unit.id], f"{unit.id} is neither taught nor planned"
    for erratum in ERRATA:
        assert erratum.outline_zh and all(HAN.search(q) for q in erratum.outline_zh)
        assert set(erratum.units) <= {u.id for u in UNITS}
        assert shown_in()[erratum.id], f"{erratum.id} is neither shown nor planned"
    named = [u for x in (*LESSONS, *PLANNED) for u in x.units + getattr(x, "partly", ())]
    assert set(named) <= {u.id for u in UNITS}
    assert {e for x in (*LESSONS, *PLANNED) for e in x.errata} == {e.id for e in ERRATA}


def test_planned_lessons_are_named_never_linked():
    texts = ["\n".join(markdown(nb)) for nb in build().values()]
    for plan in PLANNED:
        assert not list(NOTEBOOKS.glob(f"{plan.number}_*.ipynb")), "written: move it to LESSONS"
        assert any(f"{plan.label} (planned)" in t for t in texts)
        assert not any(f"[{plan.label}]" in t for t in texts)
    assert "15_landscape.ipynb" in [p.file for p in taught_in()["U13"]]
    assert "15_landscape.ipynb" in [p.file for p in taught_in()["U19"]]
    assert "12_3d_planner.ipynb" in [p.file for p in taught_in()["U6"]]


def test_the_times_are_measured_for_every_lesson():
    times = load_times()
    assert TIMES.is_file() and set(times["seconds"]) == {lesson.stem for lesson in LESSONS}
    assert all(s > 0 for s in times["seconds"].values())
    assert {"description", "cores", "date"} <= set(times["machine"])
    index = "\n".join(markdown(build()[INDEX]))
    assert "benchmarks/bench_lessons.py" in index and times["machine"]["date"] in index


def test_the_lesson_template_is_an_authors_file_not_a_lesson():
    assert not (NOTEBOOKS / "LESSON_TEMPLATE.md").exists()
    assert "LESSONS" in (ROOT / "docs" / "LESSON_TEMPLATE.md").read_text(encoding="utf-8")


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A copy of the course folder to break, with its Chinese folder ``zh/``."""
    for path in [*NOTEBOOKS.glob("*.ipynb"), NOTEBOOKS / "GLOSSARY.md"]:
        shutil.copy(path, tmp_path / path.name)
    shutil.copytree(NOTEBOOKS / "zh", tmp_path / "zh")
    return tmp_path


def _edit(path: Path, cell_id: str, text: str) -> None:
    nb = load(path)
    cell = next(c for c in nb["cells"] if c.get("id") == cell_id)
    cell["source"] = [text]
    path.write_text(json.dumps(nb), encoding="utf-8")


def test_a_planted_broken_link_is_caught(course: Path):
    assert broken_links(course) == []
    _edit(course / "03_ring_allreduce.ipynb", NAV_ID, "See [02](02_collective.ipynb).")
    _edit(course / "06_dp_bucketing_overlap.ipynb", NAV_ID, "[U3](syllabus.ipynb#U33)")
    _edit(course / INDEX, "index-nav", "[the README](../README.md), [web](https://pytorch.org)")
    assert broken_links(course) == [
        "03_ring_allreduce.ipynb: link 02_collective.ipynb: no such notebook in the course folder",
        "06_dp_bucketing_overlap.ipynb: link syllabus.ipynb#U33: "
        "syllabus.ipynb has no heading #U33",
        "index.ipynb: link ../README.md: not a notebook of the course folder "
        "(a workspace holds notebooks only)",
    ]


def test_a_planted_broken_path_is_caught(course: Path):
    assert chain_problems(course, INDEX, FILES) == []
    skip = nav_line("06_dp_bucketing_overlap").replace("07_zero_fsdp", "08_tensor_parallel")
    _edit(course / "06_dp_bucketing_overlap.ipynb", NAV_ID, skip)
    assert chain_problems(course, INDEX, FILES)[0].startswith("index.ipynb: Next visits [")
    _edit(course / "06_dp_bucketing_overlap.ipynb", NAV_ID, "Next: [03](03_ring_allreduce.ipynb)")
    assert chain_problems(course, INDEX, FILES) == [
        "06_dp_bucketing_overlap.ipynb: Next leads back to 03_ring_allreduce.ipynb, a loop that "
        "misses the index"
    ]
    _edit(course / "06_dp_bucketing_overlap.ipynb", NAV_ID, "Next: [gone](10_3d.ipynb)")
    assert chain_problems(course, INDEX, FILES) == [
        "06_dp_bucketing_overlap.ipynb: Next leads to missing 10_3d.ipynb"
    ]
    _edit(course / "06_dp_bucketing_overlap.ipynb", NAV_ID, "The end.")
    assert chain_problems(course, INDEX, FILES) == [
        "06_dp_bucketing_overlap.ipynb: its last cell has no 'Next: [...](...)' link"
    ]
    wrong_back = nav_line("06_dp_bucketing_overlap").replace(
        "05_nccl_in_practice", "03_ring_allreduce"
    )
    _edit(course / "06_dp_bucketing_overlap.ipynb", NAV_ID, wrong_back)
    assert chain_problems(course, INDEX, FILES) == [
        "06_dp_bucketing_overlap.ipynb: Previous links to 03_ring_allreduce.ipynb, expected "
        "05_nccl_in_practice.ipynb"
    ]


def test_write_repairs_exactly_what_is_stale(course: Path):
    _edit(course / INDEX, "index-intro", "# An old index")
    nb = load(course / "03_ring_allreduce.ipynb")
    nb["cells"] = [c for c in nb["cells"] if c.get("id") != NAV_ID]
    (course / "03_ring_allreduce.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    assert stale(course) == [INDEX, "03_ring_allreduce.ipynb"]
    assert write(course) == [INDEX, "03_ring_allreduce.ipynb"]
    assert stale(course) == [] and chain_problems(course, INDEX, FILES) == []
    assert load(course / "03_ring_allreduce.ipynb")["cells"][:-1] == nb["cells"]
