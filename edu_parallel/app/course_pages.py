"""The course's pages rendered as notebooks: the index, the syllabus and the errata.

:mod:`.course` hands over its lessons and says where each unit is taught and which lessons show
each erratum (``Place`` lists, computed from its lesson data); this module only writes them out.
A planned lesson is named, never linked, so every link of a page lands on a notebook that exists.

The units and errata are :data:`~.course_outline.UNITS` and :data:`~.course_outline.ERRATA`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .course_outline import ERRATA, OUTLINE_TITLE, UNITS

INDEX = "index.ipynb"  # the course index: what `edu-parallel lab` opens first
SYLLABUS = "syllabus.ipynb"
ERRATA_PAGE = "errata.ipynb"
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


@dataclass(frozen=True)
class Place:
    """A lesson that teaches a unit or shows an erratum: linked when written, named when planned."""

    label: str  # "03 · Ring all-reduce: ..."
    file: str | None  # None: planned, not written yet
    partly: bool = False

    def markdown(self) -> str:
        text = f"[{self.label}]({self.file})" if self.file else f"{self.label} (planned)"
        return f"{text} (in part)" if self.partly else text


def cell(cell_id: str, text: str, code: bool = False) -> dict:
    """A notebook cell; source as a list of lines, each ending in a newline but the last."""
    lines = text.strip("\n").split("\n")
    source = [line + "\n" for line in lines[:-1]] + [lines[-1]]
    if code:
        return {
            "cell_type": "code",
            "execution_count": None,
            "id": cell_id,
            "metadata": {},
            "outputs": [],
            "source": source,
        }
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": source}


def notebook(cells: list[dict]) -> dict:
    """A notebook (nbformat 4.5) holding ``cells``."""
    return {"cells": cells, "metadata": METADATA, "nbformat": 4, "nbformat_minor": 5}


def unit_link(unit: str) -> str:
    return f"[{unit}]({SYLLABUS}#{unit})"


def erratum_link(erratum: str) -> str:
    return f"[{erratum}]({ERRATA_PAGE}#{erratum})"


def places(found: list[Place]) -> str:
    return ", ".join(p.markdown() for p in found) if found else "not taught yet"


FOOTER = f"[Course index]({INDEX}) · [Syllabus]({SYLLABUS}) · [Errata]({ERRATA_PAGE})"


def syllabus_page(taught: dict[str, list[Place]]) -> dict:
    """The 19 units: the outline's objective lines, the topic in English, where each is taught."""
    corrected = {u.id: [e.id for e in ERRATA if u.id in e.units] for u in UNITS}
    intro = f"""# Syllabus: the outline's 19 units, and where the course teaches each

The course follows an outline in Chinese, *{OUTLINE_TITLE}* ("distributed training and
communication"): 19 units, each with three objectives (its `•` lines, quoted below word for word),
an explanation and a summary. The outline sets the **scope**; it is not always right. Where it is
wrong, the course says so and runs something that settles it: see the [errata]({ERRATA_PAGE}).

A unit may be taught by several lessons, and a lesson may teach several units. Lessons not written
yet are marked *planned*; "(in part)" means the lesson covers some of the unit's objectives.

| unit | topic | taught in |
|---|---|---|
"""
    rows = "\n".join(f"| {unit_link(u.id)} | {u.topic} | {places(taught[u.id])} |" for u in UNITS)
    cells = [cell("syllabus-intro", intro + rows)]
    for u in UNITS:
        quoted = "\n".join(f"> • {line}" for line in u.objectives_zh)
        fixes = ", ".join(erratum_link(e) for e in corrected[u.id]) or "none"
        text = f"""## {u.id}

**{u.topic}**

The outline's objectives:

{quoted}

Taught in: {places(taught[u.id])}

Corrections to the outline: {fixes}"""
        cells.append(cell(f"syllabus-{u.id.lower()}", text))
    cells.append(cell("syllabus-nav", FOOTER))
    return notebook(cells)


def errata_page(shown: dict[str, list[Place]]) -> dict:
    """Each correction: the outline's words, what is right, what the course runs, and where."""
    intro = f"""# Errata: where the outline is wrong, and the runs that settle it

The outline of the course (*{OUTLINE_TITLE}*, see the [syllabus]({SYLLABUS})) is its scope, not
its truth. Each item below quotes the outline's own words, says what is right, and names the
lesson whose run shows it: a count of bytes, a ledger of memory, a timeline, or a comparison with
a dense or single-process reference. Nothing here asks to be taken on trust.

| erratum | units | the outline says | shown in |
|---|---|---|---|
"""
    rows = "\n".join(
        f"| {erratum_link(e.id)} | {', '.join(unit_link(u) for u in e.units)} | {e.says} "
        f"| {places(shown[e.id])} |"
        for e in ERRATA
    )
    cells = [cell("errata-intro", intro + rows)]
    for e in ERRATA:
        quoted = "\n>\n".join(f"> {q}" for q in e.outline_zh)
        ran = e.shown or "Nothing to run: this is a fact about software, not a measurement."
        text = f"""## {e.id}

Units: {", ".join(unit_link(u) for u in e.units)}

The outline says:

{quoted}

In short: {e.says}

**What is right.** {e.right}

**What the course runs.** {ran}

Shown in: {places(shown[e.id])}. Source: {e.source}."""
        cells.append(cell(f"errata-{e.id.lower()}", text))
    cells.append(cell("errata-nav", FOOTER))
    return notebook(cells)


def _units(lesson) -> str:
    parts = [unit_link(u) for u in lesson.units]
    parts += [f"part of {unit_link(u)}" for u in lesson.partly]
    return ", ".join(parts) or "(how the course works)"


def index_page(lessons: tuple, planned: tuple, times: dict) -> dict:
    """The course index: what the course is, how to take it, and the learning path
    (``lessons`` and ``planned`` as :mod:`.course` holds them; ``times`` as measured)."""
    seconds = times.get("seconds", {})
    machine = times.get("machine", {})
    rows = "\n".join(
        f"| [{lsn.label}]({lsn.file}) | {lsn.goal} | {_units(lsn)} | "
        f"{', '.join(erratum_link(e) for e in lsn.errata)} | "
        f"{f'{seconds[lsn.stem]:.0f} s' if lsn.stem in seconds else 'not measured'} |"
        for lsn in lessons
    )
    where = (
        f"measured by `benchmarks/bench_lessons.py` (a fresh kernel running every cell) on "
        f"{machine.get('description', 'an unnamed machine')}, {machine.get('date', 'no date')}"
        if seconds
        else "not measured yet: run `benchmarks/bench_lessons.py`"
    )
    planned = "\n".join(
        f"- {p.label} (planned): {', '.join(map(unit_link, p.units)) or 'beyond the outline'}"
        for p in planned
    )
    intro = """# Distributed training, run for real: the course

Every lesson starts a small cluster of real worker processes on this machine (a `torch.distributed`
group, gloo on CPU), runs an algorithm of distributed training on them, and records every send,
receive, collective, compute step and memory change in a **trace**. The figures are drawn from that
trace and every formula is checked against it: no number in a lesson is typed in by hand."""
    how = """## How to take it

- Take the lessons in the order below; each ends with links to the previous and the next one.
- Open a lesson and choose **Run → Run All Cells**. The first code cell starts the cluster; the
  rest run in seconds to a minute or two. Re-run any cell: the cluster stays up.
- Animated figures have a **Play** button and a slider: step through the run yourself.
- Every lesson has a **quiz**. Its answers are computed by the package, and a "predict, then run"
  question checks your prediction against a fresh run on the ranks.
- Most lessons have an **exercise**: you write the algorithm, and `check("NN", my_fn, cluster)`
  runs your code on the lesson's ranks and says what went wrong, by rank and step.
- Your copy of each lesson is yours: edits are kept. `edu-parallel lab --reset NN` restores one."""
    path = f"""## The learning path

| lesson | goal | syllabus units | errata | time to run |
|---|---|---|---|---|
{rows}

Time to run: {where}. Expect more on a busy machine.

Not written yet:

{planned}"""
    outline = f"""## The outline and its errata

The course covers the 19 units of its outline. The [syllabus]({SYLLABUS}) quotes each unit's
objectives and links the lessons that teach it; the [errata]({ERRATA_PAGE}) page lists the ten
places where the outline is wrong, with the run that shows what is right."""
    progress = """## Exercises and your progress

Which exercises you have passed is kept in this folder (`.edu-parallel/progress.json`).
`progress_table()` lists every exercise with its lesson and your status; in a terminal,
`edu-parallel exercise list` prints the same."""
    code = "from edu_parallel.exercises import progress_table\n\nprogress_table()"
    first = lessons[0]
    nav = f"Next: [{first.label}]({first.file}) · [Syllabus]({SYLLABUS}) · [Errata]({ERRATA_PAGE})"
    return notebook(
        [
            cell("index-intro", intro),
            cell("index-how", how),
            cell("index-path", path),
            cell("index-outline", outline),
            cell("index-progress", progress),
            cell("index-progress-table", code, code=True),
            cell("index-nav", nav),
        ]
    )
