"""Engine speed goals, measured in one run and printed as a table (goals, not tests).

    python benchmarks/bench_engine.py [--quick]

1. A 4-rank cluster ready (fork): <= 0.2 s, and >= 15x faster than torch.multiprocessing.spawn
   starting and joining a 4-rank group for one run.
2. Empty-job round trip on a live cluster: <= 1 ms (median).
3. Hand ring all-reduce busbw / dist.all_reduce busbw at 1 KiB, 1 MiB, 64 MiB for w = 2, 4:
   >= 0.9x at 64 MiB with tracing off, >= 0.85x with tracing on.
4. Unique memory per worker (USS: private pages, from /proc/PID/smaps_rollup): <= 50 MiB.
5. Peak memory per rank of a 256 MiB ring all-reduce on 2 and 4 ranks, traced and checked against
   dist.all_reduce as ``edu-parallel run ring`` runs it, each on a fresh cluster: on each rank, the
   rise of its resident set over the job (the kernel's high-water mark VmHWM, reset at the start
   through /proc/self/clear_refs, minus VmRSS then; Linux), divided by the payload, the largest
   over the ranks: <= 3x (PEAK_FACTOR of edu_parallel/comm/memory.py: the buffer, the builtin's
   result, one chunk of scratch). ``--memory`` runs only these rows (one size at a time: GBs).
Timing on a shared 2-core machine is noisy: ratios are measured back to back in one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as tmp

from edu_parallel import Cluster
from edu_parallel.comm.allreduce import allreduce_peak_job
from edu_parallel.comm.bench_jobs import time_allreduce
from edu_parallel.comm.memory import PEAK_FACTOR
from edu_parallel.core.metrics import busbw_gbps
from edu_parallel.engine import demos
from edu_parallel.plans.algorithms import plan_allreduce

MEMORY_SIZE = 256 << 20  # the payload of the memory rows


def _spawned_rank(rank: int, world_size: int, port: int) -> None:
    store = dist.TCPStore(
        "127.0.0.1", port, world_size, is_master=rank == 0, timeout=timedelta(seconds=60)
    )
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    dist.barrier()
    dist.destroy_process_group()


def spawn_run_s(world_size: int) -> float:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.perf_counter()
    tmp.spawn(_spawned_rank, args=(world_size, port), nprocs=world_size, join=True)
    return time.perf_counter() - t


def uss_mib(pid: int) -> float:
    fields = {}
    for line in open(f"/proc/{pid}/smaps_rollup"):
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":"):
            fields[parts[0][:-1]] = int(parts[1])
    return (fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)) / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--memory", action="store_true", help="only the peak-memory rows")
    a = ap.parse_args()
    reps = 3 if a.quick else 7
    rows: list[tuple[str, str, str, str]] = []
    if not a.memory:
        speed_rows(rows, a.quick, reps)
    memory_rows(rows)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}"
        f" {platform.release()}, Python {platform.python_version()}, torch {torch.__version__}"
    )
    print()
    print(f"| {'measure':<44} | {'value':<34} | {'goal':<9} | ok |")
    print(f"|{'-' * 46}|{'-' * 36}|{'-' * 11}|----|")
    for name, value, goal, ok in rows:
        print(f"| {name:<44} | {value:<34} | {goal:<9} | {ok:<2} |")
    sys.stdout.flush()


def memory_rows(rows: list[tuple[str, str, str, str]]) -> None:
    """Peak resident memory per rank of a 256 MiB ring all-reduce over its payload (item 5)."""
    for w in (2, 4):
        run = plan_allreduce(w, MEMORY_SIZE)
        with Cluster(w, timeout=300) as c:  # fresh ranks: nothing kept from an earlier job
            results = c.run(allreduce_peak_job, run).results
        peaks = [r["peak_bytes"] for r in results]
        name = f"ring peak memory per rank w={w} 256 MiB"
        if None in peaks:
            rows.append((name, "not measured (not Linux)", "", ""))
            continue
        ratio = max(peaks) / run.buffer.real_bytes
        ok = ratio <= PEAK_FACTOR and all(r["matches_builtin"] for r in results)
        rows.append(
            (
                name,
                f"{ratio:.2f}x payload ({max(peaks) / 2**20:.0f} MiB, peak RSS)",
                f"<= {PEAK_FACTOR}x",
                _ok(ok),
            )
        )


def speed_rows(rows: list[tuple[str, str, str, str]], quick: bool, reps: int) -> None:
    """Items 1 to 4."""
    with Cluster(4) as c:
        for _ in range(20):
            c.run(demos.empty)
        trips = []
        for _ in range(300):
            t = time.perf_counter()
            c.run(demos.empty)
            trips.append(time.perf_counter() - t)
        rt = statistics.median(trips)
        rows.append(
            ("empty-job round trip (4 ranks)", f"{rt * 1e3:.3f} ms", "<= 1 ms", _ok(rt <= 1e-3))
        )
        uss = [uss_mib(pid) for pid in c.pids]
        rows.append(
            (
                "unique memory per worker (max)",
                f"{max(uss):.1f} MiB",
                "<= 50 MiB",
                _ok(max(uss) <= 50),
            )
        )

    ready = []
    for _ in range(reps):
        with Cluster(4) as c:
            ready.append(c.startup_s)
    starts = []  # the tail of a start (issue 17: TCPStore connects sometimes took 5 s)
    for _ in range(20 if quick else 200):
        with Cluster(4) as c:
            starts.append(c.startup_s)
    starts.sort()
    p50, p99 = starts[len(starts) // 2], starts[int(0.99 * (len(starts) - 1))]
    rows.append(
        (
            f"4-rank cluster start p50 / p99 of {len(starts)} (FileStore)",
            f"{p50:.3f} / {p99:.3f} s",
            "p99 <= 0.3 s",
            _ok(p99 <= 0.3),
        )
    )
    spawn = [spawn_run_s(4) for _ in range(2 if quick else 3)]
    ready_s, spawn_s = statistics.median(ready), statistics.median(spawn)
    rows.append(
        ("4-rank cluster ready (fork)", f"{ready_s:.3f} s", "<= 0.2 s", _ok(ready_s <= 0.2))
    )
    rows.append(("mp.spawn 4 ranks, one run", f"{spawn_s:.3f} s", "", ""))
    rows.append(
        (
            "speed-up vs mp.spawn",
            f"{spawn_s / ready_s:.1f}x",
            ">= 15x",
            _ok(spawn_s / ready_s >= 15),
        )
    )

    for w in (2, 4):
        with Cluster(w, timeout=300) as c:
            for size, label in ((1024, "1 KiB"), (1 << 20, "1 MiB"), (64 << 20, "64 MiB")):
                iters = 3 if size >= 64 << 20 else 20
                med = {}
                for impl, traced in (("builtin", False), ("ring", False), ("ring", True)):
                    per_rank = c.run(time_allreduce, size, iters, impl, trace=traced).results
                    med[(impl, traced)] = statistics.median(
                        max(ts) for ts in zip(*per_rank, strict=True)
                    )
                bw = {k: busbw_gbps("all_reduce", w, size, v) for k, v in med.items()}
                for traced, goal in ((False, 0.9), (True, 0.85)):
                    ratio = bw[("ring", traced)] / bw[("builtin", False)]
                    check = f">= {goal}x" if size == 64 << 20 else ""
                    rows.append(
                        (
                            f"ring/builtin busbw w={w} {label} trace {'on' if traced else 'off'}",
                            (
                                f"{ratio:.2f}x ({bw[('ring', traced)]:.3g} vs"
                                f" {bw[('builtin', False)]:.3g} GB/s)"
                            ),
                            check,
                            _ok(ratio >= goal) if check else "",
                        )
                    )


def _ok(flag: bool) -> str:
    return "yes" if flag else "NO"


if __name__ == "__main__":
    main()
