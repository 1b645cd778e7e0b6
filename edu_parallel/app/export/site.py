"""``edu-parallel export --html DIR``: the lessons, executed, as a static site that plays offline.

    edu-parallel export --html site                  # every lesson: site/index.html, site/NN_*.html
    edu-parallel export --html site --lessons 00 03  # some of them (the index lists every page)

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
import math
import os
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
from ...core.workspace import WORKSPACE_VAR
from ..lab import INDEX, lessons_source
from ..paths import check_output_folder
from ..workspace import course_files, lesson_number
from .html import (
    SITE_FILES,
    WIDGET_VIEW,
    first_heading,
    index_page,
    render_page,
    site_files,
    static_notebook,
)
from .probe import MIMETYPE

KERNEL = "python3"
DEFAULT_TIMEOUT_S = 60.0  # per cell: the longest lesson cells take about 25 s on 2 busy cores


class LessonFailed(Exception):
    """A lesson raised or timed out; the message is one line (lesson, cell, error)."""


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


def notebooks_of(source: Path) -> list[str]:
    """The course's English notebooks in ``source`` (the site is English; ``zh/`` is not in it)."""
    return [n for n in course_files(source) if n.endswith(".ipynb") and "/" not in n]


def lesson_files(source: Path) -> list[str]:
    """The numbered lessons in ``source``, in course order."""
    return [n for n in notebooks_of(source) if lesson_number(n).isdigit()]


def course_pages(source: Path) -> list[str]:
    """The course's other pages (syllabus, errata): not numbered, not its index."""
    return [n for n in notebooks_of(source) if not lesson_number(n).isdigit() and n != INDEX]


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


def _client_class() -> type:
    """A NotebookClient that asks the kernel about each widget view a cell displays."""
    import nbformat
    from nbclient import NotebookClient

    class ExportClient(NotebookClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # nbclient mirrors every ipywidgets Output back to the kernel, and with a figure of
            # more than ~100 KB in one it waits out the cell timeout; the views are probed below.
            self.widget_registry = {}
            self.views: dict[str, Any] = {}
            self.current: Any = None

        async def async_execute_cell(
            self, cell: Any, cell_index: int, execution_count: Any = None, store_history=True
        ) -> Any:
            self.current = cell
            cell = await super().async_execute_cell(
                cell, cell_index, execution_count, store_history
            )
            ids = [
                o.data[WIDGET_VIEW]["model_id"]
                for o in cell.get("outputs", [])
                if WIDGET_VIEW in o.get("data", {})
            ]
            if ids and cell.cell_type == "code":
                code = (
                    "__import__('edu_parallel.app.export.probe', fromlist=['_'])"
                    f".publish_offline_views({ids!r}, {cell.get('execution_count')!r})"
                )
                probe = nbformat.v4.new_code_cell(code, metadata={"tags": ["raises-exception"]})
                await super().async_execute_cell(probe, cell_index, store_history=False)
                self.nb.cells[cell_index] = cell  # the probe took its place
                for out in probe.outputs:
                    self.views.update(out.get("data", {}).get(MIMETYPE, {}))
            return cell

    return ExportClient


def _first_line(cell: Any) -> str:
    lines = [line for line in str(getattr(cell, "source", "")).splitlines() if line.strip()]
    return lines[0].strip()[:80] if lines else "(empty)"


def execute_lesson(path: Path, timeout_s: float) -> tuple[Any, dict[str, Any]]:
    """Run the lesson at ``path`` in its folder; return the executed notebook and widget views.

    The kernel's own log (not the lesson's output) goes to ``path`` + ``.log``: its last line
    explains a kernel that died."""
    import nbformat
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    client = _client_class()(
        nb,
        timeout=max(1, math.ceil(timeout_s)),
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(path.parent)}},
    )
    env = dict(os.environ, **{WORKSPACE_VAR: str(path.parent)})  # progress lands in the copy
    log = path.with_suffix(".log")
    try:
        with log.open("w") as kernel_log:
            client.execute(env=env, stderr=kernel_log)
    except CellExecutionError as exc:
        error = f"{exc.ename}: {' '.join(str(exc.evalue).split())}"
        raise LessonFailed(_failure(path, client.current, error)) from None
    except CellTimeoutError:
        error = f"no result after {timeout_s:g} s (raise --timeout)"
        raise LessonFailed(_failure(path, client.current, error)) from None
    except DeadKernelError:
        last = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        error = "the kernel died" + (f" ({last[-1].strip()})" if last else "")
        raise LessonFailed(_failure(path, client.current, error)) from None
    return nb, client.views


def _failure(path: Path, cell: Any, error: str) -> str:
    error = error if len(error) <= 300 else error[:297] + "..."
    return f"lesson {path.stem} failed in the cell `{_first_line(cell)}`: {error}"


def write_index(dest: Path, source: Path) -> Path:
    """``dest/index.html`` listing, in course order, every page of the course found in ``dest``."""
    import nbformat

    sections: list[list[tuple[str, str]]] = []
    for names in (lesson_files(source), course_pages(source)):
        entries = []
        for name in names:
            page = Path(name).with_suffix(".html").name
            if (dest / page).is_file():
                nb = nbformat.read(source / name, as_version=4)
                entries.append((page, first_heading(nb, Path(name).stem)))
        sections.append(entries)
    index = dest / "index.html"
    index.write_text(index_page(*sections), encoding="utf-8")
    return index


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
    names = pick_lessons(lessons, source)
    stems = [Path(n).stem for n in notebooks_of(source)] + ["index"]
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, text in site_files().items():  # what every page loads, before any page
        (folder / file_name).write_text(text, encoding="utf-8")
    done: list[ExportedLesson] = []
    with tempfile.TemporaryDirectory(prefix="edu-parallel-export-") as tmp:
        copy = Path(tmp) / "notebooks"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".*", "__pycache__"))
        try:
            for name in names:
                start = time.perf_counter()
                nb, views = execute_lesson(copy / name, timeout_s)
                page = static_notebook(nb, views, stems)
                title = first_heading(page, Path(name).stem)
                out = folder / Path(name).with_suffix(".html").name
                out.write_text(render_page(page, title), encoding="utf-8")
                seconds = time.perf_counter() - start
                done.append(ExportedLesson(name, title, out, seconds, nb, views))
                if progress is not None:
                    progress(f"{out.name:<36} {seconds:6.1f} s  {title}")
        finally:
            write_index(folder, source)
    return done


@dataclass(frozen=True)
class SiteSize:
    """The bytes of a site: every file it is made of (``index.html``, the pages it lists, the
    files they load) and its largest page."""

    total: int
    files: int
    largest: Path
    largest_bytes: int


def site_size(folder: Path, source: Path) -> SiteSize:
    """:class:`SiteSize` of the site in ``folder`` (the pages of the course in ``source``)."""
    names = lesson_files(source) + course_pages(source)
    pages = [folder / Path(n).with_suffix(".html").name for n in names]
    pages = [p for p in pages if p.is_file()]
    files = pages + [folder / "index.html"] + [folder / n for n in SITE_FILES]
    sizes = {f: f.stat().st_size for f in files if f.is_file()}
    largest = max(pages or [folder / "index.html"], key=lambda p: sizes.get(p, 0))
    return SiteSize(sum(sizes.values()), len(sizes), largest, sizes.get(largest, 0))


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
            page=size.largest.name,
            page_size=format_bytes(size.largest_bytes),
        )
    )
    return 0


def _print_now(line: str) -> None:
    print(line, flush=True)
