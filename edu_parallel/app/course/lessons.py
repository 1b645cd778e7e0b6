"""The course as data: the lessons in learning order, and the pages built from them.

:data:`LESSONS` is the one source of the learning path. From it (and from the outline in
:mod:`.outline` and :mod:`.errata`) :func:`build` makes the course index, the syllabus page and the
errata page, and the navigation cell that ends every lesson (``Previous · Next · Course
index``). Which lessons teach a unit, and which show an erratum, is computed from :data:`LESSONS`;
lessons not written yet are :data:`PLANNED` and are named, never linked.

The time each lesson takes to run is measured by ``benchmarks/bench_lessons.py`` and read from
``lesson_times.json`` beside this file.

Both languages are built from the same data: the English pages and lessons in ``notebooks/``,
the Chinese ones in ``notebooks/zh/`` (the pages built under ``with language("zh")``, every text
through gettext; each Chinese lesson is its English lesson translated cell by cell by
:func:`.notebook_i18n.translated`, then given the Chinese navigation cell).

Regenerate the pages after changing the data: ``python -m edu_parallel.app.course.lessons --write``
(``tests/test_course.py`` fails while a page differs from what this module builds).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from ...core.i18n import N_, _, language
from .errata import ERRATA
from .links import load
from .notebook_i18n import language_cell, translated
from .outline import UNITS
from .pages import (
    ERRATA_PAGE,
    INDEX,
    SYLLABUS,
    ZH,
    Place,
    cell,
    errata_page,
    index_page,
    syllabus_page,
)

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"  # the checkout's lessons
TIMES = Path(__file__).with_name("lesson_times.json")
NAV_ID = "course-nav"  # the id of the navigation cell that ends every lesson
LANGUAGES = ("en", "zh")  # English in notebooks/, Chinese in notebooks/zh/
WRITE = "python -m edu_parallel.app.course.lessons --write"


@dataclass(frozen=True)
class Lesson:
    """A lesson: ``notebooks/{stem}.ipynb``, its H1 is ``# {number} · {title}``.

    ``title`` and ``goal`` are English marked ``N_()``; :attr:`label` is in the current language.
    """

    stem: str
    title: str
    goal: str
    units: tuple[str, ...] = ()
    partly: tuple[str, ...] = ()  # units it covers in part
    errata: tuple[str, ...] = ()

    @property
    def number(self) -> str:
        return self.stem.split("_", 1)[0]

    @property
    def file(self) -> str:
        return f"{self.stem}.ipynb"

    @property
    def label(self) -> str:
        return f"{self.number} · {_(self.title)}"


@dataclass(frozen=True)
class Planned:
    """A lesson not written yet, and the parts of the outline it will teach."""

    number: str
    title: str
    units: tuple[str, ...] = ()
    errata: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.number} · {_(self.title)}"


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        "00_tour",
        N_("Tour: a real cluster in your notebook"),
        N_("Start real worker processes, read a trace, see a failure named, take a quiz."),
    ),
    Lesson(
        "01_parallelism_map",
        N_("The parallelism map: DP, TP, PP and EP measured on one model"),
        N_("What each strategy splits and what it sends, measured on one model."),
        ("U1", "U7"),
        errata=("E2", "E4"),
    ),
    Lesson(
        "02_collectives",
        N_("Collectives: what each primitive leaves where"),
        N_(
            "NCCL's five collectives, and all-to-all, gather and scatter from send/recv: buffers,"
            " bytes, busbw."
        ),
        ("U5", "U9"),
    ),
    Lesson(
        "03_ring_allreduce",
        N_("Ring all-reduce: two phases, counted bytes, algbw vs busbw"),
        N_("The ring's two phases, and its 2(N−1)/N·D checked against counted bytes."),
        ("U3", "U9", "U10"),
        errata=("E1",),
    ),
    Lesson(
        "04_ring_tree_ps",
        N_("Ring, tree and parameter server: traffic, cost model, calibration"),
        N_("Ring, trees and servers compared by counted traffic and an alpha-beta model."),
        ("U3", "U9"),
        ("U5",),
        ("E5",),
    ),
    Lesson(
        "05_nccl_in_practice",
        N_("NCCL in practice: algorithms × protocols, channels, NICs and knobs"),
        N_("What NCCL runs on a real cluster: its tuner, one ring per NIC, and the knobs."),
        ("U5", "U8"),
        ("U19",),
        ("E9",),
    ),
    Lesson(
        "06_dp_bucketing_overlap",
        N_("Data parallelism for real: gradient buckets, overlap with backward, accumulation"),
        N_("Gradient buckets overlapped with backward, checked against PyTorch's DDP."),
        ("U8", "U11", "U18"),
        errata=("E10",),
    ),
    Lesson(
        "07_zero_fsdp",
        N_("ZeRO and FSDP: sharded training with a memory ledger"),
        N_("ZeRO-1/2/3 and FSDP2 trained for real, every rank's memory and bytes counted."),
        ("U2", "U14", "U15"),
        errata=("E7", "E8"),
    ),
    Lesson(
        "08_tensor_parallel",
        N_("Tensor parallelism: column- and row-parallel layers, run and checked"),
        N_("Column- and row-parallel layers against a dense layer: which collective each needs."),
        ("U12",),
        errata=("E4",),
    ),
    Lesson(
        "09_expert_parallel",
        N_("Expert parallelism: a mixture-of-experts layer over all-to-all"),
        N_("Tokens routed to experts by all-to-all: traffic matrix, capacity, dropped tokens."),
        ("U12", "U1", "U7"),
    ),
    Lesson(
        "10_pipeline",
        N_(
            "Pipeline parallelism: four schedules executed, the bubble retimed, activations counted"
        ),
        N_("Four schedules executed: their bubble retimed, their stashed activations counted."),
        ("U4",),
        ("U18",),
        ("E2", "E3"),
    ),
    Lesson(
        "11_bytes_to_time",
        N_("Bytes become time: when communication bounds the step"),
        N_("A DP step's crossover measured on the ranks and predicted; every strategy on H100s."),
        ("U7",),
        ("U1",),
    ),
    Lesson(
        "12_3d_planner",
        N_("3D parallelism: DP × TP × PP on one mesh, and a planner for real clusters"),
        N_("DP × TP × PP on 8 ranks, checked and counted; a planner ranks real layouts."),
        ("U6", "U7", "U14", "U15"),
        errata=("E7",),
    ),
    Lesson(
        "13_compression",
        N_("Gradient compression: fewer bytes on the wire, and error feedback to keep convergence"),
        N_("Seven gradient compressors: bytes on the wire, convergence, error feedback."),
        ("U16",),
    ),
    Lesson(
        "14_sync_async",
        N_("Synchronous against asynchronous training, with stragglers"),
        N_("Synchronous, asynchronous, local-SGD and backup workers under stragglers."),
        ("U16", "U17"),
    ),
    Lesson(
        "15_landscape",
        N_("The landscape: communication libraries, interconnects and frameworks"),
        N_("NCCL, RCCL and the rest; one real run retimed on every interconnect; five frameworks."),
        ("U13", "U19"),
        ("U8",),
        ("E6",),
    ),
    Lesson(
        "16_debugging",
        N_("Debugging a distributed job: killed, hung, lagging and mismatched ranks"),
        N_("Nine failures made to happen on the ranks; the engine names the rank at fault."),
    ),
)

PLANNED: tuple[Planned, ...] = (
    Planned("17", N_("Long sequences: context parallelism and activation recomputation")),
)


# Each erratum's box in the lesson that runs it: (lesson stem, cell id). The box quotes the
# outline's own words (``Erratum.outline_zh``) first, in both languages (tests/test_i18n.py).
ERRATA_BOXES: dict[str, tuple[str, str]] = {
    "E1": ("03_ring_allreduce", "c14"),
    "E2": ("10_pipeline", "c17"),
    "E3": ("10_pipeline", "c11"),
    "E4": ("08_tensor_parallel", "c07"),
    "E5": ("04_ring_tree_ps", "c07"),
    "E6": ("15_landscape", "c17"),
    "E7": ("07_zero_fsdp", "c08"),
    "E8": ("07_zero_fsdp", "c06"),
    "E9": ("05_nccl_in_practice", "nccl-e9-md"),
    "E10": ("06_dp_bucketing_overlap", "d16"),
}


def taught_in() -> dict[str, list[Place]]:
    """Unit id -> the lessons that teach it (then the planned ones), from :data:`LESSONS`."""
    out: dict[str, list[Place]] = {u.id: [] for u in UNITS}
    for lesson in LESSONS:
        for unit in lesson.units + lesson.partly:
            out[unit].append(Place(lesson.label, lesson.file, unit in lesson.partly))
    for plan in PLANNED:
        for unit in plan.units:
            out[unit].append(Place(plan.label, None))
    return out


def shown_in() -> dict[str, list[Place]]:
    """Erratum id -> the lessons that show it (then the planned ones), from :data:`LESSONS`."""
    out: dict[str, list[Place]] = {e.id: [] for e in ERRATA}
    for lesson in LESSONS:
        for erratum in lesson.errata:
            out[erratum].append(Place(lesson.label, lesson.file))
    for plan in PLANNED:
        for erratum in plan.errata:
            out[erratum].append(Place(plan.label, None))
    return out


def load_times(path: Path = TIMES) -> dict:
    """The measured run times (``benchmarks/bench_lessons.py``), or an empty record."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def nav_line(stem: str) -> str:
    """The lesson's last cell: Previous, Next (the index around the ends) and the index, in the
    current language."""
    stems = [lesson.stem for lesson in LESSONS]
    i = stems.index(stem)
    link = "[" + _("Course index") + "](" + INDEX + ")"
    prev = f"[{LESSONS[i - 1].label}]({LESSONS[i - 1].file})" if i > 0 else link
    nxt = f"[{LESSONS[i + 1].label}]({LESSONS[i + 1].file})" if i + 1 < len(LESSONS) else link
    return _("Previous: {previous} · Next: {next} · {index}").format(
        previous=prev, next=nxt, index=link
    )


def _chinese_page(nb: dict, name: str) -> dict:
    """A Chinese page as :func:`.notebook_i18n.translated` makes a Chinese lesson: the cell that
    switches the package to Chinese before its first code cell, and the language in its metadata."""
    cells = list(nb["cells"])
    first = next((k for k, c in enumerate(cells) if c["cell_type"] == "code"), None)
    if first is not None:
        cells.insert(first, language_cell())
    meta = {**nb["metadata"], "edu_parallel": {"language": "zh", "source": f"../{name}"}}
    return {**nb, "metadata": meta, "cells": cells}


def build(times: dict | None = None, lang: str = "en") -> dict[str, dict]:
    """The course's pages in ``lang``, file name -> notebook, from the data as it is now."""
    times = load_times() if times is None else times
    with language(lang):
        pages = {
            INDEX: index_page(LESSONS, PLANNED, times),
            SYLLABUS: syllabus_page(taught_in()),
            ERRATA_PAGE: errata_page(shown_in()),
        }
    if lang == "zh":
        pages = {name: _chinese_page(nb, name) for name, nb in pages.items()}
    return pages


def with_nav(nb: dict, stem: str, lang: str = "en") -> dict:
    """The lesson with its navigation cell (in ``lang``) last (replaced if present, appended if
    not)."""
    cells = [c for c in nb["cells"] if c.get("id") != NAV_ID]
    with language(lang):
        nav = cell(NAV_ID, nav_line(stem))
    return {**nb, "cells": [*cells, nav]}


def chinese_lesson(english: dict, stem: str) -> dict:
    """The Chinese lesson built from the English one: its prose translated (English where the
    catalog has no current translation), the same code with its comments in Chinese, the Chinese
    navigation cell."""
    return with_nav(translated(english, stem), stem, "zh")


def dump(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _expected(folder: Path, name: str, pages: dict[str, dict]) -> dict | None:
    """What ``folder/name`` should hold (``zh/...`` for the Chinese), or None when its English
    lesson is not in ``folder``."""
    if name in pages:
        return pages[name]
    zh = name.startswith(ZH + "/")
    file = name.removeprefix(ZH + "/")
    english = folder / file
    if not english.is_file():
        return None
    stem = file.removesuffix(".ipynb")
    return chinese_lesson(load(english), stem) if zh else with_nav(load(english), stem)


def _names(pages: dict[str, dict]) -> list[str]:
    """Every notebook the course writes, relative to the English folder, English first."""
    en = [name for name in pages if "/" not in name] + [lesson.file for lesson in LESSONS]
    zh = [name for name in pages if name.startswith(ZH + "/")]
    return en + zh + [f"{ZH}/{lesson.file}" for lesson in LESSONS]


def _all_pages(times: dict | None) -> dict[str, dict]:
    times = load_times() if times is None else times
    pages = dict(build(times, "en"))
    pages.update({f"{ZH}/{name}": nb for name, nb in build(times, "zh").items()})
    return pages


def stale(folder: Path = NOTEBOOKS, times: dict | None = None) -> list[str]:
    """The notebooks that differ from what :func:`build`, :func:`with_nav` and
    :func:`chinese_lesson` make: English ones in ``folder``, Chinese ones in ``folder/zh`` (named
    ``zh/...``)."""
    pages = _all_pages(times)
    out = []
    for name in _names(pages):
        want = _expected(folder, name, pages)
        path = folder / name
        if want is None:
            continue
        if not path.is_file() or load(path) != want:
            out.append(name)
    return out


def write(folder: Path = NOTEBOOKS, times: dict | None = None) -> list[str]:
    """Write the pages, each lesson's navigation cell and the Chinese lessons; return what
    changed."""
    changed = stale(folder, times)
    pages = _all_pages(times)
    for name in changed:  # a lesson is re-read just before writing: others may be editing it
        want = _expected(folder, name, pages)
        if want is not None:
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dump(want), encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edu_parallel.app.course.lessons", description=__doc__
    )
    parser.add_argument("--write", action="store_true", help="write the pages (else only check)")
    args = parser.parse_args(argv)
    changed = write() if args.write else stale()
    verb = "wrote" if args.write else "out of date"
    print(f"{verb}: {', '.join(changed)}" if changed else "the course pages are up to date")
    return 0 if args.write or not changed else 1


if __name__ == "__main__":
    raise SystemExit(main())
