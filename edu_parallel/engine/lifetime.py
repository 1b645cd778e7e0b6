"""A child process that dies with its parent (torch-free, so the CLI may import it cheaply).

:func:`die_with_parent` asks Linux to send the calling process ``sig`` when its parent dies
(``prctl(PR_SET_PDEATHSIG)``), even when the parent is killed with SIGKILL and cannot clean up.
Workers use it with SIGKILL; ``edu-parallel lab`` starts JupyterLab with SIGTERM, so that it stops
its kernels. Elsewhere it does nothing (a parent killed with SIGKILL there leaves the child).
"""

from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> bool:
    """Ask for ``sig`` when the parent dies; True if the platform did it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig)) == 0
    except OSError:  # pragma: no cover - an unusual libc
        return False
