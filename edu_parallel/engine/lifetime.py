"""A child process that dies with its parent (torch-free, so the CLI may import it cheaply).

:func:`die_with_parent` asks Linux to send the calling process ``sig`` when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), even when the parent is killed with SIGKILL and cannot clean up.
``edu-parallel lab`` starts JupyterLab with SIGTERM, so that it stops its kernels. A rank uses
:func:`end_group_with_parent`: its whole process group (the rank and what its jobs started) ends
with the parent. Elsewhere than Linux the death signal does nothing; the rank's watching thread
still ends its group.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask for ``sig`` when the parent dies; True if the platform did it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig)) == 0
    except OSError:  # pragma: no cover - an unusual libc
        return False


def end_group_with_parent(parent_pid: int, poll_s: float = 0.2) -> None:
    """In a process that leads its own process group (a rank): when the parent dies, kill the
    whole group, this process and whatever it started (a job's ``subprocess``, a pool), so that
    nothing outlives a parent killed with SIGKILL. The parent's death arrives as SIGTERM
    (:func:`die_with_parent`), whose handler runs once the main thread is back in Python; a
    daemon thread that watches the parent's pid covers a main thread blocked in C (a receive)."""

    def end(*_args: object) -> None:
        if os.getpgrp() == os.getpid():  # the group is this process's own: it goes too
            os.killpg(0, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)  # never the group of someone else (a kernel's)

    signal.signal(signal.SIGTERM, end)
    die_with_parent(signal.SIGTERM)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        end()

    threading.Thread(target=watch, name="edu-parallel-parent-watch", daemon=True).start()
