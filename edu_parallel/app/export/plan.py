"""What ``edu-parallel export`` writes, checked once before any lesson runs: :class:`SitePlan`.

Every argument (the folder, the cell timeout, the languages, the lessons) is checked here, at the
entry point, and a bad one is one line naming the option, the value and what it may be; the export
then receives the frozen plan and trusts it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import bad_value, check_timeout
from ...core.i18n import LANGUAGES, _
from ..lab import INDEX
from ..paths import check_output_folder
from ..workspace import lesson_number
from .index import course_pages, in_language, lesson_files, page_name

DEFAULT_TIMEOUT_S = 60.0  # per cell: the longest lesson cells take about 25 s on 2 busy cores
SITE_LANGUAGES = tuple(LANGUAGES)  # what a site holds by default: English, then zh/ in Chinese


@dataclass(frozen=True)
class SitePlan:
    """The checked arguments of one export: the site's ``folder``, each cell's ``timeout_s``, the
    ``languages`` it writes (English at the top, Chinese in ``zh/``) and the course files whose
    pages it writes before the index, ``names``, in order (the English ones, then the Chinese)."""

    folder: Path
    timeout_s: float
    languages: tuple[str, ...]
    names: tuple[str, ...]

    @property
    def front(self) -> Path:
        """The index to open: ``index.html``, or ``zh/index.html`` for a Chinese-only site."""
        return self.folder / page_name(in_language(INDEX, self.languages[0]))


def check_languages(lang: str | None) -> tuple[str, ...]:
    """``--lang``: ``None`` for every language of the course (:data:`SITE_LANGUAGES`), else one."""
    if lang is None:
        return SITE_LANGUAGES
    if lang not in LANGUAGES:
        valid = _("one of {choices} (default: both)").format(choices=", ".join(SITE_LANGUAGES))
        raise bad_value("--lang", lang, valid)
    return (lang,)


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


def plan_site(
    dest: str | os.PathLike[str],
    lessons: Iterable[str] | None,
    timeout: float,
    lang: str | None,
    source: Path,
) -> SitePlan:
    """Every argument of an export of the course in ``source``, checked (a ValueError, one line,
    for the first bad one): the plan the export runs."""
    folder = check_site_dir(dest)
    timeout_s = check_timeout("--timeout", timeout)
    languages = check_languages(lang)
    picked = pick_lessons(lessons, source)
    names = [
        name
        for language in languages
        for name in (in_language(n, language) for n in picked)
        if (source / name).is_file()
    ]
    return SitePlan(folder, timeout_s, languages, tuple(names))
