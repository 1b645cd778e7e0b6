"""3D-parallel step speed goal, printed as a table (a goal, not a test).

    python benchmarks/bench_3d.py [--repeat 3]

Starts an 8-rank local cluster and runs one training step of lesson 12's model
(:func:`edu_parallel.parallel_3d.run_3d`) in each layout of ``parallel_3d.LAYOUTS``
(DP2 x TP2 x PP2 first), plus ZeRO-1. Goal: cluster start + the first DP2 x TP2 x PP2 step (which
makes the mesh's process groups) <= 15 s on 2 cores. Later steps reuse the groups; each is the
best of ``--repeat``. Every step is also checked against one process.
"""

from __future__ import annotations

import argparse
import platform
import time

from edu_parallel import Cluster
from edu_parallel.parallel_3d import LAYOUTS, run_3d

GOAL_S = 15.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    t0 = time.perf_counter()
    with Cluster(8, timeout=120) as cluster:
        started = time.perf_counter() - t0
        first = run_3d(cluster, 2, 2, 2)
        t_first = time.perf_counter() - t0
        rows.append(("cluster start (8 ranks)", f"{started:.2f} s", "", ""))
        ok = "yes" if t_first <= GOAL_S and first.matches_reference else "NO"
        rows.append(("start + first DP2xTP2xPP2 step", f"{t_first:.2f} s", f"<= {GOAL_S:g} s", ok))
        cases = [(*layout, {"experts": 4} if layout[3] > 1 else {}) for layout in LAYOUTS]
        cases.append((2, 2, 2, 1, {"zero": 1}))
        for dp, tp, pp, ep, extra in cases:
            best, rep = float("inf"), None
            for _ in range(args.repeat):
                t = time.perf_counter()
                rep = run_3d(cluster, dp, tp, pp, ep, **extra)
                best = min(best, time.perf_counter() - t)
            name = rep.layout + (" ZeRO-1" if extra.get("zero") else "")
            rows.append(
                (f"step {name}", f"{best:.3f} s", "", "yes" if rep.matches_reference else "NO")
            )
    print(f"3D step on 8 local ranks; {platform.machine()}, Python {platform.python_version()}")
    print(f"| {'measure':<34} | {'value':<9} | {'goal':<8} | ok  |")
    print(f"|{'-' * 36}|{'-' * 11}|{'-' * 10}|-----|")
    for name, value, goal, ok in rows:
        print(f"| {name:<34} | {value:<9} | {goal:<8} | {ok:<3} |")


if __name__ == "__main__":
    main()
