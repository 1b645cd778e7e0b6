"""All-reduce as a concept to run: ring, naive, trees, parameter servers, Rabenseifner; measured.

:func:`allreduce_job` runs on every rank: it builds the rank's input, computes the reference with
the builtin ``dist.all_reduce`` (untraced), then runs the chosen plan, traced and timed.
:func:`run_allreduce` runs it on a :class:`~edu_parallel.cluster.Cluster` and returns an
:class:`AllReduceReport`: bytes per rank from the trace against the formula, the check against the
builtin, and algbw/busbw by nccl-tests' definitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import check_choice, check_int
from .inputs import PATTERNS, chunk_bounds, numel_for
from .metrics import algbw_gbps, busbw_gbps
from .naive import naive_allreduce_plan, naive_sent_bytes_formula
from .plan import Plan
from .ps import parameter_server_plan, ps_bytes_formula, sharded_parameter_server_plan
from .rabenseifner import rabenseifner_allreduce_plan, rabenseifner_bytes_formula
from .ring import ring_allreduce_plan
from .trace import Trace
from .tree import binary_tree_allreduce_plan as tree_plan
from .tree import double_binary_tree_allreduce_plan as double_tree_plan
from .tree import double_tree_bytes_formula, tree_bytes_formula
from .units import DTYPES, INTEGER_DTYPES, check_dtype, parse_size

ALGOS: dict[str, Callable[[int], Plan]] = {
    "ring": ring_allreduce_plan,
    "naive": naive_allreduce_plan,
    "tree": tree_plan,  # one heap-numbered binary tree
    "double-tree": double_tree_plan,  # NCCL's two complementary trees
    "ps": parameter_server_plan,  # one server, rank 0
    "ps-sharded": sharded_parameter_server_plan,  # two servers, ranks 0 and 1
    "rabenseifner": rabenseifner_allreduce_plan,  # power-of-two world sizes only
}
PS_ALGOS = ("ps", "ps-sharded")  # the algorithms that take ``servers``
FORMULA_TEXT = {
    "ring": "2(N-1)/N * D", "naive": "root (N-1) * D, others D",
    "tree": "D per tree neighbour: leaf D, inner 3D, root 2D",
    "double-tree": "D/2 per neighbour in each tree, at most 2D",
    "ps": "servers (N+k-2)/k * D, workers D", "ps-sharded": "servers (N+k-2)/k * D, workers D",
    "rabenseifner": "2(N-1)/N * D",
}  # fmt: skip


def check_servers(algo: str, servers: int | None, world_size: int | None = None) -> int | None:
    """``servers`` is for the parameter server only: None, or an integer in [1, world_size]."""
    if servers is None:
        return None
    if algo not in PS_ALGOS:
        raise ValueError(f"servers={servers!r} is not valid: expected None unless algo is one of "
                         f"{', '.join(map(repr, PS_ALGOS))} (algo={algo!r})")  # fmt: skip
    return check_int("servers", servers, 1, world_size)


def build_plan(algo: str, world_size: int, servers: int | None = None) -> Plan:
    """The plan of ``algo`` for ``world_size`` ranks; ``servers`` overrides the PS server count."""
    check_choice("algo", algo, ALGOS)
    if check_servers(algo, servers, world_size) is not None:
        return parameter_server_plan(world_size, servers)  # type: ignore[arg-type]
    return ALGOS[algo](world_size)


def formula_bytes(
    algo: str, world_size: int, nbytes: int, servers: int | None = None
) -> dict[str, list[float]]:
    """Bytes each rank sends and receives by the textbook formula (``FORMULA_TEXT``)."""
    n = world_size
    check_choice("algo", algo, ALGOS)
    if algo in PS_ALGOS:
        k = check_servers(algo, servers, n) or (1 if algo == "ps" else min(2, n))
        return ps_bytes_formula(n, nbytes, k)
    if algo == "ring":
        sent = [2 * (n - 1) / n * nbytes] * n
    elif algo == "naive":
        sent = naive_sent_bytes_formula(n, nbytes)
    else:
        table = {"tree": tree_bytes_formula, "double-tree": double_tree_bytes_formula,
                 "rabenseifner": rabenseifner_bytes_formula}  # fmt: skip
        return table[algo](n, nbytes)
    return {"sent": sent, "recv": list(sent)}


def formula_sent_bytes(
    algo: str, world_size: int, nbytes: int, servers: int | None = None
) -> list[float]:
    """Bytes each rank sends by the textbook formula: ring ``2(N-1)/N*D``, naive root ``(N-1)D``."""
    return formula_bytes(algo, world_size, nbytes, servers)["sent"]


def allreduce_job(
    ctx: Any,
    nbytes: int,
    dtype: str,
    algo: str,
    pattern: str,
    seed: int,
    segment_bytes: int = 4 << 20,
    servers: int | None = None,
) -> dict[str, Any]:
    """On one rank: input, builtin reference (untraced), then the plan, traced and timed."""
    import torch
    import torch.distributed as dist

    from .execute import run_plan, same_result
    from .inputs import make_input
    from .units import torch_dtype

    plan = build_plan(algo, ctx.world_size, servers)
    numel = numel_for(nbytes, dtype)
    x = torch.from_numpy(make_input(ctx.rank, numel, dtype, pattern, seed)).to(
        ctx.device, torch_dtype(dtype)
    )
    with ctx.tracer.paused():
        reference = x.clone()
        ctx.tracer.where("builtin dist.all_reduce (reference)")
        dist.all_reduce(reference)
    ctx.barrier()
    start = ctx.tracer.now()
    run_plan(ctx, plan, x, segment_bytes)
    end = ctx.tracer.now()
    matches = same_result(x, reference, ctx.world_size, exact=dtype in INTEGER_DTYPES)
    err = float((x.double() - reference.double()).abs().max()) if numel else 0.0
    return {"start": start, "end": end, "matches_builtin": matches, "max_abs_err": err}


@dataclass
class AllReduceReport:
    """The numbers a lesson and the CLI show for one all-reduce run."""

    algo: str
    world_size: int
    nbytes: int
    dtype: str
    per_rank_sent_bytes: list[int]
    per_rank_recv_bytes: list[int]
    per_phase_sent_bytes: dict[str, list[int]]
    formula_sent_bytes: list[float]
    matches_builtin: bool
    steps: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    trace: Trace = field(repr=False)
    plan: Plan = field(repr=False)
    servers: int | None = None  # parameter server: how many (None: the algorithm's default)
    formula_recv_bytes: list[float] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "concept": "allreduce", "algo": self.algo, "world_size": self.world_size,
            "nbytes": self.nbytes, "dtype": self.dtype,
            "per_rank_sent_bytes": self.per_rank_sent_bytes,
            "per_rank_recv_bytes": self.per_rank_recv_bytes,
            "per_phase_sent_bytes": self.per_phase_sent_bytes,
            "formula_sent_bytes": self.formula_sent_bytes[0] if self.algo == "ring" else self.formula_sent_bytes,
            "formula_sent_bytes_per_rank": self.formula_sent_bytes,
            "formula_recv_bytes_per_rank": self.formula_recv_bytes, "servers": self.servers,
            "matches_builtin": self.matches_builtin, "steps": self.steps,
            "steps_per_phase": self.plan.steps_per_phase(),
            "time_s": self.time_s, "algbw_gbps": self.algbw_gbps, "busbw_gbps": self.busbw_gbps,
        }  # fmt: skip


def run_allreduce(cluster: Any, size: int | str = "1MiB", dtype: str = "float32", algo: str = "ring",
                  pattern: str = "random", seed: int = 0, trace: bool = True,
                  segment_bytes: int = 4 << 20, servers: int | None = None,
                  ) -> AllReduceReport | None:  # fmt: skip
    """Run an all-reduce of ``size`` bytes per rank on ``cluster`` and measure it.

    ``cluster`` is a Cluster or a TorchrunExecutor (then only rank 0 gets a report, others None).
    ``pattern="powers_of_two"`` makes every partial sum readable as a set of ranks (animation).
    With ``trace=False`` nothing is recorded and the byte counts come from the plan.
    Messages above ``segment_bytes`` travel in pieces so reduction overlaps transfer; the trace
    still records one message per planned transfer. ``servers`` (``algo="ps"`` or
    ``"ps-sharded"`` only) sets how many ranks act as parameter servers.
    """
    nbytes = parse_size(size)
    check_dtype(dtype)
    check_choice("algo", algo, ALGOS)
    check_choice("pattern", pattern, PATTERNS)
    seed = check_int("seed", seed, 0)
    segment_bytes = check_int("segment_bytes", segment_bytes, 1)
    build_plan(algo, cluster.world_size, servers)  # bad world size or servers: fail before running
    out = cluster.run(
        allreduce_job, nbytes, dtype, algo, pattern, seed, segment_bytes, servers, trace=trace
    )
    if out is None:  # a non-zero rank under torchrun: rank 0 reports
        return None
    return report_from_run(out.results, out.trace, algo, nbytes, dtype, pattern,
                           cluster.world_size, traced=trace, servers=servers)  # fmt: skip


def report_from_run(results: list[dict], trace: Trace, algo: str, nbytes: int, dtype: str, pattern: str,
                    world_size: int, traced: bool = True, servers: int | None = None,
                    ) -> AllReduceReport:  # fmt: skip
    """Build the report from per-rank job results and the merged trace (cluster or torchrun)."""
    n = world_size
    plan = build_plan(algo, n, servers)
    numel = numel_for(nbytes, dtype)
    bounds = chunk_bounds(numel, plan.num_chunks)
    item = DTYPES[dtype]
    chunk_bytes = [(bounds[k + 1] - bounds[k]) * item for k in range(plan.num_chunks)]
    real_bytes = numel * item
    trace.meta.update({
        "concept": plan.name, "algo": algo, "collective": "all_reduce", "nbytes": real_bytes,
        "dtype": dtype, "input": pattern, "plan": plan.to_text(), "chunk_bounds": bounds,
        "chunk_bytes": chunk_bytes, "world_size": n,
    })  # fmt: skip
    if traced:
        sent, recv = trace.sent_bytes(), trace.recv_bytes()
        counted = trace.sent_bytes(per_phase=True)
        per_phase = {p: counted.get(p, [0] * n) for p in plan.phases()}
    else:
        per_phase = plan.sent_bytes(chunk_bytes)
        sent = [sum(v[r] for v in per_phase.values()) for r in range(n)]
        recv = [0] * n
        for step in plan.steps:
            for t in step.transfers:
                recv[t.dst] += chunk_bytes[t.chunk]
    time_s = max(r["end"] - r["start"] for r in results)
    time_s = max(time_s, 1e-9)
    formula = formula_bytes(algo, n, real_bytes, servers)
    return AllReduceReport(
        algo=algo, world_size=n, nbytes=real_bytes, dtype=dtype,
        per_rank_sent_bytes=list(sent), per_rank_recv_bytes=list(recv),
        per_phase_sent_bytes=dict(per_phase),
        formula_sent_bytes=formula["sent"], formula_recv_bytes=formula["recv"], servers=servers,
        matches_builtin=all(r["matches_builtin"] for r in results), steps=len(plan.steps),
        time_s=time_s, algbw_gbps=algbw_gbps(real_bytes, time_s),
        busbw_gbps=busbw_gbps("all_reduce", n, real_bytes, time_s), trace=trace, plan=plan,
    )  # fmt: skip


def step_table(trace: Trace) -> list[dict[str, Any]]:
    """One row per step: phase, transfers, bytes per transfer, measured wall time of the step."""
    rows: dict[int, dict[str, Any]] = {}
    for e in trace.events:
        if e.step is None or e.kind not in ("send", "recv", "compute"):
            continue
        row = rows.setdefault(
            e.step,
            {"step": e.step, "phase": e.phase, "transfers": [], "start": e.start, "end": e.end},
        )
        row["start"], row["end"] = min(row["start"], e.start), max(row["end"], e.end)
        if e.kind == "recv":
            row["transfers"].append((e.peer, e.rank, e.chunk, e.op, e.nbytes))
    out = []
    for step in sorted(rows):
        row = rows[step]
        row["transfers"].sort()
        row["wall_s"] = row["end"] - row["start"]
        out.append(row)
    return out


def format_report(report: AllReduceReport, max_steps: int = 16) -> str:
    """The CLI's readable output: per-step table, then bytes against the formula, check, bandwidth."""
    from .units import format_bytes

    n, lines = report.world_size, []
    lines.append(
        f"{report.algo} all-reduce: {n} ranks, {format_bytes(report.nbytes)} per rank ({report.dtype})"
    )
    lines.append("")
    lines.append(
        f"{'step':>4}  {'phase':<15} {'transfers (src>dst chunk op)':<44} {'bytes/msg':>10} {'wall ms':>8}"
    )
    rows = step_table(report.trace)
    for row in rows[:max_steps]:
        sym = {"reduce": "+", "copy": "="}
        text = " ".join(f"{s}>{d}:c{c}{sym.get(op, '?')}" for s, d, c, op, _ in row["transfers"])
        sizes = sorted({b for *_, b in row["transfers"]})
        size = (
            format_bytes(sizes[0])
            if len(sizes) == 1
            else f"{format_bytes(sizes[0])}-{format_bytes(sizes[-1])}"
        )
        text = text if len(text) <= 44 else text[:41] + "..."
        lines.append(
            f"{row['step']:>4}  {row['phase']:<15} {text:<44} {size:>10} {row['wall_s'] * 1e3:>8.3f}"
        )
    if len(rows) > max_steps:
        lines.append(f"   ... {len(rows) - max_steps} more steps")
    lines.append("")
    phases = list(report.per_phase_sent_bytes)
    lines.append(
        f"{'rank':>4}  "
        + "".join(f"{p:>16}" for p in phases)
        + f"{'sent total':>14}{'formula':>14}"
    )
    for r in range(n):
        cells = "".join(f"{report.per_phase_sent_bytes[p][r]:>16,}" for p in phases)
        lines.append(
            f"{r:>4}  {cells}{report.per_rank_sent_bytes[r]:>14,}{report.formula_sent_bytes[r]:>14,.1f}"
        )
    formula = FORMULA_TEXT.get(report.algo, "see the algorithm's module")
    lines.append(f"formula: {formula}; uneven chunks differ from it by less than one chunk")
    lines.append(f"matches dist.all_reduce: {'yes' if report.matches_builtin else 'NO'}")
    lines.append(f"time {report.time_s * 1e3:.3f} ms   algbw {report.algbw_gbps:.4g} GB/s   "
                 f"busbw {report.busbw_gbps:.4g} GB/s (algbw * 2(N-1)/N, nccl-tests)")  # fmt: skip
    return "\n".join(lines)


def cluster_runner(
    cluster: Any, algo: str = "ring", dtype: str = "int64", pattern: str = "powers_of_two",
    servers: int | None = None,
) -> Callable[[int, int], Trace]:  # fmt: skip
    """``runner(world_size, nbytes) -> Trace`` on real ranks, for players and predict-then-run quizzes.

    Uses ``cluster`` when the world size matches; otherwise starts a short-lived Cluster of that
    size (about 0.1 s with fork) and closes it after the run.
    """
    check_choice("algo", algo, ALGOS)
    check_servers(algo, servers)

    def runner(world_size: int, nbytes: int) -> Trace:
        kw = {"servers": servers}
        if world_size == cluster.world_size:
            return run_allreduce(cluster, nbytes, dtype, algo, pattern, **kw).trace
        from .cluster import Cluster

        with Cluster(world_size, cluster.backend, timeout=cluster.timeout) as other:
            return run_allreduce(other, nbytes, dtype, algo, pattern, **kw).trace

    return runner
