"""``edu-parallel export --html DIR``: the lessons, executed, as a static site that plays offline.

    edu-parallel export --html site                  # every lesson: site/index.html, site/NN_*.html
    edu-parallel export --html site --lessons 00 03  # some of them (the index names every lesson)
    edu-parallel export --html site --lang zh        # Chinese only: site/zh/index.html, site/zh/...

The site has both languages: the Chinese pages in ``site/zh/`` beside the English ones, and the
index the lab opens, in each (``index.py``), linking the pages the site has. ``--lang en`` or
``--lang zh`` runs and writes one language only (half the time); its index links the other
language's pages that the folder already holds and names the others.

Each lesson runs top to bottom in a kernel of this Python (nbclient, kernel ``python3``), in a
temporary copy of the lessons folder, so neither the checkout nor the installed package is
written. Each page carries every figure and frame animation, and a note (or a kernel-free
counterpart) for each widget, in the page's language (its ``<html lang>`` too); plotly.js and the
lab CSS are one file each beside the pages (``plotly.min.js``, ``lab.css``), written wherever
pages are written; see ``html.py``. Every argument is checked before a lesson runs
(``plan.py``); a lesson that fails stops the export with one line naming it, its cell and the
error, and the pages already written stay. At the end it prints the site's size and its largest
page.

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

from ...core.i18n import LANGUAGES, _, language
from ...core.units import format_bytes
from ..lab import lessons_source
from .html import SITE_FILES, first_heading, render_page, site_files, static_notebook
from .index import (
    SiteSize,
    lang_of,
    lesson_files,
    page_name,
    root_of,
    write_index,
    write_list_index,
)
from .index import site_size as _site_size
from .plan import DEFAULT_TIMEOUT_S, SitePlan, plan_site
from .run import LessonFailed, execute_lesson

GLOSSARY = "GLOSSARY.md"  # the glossary beside the index, which links it
__all__ = ["DEFAULT_TIMEOUT_S", "export_site", "lesson_files", "page_html", "write_site"]


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


def link_stems(name: str, source: Path) -> list[str]:
    """The notebooks a page of ``name`` links by name (its folder's), whose links
    :func:`~.html.link_pages` points to their pages."""
    folder = source / posixpath.dirname(name)
    return [p.stem for p in sorted(folder.glob("*.ipynb"))]


def page_html(nb: Any, views: dict[str, Any], name: str, source: Path) -> tuple[str, str]:
    """The title and the page of the course file ``name`` (``nb`` as it ran, ``views`` what the
    kernel said of its widgets), in its language: its notes, its way back, its ``<html lang>``."""
    with language(lang_of(name)):
        page = static_notebook(nb, views, [*link_stems(name, source), "index"])
        title = first_heading(page, Path(name).stem)
        return title, render_page(page, title, root_of(name))


def export_site(
    dest: str | os.PathLike[str],
    lessons: Iterable[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    progress: Callable[[str], None] | None = print,
    lang: str | None = None,
) -> list[ExportedLesson]:
    """Execute ``lessons`` (default all) in ``lang`` (default both) and write their pages and
    index into ``dest``.

    Raises ValueError for a bad argument (before any lesson runs) and :class:`LessonFailed` for a
    lesson that fails (the pages written before it stay, with an index listing them)."""
    return write_site(plan_site(dest, lessons, timeout, lang, lessons_source()), progress)


def write_site(
    plan: SitePlan, progress: Callable[[str], None] | None = print
) -> list[ExportedLesson]:
    """Run the course files of ``plan`` and write their pages, then its languages' indexes."""
    source = lessons_source()
    folder, timeout_s = plan.folder, plan.timeout_s
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
            for name in plan.names:
                start = time.perf_counter()
                nb, views = execute_lesson(copy / name, timeout_s)
                out = folder / page_name(name)
                title, text = page_html(nb, views, name, source)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(text, encoding="utf-8")
                seconds = time.perf_counter() - start
                done.append(ExportedLesson(name, title, out, seconds, nb, views))
                if progress is not None:
                    progress(f"{page_name(name):<36} {seconds:6.1f} s  {title}")
        except LessonFailed:
            try:  # the index of the pages written before it, the lab's if it runs
                write_index(folder, copy, timeout_s, plan.languages)
            except LessonFailed:
                write_list_index(folder, copy, plan.languages)
            raise
        write_index(folder, copy, timeout_s, plan.languages, progress)
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
        "--lang",
        choices=sorted(LANGUAGES),
        default=None,
        help=_("the site's language, en or zh (简体中文, in DIR/zh); default: both"),
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
    plan = plan_site(a.html, a.lessons, a.timeout, a.lang, lessons_source())
    try:
        pages = write_site(plan, progress=_print_now)
    except LessonFailed as exc:
        print(_("error: {message}").format(message=exc), file=sys.stderr)
        before = _("the pages written before it: {path}")
        print(
            before.format(path=Path(a.html) / plan.front.relative_to(plan.folder)), file=sys.stderr
        )
        return 1
    done = _("{n} lessons written; open {path} (no kernel, no network needed)")
    print(done.format(n=len(pages), path=plan.front.resolve()))
    size = site_size(plan.folder, lessons_source())
    line = _("the site: {total} in {files} files; its largest page: {page} ({page_size})")
    print(
        line.format(
            total=format_bytes(size.total),
            files=size.files,
            page=size.largest.relative_to(plan.folder).as_posix(),
            page_size=format_bytes(size.largest_bytes),
        )
    )
    return 0


def _print_now(line: str) -> None:
    print(line, flush=True)
