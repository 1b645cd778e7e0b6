"""A quiet terminal for ``edu-parallel lab``: what Jupyter would print on every kernel start, and
why it does not.

* "Kernel is running over TCP without encryption": the kernels talk to the server over local
  (unix-socket) IPC, which only this user can open, instead of TCP on 127.0.0.1
  (:func:`kernel_args`). A socket's path has at most :data:`SOCKET_PATH_MAX` bytes, and Jupyter
  puts a kernel's sockets beside its connection file in the runtime folder, so where that folder's
  path is too long for them the lab runs with a short private one (:func:`short_runtime_dir`),
  removed when the lab stops. Where unix sockets do not exist (Windows) the kernels keep TCP.
* "The websocket_ping_timeout (90000) cannot be longer than the websocket_ping_interval (30000)":
  Jupyter Server gives tornado its keep-alive times in milliseconds, tornado 6.5 reads them as
  seconds and says so once. The pings work as Jupyter means them; the line is dropped by the
  server's config in :data:`~.lab.LAB_CONFIG` (``jupyter_server_config.py``), that line only.
* "Notebook 03_ring_allreduce.ipynb is not trusted": the course's own notebooks in the workspace
  are signed with Jupyter's notary (as ``jupyter trust`` does) when the lab starts
  (:func:`trust_course`); a notebook the learner changed is left as Jupyter judges it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

# sun_path holds 108 bytes on Linux, the last one the terminating NUL (104 on macOS)
SOCKET_PATH_MAX = 103
# the longest socket name Jupyter makes beside a connection file: kernel-<uuid4>-ipc-<port>
SOCKET_NAME = "kernel-00000000-0000-0000-0000-000000000000-ipc-99"
RUNTIME_VAR = "JUPYTER_RUNTIME_DIR"


def ipc_available() -> bool:
    """Whether kernels can talk over unix sockets here."""
    import socket

    return hasattr(socket, "AF_UNIX") and os.name == "posix"


def kernel_args() -> list[str]:
    """The JupyterLab options that move the kernels' channels off TCP, where they can."""
    return ["--KernelManager.transport=ipc"] if ipc_available() else []


def runtime_dir(env: dict[str, str]) -> str:
    """The runtime folder a Jupyter started with ``env`` uses (its connection files, sockets)."""
    if env.get(RUNTIME_VAR):
        return env[RUNTIME_VAR]
    from jupyter_core.paths import jupyter_runtime_dir

    return jupyter_runtime_dir()


def fits(folder: str) -> bool:
    """Whether every kernel socket Jupyter makes in ``folder`` has a short enough path."""
    return len(os.fsencode(os.path.join(os.path.abspath(folder), SOCKET_NAME))) <= SOCKET_PATH_MAX


def short_runtime_dir(env: dict[str, str]) -> str | None:
    """Point ``env`` at a new private runtime folder when the kernels' sockets would not fit in
    its own; return that folder (to remove when the lab stops), or None when none was needed."""
    if not ipc_available() or fits(runtime_dir(env)):
        return None
    folder = tempfile.mkdtemp(prefix="edu-lab-", dir="/tmp" if fits("/tmp") else None)
    env[RUNTIME_VAR] = folder  # mkdtemp: mode 0700, this user's only
    return folder


def remove_runtime_dir(folder: str | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def trust_course(folder: Path, course: dict[str, Path]) -> list[str]:
    """Sign the notebooks of ``folder`` that are the course's copy (``course``: name -> the
    course's file), as ``jupyter trust`` does; return the names signed now. Signatures live in
    Jupyter's data folder; the files are not changed."""
    from nbformat import NO_CONVERT, read
    from nbformat.sign import NotebookNotary

    same = [name for name, src in course.items() if _same(folder / name, src)]
    signed = []
    with NotebookNotary() as notary:
        for name in same:
            if not name.endswith(".ipynb"):
                continue
            with open(folder / name, encoding="utf-8") as f:
                nb = read(f, NO_CONVERT)
            if not notary.check_signature(nb):
                notary.sign(nb)
                signed.append(name)
    return signed


def _same(dest: Path, src: Path) -> bool:
    return dest.is_file() and dest.read_bytes() == src.read_bytes()
