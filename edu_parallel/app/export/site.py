"""``edu-parallel export --html DIR``: the lessons, executed, as a static site that plays offline.

    edu-parallel export --html site                  # every lesson: site/index.html, site/NN_*.html
    edu-parallel export --html site --lessons 00 03  # some of them (the index names every lesson)

The site has both languages: the Chinese pages in ``site/zh/`` beside the English ones, and the
index the lab opens, in each (``index.py``), linking the pages the site has.

Each lesson runs top to bottom in a kernel of this Python (nbclient, kernel ``python3``), in a
temporary copy of the lessons folder, so neither the checkout nor the installed package is
written. Each page carries every figure and frame animation, and a note (or a kernel-free
counterpart) for each widget; plotly.js and the lab CSS are one file each beside the pages
(``plotly.min.js``, ``lab.css``), written wherever pages are written; see ``html.py``. Every
argument is checked before a lesson runs; a lesson that fails stops the export with one line
naming it, its cell and the error, and the pages already written stay. At the end it prints the
site's size and its largest page.

Reference: nbclient (https://nbclient.readthedocs.io/en/latest/client.html).
"""

from __future__ import annotations

import argparse
import os
import posixpath
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import bad_value, check_timeout
from ...core.i18n import _
from ...core.units import format_bytes
from ..lab import lessons_source
from ..paths import check_output_folder
from ..workspace import lesson_number
from .html import (
    SITE_FILES,
    first_heading,
    render_page,
    site_files,
    static_notebook,
)
from .index import (
    ZH_DIR,
    SiteSize,
    course_pages,
    lesson_files,
    page_name,
    root_of,
    write_index,
    write_list_index,
)
from .index import site_size as _site_size
from .run import LessonFailed, execute_lesson

GLOSSARY = "GLOSSARY.md"  # the glossary beside the index, which links it
DEFAULT_TIMEOUT_S = 60.0  # per cell: the longest lesson cells take about 25 s on 2 busy cores


@dataclass
class ExportedLesson:
    """One page written from ``executed`` (the lesson as it ran, outputs and widget state kept)
    and ``views`` (what the kernel said about each widget view, by model id)."""

    name: str
    title: str
    page: Path
    seconds: float
    executed: Any
    views: dict[str, Any]


def pick_lessons(names: Iterable[str] | None, source: Path) -> list[str]:
    """The lesson files that ``names`` name (``03``, ``3``, a stem or a file name), in course order;
    for None or an empty list, every lesson and the course's other pages (:func:`course_pages`)."""
    files = lesson_files(source)
    if not names:
        return files + course_pages(source)
    picked: set[str] = set()
    for raw in names:
        text = str(raw).strip()
        hits = [
            n
            for n in files
            if text in (n, Path(n).stem, lesson_number(n))
            or (text.isdigit() and int(text) == int(lesson_number(n)))
        ]
        if len(hits) != 1:
            valid = ", ".join(lesson_number(n) for n in files)
            raise bad_value(
                "--lessons",
                raw,
                _("a lesson number or name (lessons: {valid})").format(valid=valid),
            )
        picked.add(hits[0])
    return [n for n in files if n in picked]


def with_chinese(names: list[str], source: Path) -> list[str]:
    """``names`` (English course files), then their Chinese counterparts in ``source/zh``."""
    return names + [f"{ZH_DIR}/{n}" for n in names if (source / ZH_DIR / n).is_file()]


def link_stems(name: str, source: Path) -> list[str]:
    """The notebooks a page of ``name`` links by name (its folder's), whose links
    :func:`~.html.link_pages` points to their pages."""
    folder = source / posixpath.dirname(name)
    return [p.stem for p in sorted(folder.glob("*.ipynb"))]


def check_site_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a folder this process can write pages into (existing, or creatable)."""
    text = os.fspath(path)
    valid = _("a folder (existing or new) this user may write, such as site")
    if not text.strip():
        raise bad_value("--html", text, valid)
    folder = Path(text).expanduser()
    if folder.exists() and not folder.is_dir():
        raise bad_value(
            "--html", text, _("{valid} ({folder} is a file)").format(valid=valid, folder=folder)
        )
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise bad_value(
            "--html",
            text,
            _("{valid} ({existing} is a file)").format(valid=valid, existing=existing),
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise bad_value(
            "--html",
            text,
            _("{valid} ({existing} is read-only)").format(valid=valid, existing=existing),
        )
    return check_output_folder(folder, "--html")  # one this system lets us fill (not /proc)


def export_site(
    dest: str | os.PathLike[str],
    lessons: Iterable[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: Callable[[str], None] | None = print,
) -> list[ExportedLesson]:
    """Execute ``lessons`` (default all) and write their pages and ``index.html`` into ``dest``.

    Raises ValueError for a bad argument (before any lesson runs) and :class:`LessonFailed` for a
    lesson that fails (the pages written before it stay, with an index listing them)."""
    folder = check_site_dir(dest)
    timeout_s = check_timeout("--timeout", timeout)
    source = lessons_source()
    names = with_chinese(pick_lessons(lessons, source), source)
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, text in site_files().items():  # what every page loads, before any page
        (folder / file_name).write_text(text, encoding="utf-8")
    if (source / GLOSSARY).is_file():  # the index links it
        shutil.copyfile(source / GLOSSARY, folder / GLOSSARY)
    done: list[ExportedLesson] = []
    with tempfile.TemporaryDirectory(prefix="edu-parallel-export-") as tmp:
        copy = Path(tmp) / "notebooks"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".*", "__pycache__"))
        try:
            for name in names:
                start = time.perf_counter()
                nb, views = execute_lesson(copy / name, timeout_s)
                page = static_notebook(nb, views, [*link_stems(name, source), "index"])
                title = first_heading(page, Path(name).stem)
                out = folder / page_name(name)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(render_page(page, title, root_of(name)), encoding="utf-8")
                seconds = time.perf_counter() - start
                done.append(ExportedLesson(name, title, out, seconds, nb, views))
                if progress is not None:
                    progress(f"{page_name(name):<36} {seconds:6.1f} s  {title}")
        except LessonFailed:
            try:  # the index of the pages written before it, the lab's if it runs
                write_index(folder, copy, timeout_s)
            except LessonFailed:
                write_list_index(folder, copy)
            raise
        write_index(folder, copy, timeout_s, progress)
    return done


def site_size(folder: Path, source: Path) -> SiteSize:
    """:class:`~.index.SiteSize` of the site in ``folder`` (``source``: the course it is of)."""
    return _site_size(folder, SITE_FILES)


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--html", required=True, metavar="DIR", help=_("the folder to write the site into")
    )
    parser.add_argument(
        "--lessons", nargs="+", default=None, metavar="NN", help=_("lesson numbers (default: all)")
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=_("seconds a cell may run (default {default_timeout_s:g})").format(
            default_timeout_s=DEFAULT_TIMEOUT_S
        ),
    )
    parser.set_defaults(func=run_export)


def run_export(a: argparse.Namespace) -> int:
    """The ``export`` command: 0 when every page was written, 1 when a lesson failed."""
    try:
        pages = export_site(a.html, a.lessons, a.timeout, progress=_print_now)
    except LessonFailed as exc:
        print(_("error: {message}").format(message=exc), file=sys.stderr)
        before = _("the pages written before it: {path}")
        print(before.format(path=Path(a.html) / "index.html"), file=sys.stderr)
        return 1
    index = Path(a.html).expanduser() / "index.html"
    done = _("{n} lessons written; open {path} (no kernel, no network needed)")
    print(done.format(n=len(pages), path=index.resolve()))
    size = site_size(index.parent, lessons_source())
    line = _("the site: {total} in {files} files; its largest page: {page} ({page_size})")
    print(
        line.format(
            total=format_bytes(size.total),
            files=size.files,
            page=size.largest.relative_to(index.parent).as_posix(),
            page_size=format_bytes(size.largest_bytes),
        )
    )
    return 0


def _print_now(line: str) -> None:
    print(line, flush=True)
