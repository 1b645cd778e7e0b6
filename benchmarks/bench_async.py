"""Lesson 14's speed goals and its result table, measured in one run (goals, not tests).

    python benchmarks/bench_async.py [--steps 100] [--workers 3]

1. One run of each regime on its ranks (3 workers; the server regimes on 4 ranks), 100 steps, no
   straggler: wall time of the run and of its one-process replay; goal a few seconds each.
2. The comparison the lesson draws (4 regimes x 4 straggler settings: none, one slow worker with a
   fixed and with a heavy-tailed delay, a random slow worker with exponential delays): the time to
   the target accuracy of each, and the whole sweep's time.
Timing on a shared 2-core machine is noisy; the table is what this machine measured, not a claim.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from edu_parallel import Cluster
from edu_parallel.async_training import compare_regimes, replay, run_async
from edu_parallel.async_training.replay_run import clear_cache
from edu_parallel.async_training.report import applies_of
from edu_parallel.async_training.tables import MODES_ORDER

SETTINGS = (
    {"straggler": "none"},
    {"straggler": "rank", "distribution": "fixed"},
    {"straggler": "rank", "distribution": "pareto"},
    {"straggler": "random", "distribution": "exponential"},
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--workers", type=int, default=3)
    a = parser.parse_args()
    rows = []
    with Cluster(a.workers + 1) as cluster, cluster.sized(a.workers) as small:
        for mode in MODES_ORDER:
            ranks = cluster if mode in ("async-ps", "backup") else small
            run_async(ranks, mode, steps=2)  # warm up the workers
            start = time.perf_counter()
            r = run_async(ranks, mode, steps=a.steps)
            total = time.perf_counter() - start
            clear_cache()
            start = time.perf_counter()
            replay(r.config, [e.attrs for e in applies_of(r.trace)])
            rep = time.perf_counter() - start
            rows.append(
                (
                    f"{mode}, {a.steps} steps: run + replay (replay alone)",
                    f"{total:.2f} s ({rep:.2f} s)",
                    "<= 3 s",
                )
            )
        start = time.perf_counter()
        cmp = compare_regimes(cluster, workers=a.workers, settings=SETTINGS, steps=a.steps)
        sweep = time.perf_counter() - start
    rows.append((f"{len(cmp.reports)} runs of the comparison", f"{sweep:.1f} s", ""))
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"| {'measure':<52} | {'value':<18} | {'goal':<8} |")
    print(f"|{'-' * 54}|{'-' * 20}|{'-' * 10}|")
    for name, value, goal in rows:
        print(f"| {name:<52} | {value:<18} | {goal:<8} |")
    print()
    table = cmp.table()
    ttt = cmp.time_to_target().round(2)
    print("time to target (s), measured; NaN: not reached in", a.steps, "steps")
    print(ttt.to_string())
    print()
    cols = ["regime", "straggler", "samples/s", "steps to target", "mean staleness", "dropped"]
    print(table[cols].round(2).to_string(index=False))
    print(f"\nevery replay matched its run bit for bit: {bool(table['replay matches'].all())}")


if __name__ == "__main__":
    main()
