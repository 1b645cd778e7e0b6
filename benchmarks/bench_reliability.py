"""The bad-input table's counts and the engine's time to a named fault, printed as two tables
(the README's "Reliability" section shows them).

    python benchmarks/bench_reliability.py

1. ``tests/test_bad_inputs.py``, run under pytest: per group of cases, how many were tried and
   how many gave what they must (a clear one-line error naming the option, or the checked
   output). A traceback, a hang (the test's own bounded timeout), a vague message or a process
   left behind fails its case, so "failed" is the count of all four.
2. Faults on a live 2-rank cluster: a rank that raises or is killed by SIGKILL, or one that
   waits in a collective its peer skipped (``timeout=1``), and a learner file that loops at import
   (``exercise check``, whose trial load has the exercise's 4 s limit): the seconds from the
   call to the error that names the rank or the line, median of 3.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GROUPS = {  # test function -> what its cases are
    "test_a_bad_value_gets_one_line_naming_the_option": "bad values of every option",
    "test_an_option_that_means_nothing_where_it_is_given_is_refused": "meaningless options",
    "test_a_path_the_system_refuses_is_named_before_any_work": "output paths the system refuses",
    "test_a_write_that_fails_after_the_run_keeps_the_result_and_names_the_option": "a full disk",
    "test_a_learner_file_that_misbehaves_at_import_gets_one_verdict": "learner files",
    "test_a_cluster_refuses_bad_arguments_in_one_line": "Cluster arguments",
    "test_an_argument_that_cannot_travel_is_named_and_a_nested_cluster_is_refused": "API misuse",
    "test_a_message_received_into_a_buffer_of_another_size_is_named": "API misuse",
    "test_what_a_job_starts_ends_with_the_cluster": "a job's own processes",
    "test_what_a_job_starts_ends_when_its_parent_is_killed": "a job's own processes",
    "test_the_store_of_a_killed_parent_is_removed_when_the_next_cluster_starts": "stale stores",
    "test_a_reader_that_leaves_the_pipe_gets_no_traceback": "a closed pipe",
    "test_version_prints_the_installed_version": "--version",
    "test_the_largest_pipeline_is_refused_one_past_it_and_runs_at_it": "largest accepted values",
    "test_a_largest_run_that_cannot_fit_is_refused_with_what_it_needs": "runs that cannot fit",
    "test_a_sample_of_the_table_reads_in_chinese": "the table in Chinese (a sample)",
}


def table_counts() -> list[tuple[str, int, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0"]
            + [f"--junitxml={junit}", "tests/test_bad_inputs.py"],
            cwd=REPO,
            capture_output=True,
            check=False,
        )
        tried, passed = Counter(), Counter()
        for case in ET.parse(junit).iter("testcase"):
            group = GROUPS.get(case.get("name", "").split("[")[0], "other")
            tried[group] += 1
            passed[group] += not any(c.tag in ("failure", "error") for c in case)
    groups = dict.fromkeys([*GROUPS.values(), "other"])  # a group once, in order
    return [(g, tried[g], passed[g]) for g in groups if tried[g]]


def fault_times() -> list[tuple[str, float, str]]:
    from edu_parallel import Cluster
    from edu_parallel.core.errors import EngineError
    from edu_parallel.engine import demos

    rows = []
    with Cluster(2, timeout=1) as c:
        for label, fn in (
            ("a rank raises", demos.raise_on),
            ("a rank is killed (SIGKILL)", demos.die_on),
            ("a collective one rank skipped (timeout=1 s)", demos.skip_collective),
        ):
            times, said = [], ""
            for _ in range(3):
                t0 = time.perf_counter()
                try:
                    c.run(fn)
                except EngineError as err:
                    times.append(time.perf_counter() - t0)
                    said = str(err).split(".")[0]
            rows.append((label, statistics.median(times), said))
    with tempfile.TemporaryDirectory() as tmp:
        loop = Path(tmp) / "loop.py"
        loop.write_text("while True:\n    pass\n")
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "edu_parallel", "exercise", "check", "03", str(loop)],
            capture_output=True,
            text=True,
            check=False,
        )
        rows.append(
            ("a learner file loops at import", time.perf_counter() - t0, out.stdout.strip())
        )
    return rows


def main() -> int:
    counts = table_counts()
    print("| cases | tried | clear or checked | failed |")
    print("|---|---|---|---|")
    for group, tried, passed in counts:
        print(f"| {group} | {tried} | {passed} | {tried - passed} |")
    total, ok = sum(t for _g, t, _p in counts), sum(p for _g, _t, p in counts)
    print(f"| **all** | **{total}** | **{ok}** | **{total - ok}** |\n")
    print("| fault | s to the named error | what it says |")
    print("|---|---|---|")
    for label, seconds, said in fault_times():
        print(f"| {label} | {seconds:.2f} | {said[:90]} |")
    return 0 if total == ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
