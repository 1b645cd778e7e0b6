"""How long each lesson takes to run, measured, for the course index's "time to run" column.

    python benchmarks/bench_lessons.py                    # every lesson of LESSONS, in order
    python benchmarks/bench_lessons.py --only 03_ring_allreduce --only 09_pipeline

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
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from edu_parallel.app.course.lessons import LESSONS, NOTEBOOKS, TIMES, load_times, write
from edu_parallel.core.errors import bad_value


def machine() -> dict:
    """What the times were measured on."""
    cores = os.cpu_count() or 1
    return {
        "description": f"{cores} CPU cores ({platform.machine()}, {platform.system()}, "
        f"Python {platform.python_version()}, torch {version('torch')})",
        "cores": cores,
        "date": datetime.date.today().isoformat(),
    }


def run_lesson(stem: str, timeout: int) -> float:
    """Seconds to execute ``notebooks/{stem}.ipynb`` from a fresh kernel, in a temporary copy."""
    with tempfile.TemporaryDirectory(prefix=f"lesson-{stem}-") as tmp:
        copy = Path(tmp) / f"{stem}.ipynb"
        shutil.copy(NOTEBOOKS / copy.name, copy)
        nb = nbformat.read(copy, as_version=4)
        client = NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": tmp}}
        )
        # Without a front end, nbclient mirrors every ipywidgets Output back to the kernel; with a
        # figure of more than ~100 KB in one it then waits out the cell timeout (a widget's plotly
        # figure did in lessons 09 and 10). Outputs go to the cell instead: what JupyterLab times.
        client.widget_registry = {}
        start = time.perf_counter()
        client.execute()
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    stems = [lesson.stem for lesson in LESSONS]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", default=[], help="a lesson stem (repeatable)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args(argv)
    for stem in args.only:
        if stem not in stems:
            raise bad_value("only", stem, ", ".join(stems))
    chosen = args.only or stems
    old = load_times()
    seconds = dict(old.get("seconds", {}))
    failed = []
    print("| lesson | seconds |\n|---|---|", flush=True)
    for stem in chosen:
        try:
            seconds[stem] = round(run_lesson(stem, args.timeout), 1)
            print(f"| {stem} | {seconds[stem]:.1f} |", flush=True)
        except Exception as err:  # report every lesson, keep the old time of a failed one
            failed.append(stem)
            print(f"| {stem} | failed: {type(err).__name__}: {str(err)[-300:]} |", flush=True)
    record = {"machine": machine(), "seconds": {s: seconds[s] for s in stems if s in seconds}}
    TIMES.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"total {sum(seconds[s] for s in chosen if s in seconds):.0f} s; wrote {TIMES}")
    print("rebuilt:", ", ".join(write()) or "nothing changed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
