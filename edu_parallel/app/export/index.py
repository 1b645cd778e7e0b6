"""The site's front pages: the index the lab opens, in both languages, with links that land.

``index.html`` is ``notebooks/index.ipynb`` executed and rendered like every page, and
``zh/index.html`` the Chinese one: the learning-path table, the lesson numbers as the lessons
carry them, the link to the other language. Its links to course notebooks point to their pages
where the site has them; a lesson the export did not write (``--lessons``) keeps its name,
unlinked, so no link of an index leads nowhere. A course without an index notebook gets a list
of its pages (:func:`~.html.index_page`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..lab import INDEX
from ..workspace import course_files, lesson_number
from .html import first_heading, index_page, render_page, static_notebook
from .run import execute_lesson

INDEX_PAGE = "index.html"
ZH_DIR = "zh"
# a markdown link to a local notebook or page: [text](target#anchor), no scheme
_LINK = re.compile(r"\[([^\]]*)\]\(\s*<?([^)\s>:]+?\.(?:ipynb|md))(#[^)\s>]*)?>?\s*\)")


def page_name(name: str) -> str:
    """The site's page for the course file ``name``: ``zh/03_x.ipynb`` -> ``zh/03_x.html``."""
    return str(Path(name).with_suffix(".html").as_posix()) if name.endswith(".ipynb") else name


def root_of(name: str) -> str:
    """The way from the page of ``name`` back to the site's folder: ``""`` or ``"../"``."""
    return "../" * name.count("/")


def index_names(source: Path) -> list[str]:
    """The course's index notebooks in ``source``, Chinese first (its page is linked from the
    English one, and back)."""
    return [n for n in (f"{ZH_DIR}/{INDEX}", INDEX) if (source / n).is_file()]


def link_site(text: str, here: str, in_site: Callable[[str], bool]) -> str:
    """``text`` (markdown of the page of ``here``, a course file name) with each link to a local
    notebook pointing to its page where ``in_site(page)`` (a site path), and the link text alone
    where it does not."""
    folder = posixpath.dirname(here)

    def fix(m: re.Match) -> str:
        label, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        resolved = posixpath.normpath(posixpath.join(folder, target))
        page = page_name(resolved)
        if resolved.startswith("..") or not in_site(page):
            return label
        return f"[{label}]({page_name(target)}{anchor})"

    return _LINK.sub(fix, text)


@dataclass(frozen=True)
class SiteSize:
    """The bytes of a site: every file it is made of (its pages, in both languages, and the files
    they load) and its largest page."""

    total: int
    files: int
    largest: Path
    largest_bytes: int


def site_size(folder: Path, site_files: tuple[str, ...]) -> SiteSize:
    """:class:`SiteSize` of the site in ``folder``."""
    pages = sorted([*folder.glob("*.html"), *(folder / ZH_DIR).glob("*.html")])
    files = pages + [folder / n for n in (*site_files, "GLOSSARY.md")]
    sizes = {f: f.stat().st_size for f in files if f.is_file()}
    lessons = [p for p in pages if p.name != INDEX_PAGE] or pages
    largest = max(lessons, key=lambda p: sizes.get(p, 0))
    return SiteSize(sum(sizes.values()), len(sizes), largest, sizes.get(largest, 0))


def notebooks_of(source: Path) -> list[str]:
    """The course's English notebooks in ``source`` (the site is English; ``zh/`` is not in it)."""
    return [n for n in course_files(source) if n.endswith(".ipynb") and "/" not in n]


def lesson_files(source: Path) -> list[str]:
    """The numbered lessons in ``source``, in course order."""
    return [n for n in notebooks_of(source) if lesson_number(n).isdigit()]


def course_pages(source: Path) -> list[str]:
    """The course's other pages (syllabus, errata): not numbered, not its index."""
    return [n for n in notebooks_of(source) if not lesson_number(n).isdigit() and n != INDEX]


def write_list_index(dest: Path, source: Path) -> Path:
    """``dest/index.html`` listing, in course order, every page of the course found in ``dest``:
    for a course without an index notebook."""
    import nbformat

    sections: list[list[tuple[str, str]]] = []
    for names in (lesson_files(source), course_pages(source)):
        entries = []
        for name in names:
            page = page_name(name)
            if (dest / page).is_file():
                nb = nbformat.read(source / name, as_version=4)
                entries.append((page, first_heading(nb, Path(name).stem)))
        sections.append(entries)
    index = dest / INDEX_PAGE
    index.write_text(index_page(*sections), encoding="utf-8")
    return index


def write_index(dest: Path, copy: Path, timeout_s: float, progress: Any = None) -> Path:
    """The index the lab opens, in each language the course has (``copy``: the lessons folder
    the pages ran in), executed and rendered into ``dest``; its links lead to the pages ``dest``
    holds. Raises :class:`LessonFailed` when an index fails to run."""
    names = index_names(copy)
    if not names:
        return write_list_index(dest, copy)
    planned = {page_name(n) for n in names}

    def in_site(page: str) -> bool:
        return page in planned or (dest / page).is_file()

    for name in names:
        nb, views = execute_lesson(copy / name, timeout_s)
        page = static_notebook(nb, views, [])
        for cell in page.cells:
            if cell.cell_type == "markdown":
                cell.source = link_site(cell.source, name, in_site)
        title = first_heading(page, Path(name).stem)
        out = dest / page_name(name)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_page(page, title, root_of(name), nav=False), encoding="utf-8")
        if progress is not None:
            progress(f"{page_name(name):<36} {'':>8}  {title}")
    return dest / INDEX_PAGE
