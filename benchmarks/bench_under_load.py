"""Lessons on a busy machine: lessons 06 and 09, and the export of lesson 09, each run with
CPU-bound processes beside them (issue 37), printed as a table of passes and seconds.

    python benchmarks/bench_under_load.py                 # 2 hogs, 3 runs of each
    python benchmarks/bench_under_load.py --hogs 4 --runs 1

A hog is a process that spins on one core for the whole measurement, as a second notebook, a
compile or a browser would. A lesson must not fail because the machine is busy: an assertion or
a timeout that depends on speed is a defect (the lesson's numbers are measured figures, and the
engine's watchdog waits for progress, not for a wall-clock budget). Each lesson runs as Run All
would, in a fresh kernel (:func:`bench_lessons.run_lesson`); the export runs the command line.
The times are this machine's under that load, not speed goals: compare them with
``bench_lessons.py`` measured in the same session.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_lessons import run_lesson  # noqa: E402

LESSONS = ("06_dp_bucketing_overlap", "09_expert_parallel")
EXPORTED = "08"  # the lesson whose export once failed with a bare AssertionError under load


def spin() -> None:  # pragma: no cover - runs in a hog process
    while True:
        pass


def run_export(lesson: str) -> tuple[bool, float, str]:
    with tempfile.TemporaryDirectory(prefix="export-under-load-") as tmp:
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "edu_parallel", "export", "--html", tmp, "--lessons", lesson],
            capture_output=True,
            text=True,
            check=False,
        )
        said = (done.stderr.strip().splitlines() or [""])[-1]
        return done.returncode == 0, time.perf_counter() - t0, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside (2)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each (3)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell (600)")
    a = parser.parse_args()
    hogs = [mp.Process(target=spin, daemon=True) for _ in range(a.hogs)]
    for h in hogs:
        h.start()
    rows = []
    try:
        for run in range(1, a.runs + 1):
            for stem in LESSONS:
                try:
                    t = run_lesson(stem, a.timeout, profile=False)
                    rows.append((stem, run, True, t.seconds, ""))
                except Exception as err:  # noqa: BLE001 - the table says which cell failed
                    rows.append((stem, run, False, float("nan"), str(err).splitlines()[0][:80]))
            ok, seconds, said = run_export(EXPORTED)
            rows.append((f"export --lessons {EXPORTED}", run, ok, seconds, "" if ok else said))
    finally:
        for h in hogs:
            h.kill()
    print(f"{a.hogs} CPU-bound processes beside, {mp.cpu_count()} cores")
    print(f"{'what':28s} {'run':>3s} {'passed':>6s} {'seconds':>8s}  error")
    for what, run, ok, seconds, said in rows:
        print(f"{what:28s} {run:3d} {'yes' if ok else 'NO':>6s} {seconds:8.1f}  {said}")
    passed = sum(ok for _w, _r, ok, _s, _e in rows)
    print(f"passed {passed} of {len(rows)}")


if __name__ == "__main__":
    main()
