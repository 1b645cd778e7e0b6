"""The exercises' speed goal, measured in one run and printed as a table (a goal, not a test).

    python benchmarks/bench_exercises.py

Grading one exercise, every case on 2 and 4 ranks, with the reference run beside it for the
picture: goal <= 5 s on 2 cores. Each exercise's reference solution is graded twice, first on a
4-rank cluster (the lesson's: the 2-rank cases start a short-lived 2-rank cluster, as in a
notebook), then with no cluster at all (the command line: the grader starts its own). A hang costs
the exercise's timeout on top: ``timeout_s`` is printed beside it.
Timing on a shared 2-core machine is noisy: compare numbers from one run.
"""

from __future__ import annotations

import platform
import time

import torch

from edu_parallel import Cluster
from edu_parallel.exercises import EXERCISES, grade


def main() -> None:
    rows = []
    with Cluster(4) as cluster:
        for ex in EXERCISES.values():
            grade(ex, ex.reference, cluster)  # warm the workers and the imports
            start = time.perf_counter()
            result = grade(ex, ex.reference, cluster)
            in_lesson = time.perf_counter() - start
            start = time.perf_counter()
            grade(ex, ex.reference)
            alone = time.perf_counter() - start
            assert result.passed, result.report()
            sizes = "+".join(str(n) for n in ex.world_sizes())
            rows.append(
                (
                    f"{ex.id} {ex.function}: {len(ex.cases)} cases on {sizes} ranks",
                    f"{in_lesson:.2f} s",
                    f"{alone:.2f} s",
                    f"{ex.timeout_s:g} s",
                    "<= 5 s",
                )
            )
    head = ("exercise", "lesson cluster", "own clusters", "hang costs", "goal")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(f"torch {torch.__version__}, {platform.platform()}")
    for row in [head, tuple("-" * w for w in widths), *rows]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


if __name__ == "__main__":
    main()
