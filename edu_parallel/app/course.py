"""The course as data: the lessons in learning order, and the pages built from them.

:data:`LESSONS` is the one source of the learning path. From it (and from the outline in
:mod:`.course_outline`) :func:`build` makes the course index, the syllabus page and the errata
page, and the navigation cell that ends every lesson (``Previous · Next · Course index``). Which
lessons teach a unit, and which show an erratum, is computed from :data:`LESSONS`; lessons not
written yet are :data:`PLANNED` and are named, never linked.

The time each lesson takes to run is measured by ``benchmarks/bench_lessons.py`` and read from
``lesson_times.json`` beside this file.

Regenerate the pages after changing the data: ``python -m edu_parallel.app.course --write``
(``tests/test_course.py`` fails while a page differs from what this module builds).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from .course_links import load
from .course_outline import ERRATA, UNITS
from .course_pages import (
    ERRATA_PAGE,
    INDEX,
    SYLLABUS,
    Place,
    cell,
    errata_page,
    index_page,
    syllabus_page,
)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"  # the checkout's lessons
TIMES = Path(__file__).with_name("lesson_times.json")
NAV_ID = "course-nav"  # the id of the navigation cell that ends every lesson
WRITE = "python -m edu_parallel.app.course --write"


@dataclass(frozen=True)
class Lesson:
    """A lesson: ``notebooks/{stem}.ipynb``, its H1 is ``# {number} · {title}``."""

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
        return f"{self.number} · {self.title}"


@dataclass(frozen=True)
class Planned:
    """A lesson not written yet, and the parts of the outline it will teach."""

    number: str
    title: str
    units: tuple[str, ...] = ()
    errata: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.number} · {self.title}"


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        "00_tour",
        "Tour: a real cluster in your notebook",
        "Start real worker processes, read a trace, see a failure named, take a quiz.",
    ),
    Lesson(
        "01_parallelism_map",
        "The parallelism map: DP, TP, PP and EP measured on one model",
        "What each strategy splits and what it sends, measured on one model.",
        ("U1", "U7"),
        errata=("E2", "E4"),
    ),
    Lesson(
        "02_collectives",
        "Collectives: what each primitive leaves where",
        "NCCL's five collectives, and all-to-all, gather and scatter from send/recv: buffers,"
        " bytes, busbw.",
        ("U5", "U9"),
    ),
    Lesson(
        "03_ring_allreduce",
        "Ring all-reduce: two phases, counted bytes, algbw vs busbw",
        "The ring's two phases, and its 2(N−1)/N·D checked against counted bytes.",
        ("U3", "U9", "U10"),
        errata=("E1",),
    ),
    Lesson(
        "04_ring_tree_ps",
        "Ring, tree and parameter server: traffic, cost model, topology",
        "Ring, trees and servers compared by counted traffic and an alpha-beta model.",
        ("U3", "U5", "U8", "U9"),
        ("U19",),
        ("E5", "E9"),
    ),
    Lesson(
        "05_dp_bucketing_overlap",
        "Data parallelism for real: gradient buckets, overlap with backward, accumulation",
        "Gradient buckets overlapped with backward, checked against PyTorch's DDP.",
        ("U8", "U11", "U18"),
        errata=("E10",),
    ),
    Lesson(
        "06_zero_fsdp",
        "ZeRO and FSDP: sharded training with a memory ledger",
        "ZeRO-1/2/3 and FSDP2 trained for real, every rank's memory and bytes counted.",
        ("U2", "U14", "U15"),
        errata=("E7", "E8"),
    ),
    Lesson(
        "07_tensor_parallel",
        "Tensor parallelism: column- and row-parallel layers, run and checked",
        "Column- and row-parallel layers against a dense layer: which collective each needs.",
        ("U12",),
        errata=("E4",),
    ),
    Lesson(
        "08_expert_parallel",
        "Expert parallelism: a mixture-of-experts layer over all-to-all",
        "Tokens routed to experts by all-to-all: traffic matrix, capacity, dropped tokens.",
        ("U12", "U1", "U7"),
    ),
    Lesson(
        "09_pipeline",
        "Pipeline parallelism: the bubble, measured; activation memory, counted",
        "The bubble measured and stashed activations counted under four schedules.",
        ("U4",),
        ("U18",),
        ("E2", "E3"),
    ),
    Lesson(
        "10_3d_planner",
        "3D parallelism: DP × TP × PP on one mesh, and a planner for real clusters",
        "DP × TP × PP on 8 ranks, checked and counted; a planner ranks real layouts.",
        ("U6", "U7", "U14", "U15"),
        errata=("E7",),
    ),
    Lesson(
        "11_compression",
        "Gradient compression: fewer bytes on the wire, and error feedback to keep convergence",
        "Seven gradient compressors: bytes on the wire, convergence, error feedback.",
        ("U16",),
    ),
    Lesson(
        "12_sync_async",
        "Synchronous against asynchronous training, with stragglers",
        "Synchronous, asynchronous, local-SGD and backup workers under stragglers.",
        ("U16", "U17"),
    ),
    Lesson(
        "13_landscape",
        "The landscape: communication libraries, interconnects and frameworks",
        "NCCL, RCCL and the rest; one real run retimed on every interconnect; five frameworks.",
        ("U13", "U19"),
        ("U8",),
        ("E6",),
    ),
)

PLANNED: tuple[Planned, ...] = (
    Planned("14", "Debugging: killed, hung, lagging and mismatched ranks"),
)


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
    """The lesson's last cell: Previous, Next (the index around the ends) and the index."""
    stems = [lesson.stem for lesson in LESSONS]
    i = stems.index(stem)
    link = "[Course index](" + INDEX + ")"
    prev = f"[{LESSONS[i - 1].label}]({LESSONS[i - 1].file})" if i > 0 else link
    nxt = f"[{LESSONS[i + 1].label}]({LESSONS[i + 1].file})" if i + 1 < len(LESSONS) else link
    return f"Previous: {prev} · Next: {nxt} · {link}"


def build(times: dict | None = None) -> dict[str, dict]:
    """The course's pages, file name -> notebook, from the data as it is now."""
    times = load_times() if times is None else times
    return {
        INDEX: index_page(LESSONS, PLANNED, times),
        SYLLABUS: syllabus_page(taught_in()),
        ERRATA_PAGE: errata_page(shown_in()),
    }


def with_nav(nb: dict, stem: str) -> dict:
    """The lesson with its navigation cell last (replaced if present, appended if not)."""
    cells = [c for c in nb["cells"] if c.get("id") != NAV_ID]
    return {**nb, "cells": [*cells, cell(NAV_ID, nav_line(stem))]}


def dump(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def stale(folder: Path = NOTEBOOKS, times: dict | None = None) -> list[str]:
    """The notebooks of ``folder`` that differ from what :func:`build` and :func:`with_nav` make."""
    out = []
    for name, nb in build(times).items():
        path = folder / name
        if not path.is_file() or load(path) != nb:
            out.append(name)
    for lesson in LESSONS:
        path = folder / lesson.file
        if path.is_file() and load(path) != with_nav(load(path), lesson.stem):
            out.append(lesson.file)
    return out


def write(folder: Path = NOTEBOOKS, times: dict | None = None) -> list[str]:
    """Write the pages and each lesson's navigation cell into ``folder``; return what changed."""
    changed = stale(folder, times)
    pages = build(times)
    for name in changed:
        if name in pages:
            (folder / name).write_text(dump(pages[name]), encoding="utf-8")
        else:  # a lesson: re-read just before writing, others may be editing it
            stem = name.removesuffix(".ipynb")
            path = folder / name
            path.write_text(dump(with_nav(load(path), stem)), encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edu_parallel.app.course", description=__doc__)
    parser.add_argument("--write", action="store_true", help="write the pages (else only check)")
    args = parser.parse_args(argv)
    changed = write() if args.write else stale()
    verb = "wrote" if args.write else "out of date"
    print(f"{verb}: {', '.join(changed)}" if changed else "the course pages are up to date")
    return 0 if args.write or not changed else 1


if __name__ == "__main__":
    raise SystemExit(main())
