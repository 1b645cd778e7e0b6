"""All-reduce algorithms side by side: bytes every rank sent and received, the busiest rank, steps.

:func:`traffic_table` runs every algorithm at every world size, on virtual ranks
(:func:`simulated_runner`, the default) or on real ones (a runner from
:func:`edu_parallel.comm.compare.cluster_traffic_runner`), and counts from the *trace*, not from a
formula:

* ``sent`` / ``recv``: bytes per rank;
* ``busiest_bytes``: the largest ``max(sent, recv)`` over ranks, the load that sets a
  bandwidth-bound run's time when every rank has one link of the same speed;
* ``steps``: the steps in which the trace shows any transfer, the number of latency (``alpha``)
  terms (equal to the plan's steps, ``plan_steps``: every step of these plans moves data);
* ``max_messages``: the most messages one rank sent. A transfer moves one chunk, so a step that
  sends a block of chunks (Rabenseifner) counts one message per chunk.

This is the evidence for errata E5 (../shared/syllabus/ERRATA.md): a single reduce-to-root tree
(:mod:`edu_parallel.plans.naive`) and a single parameter server load one rank with ``(N-1)·D``,
sharding the server over ``k`` ranks divides that by about ``k``; a binary tree's inner ranks carry
``3D``; NCCL's double binary tree keeps every rank at or below ``2D`` and the ring at ``2(N-1)/N·D``
(Thakur, Rabenseifner & Gropp 2005; NCCL ``src/graph/trees.cc``; Li et al. 2014). The trees'
and Rabenseifner's advantage is in ``steps``: ``O(log N)`` against the ring's ``2(N-1)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from ..core.errors import bad_value, check_choice, check_int
from ..core.i18n import _
from ..core.trace import Trace
from ..core.width import MAX_TEXT_COLUMNS, ljust, rjust
from ..core.width import width as display_width
from ..plans.algorithms import ALGOS, build_plan, formula_bytes
from ..plans.plan import MAX_PLAN_RANKS, Plan
from .simulation import simulate

Runner = Callable[[str, int, int], Trace]  # (algo, world_size, nbytes) -> trace of one run
# A runner may also have ``sized(world_size)``: a context manager giving a runner for that world
# size, which the table uses for every algorithm of that size (a real runner starts one cluster
# per world size for the whole table, not one per run); and ``progress``, None or a
# ``(done, total, label)`` callback the table calls before each run and at the end (a bar).


def simulated_runner(dtype: str = "float32") -> Runner:
    """Run the plan on virtual ranks (:func:`edu_parallel.models.simulation.simulate`, no data)."""

    def runner(algo: str, world_size: int, nbytes: int) -> Trace:
        trace, _ = simulate(build_plan(algo, world_size), nbytes, dtype, with_data=False)
        return trace

    return runner


def traffic_row(algo: str, trace: Trace) -> dict[str, Any]:
    """One row of the table from one run's trace (its meta holds the plan and the sizes)."""
    n, d = int(trace.meta["world_size"]), int(trace.meta["nbytes"])
    plan = Plan.from_text(trace.meta["plan"])
    sent, recv = list(trace.sent_bytes()), list(trace.recv_bytes())
    load = [max(s, r) for s, r in zip(sent, recv, strict=True)]
    busiest = max(range(n), key=lambda r: load[r])  # the lowest such rank
    messages = [0] * n
    for e in trace.events:
        if e.kind == "send":
            messages[e.rank] += 1
    formula = formula_bytes(algo, n, d)
    return {
        "algo": algo,
        "world_size": n,
        "nbytes": d,
        "supported": True,
        "source": trace.meta.get("source", "cluster"),
        "sent": sent,
        "recv": recv,
        "busiest_rank": busiest,
        "busiest_bytes": load[busiest],
        "busiest_over_d": load[busiest] / d,
        "mean_bytes": sum(load) / n,
        "formula_busiest_bytes": max(max(formula["sent"]), max(formula["recv"])),
        "steps": len({e.step for e in trace.events if e.step is not None}),
        "plan_steps": len(plan.steps),
        "max_messages": max(messages, default=0),
        "note": "",
    }


def traffic_table(
    algos: Iterable[str],
    world_sizes: Iterable[int],
    nbytes: int,
    runner: Runner | None = None,
) -> list[dict[str, Any]]:
    """One row per (algorithm, world size), from runs of ``runner`` (default: simulation).

    A combination the algorithm does not support (Rabenseifner on a world size that is not a
    power of two) gives a row with ``supported=False``, the reason in ``note`` and no numbers.
    """
    algos = [check_choice("algos", a, ALGOS) for a in algos]
    sizes = [check_int("world_sizes", n, 1, MAX_PLAN_RANKS) for n in world_sizes]
    nbytes = check_int("nbytes", nbytes, 1)
    if runner is None:
        runner = simulated_runner()
    elif not callable(runner):
        raise bad_value("runner", runner, "None or a callable runner(algo, world_size, nbytes)")
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    runs: dict[int, list[str]] = {}  # world size -> the algorithms that run on it
    for n in dict.fromkeys(sizes):
        runs[n] = []
        for algo in dict.fromkeys(algos):
            try:
                build_plan(algo, n)
            except ValueError as exc:
                rows[algo, n] = {
                    "algo": algo,
                    "world_size": n,
                    "nbytes": nbytes,
                    "supported": False,
                    "note": str(exc),
                }
                continue
            runs[n].append(algo)
    progress = getattr(runner, "progress", None)  # a real runner's bar: (done, total, label)
    total, done = sum(map(len, runs.values())), 0
    for n, names in runs.items():  # one world size at a time: one cluster for all its algorithms
        if not names:
            continue
        with _sized(runner, n) as run:
            for algo in names:
                if progress:
                    progress(done, total, f"{algo}, N={n}")
                rows[algo, n] = traffic_row(algo, run(algo, n, nbytes))
                done += 1
    if progress and total:
        progress(total, total, "")
    return [rows[algo, n] for algo in algos for n in sizes]  # algorithm by algorithm


def _sized(runner: Runner, world_size: int) -> contextlib.AbstractContextManager[Runner]:
    """``runner.sized(world_size)`` where the runner has it, else the runner itself."""
    sized = getattr(runner, "sized", None)
    return sized(world_size) if callable(sized) else contextlib.nullcontext(runner)


def _per_rank(values: list[int], d: int, limit: int) -> str:
    cells = [f"{v / d:.2f}" for v in values[:limit]]
    return " ".join(cells) + (" ..." if len(values) > limit else "")


def format_traffic_table(rows: list[dict[str, Any]], max_ranks: int = 8) -> str:
    """The table as text: per-rank bytes in units of D (the buffer), busiest rank, steps; at
    most :data:`~edu_parallel.core.width.MAX_TEXT_COLUMNS` wide. Where every rank of every row
    receives what it sends (each all-reduce here), one column shows both; else two, with as many
    ranks as fit (then "...")."""
    lead = (
        ljust(_("algo"), 13)
        + rjust("N", 3)
        + rjust(_("steps"), 6)
        + rjust("msgs", 5)
        + rjust(_("busiest"), 8)
        + rjust("load/D", 8)
        + "  "
    )
    ok = [row for row in rows if row["supported"]]
    symmetric = all(row["sent"] == row["recv"] for row in ok)
    room = MAX_TEXT_COLUMNS - display_width(lead)
    ranks = min(max_ranks, (room if symmetric else (room - 1) // 2) // 5 - 1)  # "x.xx " a rank
    width = 5 * ranks + 4  # and " ..."
    if symmetric:
        head = lead + _("sent = received per rank / D")
    else:
        sent = _("sent per rank / D")
        head = lead + ljust(sent, width) + " " + _("received per rank / D")
    lines = [head, "-" * min(display_width(head), MAX_TEXT_COLUMNS)]
    for row in rows:
        if not row["supported"]:
            lines.append(f"{row['algo']:<13}{row['world_size']:>3}   n/a: {row['note']}")
            continue
        d = row["nbytes"]
        cells = _per_rank(row["sent"], d, ranks)
        if not symmetric:
            cells = f"{cells:<{width}} {_per_rank(row['recv'], d, ranks)}"
        lines.append(
            f"{row['algo']:<13}{row['world_size']:>3}{row['steps']:>6}{row['max_messages']:>5}"
            f"{'r' + str(row['busiest_rank']):>8}{row['busiest_over_d']:>8.3f}  {cells}"
        )
    sources = sorted({row["source"] for row in rows if row["supported"]})
    lines.append(
        _(
            "D = {d} bytes per rank; counted from the trace ({sources}); load = max(sent, recv);"
            " msgs = most messages one rank sent"
        ).format(
            d=f"{rows[0]['nbytes'] if rows else 0:,}", sources=", ".join(sources) or _("no runs")
        )
    )
    return "\n".join(lines)
