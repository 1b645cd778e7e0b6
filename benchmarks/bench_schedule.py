"""Pipeline-schedule speed goal, printed as a table (a goal, not a test).

    python benchmarks/bench_schedule.py [--ranks 64] [--microbatches 512] [--repeat 3]

Builds a 1F1B schedule for P ranks and M microbatches (``build_schedule``: per-rank orders placed
into unit-time slots), times it with ``time_schedule`` (t_f = 1, t_b = 2), and measures the peak
activations per stage. Goal: build + time <= 1 s at P = 64, M = 512 (65,536 actions). Each time is
the best of ``--repeat`` runs. The script also checks the result against the formulas.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from typing import Any

from edu_parallel.pipeline_parallel.builders import build_schedule
from edu_parallel.pipeline_parallel.timing import gpipe_bubble, time_schedule

GOAL_S = 1.0


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--microbatches", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    p, m = args.ranks, args.microbatches
    t_build, schedule = timed(lambda: build_schedule("1f1b", p, m), args.repeat)
    t_time, timeline = timed(lambda: time_schedule(schedule, 1.0, 2.0), args.repeat)
    t_peak, peaks = timed(timeline.peak_activations_per_stage, args.repeat)
    assert abs(timeline.bubble_fraction() - gpipe_bubble(p, m)) < 1e-12
    assert peaks == [min(p - i, m) for i in range(p)]
    total = t_build + t_time
    actions = sum(len(row) for row in schedule.orders())
    rows = [
        ("actions", f"{actions}", "", ""),
        ("build_schedule('1f1b')", f"{t_build:.3f} s", "", ""),
        ("time_schedule", f"{t_time:.3f} s", "", ""),
        ("build + time", f"{total:.3f} s", f"<= {GOAL_S:g} s", "yes" if total <= GOAL_S else "NO"),
        ("peak_activations_per_stage", f"{t_peak:.3f} s", "", ""),
        ("bubble (measured = formula)", f"{timeline.bubble_fraction():.6f}", "", ""),
    ]
    print(f"1F1B schedule, P={p}, M={m}; {platform.machine()}, Python {platform.python_version()}")
    print(f"| {'measure':<30} | {'value':<12} | {'goal':<8} | ok  |")
    print(f"|{'-' * 32}|{'-' * 14}|{'-' * 10}|-----|")
    for name, value, goal, ok in rows:
        print(f"| {name:<30} | {value:<12} | {goal:<8} | {ok:<3} |")


if __name__ == "__main__":
    main()
