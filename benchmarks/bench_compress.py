"""Lesson 13's speed goals, measured in one run and printed as a table (goals, not tests).

    python benchmarks/bench_compress.py

1. The compression sweep (``sweep_compress``: none, fp16, bf16, top-k, random-k, sign and
   PowerSGD, each trained the lesson's LESSON_STEPS steps and scored every step) on 4 ranks: goal
   <= 20 s;
   and on 2 ranks, the lesson's cluster.
2. What bounds it: the messages each sweep step sends (``messages_per_step``, summed over the
   methods) and the time of one small ring all-reduce on 4 ranks, measured back to back. On a
   machine where a message costs milliseconds of wake-up latency, the sweep costs about
   messages x steps x that latency whatever the bytes.
3. Each compressor's own compute per step (the trace's ``compress`` events), 4 ranks.
Timing on a shared 2-core machine is noisy: compare numbers from one run.
"""

from __future__ import annotations

import platform
import statistics
import time

import torch

from edu_parallel import Cluster
from edu_parallel.comm import run_allreduce
from edu_parallel.compression import sweep_compress
from edu_parallel.compression.config import LESSON_STEPS, CompressConfig, messages_per_step
from edu_parallel.compression.sweep import SWEEP


def main() -> None:
    rows = []
    for n in (4, 2):
        with Cluster(n) as cluster:
            sweep_compress(cluster, steps=2, progress=False)  # warm up the workers
            start = time.perf_counter()
            table, reports = sweep_compress(cluster)
            took = time.perf_counter() - start
            goal = "<= 20 s" if n == 4 else "lesson: <= 30 s in all"
            rows.append(
                (
                    f"sweep of {len(SWEEP)} methods, {LESSON_STEPS} steps, {n} ranks",
                    f"{took:.1f} s",
                    goal,
                )
            )
            msgs = sum(messages_per_step(CompressConfig(n, **run)) for run in SWEEP)
            rows.append((f"  messages per rank per sweep step, {n} ranks", f"{msgs:g}", ""))
            if n == 4:
                times = [run_allreduce(cluster, 1064, trace=False).time_s for _ in range(30)]
                lat = statistics.median(times)
                rows.append(("  ring all-reduce of 266 floats, 4 ranks", f"{lat * 1e3:.2f} ms", ""))
                per_msg = lat / 6
                rows.append(("  => per message (6 per all-reduce)", f"{per_msg * 1e3:.2f} ms", ""))
                bound = msgs * LESSON_STEPS * per_msg
                rows.append(("  => messages x steps x latency", f"{bound:.1f} s", ""))
                for r in reports:
                    rows.append(
                        (
                            f"  compressor compute, {r.config.label}",
                            f"{r.compress_s_per_step * 1e3:.2f} ms/step",
                            "",
                        )
                    )
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"| {'measure':<52} | {'value':<16} | {'goal':<24} |")
    print(f"|{'-' * 54}|{'-' * 18}|{'-' * 26}|")
    for name, value, goal in rows:
        print(f"| {name:<52} | {value:<16} | {goal:<24} |")


if __name__ == "__main__":
    main()
