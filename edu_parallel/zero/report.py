"""Parent side of :mod:`edu_parallel.zero.stages`: run a stage, check it, read the trace.

* Memory: the trace's ``memory`` events of each rank are replayed in order into running sums per
  category; the peak of the model-state sum (params16 + grads16 + master + m + v) is compared with
  Rajbhandari et al. 2019 (arXiv 1910.02054) §3.1 / §5 scaled by Psi (errata E8).
* Bytes: the stages run the engine's ring plans, so every byte a rank sends is a ``send`` event;
  :func:`sent_per_step` adds them up per training step. Per step DP sends ``2(N-1)/N * 2P``
  (all-reduce of the bf16 gradient bucket, P = Psi padded to a multiple of N); ZeRO-1/2 the same
  (reduce-scatter + all-gather, ``(N-1)/N * 2P`` each), ZeRO-3 1.5x (ZeRO §7; errata E7).
  :func:`~edu_parallel.core.metrics.ring_sent_bytes` gives the same volume for a torch builtin's
  ``collective`` event, which records only the size of the buffer it was given (``all_reduce`` S,
  ``reduce_scatter`` its OUTPUT shard S/N, ``all_gather`` its OUTPUT S), e.g. the collectives FSDP2
  issues.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.errors import bad_value, check_choice
from ..core.i18n import _
from ..core.schema import MODEL_STATE, ZERO_CATEGORIES
from ..core.trace import Trace
from ..core.units import format_bytes
from ..core.width import MAX_TEXT_COLUMNS, fitted, rjust, width
from ..engine.executor import Executor
from ..memory.model_states import ZERO_STAGE_NAMES
from ..task.mlp import (
    DEFAULT_DIMS,
    DEFAULT_MICROBATCH,
    formula_model_state_bytes,
    padded_numel,
    reference_training,
)
from .config import ZeroConfig
from .stages import zero_job

# allclose of the fp32 master weights after k steps: |a - b| <= ATOL_PER_STEP * lr * k. The ranks
# and the reference sum the bf16 gradients in the same ring order, so they agree bit for bit
# (reported as ``bitwise_equal_reference``); the tolerance only says how far "close" may go: a
# wrong shard, a missing average or a stale param differs by ~lr per element and fails it.
ATOL_PER_STEP = 0.1


def memory_curves(trace: Trace, world_size: int) -> list[dict[str, Any]]:
    """Replay each rank's memory events: peaks by category, peak model state, final levels."""
    out = []
    for r in range(world_size):
        level = dict.fromkeys(ZERO_CATEGORIES, 0)
        peak = dict.fromkeys(ZERO_CATEGORIES, 0)
        peak_state = peak_total = 0
        for e in trace.events:
            if e.kind != "memory" or e.rank != r:
                continue
            cat = (e.attrs or {}).get("category")
            check_choice("category", cat, ZERO_CATEGORIES)
            level[cat] += e.nbytes
            peak[cat] = max(peak[cat], level[cat])
            peak_state = max(peak_state, sum(level[c] for c in MODEL_STATE))
            peak_total = max(peak_total, sum(level.values()))
        out.append(
            {
                "peak_by_category": peak,
                "final_by_category": dict(level),
                "peak_model_state": peak_state,
                "peak_total": peak_total,
            }
        )
    return out


def sent_per_step(trace: Trace, world_size: int, steps: int) -> list[list[float]]:
    """``[step-1][rank]`` bytes sent: the sum of the trace's ``send`` events of each step."""
    table = [[0.0] * world_size for _ in range(steps)]
    for e in trace.events:
        if e.kind == "send" and e.step is not None:
            table[e.step - 1][e.rank] += e.nbytes
    return table


def max_abs(t: torch.Tensor) -> float:
    """``max |t|``, 0 for an empty tensor."""
    return float(t.abs().max()) if t.numel() else 0.0


@dataclass
class ZeroReport:
    """What a lesson and ``edu-parallel run zero`` show for one sharded-training run."""

    stage: int
    world_size: int
    steps: int
    lr: float
    seed: int
    dims: tuple[int, ...]
    psi: int
    padded_numel: int
    matches_reference: bool
    matches_dp: bool
    max_abs_diff_reference: float
    max_abs_diff_dp: float
    tolerance: float
    bitwise_equal_reference: bool  # every rank's master == the reference's, bit for bit
    per_rank_peak_model_state_bytes: list[int]
    formula_model_state_bytes: float  # per rank, with Psi (may be fractional)
    formula_model_state_bytes_padded: float  # the same formula with the padded length P
    padding_bytes_per_rank: float  # measured - formula(Psi): the gap from rounding uneven shards
    per_rank_peak_bytes_by_category: list[dict[str, int]]
    per_rank_final_bytes_by_category: list[dict[str, int]]
    per_rank_peak_total_bytes: list[int]
    per_rank_sent_bytes: list[float]  # per step (mean over steps), counted send events
    per_step_sent_bytes: list[list[float]]
    dp_sent_bytes_per_step: float
    comm_ratio_vs_dp: float
    losses: list[float]
    trace: Trace = field(repr=False)

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        return self.matches_reference and self.matches_dp

    def to_json_dict(self) -> dict[str, Any]:
        skip = {"trace"}
        data = {k: v for k, v in self.__dict__.items() if k not in skip}
        data["dims"] = list(self.dims)
        return {"concept": "zero", "stage_name": ZERO_STAGE_NAMES[self.stage], **data}


def run_zero(
    cluster: Executor,
    stage: int = 1,
    steps: int = 2,
    lr: float = 1e-2,
    seed: int = 0,
    dims: Sequence[int] = DEFAULT_DIMS,
    microbatch: int = DEFAULT_MICROBATCH,
) -> ZeroReport | None:
    """Train ``steps`` steps of ZeRO ``stage`` (0 = DP) on ``cluster`` and check it: the options
    become one :class:`~edu_parallel.zero.config.ZeroConfig` (checked here, before any process
    starts) for :func:`run_zero_config`."""
    config = ZeroConfig(cluster.world_size, stage, steps, lr, seed, dims, microbatch)
    return run_zero_config(cluster, config)


def run_zero_config(cluster: Executor, config: ZeroConfig) -> ZeroReport | None:
    """Run ``config`` on ``cluster`` (its world size) and check it; the config is trusted.

    ``matches_reference``: the gathered fp32 master weights equal a single-process run of the same
    mixed-precision Adam on the global batch within ``ATOL_PER_STEP * lr * steps`` (absolute);
    ``matches_dp``: the same against plain DP run on the same ranks (untraced).
    """
    n = cluster.world_size
    if n != config.world_size:
        valid = _("{n}, the executor's ranks").format(n=n)
        raise bad_value("config.world_size", config.world_size, valid)
    out = cluster.run(zero_job, config)
    if out is None:  # a non-zero rank under torchrun
        return None
    stage, steps, lr, seed, dims = config.stage, config.steps, config.lr, config.seed, config.dims
    psi = config.psi
    p = psi if stage == 0 else padded_numel(psi, n)
    ref, _ambiguous = reference_training(dims, n, config.microbatch, steps, lr, seed)
    tol = ATOL_PER_STEP * lr * steps
    masters = [res["master"] for res in out.results]
    d_ref = max(max_abs(mm - ref) for mm in masters)
    d_dp = max(
        float((mm - res["dp_master"]).abs().max())
        for mm, res in zip(masters, out.results, strict=True)
    )
    same = all(torch.equal(mm, masters[0]) for mm in masters)
    mem = memory_curves(out.trace, n)
    per_step = sent_per_step(out.trace, n, steps)
    per_rank = [sum(row[r] for row in per_step) / steps for r in range(n)]
    dp_sent = 2 * (n - 1) / n * 2 * padded_numel(psi, n)  # all-reduce of the (P,) bf16 bucket
    formula = formula_model_state_bytes(stage, psi, n)
    peaks = [m["peak_model_state"] for m in mem]
    out.trace.meta.update({"concept": "zero", "stage": stage, "psi": psi, "padded_numel": p})
    return ZeroReport(
        stage=stage,
        world_size=n,
        steps=steps,
        lr=lr,
        seed=seed,
        dims=dims,
        psi=psi,
        padded_numel=p,
        matches_reference=same and d_ref <= tol,
        bitwise_equal_reference=same and all(torch.equal(mm, ref) for mm in masters),
        matches_dp=same and d_dp <= tol,
        max_abs_diff_reference=d_ref,
        max_abs_diff_dp=d_dp,
        tolerance=tol,
        per_rank_peak_model_state_bytes=peaks,
        formula_model_state_bytes=formula,
        formula_model_state_bytes_padded=formula_model_state_bytes(stage, p, n),
        padding_bytes_per_rank=max(peaks) - formula,
        per_rank_peak_bytes_by_category=[m["peak_by_category"] for m in mem],
        per_rank_final_bytes_by_category=[m["final_by_category"] for m in mem],
        per_rank_peak_total_bytes=[m["peak_total"] for m in mem],
        per_rank_sent_bytes=per_rank,
        per_step_sent_bytes=per_step,
        dp_sent_bytes_per_step=dp_sent,
        comm_ratio_vs_dp=(sum(per_rank) / n / dp_sent) if n > 1 else math.nan,
        losses=list(out.results[0]["losses"]),
        trace=out.trace,
    )


@fitted
def format_zero(report: ZeroReport) -> str:
    """Readable output: check, memory per rank by category against the formula, bytes per step."""
    r, n = report, report.world_size
    yes, no = _("yes"), _("NO")
    ref = (
        _("matches single-process reference: {ok} (max |diff| {diff}, bit for bit)")
        if r.bitwise_equal_reference
        else _("matches single-process reference: {ok} (max |diff| {diff})")
    ).format(ok=yes if r.matches_reference else no, diff=f"{r.max_abs_diff_reference:.2e}")
    dp = _("matches DP: {ok} (max |diff| {diff})").format(
        ok=yes if r.matches_dp else no, diff=f"{r.max_abs_diff_dp:.2e}"
    )
    tol = _("tolerance {tol} on fp32 master").format(tol=f"{r.tolerance:.1e}")
    lines = [
        _(
            "{stage} on {n} ranks: {steps} steps of mixed-precision Adam (lr {lr}), Psi = {psi}"
            " params, flat buffers padded to {padded} ({pad} pad)"
        ).format(
            stage=ZERO_STAGE_NAMES[r.stage],
            n=n,
            steps=r.steps,
            lr=f"{r.lr:g}",
            psi=r.psi,
            padded=r.padded_numel,
            pad=r.padded_numel - r.psi,
        ),
    ]
    checks = _("{first};  {second};  {third}").format(first=ref, second=dp, third=tol)
    lines += [checks] if width(checks) <= MAX_TEXT_COLUMNS else [ref, dp, tol]
    # one column per category, as wide as its name or its widest value: the table fits
    total = _("model state")
    cells = [
        [f"{r.per_rank_peak_bytes_by_category[k][c]:,}" for c in ZERO_CATEGORIES]
        + [f"{r.per_rank_peak_model_state_bytes[k]:,}"]
        for k in range(n)
    ]
    names = [*ZERO_CATEGORIES, total]
    widths = [max(width(name), *(len(row[i]) for row in cells)) for i, name in enumerate(names)]
    lines += [
        "",
        rjust(_("rank"), 4)
        + "".join(f"  {rjust(c, w)}" for c, w in zip(names, widths, strict=True)),
    ]
    for k, row in enumerate(cells):
        lines.append(f"{k:>4}" + "".join(f"  {v:>{w}}" for v, w in zip(row, widths, strict=True)))
    text = {0: "16 Psi", 1: "4 Psi + 12 Psi/N", 2: "2 Psi + 14 Psi/N", 3: "16 Psi/N"}[r.stage]
    lines.append(
        _(
            "formula (ZeRO §3.1/§5): {formula} = {bytes} B per rank; padding adds {padding} B"
        ).format(
            formula=text,
            bytes=f"{r.formula_model_state_bytes:,.1f}",
            padding=f"{r.padding_bytes_per_rank:,.1f}",
        )
    )
    lines.append("")
    sent = ", ".join(format_bytes(int(b)) for b in r.per_rank_sent_bytes)
    lines.append(_("sent per rank per step (send events in the trace): {sent}").format(sent=sent))
    lines.append(
        _(
            "DP sends 2(N-1)/N * 2P = {dp} B; ratio vs DP {ratio} (ZeRO §7: 1.0 for stages 1-2, 1.5"
            " for stage 3)"
        ).format(dp=f"{r.dp_sent_bytes_per_step:,.1f}", ratio=f"{r.comm_ratio_vs_dp:.3f}")
    )
    return "\n".join(lines)


def zero_runner(cluster: Executor, steps: int = 1) -> Any:
    """``run(stage, world_size) -> ZeroReport`` for predict-then-run quizzes: ``cluster`` when the
    world size matches, else a short-lived one of that size."""

    def run(stage: int, world_size: int) -> ZeroReport | None:
        with cluster.sized(world_size) as ranks:
            return run_zero(ranks, stage, steps=steps)

    return run
