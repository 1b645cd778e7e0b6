"""The course's pages rendered as notebooks: the index, the syllabus and the errata.

:mod:`.lessons` hands over its lessons and says where each unit is taught and which lessons show
each erratum (``Place`` lists, computed from its lesson data); this module only writes them out.
A planned lesson is named, never linked, so every link of a page lands on a notebook that exists.

The units and errata are :data:`~.outline.UNITS` and :data:`~.errata.ERRATA`.
Every text goes through ``_()``: :mod:`.lessons` builds the pages once in English (``notebooks/``)
and once under ``with language("zh")`` (``notebooks/zh/``), with the same cells and cell ids.
Headings that other notebooks link to (``## U3``, ``## E1``) are the same in both languages.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.i18n import N_, _, get_language
from .errata import ERRATA
from .outline import OUTLINE_TITLE, UNITS

INDEX = "index.ipynb"  # the course index: what `edu-parallel lab` opens first
SYLLABUS = "syllabus.ipynb"
ERRATA_PAGE = "errata.ipynb"
ZH = "zh"  # the folder of the Chinese pages and lessons, beside the English ones
GLOSSARY = "GLOSSARY.md"  # the terms in both languages, beside the English index
METADATA = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def listing(items: list[str]) -> str:
    """``a, b, c`` in English, ``a、b、c`` in Chinese."""
    return ("、" if get_language() == "zh" else ", ").join(items)


@dataclass(frozen=True)
class Place:
    """A lesson that teaches a unit or shows an erratum: linked when written, named when planned."""

    label: str  # "03 · Ring all-reduce: ..."
    file: str | None  # None: planned, not written yet
    partly: bool = False

    def markdown(self) -> str:
        text = (
            f"[{self.label}]({self.file})"
            if self.file
            else _("{lesson} (planned)").format(lesson=self.label)
        )
        return _("{lesson} (in part)").format(lesson=text) if self.partly else text


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
    return listing([p.markdown() for p in found]) if found else _("not taught yet")


def table_head(*columns: str) -> str:
    """A markdown table's header and rule, the column names (marked ``N_()``) translated."""
    return "| " + " | ".join(_(c) for c in columns) + " |\n" + "|---" * len(columns) + "|"


def footer() -> str:
    """The last cell of the syllabus and errata pages: the three pages of the course."""
    index, syllabus, errata = _("Course index"), _("Syllabus"), _("Errata")
    return f"[{index}]({INDEX}) · [{syllabus}]({SYLLABUS}) · [{errata}]({ERRATA_PAGE})"


def language_links(page: str) -> str:
    """The page in the other language, ``English · [简体中文](zh/index.ipynb)`` and back, and the
    glossary of the terms in both (one file, beside the English index)."""
    if get_language() == "zh":
        return f"[English](../{page}) · 简体中文 · [术语表 · Glossary](../{GLOSSARY})"
    return f"English · [简体中文]({ZH}/{page}) · [Glossary · 术语表]({GLOSSARY})"


def syllabus_page(taught: dict[str, list[Place]]) -> dict:
    """The 19 units: the outline's objective lines, the topic, where each is taught."""
    corrected = {u.id: [e.id for e in ERRATA if u.id in e.units] for u in UNITS}
    intro = _(
        "# Syllabus: the outline's 19 units, and where the course teaches each\n"
        "\n"
        'The course follows an outline in Chinese, *{title}* ("distributed training and\n'
        'communication"): 19 units, each with three objectives (its `•` lines, quoted below word'
        " for word),\n"
        "an explanation and a summary. The outline sets the **scope**; it is not always right."
        " Where it is\n"
        "wrong, the course says so and runs something that settles it: see the"
        " [errata]({errata}).\n"
        "\n"
        "A unit may be taught by several lessons, and a lesson may teach several units. Lessons not"
        " written\n"
        'yet are marked *planned*; "(in part)" means the lesson covers some of the unit\'s'
        " objectives."
    ).format(title=OUTLINE_TITLE, errata=ERRATA_PAGE)
    head = table_head(N_("unit"), N_("topic"), N_("taught in"))
    rows = "\n".join(
        f"| {unit_link(u.id)} | {_(u.topic)} | {places(taught[u.id])} |" for u in UNITS
    )
    cells = [cell("syllabus-intro", f"{intro}\n\n{head}\n{rows}")]
    for u in UNITS:
        quoted = "\n".join(f"> • {line}" for line in u.objectives_zh)
        fixes = listing([erratum_link(e) for e in corrected[u.id]]) or _("none")
        text = "\n\n".join(
            [
                f"## {u.id}",
                f"**{_(u.topic)}**",
                _("The outline's objectives:"),
                quoted,
                _("Taught in: {lessons}").format(lessons=places(taught[u.id])),
                _("Corrections to the outline: {errata}").format(errata=fixes),
            ]
        )
        cells.append(cell(f"syllabus-{u.id.lower()}", text))
    cells.append(cell("syllabus-nav", footer()))
    return notebook(cells)


def outline_quote(erratum) -> str:
    """The outline's own words, quoted in Chinese; on an English page, then in English."""
    quoted = "\n>\n".join(f"> {q}" for q in erratum.outline_zh)
    if get_language() == "zh":
        return quoted
    english = "; ".join(f"“{q}”" for q in erratum.outline_en)
    return f"{quoted}\n\nIn English: {english}."


def errata_page(shown: dict[str, list[Place]]) -> dict:
    """Each correction: the outline's words, what is right, what the course runs, and where."""
    intro = _(
        "# Errata: where the outline is wrong, and the runs that settle it\n"
        "\n"
        "The outline of the course (*{title}*, see the [syllabus]({syllabus})) is its scope, not\n"
        "its truth. Each item below quotes the outline's own words, says what is right, and names"
        " the\n"
        "lesson whose run shows it: a count of bytes, a ledger of memory, a timeline, or a"
        " comparison with\n"
        "a dense or single-process reference. Nothing here asks to be taken on trust."
    ).format(title=OUTLINE_TITLE, syllabus=SYLLABUS)
    head = table_head(N_("erratum"), N_("units"), N_("the outline says"), N_("shown in"))
    rows = "\n".join(
        f"| {erratum_link(e.id)} | {listing([unit_link(u) for u in e.units])} | {_(e.says)} "
        f"| {places(shown[e.id])} |"
        for e in ERRATA
    )
    cells = [cell("errata-intro", f"{intro}\n\n{head}\n{rows}")]
    for e in ERRATA:
        ran = (
            _(e.shown)
            if e.shown
            else _("Nothing to run: this is a fact about software, not a measurement.")
        )
        text = "\n\n".join(
            [
                f"## {e.id}",
                _("Units: {units}").format(units=listing([unit_link(u) for u in e.units])),
                _("The outline says:"),
                outline_quote(e),
                _("In short: {gist}").format(gist=_(e.says)),
                _("**What is right.** {text}").format(text=_(e.right)),
                _("**What the course runs.** {text}").format(text=ran),
                _("Shown in: {lessons}. Source: {source}.").format(
                    lessons=places(shown[e.id]), source=_(e.source)
                ),
            ]
        )
        cells.append(cell(f"errata-{e.id.lower()}", text))
    cells.append(cell("errata-nav", footer()))
    return notebook(cells)


def _units(lesson) -> str:
    parts = [unit_link(u) for u in lesson.units]
    parts += [_("part of {unit}").format(unit=unit_link(u)) for u in lesson.partly]
    return listing(parts) or _("(how the course works)")


def time_to_run(seconds: dict, stem: str) -> str:
    return f"{seconds[stem]:.0f} s" if stem in seconds else _("not measured")


def index_page(lessons: tuple, planned: tuple, times: dict) -> dict:
    """The course index: what the course is, how to take it, and the learning path
    (``lessons`` and ``planned`` as :mod:`.lessons` holds them; ``times`` as measured)."""
    browser = times.get("browser", {})
    shown = browser if browser.get("seconds") else times  # the browser's figure where measured
    seconds = shown.get("seconds", {})
    machine = shown.get("machine", {})
    rows = "\n".join(
        f"| [{lsn.label}]({lsn.file}) | {_(lsn.goal)} | {_units(lsn)} | "
        f"{listing([erratum_link(e) for e in lsn.errata])} | "
        f"{time_to_run(seconds, lsn.stem)} |"
        for lsn in lessons
    )
    description, date = machine.get("description"), machine.get("date")
    how_measured = (
        _(
            "Run All in JupyterLab in Chromium, measured by `benchmarks/bench_lessons.py"
            " --browser` on {machine}, {date}"
        )
        if shown is browser
        else _(
            "measured by `benchmarks/bench_lessons.py` (a fresh kernel running every cell) on"
            " {machine}, {date}"
        )
    )
    where = (
        how_measured.format(
            machine=_("an unnamed machine") if description is None else description,
            date=_("no date") if date is None else date,
        )
        if seconds
        else _("not measured yet: run `benchmarks/bench_lessons.py`")
    )
    planned = "\n".join(
        "- "
        + _("{lesson} (planned): {units}").format(
            lesson=p.label,
            units=listing([unit_link(u) for u in p.units]) or _("beyond the outline"),
        )
        for p in planned
    )
    intro = "\n\n".join(
        [
            _("# Distributed training, run for real: the course"),
            language_links(INDEX),
            _(
                "Every lesson starts a small cluster of real worker processes on this machine (a"
                " `torch.distributed`\n"
                "group, gloo on CPU), runs an algorithm of distributed training on them, and"
                " records every send,\n"
                "receive, collective, compute step and memory change in a **trace**. The figures"
                " are drawn from that\n"
                "trace and every formula is checked against it: no number in a lesson is typed in"
                " by hand."
            ),
        ]
    )
    how = _(
        "## How to take it\n"
        "\n"
        "- Take the lessons in the order below; each ends with links to the previous and the next"
        " one.\n"
        "- Open a lesson and choose **Run → Run All Cells**. The first code cell starts the"
        " cluster; the\n"
        "  rest run in seconds to a minute or two. Re-run any cell: the cluster stays up.\n"
        "- Animated figures have a **Play** button and a slider: step through the run yourself.\n"
        '- Every lesson has a **quiz**. Its answers are computed by the package, and a "predict,'
        ' then run"\n'
        "  question checks your prediction against a fresh run on the ranks.\n"
        "- Most lessons have an **exercise**: you write the algorithm, and"
        ' `check("NN", my_fn, cluster)`\n'
        "  runs your code on the lesson's ranks and says what went wrong, by rank and step.\n"
        "- Your copy of each lesson is yours: edits are kept. `edu-parallel lab --reset NN`"
        " restores one."
    )
    head = table_head(
        N_("lesson"), N_("goal"), N_("syllabus units"), N_("errata"), N_("time to run")
    )
    path = "\n\n".join(
        [
            _("## The learning path"),
            f"{head}\n{rows}",
            _("Time to run: {where}. Expect more on a busy machine.").format(where=where),
            _("Not written yet:"),
            planned,
        ]
    )
    outline = _(
        "## The outline and its errata\n"
        "\n"
        "The course covers the 19 units of its outline. The [syllabus]({syllabus}) quotes each"
        " unit's\n"
        "objectives and links the lessons that teach it; the [errata]({errata}) page lists the"
        " ten\n"
        "places where the outline is wrong, with the run that shows what is right."
    ).format(syllabus=SYLLABUS, errata=ERRATA_PAGE)
    progress = _(
        "## Exercises and your progress\n"
        "\n"
        "Which exercises you have passed is kept in this folder (`.edu-parallel/progress.json`).\n"
        "`progress_table()` lists every exercise with its lesson and your status; in a terminal,\n"
        "`edu-parallel exercise list` prints the same."
    )
    code = "from edu_parallel.exercises import progress_table\n\nprogress_table()"
    first = lessons[0]
    nav = _("Next: {next} · {syllabus} · {errata}").format(
        next=f"[{first.label}]({first.file})",
        syllabus="[" + _("Syllabus") + "](" + SYLLABUS + ")",
        errata="[" + _("Errata") + "](" + ERRATA_PAGE + ")",
    )
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
