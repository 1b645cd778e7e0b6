"""`edu-parallel lab`: lessons found and copied, JupyterLab on 127.0.0.1 with token auth."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from edu_parallel.app.lab import lab_command, lessons_source, prepare_lessons

ROOT = Path(__file__).resolve().parent.parent


def test_lessons_are_found_in_the_checkout():
    src = lessons_source()
    assert src == ROOT / "notebooks"
    assert {"00_tour.ipynb", "03_ring_allreduce.ipynb"} <= {p.name for p in src.glob("*.ipynb")}
    assert prepare_lessons() == src  # an editable checkout opens in place


def test_copy_keeps_a_learners_edits(tmp_path):
    dest = prepare_lessons(tmp_path / "course")
    tour = dest / "00_tour.ipynb"
    assert tour.exists() and json.loads(tour.read_text())["cells"]
    tour.write_text("{}")  # the learner's own version
    prepare_lessons(dest)
    assert tour.read_text() == "{}"


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    port = _free_port()
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
            m = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=([0-9a-f]+)", line)
            token = m.group(1) if m else None
        assert token, "".join(log)[-3000:]
        base = f"http://127.0.0.1:{port}/api/contents"
        names = _get_json(f"{base}?token={token}")["content"]
        names = {item["name"] for item in names}
        assert "03_ring_allreduce.ipynb" in names
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(base, timeout=10)
        assert info.value.code == 403
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_sigterm_to_the_wrapper_stops_the_child():
    """`edu-parallel lab` killed with SIGTERM (a container stop) takes JupyterLab with it."""
    from conftest import child_pids

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
    from conftest import child_pids

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
