"""Shared fixtures. Multi-process tests use gloo with 2 to 4 ranks and short timeouts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edu_parallel import Cluster


def child_pids(pid: int | None = None) -> list[int]:
    """Live (non-zombie) processes whose parent is ``pid`` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


@pytest.fixture(scope="module")
def cluster4():

    with Cluster(4, timeout=20) as c:
        yield c


@pytest.fixture(scope="module")
def cluster2():

    with Cluster(2, timeout=20) as c:
        yield c
