"""Drive a real ``edu-parallel lab`` in Debian's Chromium as a learner does (test_learner_path).

:class:`LabServer` starts the course command on a free loopback port, in a fresh workspace, with a
known token; :class:`Lesson` opens one lesson in JupyterLab and does what a learner does: Run All,
scroll through, press Play (and pause) on every animation, answer the quiz. Every reading comes
from the page (the DOM that the learner sees), never from the kernel.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mplfonts
import pytest
from helpers import free_port
from lab_animation import frame_zero_problems, play_problems
from lab_overlap import EDGE_PX, OVERLAPS_JS, SLACK_PX
from lab_text import TRUNCATED_JS, WRAPPED_JS

CHROMIUM_FLAGS = [  # as root in a container, on a closed network
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RAW_WIDGET_REPRS = ("VBox(", "HBox(", "Output(", "HTML(value", "Button(", "IntSlider(")
BUSY_PROMPTS = ("[*]:", "[ ]:")
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in the current tab
FEEDBACK_WORDS = ("Correct!", "Not quite", "run failed", "cluster is closed", "is not valid")


def cjk_fontconfig(folder: Path) -> dict[str, str]:
    """Environment for Chromium that adds the package's CJK font (mplfonts' Noto Sans CJK SC) to
    the system's fonts, so that 中文 renders on a machine without CJK fonts (screenshots read).
    A learner's own browser uses the learner's fonts; this touches only the test's Chromium."""
    fonts = Path(mplfonts.__file__).resolve().parent / "fonts"
    conf = folder / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
        '  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>\n'
        f"  <dir>{fonts}</dir>\n  <cachedir>{folder / 'fontcache'}</cachedir>\n</fontconfig>\n"
    )
    return {**os.environ, "FONTCONFIG_FILE": str(conf)}


def find_chromium() -> str | None:
    """Debian's chromium (``apt install chromium``), or the one ``EDU_PARALLEL_CHROMIUM`` names."""
    named = os.environ.get("EDU_PARALLEL_CHROMIUM")
    if named:
        return named if Path(named).exists() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def why_no_browser() -> str | None:
    """Why the real-browser pass cannot run here, or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[test]')"
    if find_chromium() is None:
        return "no Chromium found (apt install chromium, or set EDU_PARALLEL_CHROMIUM)"
    return None


@contextlib.contextmanager
def chromium_browser(what: str, env: dict[str, str] | None = None) -> Iterator[Any]:
    """Debian's Chromium launched by Playwright, closed on exit. Without a browser the test skips
    and says why; in CI (``CI=true``) that is a failure, since ``.ci/run`` installs it. ``what``
    names the test in that message."""
    reason = why_no_browser()
    if reason:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{reason}: in CI {what} must run (.ci/run installs chromium)")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_FLAGS, env=env)
        try:
            yield browser
        finally:
            browser.close()


class LabServer:
    """``python -m edu_parallel lab --no-browser`` in ``folder`` on a free port, stopped on exit."""

    def __init__(self, folder: Path, env: dict[str, str], args: tuple[str, ...] = ()):
        self.folder, self.port, self.token = folder, free_port(), secrets.token_hex(16)
        self.args = tuple(args)  # more options of `edu-parallel lab` (``--lang zh``)
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **env, "JUPYTER_TOKEN": self.token}
        self.log = folder.parent / "lab.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.pending: list[threading.Thread] = []

    def url(self, path: str) -> str:
        return f"{self.base}{path}?token={self.token}"

    def shutdown_kernels(self, path: str, wait: bool = True) -> None:
        """Delete the sessions (and so the kernels, and their ranks) of the notebook ``path``;
        with ``wait=False`` in the background (joined when the server stops)."""
        if not wait:
            worker = threading.Thread(target=self.shutdown_kernels, args=(path,), daemon=True)
            worker.start()
            self.pending.append(worker)
            return
        with urllib.request.urlopen(self.url("/api/sessions"), timeout=10) as r:
            sessions = json.load(r)
        for session in sessions:
            if session.get("path") == path:
                req = urllib.request.Request(self.url(f"/api/sessions/{session['id']}"))
                req.method = "DELETE"
                urllib.request.urlopen(req, timeout=30).close()

    def __enter__(self) -> LabServer:
        cmd = [sys.executable, "-m", "edu_parallel", "lab", "--no-browser"]
        cmd += ["--port", str(self.port), "--dir", str(self.folder), *self.args]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url("/api/kernelspecs"), timeout=5) as r:
                    if "python3" in json.load(r)["kernelspecs"]:
                        return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.3)
        self.__exit__()
        raise RuntimeError("edu-parallel lab did not start:\n" + self.log.read_text()[-3000:])

    def __exit__(self, *exc: object) -> None:
        for worker in self.pending:
            worker.join(timeout=60)
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@dataclass
class Scan:
    """What the learner sees in a lesson after Run All, output by output."""

    cells: int = 0
    errors: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    plotly_outputs: int = 0
    plotly_rendered: int = 0
    raw_widgets: list[str] = field(default_factory=list)
    broken_widgets: list[str] = field(default_factory=list)
    too_wide: list[str] = field(default_factory=list)
    wrapped: list[str] = field(default_factory=list)  # text outputs the area wraps (lab_text.py)
    truncated: list[str] = field(default_factory=list)  # table cells cut with no hover text
    overlaps: list[str] = field(default_factory=list)  # a figure's labels on labels (lab_overlap)


_SCAN_CELL = """cell => {
  const outs = [...cell.querySelectorAll('.jp-OutputArea-output')];
  const text = e => (e.innerText || '').trim().slice(0, 160);
  return {
    errors: outs.filter(e => e.dataset.mimeType === 'application/vnd.jupyter.error').map(text),
    stderr: outs.filter(e => e.dataset.mimeType === 'application/vnd.jupyter.stderr').map(text),
    plotly: outs.filter(e => e.classList.contains('jp-RenderedPlotly')).length,
    rendered: outs.filter(e => e.classList.contains('jp-RenderedPlotly')
                              && e.querySelector('.main-svg')).length,
    plain: outs.filter(e => e.dataset.mimeType === 'text/plain').map(text),
    broken: outs.filter(e => /Loading widget|Error displaying widget|Model not found/
                              .test(e.innerText || '')).map(text),
    wide: outs.filter(e => e.scrollWidth > e.clientWidth + 1)
              .map(e => `${e.scrollWidth}px in ${e.clientWidth}px: ${text(e).slice(0, 60)}`),
  };
}"""


# every check of one cell in one call from Python to the page (a round trip costs more than a check)
_CELL_CHECKS = f"""(cell, args) => ({{
  seen: ({_SCAN_CELL})(cell),
  wrapped: ({WRAPPED_JS})(cell),
  truncated: ({TRUNCATED_JS})(cell),
  overlaps: ({OVERLAPS_JS})(cell, args),
}})"""


class Lesson:
    """One lesson opened from the file browser of a lab page, as a learner opens it."""

    def __init__(self, page, server: LabServer, name: str, shots: Path):
        """``name`` is a path of the workspace; ``zh/03_ring_allreduce.ipynb`` opens the folder
        ``zh`` in the file browser first, as a learner does."""
        self.name, self.shots, self.server, self.page = name, shots, server, page
        *folders, file = name.split("/")
        if folders:  # from the workspace's top, wherever the last lesson left the file browser
            page.click(".jp-BreadCrumbs-home")
        for folder in folders:
            page.locator(".jp-DirListing-itemText", has_text=folder).first.dblclick()
            page.wait_for_selector(f".jp-BreadCrumbs:has-text('{folder}')")
        page.locator(".jp-DirListing-itemText", has_text=file).first.dblclick()
        page.wait_for_selector(f".lm-TabBar-tab.lm-mod-current:has-text('{file}')")
        page.wait_for_selector(f"{PANEL} .jp-Cell", timeout=90_000)
        page.wait_for_selector(f"{PANEL} .jp-KernelName:has-text('Python 3')", timeout=90_000)
        self.wait_idle(90)
        time.sleep(1.0)  # the session is connected a moment after the kernel reports idle
        dialog = page.query_selector(".jp-Dialog-header")
        if dialog is not None:
            raise AssertionError(f"{name} opened with a dialog: {dialog.inner_text()!r}")

    def close(self) -> None:
        """Close the tab without saving (what changed since a :meth:`save` is discarded), and
        shut its kernel down (a closed tab keeps it)."""
        dirty = self.page.query_selector(".lm-TabBar-tab.lm-mod-current.jp-mod-dirty")
        self.page.click(".lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon")
        if dirty is not None:
            discard = self.page.wait_for_selector(".jp-Dialog button:has-text('Discard')")
            discard.click()
            self.page.wait_for_selector(".jp-Dialog", state="detached")
        self.server.shutdown_kernels(self.name, wait=False)

    def save(self) -> dict:
        """File > Save, as in the menu; returns the notebook as JupyterLab wrote it, outputs and
        their metadata included (what the learner's kernel sent, as the page shows it)."""
        self.page.click("li.lm-MenuBar-item:has-text('File')")
        self.page.click("li[data-command='docmanager:save']")
        self.page.wait_for_selector(
            ".lm-TabBar-tab.lm-mod-current.jp-mod-dirty", state="detached", timeout=30_000
        )
        return json.loads((self.server.folder / self.name).read_text(encoding="utf-8"))

    def screenshot(self, label: str) -> Path:
        path = self.shots / f"{Path(self.name).stem}_{label}.png"
        self.page.screenshot(path=str(path), full_page=False)
        return path

    def wait_idle(self, timeout_s: float) -> None:
        """Wait until the kernel is idle and no code cell is queued or running."""
        deadline = time.monotonic() + timeout_s
        selector = f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']"
        while time.monotonic() < deadline:
            busy = self.page.evaluate(
                """busy => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                   .filter(p => p.closest('.jp-NotebookPanel:not(.lm-mod-hidden)'))
                   .some(p => p.innerText.trim() === busy)""",
                BUSY_PROMPTS[0],
            )
            if not busy and self.page.query_selector(selector):
                return
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: the kernel was still busy after {timeout_s:.0f} s")

    def run_all(self, timeout_s: float) -> float:
        """Run > Run All Cells, as in the menu; returns the seconds until every cell ran."""
        start = time.monotonic()
        self.page.click("li.lm-MenuBar-item:has-text('Run')")
        self.page.click("li[data-command='runmenu:run-all']")
        self.page.wait_for_selector(".jp-InputPrompt:has-text('[*]')", timeout=30_000)
        self.wait_idle(timeout_s)
        return time.monotonic() - start

    def scan(self) -> Scan:
        """Scroll through every cell (so each output is laid out) and read its outputs."""
        scan = Scan()
        for cell in self.page.query_selector_all(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell"):
            cell.scroll_into_view_if_needed()
            checked = cell.evaluate(_CELL_CHECKS, [SLACK_PX, EDGE_PX])
            seen = checked["seen"]
            scan.cells += 1
            scan.errors += seen["errors"]
            scan.stderr += seen["stderr"]
            scan.plotly_outputs += seen["plotly"]
            scan.plotly_rendered += seen["rendered"]
            scan.raw_widgets += [t for t in seen["plain"] if t.startswith(RAW_WIDGET_REPRS)]
            scan.broken_widgets += seen["broken"]
            scan.too_wide += seen["wide"]
            scan.wrapped += checked["wrapped"]  # lab_text.wrapped_text
            scan.truncated += checked["truncated"]  # lab_text.truncated_cells
            scan.overlaps += checked["overlaps"]  # lab_overlap.overlapping_labels
        return scan

    def widget_texts(self) -> list[str]:
        """The text each widget of the lesson shows now (an outermost ``.jupyter-widgets`` view of
        an output: a quiz, a slider and its readout, a widget's figure and table), in page order."""
        return self.page.evaluate(
            """panel => [...document.querySelectorAll(
                   `${panel} .jp-OutputArea-output .jupyter-widgets`)]
               .filter(w => !w.parentElement.closest('.jupyter-widgets'))
               .map(w => w.innerText || '')""",
            PANEL,
        )

    def animations(self) -> list:
        """The plotly figures that carry frames (an animation), as element handles."""
        plots = self.page.query_selector_all(".js-plotly-plot")
        return [
            p
            for p in plots
            if p.evaluate("g => ((g._transitionData || {})._frames || []).length > 1")
        ]

    def play_every_animation(self, samples: int = 6) -> list[str]:
        """Press Play on every animation, sample it ``samples`` times while it plays, press
        pause (:func:`lab_animation.play_problems`): one line per problem, an animation that Play
        did not move included. ``samples=0``: only what frame 0 shows, Play not pressed
        (:func:`lab_animation.frame_zero_problems`)."""
        out = []
        for i, plot in enumerate(self.animations()):
            name = f"{self.name} animation {i + 1}"
            if samples == 0:
                out += frame_zero_problems(plot, name)[0]
                continue
            problems, moved = play_problems(plot, samples=samples, name=name)
            out += problems + ([] if moved else [f"{name}: Play did not move it"])
        return out

    def quiz_questions(self) -> list:
        """The quiz questions on the page (body and end), as element handles, in page order."""
        return self.page.query_selector_all(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .edu-quiz-question"
        )

    def answer(
        self,
        block,
        choice: str | None = None,
        text: str | None = None,
        words: tuple[str, ...] = FEEDBACK_WORDS,
    ) -> str:
        """Click the option whose text is ``choice`` (or type ``text``), press the question's
        button as a learner does, and return the feedback the widget shows."""
        block.scroll_into_view_if_needed()
        if choice is not None:
            label = block.evaluate_handle(
                "(b, t) => [...b.querySelectorAll('label')].find(l => l.textContent.includes(t))",
                choice,
            ).as_element()
            assert label is not None, f"{self.name}: no option reads {choice!r}"
            label.click()
        else:
            block.query_selector("input[type='text']").fill(text or "")
        before = block.text_content() or ""
        block.query_selector("button").click()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            shown = block.text_content() or ""
            if shown != before and any(w in shown for w in words):
                return shown
            time.sleep(0.3)
        raise TimeoutError(f"{self.name}: no feedback 120 s after pressing the button")


def close_unedited_tab(page: object, wait_s: float = 3.0) -> None:
    """Close the current tab of a notebook the test did not edit. JupyterLab marks a notebook
    changed when its kernel's info fills in ``language_info`` (the Python version and the like);
    when that reply lands before the click, closing asks to save: the answer is Discard."""
    page.click(".lm-TabBar-tab.lm-mod-current .lm-TabBar-tabCloseIcon")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        discard = page.query_selector(".jp-Dialog button:has-text('Discard')")
        if discard is not None:
            discard.click()
            page.wait_for_selector(".jp-Dialog", state="detached")
            return
        time.sleep(0.1)
