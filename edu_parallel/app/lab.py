"""``edu-parallel lab``: open the lessons in JupyterLab, safely, from the learner's own folder.

Jupyter binds 127.0.0.1 only and keeps token authentication on (the URL it prints carries the
token). The lessons open from a workspace (``~/edu-parallel-course`` or ``--dir``, see
``workspace.py``), never from the git checkout or the installed package, so a pass through the
course leaves both as they were. The lab opens on the course index, in English or, with
``--lang zh``, on ``zh/index.ipynb`` with the package's messages in Chinese in every kernel
(``EDU_PARALLEL_LANG=zh``); without ``--lang`` the environment and the locale decide.

The lab asks nothing and calls nowhere: JupyterLab's "get notified about official Jupyter news?"
prompt is its ``announcements`` plugin, disabled by this package's page config
(:data:`LAB_CONFIG`, one more folder on ``JUPYTER_CONFIG_PATH``, the learner's own settings
untouched), and the server fetches no news feed and checks for no update (JupyterLab's
``news_url`` and ``check_for_updates_class``). Nor does its terminal fill with what Jupyter says
on every kernel start: the kernels talk over local IPC, the course's notebooks are trusted, and
one expected tornado warning is dropped (``lab_quiet.py``).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

from ..core.errors import check_int
from ..core.i18n import LANG_VAR, _, get_language, normalize_language
from ..engine.lifetime import die_with_parent
from . import animation_js
from .course.lessons import INDEX
from .fonts import cjk_font_note
from .lab_quiet import kernel_args, remove_runtime_dir, short_runtime_dir, trust_course
from .workspace import (
    DEFAULT_DIR,
    SyncReport,
    check_workspace,
    course_files,
    resolve_reset,
    sync_workspace,
)

# labconfig/page_config.json: the JupyterLab plugins this lab disables (the news prompt);
# jupyter_server_config.py: the one expected server warning it drops (lab_quiet.py)
LAB_CONFIG = Path(__file__).resolve().parent / "jupyter_config"


def lessons_source() -> Path:
    """The folder holding the lesson notebooks: the checkout's ``notebooks/`` or the installed
    copy."""
    checkout = Path(__file__).resolve().parents[2] / "notebooks"  # edu_parallel/app/lab.py
    if any(checkout.glob("*.ipynb")):
        return checkout
    for base in (sys.prefix, sysconfig.get_paths()["data"], os.path.expanduser("~/.local")):
        installed = Path(base) / "share" / "edu-parallel" / "notebooks"
        if any(installed.glob("*.ipynb")):
            return installed
    raise FileNotFoundError(_("the lesson notebooks were not found: reinstall edu-parallel"))


def prepare_lessons(
    dest: str | Path | None = None, reset: tuple[str, ...] | list[str] = ()
) -> SyncReport:
    """Copy the lessons into the workspace ``dest`` (default ``~/edu-parallel-course``) and
    restore the lessons ``reset`` names; see :func:`~.workspace.sync_workspace`. The course's
    own notebooks there are trusted (:func:`~.lab_quiet.trust_course`)."""
    source = lessons_source()
    target = check_workspace(Path(dest) if dest is not None else DEFAULT_DIR, source)
    report = sync_workspace(target, source, resolve_reset(reset, source))
    try:
        trust_course(report.folder, course_files(source))
    except (OSError, sqlite3.Error):  # no writable Jupyter data folder: Jupyter says "not trusted"
        pass
    return report


def start_page(lang: str) -> str:
    """The notebook the lab opens on: the course index in ``lang``."""
    return INDEX if lang == "en" else f"{lang}/{INDEX}"


def lab_command(
    root_dir: Path, port: int | None = None, no_browser: bool = False, lang: str = "en"
) -> list[str]:
    """The JupyterLab command line: loopback only, token auth kept on, opening the index."""
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.allow_remote_access=False",
        "--LabApp.news_url=None",  # no news feed fetched (the prompt is disabled: LAB_CONFIG)
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        *kernel_args(),  # kernels over local IPC, not unencrypted TCP (lab_quiet.py)
        *animation_js.lab_args(),  # pausing an animation is no console error (animation_js.py)
    ]
    page = start_page(lang) if (root_dir / start_page(lang)).exists() else INDEX
    if (root_dir / page).exists():
        cmd.append(f"--LabApp.default_url=/lab/tree/{page}")
    if port is not None:
        cmd += [
            f"--ServerApp.port={check_int('port', port, 1024, 65535)}",
            "--ServerApp.port_retries=0",
        ]
    if no_browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI run as root
        cmd.append("--allow-root")
    return cmd


def run_lab(
    dest: str | None = None,
    port: int | None = None,
    no_browser: bool = False,
    reset: tuple[str, ...] | list[str] = (),
    lang: str | None = None,
) -> int:
    """Prepare the workspace and run JupyterLab until it is stopped (Ctrl-C).

    Every argument is checked before a file is copied or a server started."""
    if port is not None:
        check_int("port", port, 1024, 65535)
    chosen = get_language() if lang is None else normalize_language(lang, "lang")
    report = prepare_lessons(dest, reset)  # checks the folder and the names before copying
    cmd = lab_command(report.folder, port, no_browser, chosen)
    env = lab_environment(dict(os.environ))
    if lang is not None:
        env[LANG_VAR] = chosen  # the kernels' language: quizzes, figures, messages
    if not env.get("JUPYTER_TOKEN", "x"):  # an empty token would turn authentication off
        del env["JUPYTER_TOKEN"]
    note = cjk_font_note()
    print("\n".join(report.lines() + ([note] if note else [])), flush=True)
    runtime = short_runtime_dir(env)  # where the kernels' sockets fit (lab_quiet.py)
    try:
        return run_child(cmd, env)
    finally:
        remove_runtime_dir(runtime)


def lab_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` with :data:`LAB_CONFIG` first on ``JUPYTER_CONFIG_PATH`` (its page config disables
    the news prompt; the folders the learner set stay after it)."""
    extra = env.get("JUPYTER_CONFIG_PATH")
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(LAB_CONFIG), *([extra] if extra else [])])
    return env


def _die_with_us() -> None:
    """In the child, before exec: SIGTERM when this process dies, however it dies."""
    die_with_parent(signal.SIGTERM)


def run_child(cmd: list[str], env: dict[str, str] | None = None, grace_s: float = 10.0) -> int:
    """Run ``cmd`` until it exits; never leave it behind.

    SIGTERM and SIGHUP sent to this process (a closed terminal, ``kill``, a container stop) are
    forwarded to the child, which shuts down cleanly; Ctrl-C stops it too; and on Linux the child
    gets SIGTERM when this process dies even by SIGKILL (``PR_SET_PDEATHSIG``). A child that has not
    exited ``grace_s`` seconds after being asked is killed. Returns its exit status as a shell
    reports it (128 + N for a child ended by signal N; 0 after Ctrl-C).
    """
    started: list[subprocess.Popen] = []
    early: list[int] = []  # a signal that came before the child existed

    def forward(signum: int, _frame: object) -> None:
        if started:
            started[0].send_signal(signum)
        else:
            early.append(signum)

    handled = (signal.SIGTERM, signal.SIGHUP) if hasattr(signal, "SIGHUP") else (signal.SIGTERM,)
    if threading.current_thread() is not threading.main_thread():
        handled = ()  # only the main thread may install signal handlers
    # the handlers first, then the child: a SIGTERM right after the start is forwarded, too
    previous = {sig: signal.signal(sig, forward) for sig in handled}
    # SIGKILL to this wrapper cannot be forwarded: the kernel sends the child SIGTERM instead
    try:
        proc = subprocess.Popen(cmd, env=env, preexec_fn=_die_with_us)
    except BaseException:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        raise
    started.append(proc)
    for signum in early:
        proc.send_signal(signum)
    try:
        status = proc.wait()
        return 128 - status if status < 0 else status
    except KeyboardInterrupt:
        proc.terminate()
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
