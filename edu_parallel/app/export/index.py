"""The site's front pages: the index the lab opens, in each language, with links that land.

``index.html`` is ``notebooks/index.ipynb`` executed and rendered like every page, and
``zh/index.html`` the Chinese one: the learning-path table, the lesson numbers as the lessons
carry them, the link to the other language. Its links to course notebooks point to their pages
where the site has them; a page the export did not write (``--lessons``, or the other language
with ``--lang``) keeps its name, unlinked, so no link of an index leads nowhere. A course without
an index notebook gets a list of its pages (:func:`list_page`).
"""

from __future__ import annotations

import html
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.i18n import _, get_language, language
from ..lab import INDEX
from ..workspace import course_files, lesson_number
from .html import HTML_LANG, first_heading, render_page, static_notebook
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


def lang_of(name: str) -> str:
    """The language of the course file (or page) ``name``: ``zh`` in ``zh/``, else ``en``."""
    return "zh" if name.startswith(f"{ZH_DIR}/") else "en"


def in_language(name: str, lang: str) -> str:
    """The English course file ``name``'s counterpart in ``lang``: ``03_x.ipynb`` or
    ``zh/03_x.ipynb``."""
    return f"{ZH_DIR}/{name}" if lang == "zh" else name


def index_names(source: Path, languages: tuple[str, ...]) -> list[str]:
    """The course's index notebooks in ``source`` for ``languages``, Chinese first (its page is
    linked from the English one, and back)."""
    names = [in_language(INDEX, lang) for lang in sorted(languages, reverse=True)]
    return [n for n in names if (source / n).is_file()]


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


def _links(entries: list[tuple[str, str]], tag: str) -> str:
    items = "\n".join(
        f'<li><a href="{html.escape(page)}">{html.escape(name)}</a></li>' for page, name in entries
    )
    return f"<{tag}>\n{items}\n</{tag}>\n"


def list_page(lessons: list[tuple[str, str]], pages: list[tuple[str, str]] | None = None) -> str:
    """An ``index.html`` in the current language: ``lessons`` and the course's other ``pages``,
    each ``(page, title)``."""
    title, heading, others = (
        html.escape(t) for t in (_("edu-parallel: the course"), _("Lessons"), _("Course pages"))
    )
    more = f"<h2>{others}</h2>\n{_links(pages, 'ul')}" if pages else ""
    intro = _(
        "The lessons as they ran, with their figures and animations; the widgets need JupyterLab"
        " ({lab})."
    ).format(lab="<code>edu-parallel lab</code>")
    return (
        f'<!DOCTYPE html>\n<html lang="{HTML_LANG[get_language()]}">\n<head>\n'
        f'<meta charset="utf-8">\n<title>{title}</title>\n<style>body {{ font-family: sans-serif;'
        f" max-width: 50em; margin: 2em auto; line-height: 1.6; }}</style>\n</head>\n<body>\n"
        f"<h1>{title}</h1>\n<p>{intro}</p>\n<h2>{heading}</h2>\n"
        f"{_links(lessons, 'ol')}{more}</body>\n</html>\n"
    )


def write_list_index(dest: Path, source: Path, languages: tuple[str, ...]) -> Path:
    """``index.html`` (in ``dest``, or ``dest/zh`` for Chinese) listing, in course order, every
    page of the course found in ``dest``: for a course without an index notebook. One for each of
    ``languages`` that has a page there (the first if none has); returns the first written."""
    import nbformat

    listed = {}
    for lang in languages:
        sections = []
        for names in (lesson_files(source), course_pages(source)):
            entries = []
            for name in (in_language(n, lang) for n in names):
                if (dest / page_name(name)).is_file():
                    nb = nbformat.read(source / name, as_version=4)
                    entries.append((Path(page_name(name)).name, first_heading(nb, Path(name).stem)))
            sections.append(entries)
        if any(sections):
            listed[lang] = sections
    written = []
    for lang, sections in listed.items() or [(languages[0], [[], []])]:
        index = dest / page_name(in_language(INDEX, lang))
        index.parent.mkdir(parents=True, exist_ok=True)
        with language(lang):
            index.write_text(list_page(*sections), encoding="utf-8")
        written.append(index)
    return written[0]


def write_index(
    dest: Path, copy: Path, timeout_s: float, languages: tuple[str, ...], progress: Any = None
) -> Path:
    """The index the lab opens, in each of ``languages`` that the course has (``copy``: the
    lessons folder the pages ran in), executed and rendered into ``dest``; its links lead to the
    pages ``dest`` holds. Raises :class:`LessonFailed` when an index fails to run."""
    names = index_names(copy, languages)
    if not names:
        return write_list_index(dest, copy, languages)
    planned = {page_name(n) for n in names}

    def in_site(page: str) -> bool:
        return page in planned or (dest / page).is_file()

    for name in names:
        nb, views = execute_lesson(copy / name, timeout_s)
        with language(lang_of(name)):
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
    return dest / page_name(names[-1])
