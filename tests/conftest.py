"""Shared fixtures. Multi-process tests use gloo with 2 to 4 ranks and short timeouts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lab_driver import why_no_browser

from edu_parallel import Cluster

# a fixed learner for the quizzes' option order: no test writes .edu-parallel/learner.json here
os.environ.setdefault("EDU_PARALLEL_LEARNER", "tests")
# English unless a test asks for Chinese (set_language / language()), whatever this machine's locale
os.environ.setdefault("EDU_PARALLEL_LANG", "en")

BROWSER_PASS = "test_learner_path.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run each lesson once: in the real-browser pass when it runs, else under nbval.

    The browser pass executes every lesson with Run All and fails on any error or stderr output,
    which is all nbval-lax checks, and more; running the lessons twice would only cost minutes.
    A lesson selected alone (``pytest notebooks/03_ring_allreduce.ipynb``) still runs under nbval.
    """
    browser = any(item.path.name == BROWSER_PASS for item in items)
    if not browser or why_no_browser() is not None:
        return
    lessons = [  # the English lessons; the Chinese ones (notebooks/zh/) stay under nbval
        i
        for i in items
        if i.path.suffix == ".ipynb" and i.path.name[:2].isdigit() and i.path.parent.name != "zh"
    ]
    if lessons:
        config.hook.pytest_deselected(items=lessons)
        items[:] = [i for i in items if i not in lessons]
        names = sorted({i.path.name for i in lessons})
        config._edu_parallel_note = (
            f"{len(names)} lessons run in the real-browser pass ({BROWSER_PASS}), not under nbval"
        )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    note = getattr(terminalreporter.config, "_edu_parallel_note", None)
    if note:
        terminalreporter.write_line(note)


def child_pids(pid: int | None = None) -> list[int]:
    """Live (non-zombie) processes whose parent is ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.fixture(scope="module")
def cluster4():

    with Cluster(4, timeout=20) as c:
        yield c


@pytest.fixture(scope="module")
def cluster2():

    with Cluster(2, timeout=20) as c:
        yield c
