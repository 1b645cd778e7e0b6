"""The folder of a cluster's ``FileStore``: one per start, named after the process that owns it.

``torch.distributed.FileStore`` needs a file every rank of one group can reach, and that file must
not outlive its group, so each start makes a fresh folder (mode 0700) and :meth:`Cluster.close`
removes it. A parent that is killed (SIGKILL, a closed terminal, a crashed kernel) cannot; its
folder's name carries its host and pid, and the next cluster to start removes the folders of this
user whose owner is no longer running (:func:`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

PREFIX = "edu-parallel-store-"
_OWNED = re.compile(re.escape(PREFIX) + r"(?P<host>.+)-(?P<pid>\d+)-[^-]+$")


def _owner() -> str:
    """``host-pid``: a pid means something only on its own host (a /tmp shared by containers)."""
    return f"{socket.gethostname()}-{os.getpid()}"


def make_store_dir(folder: str | None = None) -> str:
    """A new, private folder for one start's store, in ``folder`` (the temp directory):
    ``edu-parallel-store-<host>-<pid>-<random>``."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{_owner()}-", dir=folder)  # mode 0700


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def sweep_stale(folder: str | None = None) -> list[str]:
    """Remove this user's store folders in ``folder`` (the temp directory) whose owner, a process
    of this host, has died; return their paths. A folder whose pid runs again (a reused pid), or
    made on another host, is kept."""
    removed = []
    host = socket.gethostname()
    root = Path(folder or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for path in root.glob(PREFIX + "*"):
            m = _OWNED.match(path.name)
            if m is None or m["host"] != host or not path.is_dir() or path.is_symlink():
                continue
            with contextlib.suppress(OSError):
                if path.stat().st_uid != os.getuid() or _running(int(m["pid"])):
                    continue
                shutil.rmtree(path)
                removed.append(str(path))
    return removed
