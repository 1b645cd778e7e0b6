"""One intra-op thread for the one-process references the kernel computes beside a run.

Every rank runs with one intra-op thread (``engine/worker.py``: N ranks share the machine's cores).
The references a lesson checks a run against (the 3D step, the strategy map's MoE, DDP's big batch,
the asynchronous replays) are tiny; on two shared cores the kernel's second thread only waits for a
busy core: a 10-20 ms step took 0.1 to 2 s. Inside :func:`one_thread` the kernel computes them as a
rank would, and the caller's thread count comes back after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One intra-op thread inside; the previous count restored on the way out."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
