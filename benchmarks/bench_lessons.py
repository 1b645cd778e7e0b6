"""How long each lesson takes to run, measured, for the course index's "time to run" column.

    python benchmarks/bench_lessons.py                    # every lesson of LESSONS, in order
    python benchmarks/bench_lessons.py --only 03_ring_allreduce --only 10_pipeline

Each lesson is copied into a temporary folder and executed there by nbclient, as Run All would in
a fresh kernel (kernel start included); the checkout's notebooks are never touched. The seconds,
with this machine's description and the date, go to ``edu_parallel/app/course/lesson_times.json``
(``--only`` updates just those lessons), and the course pages are rebuilt from them
(``edu_parallel.app.course.lessons.write``). A lesson that fails is reported and keeps its old time.
Timing on a shared machine is noisy: the index says where and when the numbers were measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from edu_parallel.app.course.lessons import LESSONS, NOTEBOOKS, TIMES, load_times, write
from edu_parallel.core.errors import bad_value

ROOT = Path(__file__).resolve().parents[1]
SLOW_S = 3.0  # a cell longer than this shows a progress bar (issue 35)
TIMES_VAR = "EDU_PARALLEL_BROWSER_TIMES"  # read by tests/conftest.py: where the pass writes them
sys.path.insert(0, str(Path(__file__).parent))
from lesson_profile import CATEGORIES, REPORT, SETUP  # noqa: E402


def machine() -> dict:
    """What the times were measured on."""
    cores = os.cpu_count() or 1
    return {
        "description": f"{cores} CPU cores ({platform.machine()}, {platform.system()}, "
        f"Python {platform.python_version()}, torch {version('torch')})",
        "cores": cores,
        "date": datetime.date.today().isoformat(),
    }


@dataclass
class CellTime:
    """One cell's wall time (seen from the client) and its seconds per category."""

    index: int
    first_line: str
    seconds: float
    parts: dict[str, float]
    bars: int = 0  # progress bars the cell showed


@dataclass
class LessonTime:
    """A lesson's Run All: the kernel's start, then every code cell."""

    stem: str
    seconds: float
    kernel_s: float
    cells: list[CellTime] = field(default_factory=list)

    def parts(self) -> dict[str, float]:
        """Seconds per category over the lesson, "other" the rest of the cells' time."""
        out = {"kernel start": self.kernel_s}
        for name in CATEGORIES:
            out[name] = sum(c.parts.get(name, 0.0) for c in self.cells)
        out["other"] = self.seconds - sum(out.values())
        return out


def run_lesson(stem: str, timeout: int, profile: bool = True) -> LessonTime:
    """Execute ``notebooks/{stem}.ipynb`` from a fresh kernel, in a temporary copy, cell by cell.

    With ``profile``, :data:`lesson_profile.SETUP` runs first in the kernel (its time is not
    counted) and each cell's seconds are split into :data:`lesson_profile.CATEGORIES`.
    """
    with tempfile.TemporaryDirectory(prefix=f"lesson-{stem}-") as tmp:
        copy = Path(tmp) / f"{stem}.ipynb"
        shutil.copy(NOTEBOOKS / copy.name, copy)
        nb = nbformat.read(copy, as_version=4)
        client = NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": tmp}}
        )
        # Without a front end, nbclient mirrors every ipywidgets Output back to the kernel; with a
        # figure of more than ~100 KB in one it then waits out the cell timeout (a widget's plotly
        # figure did in lessons 10 and 12). Outputs go to the cell instead: what JupyterLab times.
        client.widget_registry = {}
        lesson_cells = list(enumerate(nb.cells))
        # nbclient writes a cell back at its index: the profile's two cells get their own
        nb.cells += [nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(REPORT)]
        setup_at, report_at = len(nb.cells) - 2, len(nb.cells) - 1
        start = time.perf_counter()
        with client.setup_kernel():
            kernel_s = time.perf_counter() - start
            if profile:
                client.execute_cell(nb.cells[setup_at], setup_at, store_history=False)
            walls = []
            for index, cell in lesson_cells:
                if cell.cell_type != "code":
                    continue
                t0 = time.perf_counter()
                client.execute_cell(cell, index)
                walls.append((index, cell, time.perf_counter() - t0))
            snaps: list[dict[str, float]] = []
            if profile:
                report = nb.cells[report_at]
                client.execute_cell(report, report_at, store_history=False)
                text = "".join(
                    o.get("text", "") for o in report.outputs if o.get("name") == "stdout"
                )
                snaps = json.loads(text.strip().splitlines()[-1])
    # Run All's wait: the kernel's start and every cell (not the kernel's shutdown)
    lesson = LessonTime(stem, kernel_s + sum(w for _, _, w in walls), kernel_s)
    previous = {**dict.fromkeys(CATEGORIES, 0.0), "bars": 0}
    for k, (index, cell, wall) in enumerate(walls):
        snap = snaps[k + 1] if k + 1 < len(snaps) else previous  # snaps[0]: after SETUP
        parts = {name: snap[name] - previous[name] for name in CATEGORIES}
        bars = snap["bars"] - previous["bars"]
        previous = snap
        first = next((line for line in cell.source.splitlines() if line.strip()), "")
        lesson.cells.append(CellTime(index, first[:60], wall, parts, bars))
    return lesson


def print_profile(lessons: list[LessonTime], top: int = 10) -> None:
    """The per-lesson table (where the seconds go) and the course's slowest cells."""
    names = ["kernel start", *CATEGORIES, "other"]
    print("\n| lesson | s | " + " | ".join(names) + " | slowest cell |")
    print("|---|---|" + "---|" * len(names) + "---|")
    for lesson in lessons:
        parts = lesson.parts()
        worst = max(lesson.cells, key=lambda c: c.seconds)
        print(
            f"| {lesson.stem} | {lesson.seconds:.1f} | "
            + " | ".join(f"{parts[n]:.1f}" for n in names)
            + f" | [{worst.index}] {worst.seconds:.1f} s |"
        )
    seconds = sorted(x.seconds for x in lessons)
    if seconds:
        print(f"\nmedian {statistics.median(seconds):.1f} s, max {seconds[-1]:.1f} s")
    cells = sorted(
        ((lesson.stem, c) for lesson in lessons for c in lesson.cells),
        key=lambda x: -x[1].seconds,
    )[:top]
    print(f"\n| top {top} cells | s | " + " | ".join(CATEGORIES) + " | first line |")
    print("|---|---|" + "---|" * len(CATEGORIES) + "---|")
    for stem, c in cells:
        parts = " | ".join(f"{c.parts[n]:.1f}" for n in CATEGORIES)
        line = c.first_line.replace("|", "\\|")
        print(f"| {stem} [{c.index}] | {c.seconds:.1f} | {parts} | `{line}` |")
    slow = [(x.stem, c) for x in lessons for c in x.cells if c.seconds > SLOW_S]
    bare = [f"{stem} [{c.index}] {c.seconds:.1f} s" for stem, c in slow if not c.bars]
    print(f"\ncells over {SLOW_S:g} s: {len(slow)}; without a progress bar: {len(bare)}")
    for line in bare:
        print(f"  {line}")


def browser_times(stems: list[str]) -> dict[str, float]:
    """Each lesson's Run All seconds in Chromium: the browser pass (``tests/test_learner_path.py``)
    run once, every lesson in one JupyterLab as a learner takes the course."""
    with tempfile.TemporaryDirectory(prefix="browser-times-") as tmp:
        out = Path(tmp) / "times.json"
        wanted = " or ".join(f"[{stem}.ipynb]" for stem in stems)
        cmd = [sys.executable, "-m", "pytest", str(ROOT / "tests" / "test_learner_path.py")]
        cmd += ["-q", "-k", f"runs_every_cell and ({wanted})" if wanted else "runs_every_cell"]
        done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, TIMES_VAR: str(out), "CI": "true"})
        if done.returncode != 0 or not out.exists():
            raise SystemExit(f"the browser pass failed (exit {done.returncode}): see its output")
        times = json.loads(out.read_text())
    return {name.removesuffix(".ipynb"): s for name, s in times.items()}


def main(argv: list[str] | None = None) -> int:
    stems = [lesson.stem for lesson in LESSONS]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", default=[], help="a lesson stem (repeatable)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    parser.add_argument(
        "--no-profile", action="store_true", help="time the lessons without the per-cell profile"
    )
    parser.add_argument(
        "--dry", action="store_true", help="print the tables; leave lesson_times.json as it is"
    )
    parser.add_argument(
        "--browser",
        action="store_true",
        help="time Run All in JupyterLab in Chromium (the browser pass) instead of nbclient",
    )
    parser.add_argument(
        "--from-json",
        type=Path,
        help="with --browser: the times a browser pass already wrote ($EDU_PARALLEL_BROWSER_TIMES)",
    )
    args = parser.parse_args(argv)
    for stem in args.only:
        if stem not in stems:
            raise bad_value("only", stem, ", ".join(stems))
    chosen = args.only or stems
    old = load_times()
    if args.browser:
        return record_browser(old, chosen, stems, dry=args.dry, source=args.from_json)
    seconds = dict(old.get("seconds", {}))
    failed = []
    timed: list[LessonTime] = []
    print("| lesson | seconds |\n|---|---|", flush=True)
    for stem in chosen:
        try:
            lesson = run_lesson(stem, args.timeout, profile=not args.no_profile)
        except Exception as err:  # report every lesson, keep the old time of a failed one
            failed.append(stem)
            print(f"| {stem} | failed: {type(err).__name__}: {str(err)[-300:]} |", flush=True)
            continue
        timed.append(lesson)
        seconds[stem] = round(lesson.seconds, 1)
        print(f"| {stem} | {seconds[stem]:.1f} |", flush=True)
    if not args.no_profile:
        print_profile(timed)
    if args.dry:
        return 1 if failed else 0
    record = {
        **old,
        "machine": machine(),
        "seconds": {s: seconds[s] for s in stems if s in seconds},
    }
    TIMES.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"total {sum(seconds[s] for s in chosen if s in seconds):.0f} s; wrote {TIMES}")
    print("rebuilt:", ", ".join(write()) or "nothing changed")
    return 1 if failed else 0


def record_browser(
    old: dict, chosen: list[str], stems: list[str], dry: bool, source: Path | None = None
) -> int:
    """``--browser``: the browser pass's times (run now, or read from ``source``), printed, and
    kept as ``old["browser"]``."""
    if source is None:
        measured = browser_times(chosen if chosen != stems else [])
    else:
        named = json.loads(source.read_text())
        measured = {n.removesuffix(".ipynb"): s for n, s in named.items() if "/" not in n}
    ordered = sorted(measured.values())
    print("| lesson | Run All in Chromium, s |\n|---|---|")
    for stem in stems:
        if stem in measured:
            print(f"| {stem} | {measured[stem]:.1f} |")
    print(f"\nmedian {statistics.median(ordered):.1f} s, max {ordered[-1]:.1f} s")
    if dry:
        return 0
    seconds = {**old.get("browser", {}).get("seconds", {}), **measured}
    old["browser"] = {
        "machine": machine(),
        "seconds": {s: seconds[s] for s in stems if s in seconds},
    }
    TIMES.write_text(json.dumps(old, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {TIMES}; rebuilt:", ", ".join(write()) or "nothing changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
