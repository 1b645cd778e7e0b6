"""Shared fixtures. Multi-process tests use gloo with 2 to 4 ranks and short timeouts; the plain
helpers (``cli``, ``fresh_python``, ``free_port``, ``child_pids``) are in ``helpers.py``."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import LEARNER
from lab_driver import why_no_browser
from zh_outputs import english_in_outputs

from edu_parallel import Cluster
from edu_parallel.core.i18n import LANG_VAR
from edu_parallel.core.workspace import WORKSPACE_VAR
from edu_parallel.quiz.shuffle import LEARNER_VAR

# a fixed learner for the quizzes' option order: no test writes .edu-parallel/learner.json here
os.environ.setdefault(LEARNER_VAR, "tests")
# English unless a test asks for Chinese (set_language / language()), whatever this machine's locale
os.environ.setdefault(LANG_VAR, "en")

BROWSER_PASS = "test_learner_path.py"
# where the browser pass writes each lesson's Run All seconds in Chromium (JSON), when set
TIMES_VAR = "EDU_PARALLEL_BROWSER_TIMES"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run each lesson once, in each language: in the real-browser pass when it runs, else under
    nbval. The outputs of a Chinese lesson are scanned for English either way (``zh_outputs.py``:
    the browser pass reads the notebook as the lab saves it; under nbval, :class:`ZhOutputScan`).

    The browser pass executes every lesson with Run All and fails on any error or stderr output,
    which is all nbval-lax checks, and more; running the lessons twice would only cost minutes.
    A lesson selected alone (``pytest notebooks/03_ring_allreduce.ipynb``) still runs under nbval.
    """
    browser = any(item.path.name == BROWSER_PASS for item in items)
    if not browser or why_no_browser() is not None:
        return
    lessons = [i for i in items if i.path.suffix == ".ipynb" and i.path.name[:2].isdigit()]
    if lessons:
        config.hook.pytest_deselected(items=lessons)
        items[:] = [i for i in items if i not in lessons]
        names = sorted({str(i.path.relative_to(i.path.parents[1])) for i in lessons})
        config._edu_parallel_note = (
            f"{len(names)} lessons run in the real-browser pass ({BROWSER_PASS}), not under nbval"
        )


class ZhOutputScan:
    """A cell of a Chinese lesson run under nbval fails on English output (``zh_outputs.py``). A
    plugin, not a hook of this file: a conftest's item hooks apply only below its folder, and the
    lessons run from ``notebooks/``."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        path = getattr(item, "path", None)
        if (
            call.when != "call"
            or not report.passed
            or path is None
            or path.parent.name != "zh"
            or not path.stem[:2].isdigit()
            or not hasattr(item, "test_outputs")
        ):
            return
        found = english_in_outputs(item.cell.source, item.test_outputs or [])
        if found:
            report.outcome = "failed"
            report.longrepr = (
                f"{path.parent.name}/{path.name} cell {item.cell_num}: English in the Chinese"
                f" output: {found[:10]}"
            )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ZhOutputScan(), "edu-parallel-zh-output-scan")


RUN_ALL = "run_all_s"  # the user property a browser test records its Run All seconds in


@pytest.fixture
def run_all_times(request) -> Callable[[str, float], None]:
    """``record(lesson, seconds)``: the browser pass's Run All time of a lesson, kept as a user
    property of the test (so it reaches the controller under pytest-xdist too), printed at the
    end of the run and written as JSON to ``$EDU_PARALLEL_BROWSER_TIMES`` when that is set (the
    course index's "time to run" column, through ``benchmarks/bench_lessons.py --browser``)."""

    def record(lesson: str, seconds: float) -> None:
        request.node.user_properties.append((RUN_ALL, (lesson, round(seconds, 1))))

    return record


RUN_ALL_TIMES: dict[str, float] = {}  # lesson -> seconds, in the process that reports


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        for key, value in report.user_properties:
            if key == RUN_ALL:
                lesson, seconds = value
                RUN_ALL_TIMES[lesson] = seconds


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    note = getattr(config, "_edu_parallel_note", None)
    if note:
        terminalreporter.write_line(note)
    times = RUN_ALL_TIMES
    if times:
        terminalreporter.section("Run All in Chromium (seconds)")
        for name, seconds in times.items():
            terminalreporter.write_line(f"{name:<40} {seconds:6.1f}")
        ordered = sorted(times.values())
        terminalreporter.write_line(
            f"median {statistics.median(ordered):.1f} s, max {ordered[-1]:.1f} s,"
            f" {len(ordered)} lessons"
        )
        if os.environ.get(TIMES_VAR):
            Path(os.environ[TIMES_VAR]).write_text(json.dumps(times, indent=1) + "\n")


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


@pytest.fixture(scope="session")
def tour_site(tmp_path_factory):
    """``edu-parallel export`` of lesson 00 in both languages, once for the session (about 20 s):
    ``(folder, pages, progress lines)``, read by ``test_export.py`` and its browser tests."""
    from edu_parallel.app.export.site import export_site

    dest = tmp_path_factory.mktemp("site") / "new" / "site"  # created by the export
    lines: list[str] = []
    pages = export_site(dest, ["00"], timeout=120, progress=lines.append)
    return dest, pages, lines


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
