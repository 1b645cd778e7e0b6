"""Collective semantics, from a run: every collective's plan on real ranks, checked against torch.

:func:`collective_job` runs on every rank: it builds the rank's buffer of ``D`` bytes, sets the
inputs up the way the collective defines them, computes the reference with the builtin
``torch.distributed`` collective (untraced), then runs the plan of
:data:`~edu_parallel.collectives.COLLECTIVE_PLANS`, traced and timed, and compares the chunks the
collective defines. :func:`run_collective` runs it on a cluster and returns a
:class:`CollectiveReport`: bytes per rank against :func:`~edu_parallel.collectives.volume_formula`,
the check, and algbw/busbw by nccl-tests' definitions (doc/PERFORMANCE.md in NVIDIA/nccl-tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .collectives import COLLECTIVE_PLANS, volume_formula
from .errors import bad_value, check_choice, check_int
from .inputs import PATTERNS, chunk_bounds, numel_for
from .metrics import BUS_FACTORS, algbw_gbps
from .plan import ROOTED, Plan
from .trace import Trace
from .units import DTYPES, INTEGER_DTYPES, check_dtype, parse_size

# CLI concept name -> collective
CONCEPT_NAMES = {"allgather": "all_gather", "reducescatter": "reduce_scatter",
                 "broadcast": "broadcast", "reduce": "reduce", "alltoall": "all_to_all",
                 "gather": "gather", "scatter": "scatter"}  # fmt: skip
# The torch builtins cut the buffer into N equal parts: D must be a multiple of N * itemsize.
EQUAL_CHUNKS = ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter")
REDUCTIONS = ("all_reduce", "reduce", "reduce_scatter")
BUFFER_LIMIT = 4096  # bytes per rank: up to this, the result carries the buffers before and after


def check_size(collective: str, world_size: int, nbytes: int, dtype: str, size: Any = None) -> None:
    """Raise a ValueError naming ``size`` when the collective needs equal chunks and D has none."""
    unit = world_size * DTYPES[dtype]
    if collective in EQUAL_CHUNKS and nbytes % unit:
        lower, upper = nbytes // unit * unit, (nbytes // unit + 1) * unit
        such = f"{lower} or {upper}" if lower else f"{upper} or {2 * upper}"
        raise bad_value("size", nbytes if size is None else size,
                        f"a multiple of n*itemsize = {unit} bytes ({collective} on {world_size} "
                        f"ranks of {dtype} needs equal chunks), such as {such}")  # fmt: skip


def plan_for(collective: str, world_size: int, root: int, numel: int) -> Plan:
    """The plan a run uses; pipelined chains get at most one chunk per element."""
    if collective in ("broadcast", "reduce"):
        return COLLECTIVE_PLANS[collective](world_size, root, min(world_size, numel))
    return COLLECTIVE_PLANS[collective](world_size, root)


def defined_chunks(collective: str, rank: int, root: int, num_chunks: int) -> list[int]:
    """The chunks of ``rank`` whose final value the collective defines (compared and drawn)."""
    if collective in ("reduce_scatter", "scatter"):
        return [rank]
    if collective in ("reduce", "gather") and rank != root:
        return []
    return list(range(num_chunks))


def _reference(name: str, x: Any, chunks: tuple, n: int, r: int, root: int) -> tuple[Any, str]:
    """The builtin's result on this rank, concatenated over :func:`defined_chunks`, and its name.

    torch 2.13 deprecates ``all_gather_into_tensor``/``reduce_scatter_tensor`` for the same calls
    named ``all_gather_single``/``reduce_scatter_single``; both work on gloo (checked), so the
    reduce-scatter reference is the builtin itself, not an all-reduce sliced."""
    import torch
    import torch.distributed as dist

    part = x.numel() // n
    if name in ("all_reduce", "broadcast", "reduce"):
        out = x.clone()
        {"all_reduce": lambda: dist.all_reduce(out), "broadcast": lambda: dist.broadcast(out, root),
         "reduce": lambda: dist.reduce(out, root)}[name]()  # fmt: skip
        return (out if name != "reduce" or r == root else out[:0]), f"dist.{name}"
    if name in ("all_gather", "reduce_scatter"):
        new, old = {"all_gather": ("all_gather_single", "all_gather_into_tensor"),
                    "reduce_scatter": ("reduce_scatter_single", "reduce_scatter_tensor")}[name]  # fmt: skip
        call = new if hasattr(dist, new) else old
        if name == "all_gather":
            out = torch.empty_like(x)
            getattr(dist, call)(out, chunks[r].clone())
        else:
            out = torch.empty(part, dtype=x.dtype, device=x.device)
            getattr(dist, call)(out, x.clone())
        return out, f"dist.{call}"
    if name == "all_to_all":
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.clone())
        return out, "dist.all_to_all_single"
    if name == "gather":
        parts = [torch.empty(part, dtype=x.dtype, device=x.device) for _ in range(n)]
        dist.gather(chunks[r].clone(), parts if r == root else None, dst=root)
        return (torch.cat(parts) if r == root else x[:0]), "dist.gather"
    out = torch.empty(part, dtype=x.dtype, device=x.device)  # scatter
    dist.scatter(out, [c.clone() for c in chunks] if r == root else None, src=root)
    return out, "dist.scatter"


def collective_job(ctx: Any, name: str, nbytes: int, dtype: str, pattern: str, seed: int,
                   segment_bytes: int = 4 << 20, root: int = 0) -> dict[str, Any]:  # fmt: skip
    """On one rank: inputs per the collective, builtin reference (untraced), the plan (traced).

    Cells that are output only start at zero (all-gather and gather: every chunk but the rank's
    own; broadcast and scatter: the whole buffer of every rank but the root), so the buffers show
    what moved. Data movement is compared bit for bit, sums exactly for integers and with
    ``allclose`` for floats (another order of additions), on the chunks the collective defines.
    """
    import torch

    from .execute import run_plan, same_result
    from .inputs import make_input
    from .units import torch_dtype

    n, r = ctx.world_size, ctx.rank
    numel = numel_for(nbytes, dtype)
    plan = plan_for(name, n, root, numel)
    x = torch.from_numpy(make_input(r, numel, dtype, pattern, seed)).to(
        ctx.device, torch_dtype(dtype)
    )
    chunks = torch.tensor_split(x, plan.num_chunks)  # views into x, shape [numel / chunks] each
    if name in ("all_gather", "gather"):
        for k, c in enumerate(chunks):
            if k != r:
                c.zero_()
    elif name in ("broadcast", "scatter") and r != root:
        x.zero_()
    before = x.clone()
    with ctx.tracer.paused():
        ctx.tracer.where(f"builtin {name} (reference)")
        expected, reference = _reference(name, x, chunks, n, r, root)
    ctx.barrier()
    start = ctx.tracer.now()
    run_plan(ctx, plan, x, segment_bytes)
    end = ctx.tracer.now()
    defined = defined_chunks(name, r, root, plan.num_chunks)
    got = torch.cat([chunks[k] for k in defined]) if defined else x[:0]
    matches = same_result(got, expected, n, exact=dtype in INTEGER_DTYPES or name not in REDUCTIONS)
    err = float((got.double() - expected.double()).abs().max()) if got.numel() else 0.0
    out = {"start": start, "end": end, "matches_builtin": matches, "max_abs_err": err,
           "reference": reference, "defined": defined}  # fmt: skip
    if numel * x.element_size() <= BUFFER_LIMIT:
        out["before"], out["after"] = before.double().tolist(), x.double().tolist()
    return out


def bus_factor_for(collective: str, world_size: int) -> tuple[float, str]:
    """nccl-tests' busbw/algbw factor; gather and scatter are not in nccl-tests: ``(n-1)/n``, the
    share of S the root's link carries (as for all-gather)."""
    if collective in BUS_FACTORS:
        return BUS_FACTORS[collective](world_size), "nccl-tests doc/PERFORMANCE.md"
    return (world_size - 1) / world_size, "(n-1)/n: not in nccl-tests; the root link carries it"


@dataclass
class CollectiveReport:
    """What a lesson and the CLI show for one run of a collective's plan."""

    collective: str
    world_size: int
    nbytes: int
    dtype: str
    root: int
    per_rank_sent_bytes: list[int]
    per_rank_recv_bytes: list[int]
    formula: dict[str, Any]
    matches_builtin: bool
    reference: str
    steps: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    bus_factor: float
    bus_factor_source: str
    defined: list[list[int]]  # [rank] -> chunks the collective defines there
    before: list[list[float]] | None  # [rank][element], small runs only
    after: list[list[float]] | None
    trace: Trace = field(repr=False)
    plan: Plan = field(repr=False)

    @property
    def concept(self) -> str:
        return {v: k for k, v in CONCEPT_NAMES.items()}.get(self.collective, self.collective)

    @property
    def chunk_bounds(self) -> list[int]:
        return self.trace.meta["chunk_bounds"]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "concept": self.concept, "collective": self.collective, "algo": self.plan.name,
            "world_size": self.world_size, "nbytes": self.nbytes, "dtype": self.dtype,
            "root": self.root if self.collective in ROOTED else None,
            "per_rank_sent_bytes": self.per_rank_sent_bytes,
            "per_rank_recv_bytes": self.per_rank_recv_bytes,
            "formula_sent_bytes": self.formula["sent"], "formula_recv_bytes": self.formula["recv"],
            "formula": {k: self.formula[k] for k in ("sent_text", "recv_text", "convention")},
            "matches_builtin": self.matches_builtin, "reference": self.reference,
            "steps": self.steps, "num_chunks": self.plan.num_chunks, "time_s": self.time_s,
            "algbw_gbps": self.algbw_gbps, "busbw_gbps": self.busbw_gbps,
            "bus_factor": self.bus_factor, "bus_factor_source": self.bus_factor_source,
            "plan": self.plan.to_text(),
        }  # fmt: skip


def run_collective(cluster: Any, name: str, size: int | str = "1MiB", dtype: str = "float32",
                   pattern: str = "random", seed: int = 0, trace: bool = True, root: int = 0,
                   segment_bytes: int = 4 << 20) -> CollectiveReport | None:  # fmt: skip
    """Run collective ``name`` (a key of COLLECTIVE_PLANS, or a CLI name such as "allgather") on
    ``cluster`` with ``size`` bytes per rank, check it against torch and measure it.

    Sizes the builtin cannot cut into N equal parts raise a ValueError before anything runs. Under
    torchrun only rank 0 gets a report (others None). ``trace=False`` counts bytes from the plan."""
    name = CONCEPT_NAMES.get(name, name)
    check_choice("name", name, COLLECTIVE_PLANS)
    nbytes, n = parse_size(size), cluster.world_size
    check_dtype(dtype)
    check_choice("pattern", pattern, PATTERNS)
    seed = check_int("seed", seed, 0)
    root = check_int("root", root, 0, n - 1)
    segment_bytes = check_int("segment_bytes", segment_bytes, 1)
    check_size(name, n, nbytes, dtype, size)
    out = cluster.run(collective_job, name, nbytes, dtype, pattern, seed, segment_bytes, root,
                      trace=trace)  # fmt: skip
    if out is None:
        return None
    return report_from_run(out.results, out.trace, name, nbytes, dtype, pattern, n, root, trace)


def report_from_run(results: list[dict], trace: Trace, name: str, nbytes: int, dtype: str,
                    pattern: str, world_size: int, root: int = 0,
                    traced: bool = True) -> CollectiveReport:  # fmt: skip
    """Build the report from per-rank job results and the merged trace."""
    n, item = world_size, DTYPES[dtype]
    numel = numel_for(nbytes, dtype)
    plan = plan_for(name, n, root, numel)
    bounds = chunk_bounds(numel, plan.num_chunks)
    chunk_bytes = [(bounds[k + 1] - bounds[k]) * item for k in range(plan.num_chunks)]
    real = numel * item
    trace.meta.update({"concept": plan.name, "collective": name, "nbytes": real, "dtype": dtype,
                       "input": pattern, "plan": plan.to_text(), "chunk_bounds": bounds,
                       "chunk_bytes": chunk_bytes, "world_size": n, "root": root})  # fmt: skip
    if traced:
        sent, recv = list(trace.sent_bytes()), list(trace.recv_bytes())
    else:
        sent, recv = [0] * n, [0] * n
        for step in plan.steps:
            for t in step.transfers:
                sent[t.src] += chunk_bytes[t.chunk]
                recv[t.dst] += chunk_bytes[t.chunk]
    time_s = max(max(r["end"] - r["start"] for r in results), 1e-9)
    factor, source = bus_factor_for(name, n)
    small = all("before" in r for r in results)
    return CollectiveReport(
        collective=name, world_size=n, nbytes=real, dtype=dtype, root=root,
        per_rank_sent_bytes=sent, per_rank_recv_bytes=recv,
        formula=volume_formula(name, n, real, root),
        matches_builtin=all(r["matches_builtin"] for r in results), reference=results[0]["reference"],
        steps=len(plan.steps), time_s=time_s, algbw_gbps=algbw_gbps(real, time_s),
        busbw_gbps=algbw_gbps(real, time_s) * factor, bus_factor=factor, bus_factor_source=source,
        defined=[r["defined"] for r in results],
        before=[r["before"] for r in results] if small else None,
        after=[r["after"] for r in results] if small else None, trace=trace, plan=plan,
    )  # fmt: skip


def _cell(values: list[float], lo: int, hi: int) -> str:
    v = values[lo] if hi > lo else None
    text = "-" if v is None else f"{v:.3g}" if v != int(v) else str(int(v))
    return text + (".." if hi - lo > 1 else "")


def format_collective(report: CollectiveReport, max_plan_lines: int = 12) -> str:
    """Text for the CLI: the plan, bytes per rank against the formula, check, bandwidth, and for
    small runs each chunk's first value before and after (``..``: more values follow)."""
    from .units import format_bytes

    n, f = report.world_size, report.formula
    lines = [f"{report.plan.name} ({report.collective}): {n} ranks, "
             f"{format_bytes(report.nbytes)} per rank ({report.dtype})"
             + (f", root {report.root}" if report.collective in ROOTED else ""), ""]  # fmt: skip
    plan_lines = report.plan.to_text().splitlines()
    lines += plan_lines[: max_plan_lines + 1]
    if len(plan_lines) > max_plan_lines + 1:
        lines.append(f"... {len(plan_lines) - max_plan_lines - 1} more steps")
    lines += ["", f"{'rank':>4} {'sent':>12} {'formula':>12} {'received':>12} {'formula':>12}"]
    for r in range(n):
        lines.append(f"{r:>4} {report.per_rank_sent_bytes[r]:>12,} {f['sent'][r]:>12,.1f} "
                     f"{report.per_rank_recv_bytes[r]:>12,} {f['recv'][r]:>12,.1f}")  # fmt: skip
    lines.append(f"formula: sent {f['sent_text']}; received {f['recv_text']}")
    lines.append("S = the larger of input and output per rank (nccl-tests doc/PERFORMANCE.md); "
                 "uneven chunks differ by less than one chunk")  # fmt: skip
    if report.before is not None and report.after is not None:
        b = report.chunk_bounds
        lines.append("")
        lines.append("first value of each chunk, before -> after (* = defined by the collective)")
        for r in range(n):
            cells = [_cell(report.before[r], b[k], b[k + 1]) for k in range(len(b) - 1)]
            done = [_cell(report.after[r], b[k], b[k + 1]) + ("*" if k in report.defined[r] else "")
                    for k in range(len(b) - 1)]  # fmt: skip
            lines.append(f"  r{r}: [{' '.join(cells)}] -> [{' '.join(done)}]")
    lines.append("")
    lines.append(f"matches {report.reference}: {'yes' if report.matches_builtin else 'NO'}")
    lines.append(f"steps {report.steps}   time {report.time_s * 1e3:.3f} ms   algbw "
                 f"{report.algbw_gbps:.4g} GB/s   busbw {report.busbw_gbps:.4g} GB/s "
                 f"(algbw * {report.bus_factor:.4g}, {report.bus_factor_source})")  # fmt: skip
    return "\n".join(lines)


def collective_runner(cluster: Any) -> Any:
    """``runner(collective, world_size, nbytes) -> Trace`` on real ranks, for predict-then-run
    quizzes: uses ``cluster`` when the world size matches, else a short-lived Cluster."""

    def runner(collective: str, world_size: int, nbytes: int) -> Trace:
        if world_size == cluster.world_size:
            return run_collective(cluster, collective, nbytes).trace
        from .cluster import Cluster

        with Cluster(world_size, cluster.backend, timeout=cluster.timeout) as other:
            return run_collective(other, collective, nbytes).trace

    return runner
