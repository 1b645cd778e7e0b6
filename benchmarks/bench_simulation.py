"""Simulation speed goal, measured in one run and printed as a table (a goal, not a test).

    python benchmarks/bench_simulation.py [--ranks 64 256 1024] [--event-limit 256]

Ring all-reduce of 1 GiB per rank with the ``nvlink4-h100`` cost model. Per world size:

* plan build: ``ring_allreduce_plan(n)`` (Transfer objects) vs ``ring_allreduce_arrays(n)``;
* event path: ``simulate(plan, nbytes, with_data=False)`` then ``retime(trace, model)``, skipped
  above ``--event-limit`` ranks (1024 ranks: ~5M Event objects; retime, by extrapolation, minutes);
* fast path: ``simulate_fast(arrays, nbytes, model=model)``; "fast total" adds the array build.

Goal: fast total <= 1 s at 1024 ranks. Each time is the best of ``--repeat`` runs (the event path
runs once; "1st run" is the array path's first, cold call). Where both paths ran, the script also
checks that they agree.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from typing import Any

from edu_parallel.models.fast_simulation import simulate_fast
from edu_parallel.models.retiming import cost_model, retime
from edu_parallel.models.simulation import simulate
from edu_parallel.plans.arrays import ring_allreduce_arrays
from edu_parallel.plans.ring import ring_allreduce_plan

GOAL_S = 1.0
NBYTES = 1024**3


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any, float]:
    """Best wall time of ``repeat`` calls, the last result, and the first call's time."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out, times[0]


def row(n: int, event_limit: int, repeat: int) -> dict[str, Any]:
    model = cost_model("nvlink4-h100")
    t_plan, plan, _ = timed(lambda: ring_allreduce_plan(n), 1)
    t_arrays, arrays, first_arrays = timed(lambda: ring_allreduce_arrays(n), repeat)
    t_fast, summary, first_fast = timed(lambda: simulate_fast(arrays, NBYTES, model=model), repeat)
    out = {
        "n": n,
        "plan": t_plan,
        "arrays": t_arrays,
        "fast": t_fast,
        "time_s": summary.time_s,
        "first": first_arrays + first_fast,
    }
    if n <= event_limit:
        out["sim"], trace, _ = timed(lambda: simulate(plan, NBYTES, with_data=False)[0])
        out["retime"], retimed, _ = timed(lambda: retime(trace, model))
        assert summary.sent_bytes(per_phase=True) == trace.sent_bytes(per_phase=True)
        assert summary.steps_per_phase() == trace.steps_per_phase()
        assert summary.time_s == retimed.duration, (summary.time_s, retimed.duration)
        out["agree"] = "yes"
    return out


def fmt(x: float | None) -> str:
    return "skipped" if x is None else f"{x:.3f} s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--event-limit", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(
        f"ring all-reduce, 1 GiB per rank, nvlink4-h100; python {platform.python_version()}, "
        f"{platform.machine()}; best of {args.repeat} for the array path"
    )
    head = (
        "ranks",
        "plan objects",
        "plan arrays",
        "event simulate",
        "event retime",
        "fast sim",
        "fast total",
        "fast total, 1st run",
        "modelled time",
        "paths agree",
    )
    print(" | ".join(head))
    print(" | ".join("-" * len(h) for h in head))
    ok = True
    for n in args.ranks:
        r = row(n, args.event_limit, args.repeat)
        total = r["arrays"] + r["fast"]
        cells = (
            str(n),
            fmt(r["plan"]),
            fmt(r["arrays"]),
            fmt(r.get("sim")),
            fmt(r.get("retime")),
            fmt(r["fast"]),
            fmt(total),
            fmt(r["first"]),
            f"{r['time_s'] * 1e3:.3f} ms",
            r.get("agree", "-"),
        )
        print(" | ".join(cells))
        if n == 1024:
            ok = max(total, r["first"]) <= GOAL_S
    print(f"event path skipped above {args.event_limit} ranks (millions of Event objects).")
    if 1024 in args.ranks:
        print(
            f"goal: fast total <= {GOAL_S} s at 1024 ranks (best and 1st run): "
            f"{'met' if ok else 'NOT met'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
