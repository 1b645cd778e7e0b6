"""Shared fixtures. Multi-process tests use gloo with 2 to 4 ranks and short timeouts; the plain
helpers (``cli``, ``fresh_python``, ``free_port``, ``child_pids``) are in ``helpers.py``."""

from __future__ import annotations

import os

import pytest
from helpers import LEARNER
from lab_driver import why_no_browser

from edu_parallel import Cluster
from edu_parallel.core.i18n import LANG_VAR
from edu_parallel.core.workspace import WORKSPACE_VAR
from edu_parallel.quiz.shuffle import LEARNER_VAR

# a fixed learner for the quizzes' option order: no test writes .edu-parallel/learner.json here
os.environ.setdefault(LEARNER_VAR, "tests")
# English unless a test asks for Chinese (set_language / language()), whatever this machine's locale
os.environ.setdefault(LANG_VAR, "en")

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


@pytest.fixture(scope="module")
def cluster2():
    with Cluster(2, timeout=20) as c:
        yield c


@pytest.fixture(scope="module")
def cluster3():
    with Cluster(3, timeout=20) as c:
        yield c


@pytest.fixture(scope="module")
def cluster4():
    with Cluster(4, timeout=20) as c:
        yield c


@pytest.fixture(scope="module")
def cluster8():
    """Eight ranks on this machine's cores: a longer job timeout than the small clusters'."""
    with Cluster(8, timeout=30) as c:
        yield c


@pytest.fixture
def quiet_workspace(monkeypatch, tmp_path):
    """A fresh workspace in ``tmp_path`` (nothing is written to the checkout) and no learner from
    the environment: a quiz built without ``learner=`` draws and saves a new id there."""
    monkeypatch.setenv(WORKSPACE_VAR, str(tmp_path))
    monkeypatch.delenv(LEARNER_VAR, raising=False)
    return tmp_path


@pytest.fixture
def fixed_learner(quiet_workspace, monkeypatch):
    """``quiet_workspace`` with one known learner (``LEARNER``), so the option order is known."""
    monkeypatch.setenv(LEARNER_VAR, LEARNER)
    return quiet_workspace
