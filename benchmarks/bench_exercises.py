"""The coding exercises' speed goals, measured in one run and printed as a table (goals, not tests).

    python benchmarks/bench_exercises.py [--only 05,10]

Grading an exercise runs every case on real ranks and then, for the picture, the reference
solution on the case shown. Each exercise's reference is graded twice: on the lesson's cluster
(``Cluster(4)``; ``Cluster(8)`` in lesson 12), where a case of another size starts a
short-lived cluster as in a notebook, and with no cluster, as ``edu-parallel exercise check``
grades (the grader starts its own). The starters of exercises 05, 11 and 12 return at once with
wrong groups, sums or tokens; they are graded on the lesson's cluster too, since a learner's first
check must come back quickly with a diagnosis, not after a hang. The goals were assertions in
``tests/test_exercise_*.py`` until issue 28 moved timing out of the tests; the tests keep what
each grade says. A hang costs the exercise's ``timeout_s`` per case on top.
Timing on a shared 2-core machine is noisy: compare numbers from one run.
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import time

import torch

from edu_parallel import Cluster
from edu_parallel.exercises import EXERCISES, get_exercise, grade

GOAL_S = 5.0  # grading a reference, every case on 2..4 ranks (8 for exercises 05 and 12)
# grading the starter on a cluster of its largest case, by the function the learner writes
STARTER_GOAL_S = {"my_mesh_groups": 10.0, "my_two_level_allreduce": 20.0, "my_dp_crossover": 5.0}


def starter(ex):
    """The learner's starting function, as the lesson's exercise cell defines it."""
    space: dict = {"__name__": "learner"}
    exec(ex.starter, space)
    return space[ex.function]


def timed(ex, fn, cluster, passes: bool) -> float:
    """Seconds to grade ``fn``, after one warm-up grade (workers, imports); checks the verdict."""
    grade(ex, fn, cluster)
    start = time.perf_counter()
    result = grade(ex, fn, cluster)
    wall = time.perf_counter() - start
    assert result.passed == passes, result.report()
    return wall


def row(ex, graded: str, wall: float, goal: float) -> tuple[str, ...]:
    met = "yes" if wall <= goal else "NO"
    return f"{ex.id} {ex.function}", graded, str(len(ex.cases)), f"{wall:.2f}", f"{goal:g}", met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="exercise ids, comma-separated (default: all)")
    args = parser.parse_args()
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    exercises = [get_exercise(i) for i in only] if only else list(EXERCISES.values())
    rows = []
    with contextlib.ExitStack() as stack:
        lesson: dict[int, Cluster] = {}
        for ex in exercises:
            size = 8 if max(ex.world_sizes()) > 4 else 4
            if size not in lesson:
                lesson[size] = stack.enter_context(Cluster(size))
            sizes = "+".join(str(n) for n in ex.world_sizes())
            wall = timed(ex, ex.reference, lesson[size], passes=True)
            rows.append(row(ex, f"reference, Cluster({size}), {sizes} ranks", wall, GOAL_S))
            wall = timed(ex, ex.reference, None, passes=True)
            rows.append(row(ex, f"reference, own clusters, {sizes} ranks", wall, GOAL_S))
            if ex.function in STARTER_GOAL_S:
                wall = timed(ex, starter(ex), lesson[size], passes=False)
                goal = STARTER_GOAL_S[ex.function]
                rows.append(row(ex, f"starter, Cluster({size})", wall, goal))
    head = ("exercise", "graded", "cases", "wall s", "goal s", "met")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(f"coding exercises; torch {torch.__version__}, {platform.platform()}")
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    missed = sum(r[-1] == "NO" for r in rows)
    print(f"goals met: {len(rows) - missed} of {len(rows)}")


if __name__ == "__main__":
    main()
