"""``edu-parallel lab``: open the lessons in JupyterLab, safely.

Jupyter binds 127.0.0.1 only and keeps token authentication on (the URL it prints carries the
token). In a source checkout (editable install) the lessons open in place, from ``notebooks/``;
from an installed wheel they are copied once to a writable folder (``~/edu-parallel-course`` by
default), never overwriting a learner's edited copy.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

from ..core.errors import bad_value, check_int
from ..engine.lifetime import die_with_parent


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
    raise FileNotFoundError("the lesson notebooks were not found: reinstall edu-parallel")


def is_writable_checkout(path: Path) -> bool:
    return (path.parent / "pyproject.toml").exists() and os.access(path, os.W_OK)


def prepare_lessons(dest: str | Path | None = None) -> Path:
    """Return a writable folder with the lessons, copying missing ones from the installed set."""
    source = lessons_source()
    if dest is None and is_writable_checkout(source):
        return source
    target = Path(dest) if dest is not None else Path.home() / "edu-parallel-course"
    target.mkdir(parents=True, exist_ok=True)
    if target.resolve() != source.resolve():
        for f in sorted(source.iterdir()):
            if f.suffix in (".ipynb", ".md") and not (target / f.name).exists():
                shutil.copy2(f, target / f.name)
    return target


def lab_command(root_dir: Path, port: int | None = None, no_browser: bool = False) -> list[str]:
    """The JupyterLab command line: loopback only, token auth kept on."""
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.allow_remote_access=False",
    ]
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


def run_lab(dest: str | None = None, port: int | None = None, no_browser: bool = False) -> int:
    """Prepare the lessons and run JupyterLab until it is stopped (Ctrl-C)."""
    if dest is not None and Path(dest).exists() and not Path(dest).is_dir():
        raise bad_value("dir", dest, "a folder (existing or new) for the lessons")
    root = prepare_lessons(dest)
    cmd = lab_command(root, port, no_browser)
    env = dict(os.environ)
    if not env.get("JUPYTER_TOKEN", "x"):  # an empty token would turn authentication off
        del env["JUPYTER_TOKEN"]
    print(f"lessons: {root}", flush=True)
    return run_child(cmd, env)


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
    # SIGKILL to this wrapper cannot be forwarded: the kernel sends the child SIGTERM instead
    proc = subprocess.Popen(cmd, env=env, preexec_fn=_die_with_us)

    def forward(signum: int, _frame: object) -> None:
        proc.send_signal(signum)

    handled = (signal.SIGTERM, signal.SIGHUP) if hasattr(signal, "SIGHUP") else (signal.SIGTERM,)
    if threading.current_thread() is not threading.main_thread():
        handled = ()  # only the main thread may install signal handlers
    previous = {sig: signal.signal(sig, forward) for sig in handled}
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
