"""``edu-parallel bench collectives``: an nccl-tests-style table from the engine's own plans.

For every collective and every size of a sweep it runs the plan on the cluster, checks the result
against the torch builtin and prints a row as nccl-tests' ``*_perf`` binaries do: size (bytes),
count (elements), type, time, algbw, busbw and whether the result was verified. Bandwidths follow
nccl-tests doc/PERFORMANCE.md (busbw = algbw x the collective's factor). A progress bar shows where
the sweep is: ``tqdm.auto`` (https://tqdm.github.io/docs/shortcuts/#tqdmauto), an ipywidgets bar in
a notebook, a text bar in a terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

from ..core.errors import bad_value, check_choice, check_int
from ..core.i18n import N_, _
from ..core.units import DTYPES, check_dtype, parse_size
from ..core.width import fitted
from ..engine.executor import Executor
from ..plans.algorithms import plan_allreduce
from ..plans.collectives import plan_collective
from .allreduce import run_allreduce
from .collective import run_collective
from .memory import check_fits

COLLECTIVE_ORDER = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "gather",
    "scatter",
)


def check_collectives(collectives: list[str] | None) -> list[str]:
    """The collectives to run (all when None), each checked by name."""
    names = list(collectives or COLLECTIVE_ORDER)
    for name in names:
        check_choice("collective", name, COLLECTIVE_ORDER)
    return names


def size_sweep(
    min_size: int | str = "1KiB", max_size: int | str = "4MiB", factor: int = 4
) -> list[int]:
    """Sizes from ``min_size`` to ``max_size``, multiplying by ``factor`` (nccl-tests ``-b -e
    -f``)."""
    lo, hi = parse_size(min_size, "min_size"), parse_size(max_size, "max_size")
    if hi < lo:
        raise bad_value("max_size", max_size, f"a size >= min_size ({lo} bytes)")
    if factor < 2:
        raise bad_value("factor", factor, "an integer >= 2")
    sizes = [lo]
    while sizes[-1] * factor <= hi:
        sizes.append(sizes[-1] * factor)
    return sizes


class ProgressBar:
    """A ``(done, total, label)`` callback that draws one ``tqdm.auto`` bar per sweep: a widget in
    Jupyter, a line rewritten in place in a terminal (``out``: its stream, default stderr). The bar
    starts at the first call and closes when ``done == total``; the next call starts a new one.
    ``unit``: what it counts; ``disable``: tqdm's (None: no bar unless ``out`` is a terminal)."""

    def __init__(
        self,
        desc: str,
        out: TextIO | None = None,
        *,
        unit: str = N_("run"),
        disable: bool | None = False,
    ):
        self.desc, self.out, self.unit, self.disable = desc, out, unit, disable
        self.bar: Any = None

    def __call__(self, done: int, total: int, label: str = "") -> None:
        from tqdm.auto import tqdm

        if self.bar is None:
            self.bar = tqdm(
                total=total,
                initial=done,  # its rate counts from here
                desc=self.desc,
                file=self.out,
                leave=True,
                unit=_(self.unit),  # a gettext message, or already in the learner's words
                disable=self.disable,
            )
        self.bar.total, self.bar.n = total, done
        self.bar.set_postfix_str(label, refresh=False)
        self.bar.refresh()
        if done >= total:
            self.close()

    def close(self) -> None:
        """Close the bar now, where it stands (a run that failed), if one is open."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


progress_bar = ProgressBar("bench")


def run_bytes(size: int, world_size: int, dtype: str) -> int:
    """The bytes a sweep's ``size`` runs with: rounded down to a multiple of ``world_size *
    itemsize`` (nccl-tests rounds the count the same way), at least one of it."""
    unit = world_size * DTYPES[dtype]
    return max(unit, size // unit * unit)


def check_sweep_fits(
    names: list[str], sizes: list[int], dtype: str, world_size: int, given: Any
) -> None:
    """Refuse, before any process starts, a sweep whose largest run would not fit this machine's
    free memory (:func:`~edu_parallel.comm.memory.check_fits`), named as ``--max-size``."""
    nbytes = run_bytes(max(sizes), world_size, dtype)
    for name in names:
        run = (
            plan_allreduce(world_size, nbytes, dtype)
            if name == "all_reduce"
            else plan_collective(world_size, name, nbytes, dtype)
        )
        check_fits(run, world_size, given, "--max-size")


def bench_collectives(
    cluster: Executor,
    collectives: list[str] | None = None,
    sizes: list[int] | None = None,
    dtype: str = "float32",
    progress: Callable[[int, int, str], None] | None = progress_bar,
    iters: int = 3,
) -> list[dict[str, Any]]:
    """Run every collective at every size on ``cluster``; one row dict per run.

    Sizes the collective cannot split into equal chunks are rounded down to a multiple of
    ``world_size * itemsize`` (nccl-tests rounds the count the same way). Each row is the median
    time of ``iters`` runs, verified on every run."""
    names = check_collectives(collectives)
    check_dtype(dtype)
    iters = check_int("iters", iters, 1, 100)
    sizes = sizes or size_sweep()
    n, item = cluster.world_size, DTYPES[dtype]
    rows, total = [], len(names) * len(sizes)
    for name in names:
        for size in sizes:
            nbytes = run_bytes(size, n, dtype)
            if progress:
                progress(len(rows), total, f"{name} {nbytes} B")
            reps = [
                (
                    run_allreduce(cluster, nbytes, dtype, "ring", trace=False)
                    if name == "all_reduce"
                    else run_collective(cluster, name, nbytes, dtype, trace=False)
                )
                for _ in range(iters)
            ]
            rep = sorted(reps, key=lambda r: r.time_s)[len(reps) // 2]
            rows.append(
                {
                    "collective": name,
                    "size": rep.nbytes,
                    "count": rep.nbytes // item,
                    "type": dtype,
                    "time_us": rep.time_s * 1e6,
                    "algbw_gbps": rep.algbw_gbps,
                    "busbw_gbps": rep.busbw_gbps,
                    "verified": all(r.matches_builtin for r in reps),
                    "world_size": n,
                }
            )
    if progress:
        progress(total, total, _("done"))
    return rows


@fitted
def format_bench(rows: list[dict[str, Any]]) -> str:
    """The table nccl-tests prints, one block per collective."""
    lines: list[str] = []
    for name in dict.fromkeys(r["collective"] for r in rows):
        lines.append(
            _("# {name}, {n} ranks (plan run on the engine; busbw per nccl-tests)").format(
                name=name, n=rows[0]["world_size"]
            )
        )
        lines.append(
            f"# {'size':>12} {'count':>10} {'type':>8} {'time(us)':>10} {'algbw(GB/s)':>12}"
            f" {'busbw(GB/s)':>12} {'verified':>9}"
        )
        for r in rows:
            if r["collective"] == name:
                ok = "OK" if r["verified"] else "WRONG"
                lines.append(
                    f"  {r['size']:>12} {r['count']:>10} {r['type']:>8} {r['time_us']:>10.1f} "
                    f"{r['algbw_gbps']:>12.4f} {r['busbw_gbps']:>12.4f} {ok:>9}"
                )
        lines.append("")
    return "\n".join(lines)
