"""`edu-parallel lab`: lessons found and copied, JupyterLab on 127.0.0.1 with token auth."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers import child_pids, cli, free_port

from edu_parallel.app.lab import lab_command, lessons_source, prepare_lessons
from edu_parallel.app.workspace import resolve_reset, sync_workspace
from edu_parallel.core.i18n import language

ROOT = Path(__file__).resolve().parent.parent


def test_lessons_are_found_in_the_checkout():
    src = lessons_source()
    assert src == ROOT / "notebooks"
    assert {"00_tour.ipynb", "03_ring_allreduce.ipynb"} <= {p.name for p in src.glob("*.ipynb")}


def test_the_lessons_open_from_a_copy_never_from_the_checkout(tmp_path):
    with pytest.raises(ValueError, match=r"^dir=.*a folder of your own, not the course's lessons"):
        prepare_lessons(ROOT / "notebooks")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"^dir=.*a folder \(existing or new\)"):
        prepare_lessons(tmp_path / "file")
    report = prepare_lessons(tmp_path / "course")
    src = lessons_source()
    names = sorted(
        [p.name for p in src.glob("*.ipynb")]
        + ["GLOSSARY.md"]
        + [f"zh/{p.name}" for p in src.glob("zh/*.ipynb")]
    )
    assert "zh/03_ring_allreduce.ipynb" in names  # the Chinese lessons come along
    assert report.copied == names and not report.kept
    copied = (tmp_path / "course").rglob("*")
    assert (
        sorted(
            p.relative_to(tmp_path / "course").as_posix()
            for p in copied
            if p.is_file() and ".edu-parallel" not in p.parts
        )
        == names
    )
    assert prepare_lessons(tmp_path / "course").lines() == [f"lessons: {tmp_path / 'course'}"]


def test_copy_keeps_a_learners_edits_and_reset_restores_them(tmp_path):
    dest = prepare_lessons(tmp_path / "course").folder
    tour = dest / "00_tour.ipynb"
    assert tour.exists() and json.loads(tour.read_text())["cells"]
    tour.write_text("{}")  # the learner's own version
    assert prepare_lessons(dest).copied == [] and tour.read_text() == "{}"
    with pytest.raises(ValueError, match=r"^reset='99' is not valid.*lessons: 00, 01"):
        prepare_lessons(dest, ["99"])
    assert tour.read_text() == "{}"  # a bad name restores nothing
    assert prepare_lessons(dest, ["00"]).restored == ["00_tour.ipynb"]
    assert tour.read_bytes() == (lessons_source() / "00_tour.ipynb").read_bytes()


def test_an_updated_course_refreshes_untouched_lessons_and_keeps_edited_ones(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("01_a.ipynb", "02_b.ipynb"):
        (source / name).write_text(f"{name} v1")
    dest = tmp_path / "course"
    assert sync_workspace(dest, source).copied == ["01_a.ipynb", "02_b.ipynb"]
    (dest / "02_b.ipynb").write_text("my notes")
    for name in ("01_a.ipynb", "02_b.ipynb"):
        (source / name).write_text(f"{name} v2")  # a git pull
    (source / "03_c.ipynb").write_text("new")
    report = sync_workspace(dest, source)
    assert report.refreshed == ["01_a.ipynb"] and report.copied == ["03_c.ipynb"]
    assert report.kept == ["02_b.ipynb"] and (dest / "02_b.ipynb").read_text() == "my notes"
    assert "edu-parallel lab --reset 02" in report.lines()[1]
    assert (dest / "01_a.ipynb").read_text() == "01_a.ipynb v2"
    assert resolve_reset(["all"], source) == ["01_a.ipynb", "02_b.ipynb", "03_c.ipynb"]
    assert resolve_reset(["02_b", "03_c.ipynb", "02"], source) == ["02_b.ipynb", "03_c.ipynb"]
    # the Chinese lessons sit in zh/, are copied there, and --reset 02 restores both languages
    (source / "zh").mkdir()
    (source / "zh" / "02_b.ipynb").write_text("中文 v1")
    assert sync_workspace(dest, source).copied == ["zh/02_b.ipynb"]
    assert (dest / "zh" / "02_b.ipynb").read_text() == "中文 v1"
    assert resolve_reset(["02"], source) == ["02_b.ipynb", "zh/02_b.ipynb"]
    (dest / "zh" / "02_b.ipynb").write_text("我的笔记")
    assert sync_workspace(dest, source, ["zh/02_b.ipynb"]).restored == ["zh/02_b.ipynb"]


def test_lang_zh_opens_the_chinese_index(tmp_path):
    (tmp_path / "zh").mkdir()
    for page in ("index.ipynb", "zh/index.ipynb"):
        (tmp_path / page).write_text("{}")
    assert "--LabApp.default_url=/lab/tree/zh/index.ipynb" in lab_command(tmp_path, lang="zh")
    assert "--LabApp.default_url=/lab/tree/index.ipynb" in lab_command(tmp_path, lang="en")


def test_command_binds_loopback_and_keeps_the_token():
    cmd = lab_command(Path("/tmp/x"), 8899, no_browser=True)
    assert (
        "--ServerApp.ip=127.0.0.1" in cmd
        and "--ServerApp.port=8899" in cmd
        and "--no-browser" in cmd
    )
    assert not any("token=" in c.lower() and c.endswith("=") for c in cmd)
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)  # Jupyter refuses root without it
    with pytest.raises(ValueError, match="port=80 is not valid"):
        lab_command(Path("/tmp/x"), 80)


def test_the_lab_opens_on_the_course_index(tmp_path):
    folder = prepare_lessons(tmp_path / "course").folder
    assert (folder / "index.ipynb").exists()
    assert "--LabApp.default_url=/lab/tree/index.ipynb" in lab_command(folder)


def _get_json(url: str, wait_s: float = 30.0) -> dict:
    """GET ``url``; Jupyter prints its URL a moment before it accepts connections, so retry."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)
        except urllib.error.URLError as exc:
            if isinstance(exc, urllib.error.HTTPError) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_lab_serves_the_lessons_only_with_the_token(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_TOKEN"}
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "cfg")
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "rt")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edu_parallel",
            "lab",
            "--no-browser",
            "--port",
            str(port),
            "--dir",
            str(tmp_path / "course"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        token, log, deadline = None, [], time.monotonic() + 90
        while token is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            log.append(line)
            opens = rf"http://127\.0\.0\.1:{port}/lab/tree/index\.ipynb"  # the course index
            m = re.search(opens + r"\?token=([0-9a-f]+)", line)
            token = m.group(1) if m else None
        assert token, "".join(log)[-3000:]
        base = f"http://127.0.0.1:{port}/api/contents"
        names = _get_json(f"{base}?token={token}")["content"]
        names = {item["name"] for item in names}
        assert "03_ring_allreduce.ipynb" in names
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(base, timeout=10)
        assert info.value.code == 403
        # the page the learner opens: no "get notified about official Jupyter news?" prompt
        page = f"http://127.0.0.1:{port}/lab?token={token}"
        with urllib.request.urlopen(page, timeout=10) as r:
            html = r.read().decode()
        data = re.search(r'id="jupyter-config-data"[^>]*>(.*?)</script>', html, re.S)
        assert data, html[:2000]
        config = json.loads(data.group(1))
        assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
        news = _get_json(f"http://127.0.0.1:{port}/lab/api/news?token={token}")
        assert news["news"] == []  # no feed fetched
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_sigterm_to_the_wrapper_stops_the_child():
    """`edu-parallel lab` killed with SIGTERM (a container stop) takes JupyterLab with it."""
    code = (
        "import sys; from edu_parallel.app.lab import run_child; "
        "sys.exit(run_child([sys.executable, '-c', 'import time; time.sleep(60)']))"
    )
    wrapper = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while not child_pids(wrapper.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (child,) = child_pids(wrapper.pid)
        wrapper.send_signal(signal.SIGTERM)
        assert (
            wrapper.wait(timeout=10) == 128 + signal.SIGTERM
        )  # the child's status, as a shell says
        with pytest.raises(ProcessLookupError):
            os.kill(child, 0)
    finally:
        wrapper.kill()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_sigkill_to_the_wrapper_still_stops_the_child():
    """SIGKILL cannot be caught or forwarded: the kernel's parent-death signal stops the child."""
    code = (
        "import sys; from edu_parallel.app.lab import run_child; "
        "sys.exit(run_child([sys.executable, '-c', 'import time; time.sleep(60)']))"
    )
    wrapper = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while not child_pids(wrapper.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (child,) = child_pids(wrapper.pid)
        wrapper.kill()
        wrapper.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            if Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
                break  # dead, waiting for init to reap it
            time.sleep(0.05)
        else:
            os.kill(child, signal.SIGKILL)
            pytest.fail("the child outlived the killed wrapper by 10 s")
    finally:
        wrapper.kill()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--port", "99999"], "port=99999 is not valid"),
        (["--reset", "99"], "reset='99' is not valid"),
    ],
)
def test_a_bad_lab_argument_is_refused_before_anything_is_copied(tmp_path, args, message):
    dest = tmp_path / "course"
    done = cli("lab", "--no-browser", "--dir", str(dest), *args, timeout=60)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not dest.exists()


def test_a_machine_without_a_chinese_font_is_told_what_to_install(monkeypatch):
    from edu_parallel.app import fonts

    monkeypatch.setattr(fonts.subprocess, "run", lambda *a, **k: _Listed(""))
    monkeypatch.setattr(fonts.shutil, "which", lambda name: "/usr/bin/fc-list")
    note = fonts.cjk_font_note()
    assert note is not None and "sudo apt install fonts-noto-cjk" in note and "\n" not in note
    with language("zh"):
        assert fonts.cjk_font_note().startswith("提示：")
    monkeypatch.setattr(fonts.subprocess, "run", lambda *a, **k: _Listed("Noto Sans CJK SC\n"))
    assert fonts.cjk_font_note() is None
    monkeypatch.setattr(fonts.shutil, "which", lambda name: None)  # macOS, Windows: not asked
    assert fonts.has_cjk_font() is None and fonts.cjk_font_note() is None


class _Listed:
    def __init__(self, stdout: str):
        self.stdout = stdout
