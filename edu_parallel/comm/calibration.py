"""This machine's alpha and beta: a ping-pong sweep, fitted by least squares to Hockney's model.

Rank 0 sends a buffer to rank 1, which sends it back; half the round trip is one message. Over
sizes from 1 KiB to 16 MiB the median one-way time ``t(m)`` is fitted to ``t = α + m/B`` by least
squares on the *relative* error (each point weighted by ``1/t``), so that the small messages fix
``α`` and the large ones ``B`` (an unweighted fit lets the 16 MiB points swamp ``α``). This is how
Hockney (1994, "The communication challenge for MPP", Parallel Computing 20) defined the two
parameters, and how Thakur, Rabenseifner & Gropp 2005 measure the ``α``, ``β`` their MPICH
formulas use; NCCL keeps the same two numbers per link type, measured once by its developers
(``baseLat``/``hwLat`` and the graph's bandwidths in ``src/graph/tuning.cc``). The result is a
:class:`~edu_parallel.models.topology.Link` that :func:`~edu_parallel.models.cost.predict` and
:func:`~edu_parallel.models.retiming.retime` accept like the presets.

What the fit measures depends on the machine. On a VM whose ranks share two CPU cores, the fitted
``α`` (hundreds of microseconds to milliseconds) is the time for a worker process to be woken by
the scheduler and get a core back, plus gloo's TCP stack: process and scheduler overhead, not a
property of any link. The link presets' ``α`` (a few microseconds) are hardware and library
latencies of one message; lesson 04 prints both and their ratio.
"""

from __future__ import annotations

import socket
import statistics
from collections.abc import Sequence
from datetime import date

import numpy as np

from ..core.errors import bad_value, check_int
from ..core.units import format_bytes, parse_size
from ..engine.executor import Executor
from ..models.topology import Link
from .bench import ProgressBar
from .bench_jobs import ping_pong, time_reduce

DEFAULT_SIZES = tuple(1 << e for e in range(10, 25, 2))  # 1 KiB, 4 KiB, ..., 16 MiB
DEFAULT_REPEATS = 15


def fit_alpha_beta(sizes: Sequence[float], times: Sequence[float]) -> tuple[float, float]:
    """``(alpha_s, bandwidth_Bps)`` minimizing ``sum(((α + m/B - t) / t)^2)`` over the points."""
    m = np.asarray(sizes, dtype=float)
    t = np.asarray(times, dtype=float)
    if m.shape != t.shape or len(np.unique(m)) < 2:
        raise bad_value("sizes", list(sizes), "at least two different sizes, one time each")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise bad_value("times", list(times), "finite times > 0")
    A = np.stack([1 / t, m / t], axis=1)  # rows (α, β) weighted by 1/t; target 1
    (alpha, beta), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    if beta <= 0:  # noise flattened the curve: the largest message alone sets the bandwidth
        beta = float(t[m.argmax()] / m.max())
    if alpha <= 0:  # noise below the line at small sizes: the smallest residual is the latency
        alpha = max(float(np.min(t - m * beta)), float(t.min()) * 1e-3)
    return float(alpha), float(1 / beta)


def measure_ping_pong(
    cluster: Executor,
    sizes: Sequence[int | str] | None = None,
    repeats: int = DEFAULT_REPEATS,
    progress: bool = True,
) -> list[tuple[int, float]]:
    """``[(nbytes, median one-way seconds), ...]`` between ranks 0 and 1 of ``cluster``."""
    sizes_b, repeats = _check(cluster, sizes, repeats, progress)
    out = []
    bar = ProgressBar("calibrate") if progress else None
    for i, nbytes in enumerate(sizes_b):
        times = cluster.run(ping_pong, nbytes, repeats, trace=False).results[0]
        out.append((nbytes, statistics.median(times)))
        if bar is not None:
            one_way = f"{format_bytes(nbytes)}: {out[-1][1] * 1e6:.1f} µs one-way"
            bar(i + 1, len(sizes_b), one_way)
    return out


def calibrate(
    cluster: Executor,
    sizes: Sequence[int | str] | None = None,
    repeats: int = DEFAULT_REPEATS,
    progress: bool = True,
) -> Link:
    """Ping-pong sweep on ``cluster`` (ranks 0 and 1), fitted: ``Link(name="this machine", ...)``.

    ``sizes``: message sizes (default 1 KiB, 4 KiB, ..., 16 MiB); ``repeats``: round trips per size
    (median kept); ``progress``: a progress bar (``tqdm.auto``: a widget in Jupyter, text in a
    terminal). About a second on an idle laptop.
    """
    points = measure_ping_pong(cluster, sizes, repeats, progress)
    alpha, bandwidth = fit_alpha_beta([m for m, _ in points], [t for _, t in points])
    source = f"calibrate() on {socket.gethostname()}, {date.today().isoformat()}"
    return Link("this machine", alpha, bandwidth, source)


def measure_reduce_Bps(
    cluster: Executor, nbytes: int | str = "4MiB", repeats: int = DEFAULT_REPEATS
) -> float:
    """Bytes per second of the reduction (``a.add_(b)``, float32) on rank 0: ``reduce_Bps``."""
    size = parse_size(nbytes, "nbytes")
    repeats = check_int("repeats", repeats, 1, 1000)
    times = cluster.run(time_reduce, size, repeats, trace=False).results[0]
    return size / statistics.median(times)


def _check(
    cluster: Executor, sizes: Sequence[int | str] | None, repeats: int, progress: bool
) -> tuple[list[int], int]:
    world = getattr(cluster, "world_size", None)
    if not callable(getattr(cluster, "run", None)) or not isinstance(world, int) or world < 2:
        raise bad_value(
            "cluster",
            cluster,
            "a running Cluster with at least 2 ranks (ping-pong between ranks 0 and 1)",
        )
    if sizes is None:
        sizes = DEFAULT_SIZES
    if isinstance(sizes, str | bytes) or not isinstance(sizes, Sequence):
        raise bad_value("sizes", sizes, "a list of message sizes such as [1024, '64KiB', '16MiB']")
    parsed = [parse_size(s, "sizes") for s in sizes]
    if len(set(parsed)) < 2:
        raise bad_value(
            "sizes", sizes, "at least two different message sizes (the fit has two unknowns)"
        )
    if not isinstance(progress, bool):
        raise bad_value("progress", progress, "True or False")
    return parsed, check_int("repeats", repeats, 1, 1000)
