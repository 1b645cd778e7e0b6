"""`edu-parallel lab` keeps its terminal to what a learner needs: a kernel started, a lesson
opened and a websocket connected print none of Jupyter's routine warnings ("Kernel is running over
TCP without encryption", "websocket_ping_timeout ... cannot be longer than ...", "Notebook X is
not trusted"); the kernels talk over local IPC, in a runtime folder short enough for their
sockets; the course's own notebooks are trusted, a learner's edited one is not."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from lab_driver import LabServer

from edu_parallel.app import lab_quiet
from edu_parallel.app.lab import lessons_source, prepare_lessons
from edu_parallel.app.workspace import course_files

NOISE = ("running over TCP without encryption", "websocket_ping_timeout", "is not trusted")
LESSON = "03_ring_allreduce.ipynb"


def noisy(log: str) -> list[str]:
    return [line for line in log.splitlines() if any(mark in line for mark in NOISE)]


def _post(lab: LabServer, path: str, body: dict) -> dict:
    req = urllib.request.Request(
        lab.url(path), json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


async def _kernel_info(lab: LabServer, kernel: str) -> dict:
    """A kernel_info_request over the kernel's websocket, as JupyterLab sends one; the reply."""
    from tornado.websocket import websocket_connect

    url = lab.url(f"/api/kernels/{kernel}/channels").replace("http://", "ws://")
    ws = await websocket_connect(url)
    msg_id = uuid.uuid4().hex
    header = {
        "msg_id": msg_id,
        "msg_type": "kernel_info_request",
        "username": "test",
        "session": uuid.uuid4().hex,
        "date": "",
        "version": "5.3",
    }
    request = {
        "header": header,
        "parent_header": {},
        "metadata": {},
        "content": {},
        "channel": "shell",
        "buffers": [],
    }
    await ws.write_message(json.dumps(request))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        reply = json.loads(await asyncio.wait_for(ws.read_message(), 60))
        if reply.get("parent_header", {}).get("msg_id") == msg_id and reply["channel"] == "shell":
            ws.close()
            return reply
    raise AssertionError("no kernel_info_reply")


@pytest.mark.timeout(180)
def test_a_kernel_start_prints_none_of_jupyters_routine_warnings(tmp_path):
    env = {
        "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),  # the notary's key and signatures
    }
    with LabServer(tmp_path / "course", env) as lab:
        for name in (LESSON, f"zh/{LESSON}"):  # the lesson as JupyterLab opens it
            with urllib.request.urlopen(lab.url(f"/api/contents/{name}"), timeout=30) as r:
                assert json.load(r)["type"] == "notebook"
        session = _post(
            lab,
            "/api/sessions",
            {"path": LESSON, "type": "notebook", "name": LESSON, "kernel": {"name": "python3"}},
        )
        kernel = session["kernel"]["id"]
        reply = asyncio.run(_kernel_info(lab, kernel))
        assert reply["content"]["status"] == "ok"
        # the kernel's connection file and sockets: in the runtime folder, or in the short one
        # the lab chose because this one is too deep for socket paths (pytest's tmp_path is)
        folders = [tmp_path / "rt", *Path(tempfile.gettempdir()).glob("edu-lab-*")]
        name = f"kernel-{kernel}.json"
        (found,) = [f / name for f in folders if (f / name).is_file()]
        transport = json.loads(found.read_text())["transport"]
        sockets = list(found.parent.glob(f"kernel-{kernel}-ipc-*"))
        lab.shutdown_kernels(LESSON)
        time.sleep(1)
    log = lab.log.read_text()
    assert "Kernel started" in log, log[-3000:]
    assert not noisy(log), noisy(log)
    assert transport == "ipc" and sockets, (transport, sockets)
    assert lab_quiet.fits(str(found.parent))
    assert not found.parent.exists() or found.parent == tmp_path / "rt"  # removed on exit


def test_the_noise_is_what_jupyter_prints_without_these_settings():
    """The marks above match the lines Jupyter writes (so the test above can fail)."""
    lines = [
        "[IPKernelApp] WARNING | Kernel is running over TCP without encryption. All ...",
        "[W 2026-12-03 08:24:17.843 ServerApp] Notebook 03_ring_allreduce.ipynb is not trusted",
        "[W ...] The websocket_ping_timeout (90000) cannot be longer than the"
        " websocket_ping_interval (30000).",
    ]
    assert noisy("\n".join(lines)) == lines


def test_a_runtime_folder_too_long_for_the_sockets_is_replaced_by_a_short_one(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    env = {"JUPYTER_RUNTIME_DIR": str(deep)}
    assert not lab_quiet.fits(str(deep))
    folder = lab_quiet.short_runtime_dir(env)
    try:
        assert folder is not None and env["JUPYTER_RUNTIME_DIR"] == folder
        assert lab_quiet.fits(folder) and Path(folder).is_dir()
        assert os.stat(folder).st_mode & 0o077 == 0  # this user's only
    finally:
        lab_quiet.remove_runtime_dir(folder)
    assert not Path(folder).exists()
    near = tempfile.mkdtemp(dir="/tmp")
    try:
        short = {"JUPYTER_RUNTIME_DIR": near}
        assert lab_quiet.fits(near) and lab_quiet.short_runtime_dir(short) is None
        assert short == {"JUPYTER_RUNTIME_DIR": near}
    finally:
        os.rmdir(near)


def test_the_course_notebooks_are_trusted_and_an_edited_one_is_not(tmp_path, monkeypatch):
    from nbformat import NO_CONVERT, read
    from nbformat.sign import NotebookNotary

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    folder = prepare_lessons(tmp_path / "course").folder
    edited = folder / "02_collectives.ipynb"
    edited.write_text(edited.read_text().replace("Collectives", "My collectives", 1))
    again = lab_quiet.trust_course(folder, course_files(lessons_source()))
    assert again == []  # signed when the lab prepared the workspace; the edit is not signed now
    with NotebookNotary() as notary:
        for name in (LESSON, f"zh/{LESSON}", "index.ipynb", edited.name):
            with open(folder / name, encoding="utf-8") as f:
                trusted = notary.check_signature(read(f, NO_CONVERT))
            assert trusted is (name != edited.name), name


def test_a_read_only_jupyter_data_folder_does_not_stop_the_lab(tmp_path, monkeypatch):
    """Trust is a courtesy: where Jupyter's data folder cannot be written, the lessons are still
    prepared (and Jupyter says "not trusted", as it would anyway)."""
    blocked = tmp_path / "a-file"  # a folder below a file cannot be made, even by root
    blocked.write_text("")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(blocked / "jupyter"))
    report = prepare_lessons(tmp_path / "course")
    assert (report.folder / LESSON).is_file()
