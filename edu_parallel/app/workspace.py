"""The learner's workspace: a private copy of the lessons, never the checkout or the package.

``edu-parallel lab`` opens the lessons from a folder of the learner's own
(``~/edu-parallel-course``, or ``--dir``). The first time, every lesson is copied there. Later:

* a lesson the learner has not changed is refreshed when the course's copy changed (a ``git pull``,
  a new release);
* a lesson the learner changed (edited, or saved with outputs) is kept, and one line says how to
  restore it: ``edu-parallel lab --reset 03``;
* a lesson new to the course is copied;
* a lesson the course renumbered (:data:`~edu_parallel.core.lesson_renames.FORMER_STEMS`) is
  renamed in place first, edits and all (``09_pipeline.ipynb`` becomes ``10_pipeline.ipynb``),
  and then refreshed or kept as above.

The Chinese lessons come along in ``zh/`` (``zh/03_ring_allreduce.ipynb``), and the glossary
(``GLOSSARY.md``) beside the index; ``--reset 03`` restores a lesson in both languages.

What was copied is remembered in ``.edu-parallel/lessons.json`` (the SHA-256 of each file as
copied), so "unchanged by the learner" is a fact, not a guess from timestamps. Traces and progress
files that the lessons write land in the workspace too, so a full pass leaves the checkout as it
was.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import bad_value
from ..core.i18n import _
from ..core.lesson_renames import current_name
from .paths import check_output_folder

DEFAULT_DIR = Path("~/edu-parallel-course")
MANIFEST = Path(".edu-parallel") / "lessons.json"
COURSE_SUFFIXES = (".ipynb", ".md")
LANGUAGE_FOLDERS = ("zh",)  # the lessons in another language, each in its own subfolder


@dataclass
class SyncReport:
    """What :func:`sync_workspace` did, file name by file name."""

    folder: Path
    copied: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # the learner's edits; the course's copy changed
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (former name, name now)

    def lines(self) -> list[str]:
        """What a learner should read: the folder, what changed, and how to restore a lesson."""
        done = [
            verb.format(n=len(names))
            for verb, names in (
                (_("copied {n}"), self.copied),
                (_("refreshed {n}"), self.refreshed),
                (_("restored {n}"), self.restored),
            )
            if names
        ]
        head = _("lessons: {folder}").format(folder=self.folder)
        out = [head + (_(" ({done})").format(done=", ".join(done)) if done else "")]
        moved = _("  {old} is now {new} (the lessons were renumbered)")
        out += [moved.format(old=old, new=new) for old, new in self.renamed]
        kept = _(
            "  {name}: the course's version changed and yours has edits;"
            " `edu-parallel lab --reset {number}` replaces yours with it"
        )
        out += [kept.format(name=name, number=lesson_number(name)) for name in self.kept]
        return out


def lesson_number(name: str) -> str:
    """``"03_ring_allreduce.ipynb"`` -> ``"03"``; a page without a number keeps its stem."""
    stem = Path(name).stem
    head = stem.split("_", 1)[0]
    return head if head.isdigit() else stem


def course_files(source: Path) -> dict[str, Path]:
    """The files of the course in ``source``: ``{name: path}``, sorted by name; a file of a
    language folder is named with it (``zh/03_ring_allreduce.ipynb``)."""
    out = {}
    for folder in (source, *(source / lang for lang in LANGUAGE_FOLDERS)):
        if not folder.is_dir():
            continue
        for p in sorted(folder.iterdir()):
            if p.is_file() and p.suffix in COURSE_SUFFIXES and not p.name.startswith("."):
                out[p.relative_to(source).as_posix()] = p
    return out


def resolve_reset(names: Iterable[str], source: Path) -> list[str]:
    """The file names that ``--reset`` names: a number (``03``), a stem, a file name, or ``all``.

    Raises a one-line ValueError naming the first name that matches no lesson, with the valid ones.
    """
    files = course_files(source)
    picked: list[str] = []
    for raw in names:
        text = str(raw).strip()
        if text == "all":
            return list(files)
        hits = [n for n in files if text in (n, Path(n).name, Path(n).stem, lesson_number(n))]
        if not hits:
            valid = ", ".join(dict.fromkeys(lesson_number(n) for n in files))
            raise bad_value(
                "reset",
                raw,
                _("a lesson number or name, or all (lessons: {valid})").format(valid=valid),
            )
        picked += [n for n in hits if n not in picked]
    return picked


def check_workspace(target: Path, source: Path) -> Path:
    """``target`` as a workspace folder: not a file, and not the course's own lessons folder."""
    target = target.expanduser()
    if target.exists() and not target.is_dir():
        raise bad_value(
            "dir", str(target), _("a folder (existing or new) for your copy of the lessons")
        )
    if target.resolve() == source.resolve():
        raise bad_value(
            "dir",
            str(target),
            _("a folder of your own, not the course's lessons ({source})").format(source=source),
        )
    return check_output_folder(target, "dir")  # one this system lets us fill (not /proc, /sys)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rename_former(target: Path, copied_as: dict[str, str], report: SyncReport) -> None:
    """Give each lesson of ``target`` that has a former name its name now, with its record in
    ``copied_as``; a lesson already present under its new name leaves the old file alone."""
    for name in course_files(target):
        new = current_name(name)
        if new == name or (target / new).exists():
            continue
        (target / name).rename(target / new)
        if name in copied_as:
            copied_as[new] = copied_as.pop(name)
        report.renamed.append((name, new))


def sync_workspace(target: Path, source: Path, reset: Iterable[str] = ()) -> SyncReport:
    """Bring ``target`` up to date with the course in ``source`` (see the module docstring).

    ``reset`` lists file names (from :func:`resolve_reset`) to overwrite with the course's copy.
    """
    target = check_workspace(Path(target), source)
    resets = set(reset)
    target.mkdir(parents=True, exist_ok=True)
    manifest_path = target / MANIFEST
    try:
        copied_as = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        copied_as = {}
    report = SyncReport(target)
    rename_former(target, copied_as, report)
    for name, src in course_files(source).items():
        dest, new = target / name, _sha(src)
        if not dest.exists():
            bucket = report.copied
        elif _sha(dest) == new:  # already the course's copy: nothing to restore
            copied_as[name] = new
            continue
        elif name in resets:
            bucket = report.restored
        elif copied_as.get(name) == _sha(dest):  # untouched since we copied it
            bucket = report.refreshed
        else:
            report.kept.append(name)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        copied_as[name] = new
        bucket.append(name)
    manifest_path.parent.mkdir(exist_ok=True)
    manifest_path.write_text(json.dumps(copied_as, indent=1, sort_keys=True) + "\n")
    return report
