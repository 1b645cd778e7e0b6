"""Parent side of tensor parallelism: run :func:`~edu_parallel.tensor_parallel.job.tp_job`, check
it against a dense layer, read the bytes off the trace, report.

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
on one process (``torch.allclose`` with
:data:`~edu_parallel.tensor_parallel.config.TOLERANCES`; float64 by default). The options are one
:class:`~edu_parallel.tensor_parallel.config.TPConfig`, checked where the run starts. Bytes: the
trace's collective events converted to ring volume by
:func:`~edu_parallel.core.metrics.ring_sent_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.errors import bad_value
from ..core.i18n import N_, _
from ..core.trace import Trace
from ..core.width import fitted
from ..engine.executor import Executor
from .config import TPConfig
from .formulas import (
    allreduce_message_bytes,
    expected_collectives,
    tp_sent_bytes,
    traced_collectives,
)
from .job import classify_local, dense_reference, expected_piece, problem_of, tp_job


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


def run_tp(
    cluster: Executor,
    mode: str = "mlp",
    batch: int = 2,
    seq: int = 4,
    hidden: int = 8,
    ffn: int | None = None,
    seed: int = 0,
    dtype: str = "float64",
    rule: str = "megatron",
    gather_output: bool = False,
) -> TPReport | None:
    """Run ``mode`` on every rank of ``cluster`` (TP degree = its world size) and check it: the
    options become one :class:`~edu_parallel.tensor_parallel.config.TPConfig` (checked here,
    before any process starts) for :func:`run_tp_config`."""
    config = TPConfig(
        cluster.world_size, mode, batch, seq, hidden, ffn, seed, dtype, rule, gather_output
    )
    return run_tp_config(cluster, config)


def run_tp_config(cluster: Executor, config: TPConfig) -> TPReport | None:
    """Run ``config`` on ``cluster`` and check it against the dense layer; the config is trusted."""
    t = cluster.world_size
    if t != config.world_size:
        valid = _("{n}, the executor's ranks").format(n=t)
        raise bad_value("config.world_size", config.world_size, valid)
    out = cluster.run(tp_job, config)
    if out is None:  # a non-zero rank under torchrun
        return None
    mode, rule, gather_output = config.mode, config.rule, config.gather_output
    rtol, atol = config.tolerances
    problem = problem_of(config)
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
        ok = ok and all(
            torch.allclose(a, b, rtol=rtol, atol=atol) for a, b in zip(got, want, strict=True)
        )
    seqs, colls, by_phase = traced_collectives(out.trace, t)
    b, s, h, itemsize = config.batch, config.seq, config.hidden, config.itemsize
    fwd, bwd = expected_collectives(mode, gather_output, rule)
    # What the collective after the local matmul must produce: Y, less the row bias added after it.
    reduced = dense["y"] - problem["b2"] if "b2" in problem else dense["y"]
    out.trace.meta.update({"concept": "tp", "mode": mode, "rule": rule, "world_size": t})
    return TPReport(
        mode=mode,
        rule=rule,
        world_size=t,
        batch=b,
        seq=s,
        hidden=h,
        ffn=config.ffn,
        dtype=config.dtype,
        seed=config.seed,
        gather_output=gather_output,
        matches_dense=ok,
        max_abs_diff=diffs,
        rtol=rtol,
        atol=atol,
        forward_collectives=[c["op"] for c in colls if c["phase"] == "forward"],
        backward_collectives=[c["op"] for c in colls if c["phase"] == "backward"],
        expected_forward=fwd,
        expected_backward=bwd,
        same_collectives_on_every_rank=all(s == seqs[0] for s in seqs),
        collectives=colls,
        per_rank_sent_bytes=[sum(d.values()) for d in by_phase],
        per_rank_sent_bytes_by_phase=by_phase,
        message_bytes_formula=allreduce_message_bytes(b, s, h, itemsize),
        sent_bytes_formula=(
            tp_sent_bytes(mode, t, b, s, h, itemsize, config.ffn, gather_output)
            if rule == "megatron"
            else None
        ),
        local_output_kind=classify_local([rr["local"] for rr in res], reduced, rtol, atol),
        local_output_shape=list(res[0]["local"].shape),
        output_shape=list(res[0]["y"].shape),
        dense_output_shape=list(dense["y"].shape),
        trace=out.trace,
    )


@fitted
def format_tp(report: TPReport) -> str:
    """Readable output: the check, the collectives by pass, the bytes against the formula."""
    r = report
    modes = {
        "column": N_("column-parallel nn.Linear(h, ffn)"),
        "row": N_("row-parallel nn.Linear(ffn, h)"),
        "mlp": N_("Megatron MLP (column -> GeLU -> row)"),
        "mlp-sp": N_("Megatron MLP with sequence parallelism"),
    }
    what = _(modes[r.mode])
    differs, none = _("shape differs"), _("none")
    diffs = ", ".join(
        f"{k} {differs if v is None else f'{v:.1e}'}" for k, v in r.max_abs_diff.items()
    )
    setting = _("{what} on {n} ranks: b={b} s={s} h={h} ffn={ffn} {dtype}")
    if r.rule != "megatron":
        setting = _(
            "{what} with the SYLLABUS's collectives (errata E4) on {n} ranks: b={b} s={s} h={h}"
            " ffn={ffn} {dtype}"
        )
    lines = [
        setting.format(
            what=what, n=r.world_size, b=r.batch, s=r.seq, h=r.hidden, ffn=r.ffn, dtype=r.dtype
        ),
        _(
            "matches a dense nn.Linear on one process: {ok} (max |diff|: {diffs}; allclose"
            " rtol={rtol} atol={atol})"
        ).format(
            ok=_("yes") if r.matches_dense else _("NO"),
            diffs=diffs,
            rtol=f"{r.rtol:g}",
            atol=f"{r.atol:g}",
        ),
        _(
            "output shape {shape} (dense {dense}); before its collective each rank held {local}:"
            " {kinds}"
        ).format(
            shape=r.output_shape,
            dense=r.dense_output_shape,
            local=r.local_output_shape,
            kinds=", ".join(sorted(set(r.local_output_kind))),
        ),
        _("forward collectives:  {got}   (expected {expected})").format(
            got=r.forward_collectives or none, expected=r.expected_forward or none
        ),
        _("backward collectives: {got}   (expected {expected})").format(
            got=r.backward_collectives or none, expected=r.expected_backward or none
        ),
    ]
    for c in r.collectives:
        lines.append(
            "  "
            + _("{phase} {op} message {nbytes} B, rank 0 sends {sent} B").format(
                phase=f"{c['phase']:<8}",
                op=f"{c['traced_op']:<22}",
                nbytes=f"{c['nbytes']:>8,}",
                sent=f"{c['sent_bytes']:>10,.1f}",
            )
        )
    lines.append(
        _("sent per rank (ring volume from the trace): {sent}").format(
            sent=[round(b, 1) for b in r.per_rank_sent_bytes]
        )
    )
    if r.sent_bytes_formula is not None:
        lines.append(
            _("formula: b*s*h*itemsize = {message} B per all-reduce; per rank {sent} B").format(
                message=f"{r.message_bytes_formula:,}", sent=f"{r.sent_bytes_formula:,.1f}"
            )
        )
    return "\n".join(lines)


def tp_runner(cluster: Executor, **kwargs: Any) -> Any:
    """``run(mode, world_size) -> TPReport`` for predict-then-run quizzes: ``cluster`` when the
    world size matches, else a short-lived one of that size."""

    def run(mode: str, world_size: int) -> TPReport | None:
        with cluster.sized(world_size) as ranks:
            return run_tp(ranks, mode, **kwargs)

    return run
