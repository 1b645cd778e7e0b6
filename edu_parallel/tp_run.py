"""Parent side of :mod:`edu_parallel.tp`: the job, the dense check, bytes from the trace, the report.

Modes (the layers of Megatron's MLP, arXiv 1909.08053 §3, with ``ffn`` = 4h by default):

* ``column``: ``nn.Linear(h, ffn)`` column-parallel, X (b, s, h) replicated;
* ``row``: ``nn.Linear(ffn, h)`` row-parallel, X (b, s, ffn) split along its last dim;
* ``mlp``: both, with GeLU between; ``mlp-sp``: the same with sequence parallelism
  (Korthikanti et al. 2022, arXiv 2205.05198 §4.2.2), X and Y split along the sequence.

``rule="syllabus"`` (column and row only, forward only) applies the collectives the course outline
names (errata E4): all-reduce after the column layer, all-gather after the row layer.

Every rank builds the same full weights, input and upstream gradient dY from ``seed`` (as if rank
0 had broadcast them), keeps its shard, runs forward and ``backward(dY)``, and returns its pieces.
The parent compares each rank's Y, dX, dW and db with the same block of a dense ``nn.Linear`` run
on one process (``torch.allclose`` with :data:`TOLERANCES`; float64 by default). Bytes: the
trace's collective events converted to ring volume by :func:`~edu_parallel.zero_report.ring_sent_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .tp import SEQ_DIM, megatron_mlp, own_block, row_parallel_linear, shard_linear
from .tp_model import (
    MODES,
    RULES,
    TOLERANCES,
    allreduce_message_bytes,
    check_tp_args,
    expected_collectives,
    short_op,
    tp_sent_bytes,
)
from .trace import Trace
from .zero_report import ring_sent_bytes

__all__ = ["MODES", "RULES", "TPReport", "check_tp_args", "dense_reference", "format_tp",
           "make_problem", "run_tp", "tp_job", "tp_runner", "tp_sent_bytes"]  # fmt: skip

DTYPES = {"float64": torch.float64, "float32": torch.float32}


def make_problem(mode: str, batch: int, seq: int, hidden: int, ffn: int, seed: int, dtype: str) -> dict[str, torch.Tensor]:  # fmt: skip
    """Full weights (``nn.Linear`` layout), input X and upstream gradient dY, from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    dt = DTYPES[dtype]

    def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dt)

    p: dict[str, torch.Tensor] = {}
    if mode != "row":  # fc1 = nn.Linear(h, ffn): W1 (ffn, h)
        p["w1"], p["b1"] = rand(ffn, hidden, scale=hidden**-0.5), rand(ffn, scale=0.1)
    if mode != "column":  # fc2 = nn.Linear(ffn, h): W2 (h, ffn)
        p["w2"], p["b2"] = rand(hidden, ffn, scale=ffn**-0.5), rand(hidden, scale=0.1)
    p["x"] = rand(batch, seq, ffn if mode == "row" else hidden)
    p["dy"] = rand(batch, seq, ffn if mode == "column" else hidden)
    return p


def dense_reference(mode: str, p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same forward and backward with dense ``nn.Linear`` layers on one process."""
    from .tp import dense_mlp

    def linear(w: torch.Tensor, b: torch.Tensor) -> torch.nn.Linear:
        lin = torch.nn.Linear(w.shape[1], w.shape[0], dtype=w.dtype)
        with torch.no_grad():
            lin.weight.copy_(w)
            lin.bias.copy_(b)
        return lin

    x = p["x"].clone().requires_grad_()
    fc1 = linear(p["w1"], p["b1"]) if "w1" in p else None
    fc2 = linear(p["w2"], p["b2"]) if "w2" in p else None
    if fc1 is not None and fc2 is not None:
        y = dense_mlp(x, fc1, fc2)
    else:
        y = (fc1 or fc2)(x)  # type: ignore[misc]
    y.backward(p["dy"])
    out = {"y": y.detach(), "dx": x.grad}
    for name, lin in (("1", fc1), ("2", fc2)):
        if lin is not None:
            out["dw" + name], out["db" + name] = lin.weight.grad, lin.bias.grad
    return out


def tp_job(ctx: Any, mode: str, batch: int, seq: int, hidden: int, ffn: int, seed: int,
           dtype: str = "float64", rule: str = "megatron", gather_output: bool = False) -> dict[str, Any]:  # fmt: skip
    """On every rank: shard, forward, ``backward(dY)``; returns this rank's pieces."""
    from .tp import GatherFromTensorParallel, all_gather, all_reduce, column_parallel_linear

    r, t = ctx.rank, ctx.world_size
    p = make_problem(mode, batch, seq, hidden, ffn, seed, dtype)
    ctx.tracer.where(f"tp {mode}: forward")
    leaves: dict[str, torch.Tensor] = {}

    def leaf(name: str, x: torch.Tensor | None) -> torch.Tensor | None:
        if x is not None:
            leaves[name] = x.requires_grad_()
        return x

    w1, b1 = shard_linear(p["w1"], p["b1"], r, t, "column") if "w1" in p else (None, None)
    w2, b2 = shard_linear(p["w2"], p["b2"], r, t, "row") if "w2" in p else (None, None)
    x_in = p["x"]
    if mode == "row":
        x_in = own_block(x_in, r, t, -1)  # (b, s, ffn/t): X split along its last dim
    elif mode == "mlp-sp":
        x_in = own_block(x_in, r, t, SEQ_DIM)  # (b, s/t, h): the rank's sequence block
    if rule == "syllabus":  # errata E4, forward only: the collective the outline names
        with torch.no_grad():
            if mode == "column":  # slices of Y summed: (b, s, ffn/t)
                local = column_parallel_linear(ctx, x_in, w1, b1, step=1)
                y = all_reduce(ctx, local, "forward", 1)
            else:  # partial sums concatenated: (b, s, t*h)
                local = torch.nn.functional.linear(x_in, w2)  # (b, s, ffn/t) @ (ffn/t, h)
                y = all_gather(ctx, local, -1, "forward", 1)
        return {"y": y, "local": local}
    x = leaf("dx", x_in.clone())
    for name, tensor in (("dw1", w1), ("db1", b1), ("dw2", w2), ("db2", b2)):
        leaf(name, tensor)
    cap: dict[str, torch.Tensor] = {}
    if mode == "column":
        local = column_parallel_linear(ctx, x, w1, b1, step=1)  # (b, s, ffn/t)
        y = GatherFromTensorParallel.apply(local, ctx, 1, None) if gather_output else local
        dy = p["dy"] if gather_output else own_block(p["dy"], r, t, -1)
    elif mode == "row":
        y = row_parallel_linear(ctx, x, w2, b2, step=1, capture=cap)  # (b, s, h)
        local, dy = cap["partial"], p["dy"]
    else:
        sp = mode == "mlp-sp"
        y = megatron_mlp(ctx, x, w1, b1, w2, b2, sequence_parallel=sp, step=1, capture=cap)
        local, dy = cap["partial"], own_block(p["dy"], r, t, SEQ_DIM) if sp else p["dy"]
    ctx.tracer.where(f"tp {mode}: backward")
    y.backward(dy)
    out = {name: v.grad.detach().clone() for name, v in leaves.items()}
    return {**out, "y": y.detach(), "local": local.detach()}


def expected_piece(mode: str, name: str, dense: dict[str, torch.Tensor], rank: int, t: int,
                   gather_output: bool = False) -> torch.Tensor | None:  # fmt: skip
    """What rank ``rank`` must hold of the dense result ``name``; None: the SUM over ranks must equal it."""
    full = dense[name]
    if name in ("dw1", "db1"):
        return shard_linear(dense["dw1"], dense["db1"], rank, t, "column")[name == "db1"]
    if name == "dw2":
        return shard_linear(full, None, rank, t, "row")[0]
    if mode == "mlp-sp":
        return None if name == "db2" else own_block(full, rank, t, SEQ_DIM)
    if (name == "y" and mode == "column" and not gather_output) or (name == "dx" and mode == "row"):
        return own_block(full, rank, t, -1)
    return full


def classify_local(locals_: list[torch.Tensor], full: torch.Tensor, rtol: float, atol: float) -> list[str]:  # fmt: skip
    """What each rank's output was BEFORE its collective: "full", "slice" (block r of the last
    dim), "partial_sum" (full shape, and the ranks' sum is Y) or "other"."""
    t = len(locals_)

    def close(a: torch.Tensor, b: torch.Tensor) -> bool:
        return a.shape == b.shape and torch.allclose(a, b, rtol=rtol, atol=atol)

    same = all(loc.shape == full.shape for loc in locals_)
    summed = same and close(torch.stack(locals_).sum(0), full)
    kinds = []
    for r, loc in enumerate(locals_):
        block = own_block(full, r, t, -1) if full.shape[-1] % t == 0 else None
        if close(loc, full):
            kinds.append("full")
        elif block is not None and close(loc, block):
            kinds.append("slice")
        else:
            kinds.append("partial_sum" if summed else "other")
    return kinds


@dataclass
class TPReport:
    """What the lesson and ``edu-parallel run tp`` show for one tensor-parallel run."""

    mode: str
    rule: str
    world_size: int
    batch: int
    seq: int
    hidden: int
    ffn: int
    dtype: str
    seed: int
    gather_output: bool
    matches_dense: bool
    max_abs_diff: dict[str, float | None]  # None: the shapes differ
    rtol: float
    atol: float
    forward_collectives: list[str]
    backward_collectives: list[str]
    expected_forward: list[str]
    expected_backward: list[str]
    same_collectives_on_every_rank: bool
    collectives: list[dict[str, Any]]  # rank 0, in order: op, traced_op, phase, nbytes, sent_bytes
    per_rank_sent_bytes: list[float]  # ring volume from the trace, forward + backward
    per_rank_sent_bytes_by_phase: list[dict[str, float]]
    message_bytes_formula: int  # b*s*h*itemsize
    sent_bytes_formula: float | None  # tp_sent_bytes (Megatron's rule only)
    local_output_kind: list[str]
    local_output_shape: list[int]
    output_shape: list[int]
    dense_output_shape: list[int]
    trace: Trace = field(repr=False)

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        return self.matches_dense

    def to_json_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "trace"}
        return {"concept": "tp", **data}


def run_tp(cluster: Any, mode: str = "mlp", batch: int = 2, seq: int = 4, hidden: int = 8,
           ffn: int | None = None, seed: int = 0, dtype: str = "float64", rule: str = "megatron",
           gather_output: bool = False) -> TPReport | None:  # fmt: skip
    """Run ``mode`` on every rank of ``cluster`` (TP degree = its world size) and check it."""
    args = check_tp_args(mode, cluster.world_size, batch, seq, hidden, ffn, seed, dtype, rule, gather_output)  # fmt: skip
    mode, t, batch, seq, hidden, ffn, seed, dtype, rule, gather_output = args
    out = cluster.run(tp_job, mode, batch, seq, hidden, ffn, seed, dtype, rule, gather_output)
    if out is None:  # a non-zero rank under torchrun
        return None
    rtol, atol = TOLERANCES[dtype]
    problem = make_problem(mode, batch, seq, hidden, ffn, seed, dtype)
    dense = dense_reference(mode, problem)
    res = out.results
    diffs: dict[str, float | None] = {}
    ok = True
    for name in [k for k in res[0] if k != "local"]:
        if rule == "syllabus":  # the outline claims its collective yields the full Y
            pieces = [dense[name]] * t
        else:
            pieces = [expected_piece(mode, name, dense, r, t, gather_output) for r in range(t)]
        if any(pc is None for pc in pieces):
            got, want = [torch.stack([rr[name] for rr in res]).sum(0)], [dense[name]]
        else:
            got, want = [rr[name] for rr in res], pieces
        if any(a.shape != b.shape for a, b in zip(got, want, strict=True)):
            diffs[name], ok = None, False
            continue
        diffs[name] = max(float((a - b).abs().max()) for a, b in zip(got, want, strict=True))
        ok = ok and all(torch.allclose(a, b, rtol=rtol, atol=atol) for a, b in zip(got, want, strict=True))  # fmt: skip
    ev = sorted((e for e in out.trace.events if e.kind == "collective"), key=lambda e: (e.rank, e.start))  # fmt: skip
    seqs = [[(e.op, e.phase, e.nbytes) for e in ev if e.rank == r] for r in range(t)]
    colls = [{"op": short_op(e.op), "traced_op": e.op, "phase": e.phase, "nbytes": e.nbytes,
              "sent_bytes": float(ring_sent_bytes(e.op, e.nbytes, t))} for e in ev if e.rank == 0]  # fmt: skip
    by_phase = [{"forward": 0.0, "backward": 0.0} for _ in range(t)]
    for e in ev:
        by_phase[e.rank][e.phase] += ring_sent_bytes(e.op, e.nbytes, t)
    itemsize = torch.empty(0, dtype=DTYPES[dtype]).element_size()
    fwd, bwd = expected_collectives(mode, gather_output, rule)
    # What the collective after the local matmul must produce: Y, less the row bias added after it.
    reduced = dense["y"] - problem["b2"] if "b2" in problem else dense["y"]
    out.trace.meta.update({"concept": "tp", "mode": mode, "rule": rule, "world_size": t})
    return TPReport(
        mode=mode, rule=rule, world_size=t, batch=batch, seq=seq, hidden=hidden, ffn=ffn,
        dtype=dtype, seed=seed, gather_output=gather_output, matches_dense=ok, max_abs_diff=diffs,
        rtol=rtol, atol=atol, forward_collectives=[c["op"] for c in colls if c["phase"] == "forward"],
        backward_collectives=[c["op"] for c in colls if c["phase"] == "backward"],
        expected_forward=fwd, expected_backward=bwd,
        same_collectives_on_every_rank=all(s == seqs[0] for s in seqs), collectives=colls,
        per_rank_sent_bytes=[sum(d.values()) for d in by_phase], per_rank_sent_bytes_by_phase=by_phase,
        message_bytes_formula=allreduce_message_bytes(batch, seq, hidden, itemsize),
        sent_bytes_formula=tp_sent_bytes(mode, t, batch, seq, hidden, itemsize, ffn, gather_output) if rule == "megatron" else None,
        local_output_kind=classify_local([rr["local"] for rr in res], reduced, rtol, atol),
        local_output_shape=list(res[0]["local"].shape), output_shape=list(res[0]["y"].shape),
        dense_output_shape=list(dense["y"].shape), trace=out.trace,
    )  # fmt: skip


def format_tp(report: TPReport) -> str:
    """Readable output: the check, the collectives by pass, the bytes against the formula."""
    r = report
    what = {"column": "column-parallel nn.Linear(h, ffn)", "row": "row-parallel nn.Linear(ffn, h)",
            "mlp": "Megatron MLP (column -> GeLU -> row)", "mlp-sp": "Megatron MLP with sequence parallelism"}[r.mode]  # fmt: skip
    rule = "" if r.rule == "megatron" else " with the SYLLABUS's collectives (errata E4)"
    diffs = ", ".join(f"{k} {'shape differs' if v is None else f'{v:.1e}'}" for k, v in r.max_abs_diff.items())  # fmt: skip
    lines = [
        f"{what}{rule} on {r.world_size} ranks: b={r.batch} s={r.seq} h={r.hidden} ffn={r.ffn} {r.dtype}",
        f"matches a dense nn.Linear on one process: {'yes' if r.matches_dense else 'NO'} "
        f"(max |diff|: {diffs}; allclose rtol={r.rtol:g} atol={r.atol:g})",
        f"output shape {r.output_shape} (dense {r.dense_output_shape}); before its collective each rank "
        f"held {r.local_output_shape}: {', '.join(sorted(set(r.local_output_kind)))}",
        f"forward collectives:  {r.forward_collectives or 'none'}   (expected {r.expected_forward or 'none'})",
        f"backward collectives: {r.backward_collectives or 'none'}   (expected {r.expected_backward or 'none'})",
    ]  # fmt: skip
    for c in r.collectives:
        lines.append(f"  {c['phase']:<8} {c['traced_op']:<22} message {c['nbytes']:>8,} B, rank 0 sends {c['sent_bytes']:>10,.1f} B")  # fmt: skip
    lines.append(f"sent per rank (ring volume from the trace): {[round(b, 1) for b in r.per_rank_sent_bytes]}")  # fmt: skip
    if r.sent_bytes_formula is not None:
        lines.append(f"formula: b*s*h*itemsize = {r.message_bytes_formula:,} B per all-reduce; "
                     f"per rank {r.sent_bytes_formula:,.1f} B")  # fmt: skip
    return "\n".join(lines)


def tp_runner(cluster: Any, **kwargs: Any) -> Any:
    """``run(mode, world_size) -> TPReport`` for predict-then-run quizzes: ``cluster`` when the
    world size matches, else a short-lived Cluster of that size."""

    def run(mode: str, world_size: int) -> TPReport | None:
        if world_size == cluster.world_size:
            return run_tp(cluster, mode, **kwargs)
        from .cluster import Cluster

        with Cluster(world_size, cluster.backend, timeout=cluster.timeout) as other:
            return run_tp(other, mode, **kwargs)

    return run
