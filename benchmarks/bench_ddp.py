"""Lesson 06's speed goals, measured in one run and printed as a table (goals, not tests).

    python benchmarks/bench_ddp.py

1. A sweep of 8 bucket sizes of the ``deep`` model on 4 ranks (``sweep_buckets``: each size
   trained, checked against the one-process reference and retimed for a GPU): <= 10 s.
2. The same model bucketed (2 MiB) with the all-reduces issued after backward vs during backward:
   the step-time ratio measured on the ranks, and the fraction of all-reduce time hidden.
3. One ``run_ddp`` of the deep model beside torch's DDP: our step time / torch DDP's.
Timing on a shared 2-core machine is noisy: ratios are measured back to back in one run.
"""

from __future__ import annotations

import platform
import time

import torch

from edu_parallel import Cluster
from edu_parallel.data_parallel import run_ddp, sweep_buckets


def main() -> None:
    rows = []
    with Cluster(4) as cluster:
        run_ddp(cluster, "deep", steps=1, compare_torch=False)  # warm up the workers
        start = time.perf_counter()
        table = sweep_buckets(cluster)
        sweep_s = time.perf_counter() - start
        rows.append(("sweep of 8 bucket sizes, deep, 4 ranks", f"{sweep_s:.2f} s", "<= 10 s"))
        reports = {
            sync: run_ddp(cluster, "deep", bucket_cap_mb=2, sync=sync, compare_torch=False)
            for sync in ("per-param", "bucketed", "overlap")
        }
        ours = run_ddp(cluster, "deep")
    for sync, r in reports.items():
        rows.append(
            (
                f"step time, {sync} (2 MiB buckets)",
                f"{r.step_time_s * 1e3:.1f} ms, {r.overlap_fraction_measured:.0%} hidden",
                "",
            )
        )
    ratio = reports["overlap"].step_time_s / reports["bucketed"].step_time_s
    rows.append(("overlap / after-backward step time", f"{ratio:.2f}x", "none (2 cores)"))
    rows.append(
        (
            "ours / torch DDP step time (deep, default buckets)",
            f"{ours.step_time_s / ours.torch_ddp_step_time_s:.2f}x"
            f" ({ours.step_time_s * 1e3:.1f} vs {ours.torch_ddp_step_time_s * 1e3:.1f} ms)",
            "",
        )
    )
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"| {'measure':<52} | {'value':<30} | {'goal':<16} |")
    print(f"|{'-' * 54}|{'-' * 32}|{'-' * 18}|")
    for name, value, goal in rows:
        print(f"| {name:<52} | {value:<30} | {goal:<16} |")
    print()
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
