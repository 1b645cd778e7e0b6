"""Parent side of :mod:`edu_parallel.zero.fsdp`: FSDP2 and ZeRO-3 on one cluster, compared.

* Parameters: FSDP2's full fp32 parameters after k steps against ZeRO-3's gathered master
  (:func:`edu_parallel.zero.report.run_zero`, stage 3) and the single-process
  reference (:func:`edu_parallel.task.mlp.reference_training`).
* Collectives: the rank-0 sequence of each run (op, pass, unit, bytes, prefetched or not), the
  number per step (the latency term: alpha per collective) and the bytes each rank sends per step
  by ring volume (:func:`edu_parallel.core.metrics.ring_sent_bytes`), against plain DP's
  ``2(N-1)/N * 2Psi`` (ZeRO §7: ZeRO-3 / FSDP with resharding move 1.5x).
* Memory: the peak bytes of all-gathered (unsharded) bf16 parameters alive at once per rank, from
  the ``gathered_params`` ledger of both traces: the largest unit (plus a prefetched one) for FSDP
  per layer, the whole model for ZeRO-3 and for FSDP with one unit (the wrapping granularity sets
  the peak: Zhao et al. 2023, "PyTorch FSDP", arXiv 2304.11277, §3.2, for FSDP1's wrapping, which
  FSDP2's ``fully_shard`` units keep; FSDP2's per-parameter sharding: the ``fully_shard`` docs and
  pytorch/pytorch#114299).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.errors import bad_value
from ..core.i18n import N_, _
from ..core.metrics import ring_sent_bytes
from ..core.schema import GATHERED_PARAMS
from ..core.trace import Trace
from ..core.width import fitted, ljust, rjust, width
from ..engine.executor import Executor
from ..task.mlp import DEFAULT_DIMS, DEFAULT_MICROBATCH, reference_training
from .config import FsdpConfig
from .fsdp import fsdp_job, require_fsdp2
from .report import max_abs
from .stages import zero_job

# "Matches" for fp32 parameters after k steps (measured on 816 params, 4 ranks, lr 1e-2, seed 0):
# * every element within OUTLIER_STEPS * lr * k: Adam moves an element by about lr per step
#   whatever the gradient's size, so two runs whose gradient signs disagree at every step
#   are at most ~2 lr apart per step; a stale parameter or a wrong shard breaks it at once;
# * at most MAX_OUTLIER_FRACTION of the elements beyond ATOL_PER_STEP * lr * k. FSDP2 averages
#   the bf16 gradients with ReduceOp.AVG inside gloo (its own summation order); ZeRO-3 and the
#   reference sum them in the engine's ring order. Where a summed gradient is near zero the two
#   roundings differ in sign and Adam turns that into a step of up to 2 lr; that element then
#   drifts. Measured max |diff| / lr: 0.001, 0.03, 0.04, 0.55, 1.8 after 1, 2, 3, 5, 8 steps, with
#   0, 0, 0, 1, 2 elements beyond 0.1 lr k. With 2 ranks a + b has one rounding and /2 is exact:
#   FSDP2 equals ZeRO-3 bit for bit.
ATOL_PER_STEP = 0.1
OUTLIER_STEPS = 2.0
MAX_OUTLIER_FRACTION = 0.01
ZERO3_UNIT = N_("whole model")  # ZeRO-3 here gathers one flat buffer of all layers


def fsdp_padded_numel(dims: Sequence[int], world_size: int) -> int:
    """Elements FSDP2 all-gathers for the whole model: every parameter's dim 0 rounded up to a
    multiple of N (``Shard(0)``, equal padded shards; the PyTorch ``fully_shard`` docs)."""
    n = world_size
    return sum(-(-b // n) * n * (a + 1) for a, b in zip(dims[:-1], dims[1:], strict=False))


def formula_sent_bytes(dims: Sequence[int], world_size: int, gathers_per_step: int) -> float:
    """Bytes a rank sends per step, ring volume: each all-gather and the reduce-scatter of 2 bytes
    per padded element move ``(N-1)/N * 2 P_fsdp``; ``gathers_per_step`` = 2 when the units are
    resharded after forward, 1 when not."""
    n = world_size
    return (gathers_per_step + 1) * (n - 1) / n * 2 * fsdp_padded_numel(dims, n)


def collective_rows(trace: Trace, rank: int = 0) -> list[dict[str, Any]]:
    """One rank's collectives in issue order: step, pass, op, unit, recorded bytes, bytes sent,
    prefetch.

    ``sent_bytes``: the ``send`` events inside the collective's span when the engine ran it as its
    own ring plan (ZeRO), else the ring volume of the torch collective (:func:`ring_sent_bytes`
    of :mod:`edu_parallel.zero.report`: FSDP's events record the OUTPUT tensor like
    ``ctx.collective``)."""

    sends = trace.select("send", rank=rank)
    rows = []
    for e in sorted(trace.select("collective", rank=rank), key=lambda e: e.start):
        inside = [s.nbytes for s in sends if e.start <= s.start <= e.end]
        attrs = e.attrs or {}
        sent = sum(inside) if inside else ring_sent_bytes(e.op, e.nbytes, trace.world_size)
        rows.append(
            {
                "step": e.step,
                "pass": e.phase,
                "op": e.op,
                "unit": attrs.get("unit", ZERO3_UNIT),
                "nbytes": e.nbytes,
                "sent_bytes": sent,
                "prefetch": bool(attrs.get("prefetch", False)),
            }
        )
    return rows


def sent_bytes_per_step(trace: Trace, steps: int) -> list[list[float]]:
    """``[step-1][rank]`` bytes sent, from :func:`collective_rows` of every rank."""
    n = trace.world_size
    table = [[0.0] * n for _ in range(steps)]
    for r in range(n):
        for row in collective_rows(trace, r):
            if row["step"] is not None:
                table[row["step"] - 1][r] += row["sent_bytes"]
    return table


def peak_gathered_bytes(trace: Trace, world_size: int) -> list[int]:
    """Per rank, the peak of the running ``gathered_params`` bytes (the ledger's memory events)."""
    peaks = []
    for r in range(world_size):
        level = peak = 0
        for e in trace.select("memory", rank=r):
            if (e.attrs or {}).get("category") == GATHERED_PARAMS:
                level += e.nbytes
                peak = max(peak, level)
        peaks.append(peak)
    return peaks


@dataclass
class FsdpReport:
    """FSDP2 against ZeRO-3 on the same ranks, model, data and optimizer."""

    granularity: str
    reshard_after_forward: bool | None
    forward_prefetch: bool
    world_size: int
    steps: int
    lr: float
    seed: int
    dims: tuple[int, ...]
    psi: int
    units: list[str]
    fsdp_padded_numel: int  # elements all-gathered per gather of every unit (dim-0 padding)
    zero3_padded_numel: int  # ZeRO-3's flat buffer, Psi rounded up to a multiple of N
    matches_zero3: bool
    max_abs_diff_zero3: float
    matches_reference: bool
    max_abs_diff_reference: float
    tolerance: float  # ATOL_PER_STEP * lr * steps
    outlier_tolerance: float  # OUTLIER_STEPS * lr * steps: no element may differ more
    elements_beyond_tolerance: dict[str, int]  # {"zero3": ..., "reference": ...}
    collectives: dict[str, list[dict[str, Any]]]  # {"fsdp": rows, "zero3": rows}, rank 0
    collectives_per_step: dict[str, float]
    per_rank_sent_bytes: list[float]  # FSDP, per step (mean over steps), ring volume
    zero3_per_rank_sent_bytes: list[float]
    formula_sent_bytes: float  # formula_sent_bytes(...) for this configuration
    dp_sent_bytes_per_step: float
    comm_ratio_vs_dp: float
    zero3_comm_ratio_vs_dp: float
    per_rank_peak_gathered_bytes: list[int]  # FSDP: unsharded bf16 params alive at once
    zero3_per_rank_peak_gathered_bytes: list[int]
    losses: list[float]
    zero3_losses: list[float]
    trace: Trace = field(repr=False)
    zero3_trace: Trace = field(repr=False)

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        return self.matches_zero3 and self.matches_reference

    def to_json_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("trace", "zero3_trace")}
        data["dims"] = list(self.dims)
        return {"concept": "fsdp", **data}


def run_fsdp(
    cluster: Executor,
    steps: int = 2,
    lr: float = 1e-2,
    seed: int = 0,
    granularity: str = "layer",
    reshard_after_forward: bool | None = True,
    forward_prefetch: bool = False,
    dims: Sequence[int] = DEFAULT_DIMS,
    microbatch: int = DEFAULT_MICROBATCH,
) -> FsdpReport | None:
    """Train with FSDP2 (``fully_shard``) and with ZeRO-3 on ``cluster``; compare params and
    traffic. The options (see :class:`~edu_parallel.zero.config.FsdpConfig`) are checked here,
    once, before any process starts; :func:`run_fsdp_config` runs them.

    ``granularity``: "layer" (one unit per Linear, plus the root, which then holds no parameters)
    or "model" (the root only). ``reshard_after_forward``: passed to every ``fully_shard`` call
    (None: torch's default, True except for the root). ``forward_prefetch``: unit k's forward also
    all-gathers unit k+1. Raises :class:`~edu_parallel.zero.fsdp.FsdpUnavailableError` when
    the installed torch has no FSDP2.
    """
    config = FsdpConfig(
        cluster.world_size,
        steps,
        lr,
        seed,
        granularity,
        reshard_after_forward,
        forward_prefetch,
        dims,
        microbatch,
    )
    return run_fsdp_config(cluster, config)


def run_fsdp_config(cluster: Executor, config: FsdpConfig) -> FsdpReport | None:
    """Run ``config`` with FSDP2 and ``config.zero3`` with ZeRO-3 on ``cluster``; the config is
    trusted (it was checked when it was built)."""
    require_fsdp2()
    n = cluster.world_size
    if n != config.world_size:
        valid = _("{n}, the executor's ranks").format(n=n)
        raise bad_value("config.world_size", config.world_size, valid)
    out = cluster.run(fsdp_job, config)
    z3 = cluster.run(zero_job, config.zero3, False)
    if out is None or z3 is None:  # a non-zero rank under torchrun
        return None
    steps, lr, seed, dims = config.steps, config.lr, config.seed, config.dims
    granularity, reshard_after_forward = config.granularity, config.reshard_after_forward
    for t, concept in ((out.trace, "fsdp"), (z3.trace, "zero")):
        t.meta.update({"concept": concept, "world_size": n, "steps": steps})
    psi = config.zero3.psi
    ref = reference_training(dims, n, config.microbatch, steps, lr, seed)
    ref = ref[0] if isinstance(ref, tuple) else ref  # (Psi,) fp32 (older versions: + a mask)
    tol, outlier = ATOL_PER_STEP * lr * steps, OUTLIER_STEPS * lr * steps
    params = [res["params"] for res in out.results]  # (Psi,) fp32, full, on every rank
    master = z3.results[0]["master"]  # (Psi,) ZeRO-3's gathered fp32 master

    same = all(torch.equal(p, params[0]) for p in params)
    others = {"zero3": master, "reference": ref}
    beyond = {k: int(((params[0] - v).abs() > tol).sum()) for k, v in others.items()}
    close = {
        k: same and max_abs(params[0] - v) <= outlier and beyond[k] <= MAX_OUTLIER_FRACTION * psi
        for k, v in others.items()
    }
    sent, z3_sent = (
        [sum(row[r] for row in t) / steps for r in range(n)]
        for t in (sent_bytes_per_step(x.trace, steps) for x in (out, z3))
    )
    rows = {"fsdp": collective_rows(out.trace), "zero3": collective_rows(z3.trace)}
    dp = 2 * (n - 1) / n * 2 * psi  # DP: ring all-reduce of 2 Psi bytes of bf16 grads
    ratio = (lambda s: sum(s) / n / dp) if n > 1 else (lambda s: math.nan)
    out.trace.meta.update(
        {"psi": psi, "granularity": granularity, "reshard_after_forward": reshard_after_forward}
    )
    return FsdpReport(
        granularity=granularity,
        reshard_after_forward=reshard_after_forward,
        forward_prefetch=config.forward_prefetch,
        world_size=n,
        steps=steps,
        lr=lr,
        seed=seed,
        dims=dims,
        psi=psi,
        units=list(out.results[0]["units"]),
        fsdp_padded_numel=fsdp_padded_numel(dims, n),
        zero3_padded_numel=int(z3.results[0]["padded_numel"]),
        matches_zero3=close["zero3"],
        max_abs_diff_zero3=max_abs(params[0] - master),
        matches_reference=close["reference"],
        max_abs_diff_reference=max_abs(params[0] - ref),
        tolerance=tol,
        outlier_tolerance=outlier,
        elements_beyond_tolerance=beyond,
        collectives=rows,
        collectives_per_step={k: len(v) / steps for k, v in rows.items()},
        per_rank_sent_bytes=sent,
        zero3_per_rank_sent_bytes=z3_sent,
        formula_sent_bytes=formula_sent_bytes(dims, n, config.gathers_per_step),
        dp_sent_bytes_per_step=dp,
        comm_ratio_vs_dp=ratio(sent),
        zero3_comm_ratio_vs_dp=ratio(z3_sent),
        per_rank_peak_gathered_bytes=peak_gathered_bytes(out.trace, n),
        zero3_per_rank_peak_gathered_bytes=peak_gathered_bytes(z3.trace, n),
        losses=list(out.results[0]["losses"]),
        zero3_losses=list(z3.results[0]["losses"]),
        trace=out.trace,
        zero3_trace=z3.trace,
    )


@fitted
def format_fsdp(report: FsdpReport) -> str:
    """Readable output: the checks, then collectives and bytes per step for ZeRO-3 and FSDP."""
    r, n = report, report.world_size
    raf = {True: "True", False: "False", None: _("None (torch default)")}[r.reshard_after_forward]
    yes, no = _("yes"), _("NO")
    ratio_w = max(7, width(_("vs DP")) + 2)  # the header keeps two spaces in either language
    lines = [
        _(
            "FSDP2 fully_shard on {n} ranks, granularity {granularity} (units: {units}),"
            " reshard_after_forward={raf}, forward_prefetch={prefetch}; {steps} steps of Adam"
        ).format(
            n=n,
            granularity=repr(r.granularity),
            units=", ".join(r.units),
            raf=raf,
            prefetch=r.forward_prefetch,
            steps=r.steps,
        ),
        _("{first};  {second};  {third}").format(
            first=_("matches ZeRO-3: {ok} (max |diff| {diff})").format(
                ok=yes if r.matches_zero3 else no, diff=f"{r.max_abs_diff_zero3:.2e}"
            ),
            second=_("matches one process: {ok} (max |diff| {diff})").format(
                ok=yes if r.matches_reference else no, diff=f"{r.max_abs_diff_reference:.2e}"
            ),
            third=_(
                "tolerance {tol} ({beyond} elements beyond it; any element at most {outlier})"
            ).format(
                tol=f"{r.tolerance:.1e}",
                beyond=r.elements_beyond_tolerance["zero3"],
                outlier=f"{r.outlier_tolerance:.1e}",
            ),
        ),
        "",
        " " * 8
        + rjust(_("collectives/step"), 17)
        + rjust(_("sent per rank/step"), 20)
        + rjust(_("vs DP"), ratio_w)
        + rjust(_("peak gathered"), 15),
    ]
    for name, k, sent, ratio, peak in (
        (
            "ZeRO-3",
            "zero3",
            r.zero3_per_rank_sent_bytes,
            r.zero3_comm_ratio_vs_dp,
            r.zero3_per_rank_peak_gathered_bytes,
        ),
        ("FSDP", "fsdp", r.per_rank_sent_bytes, r.comm_ratio_vs_dp, r.per_rank_peak_gathered_bytes),
    ):
        lines.append(
            f"{name:<8}{r.collectives_per_step[k]:>17g}{max(sent):>18,.0f}"
            f" B{ratio:>{ratio_w}.2f}{max(peak):>13,} B"
        )
    lines += ["", _("step 1, rank 0, in issue order:")]
    for k in ("zero3", "fsdp"):
        for row in (x for x in r.collectives[k] if x["step"] == 1):
            pre = "  " + _("(prefetch)") if row["prefetch"] else ""
            sizes = _("{nbytes} B out {sent} B sent").format(
                nbytes=f"{row['nbytes']:>6}", sent=f"{row['sent_bytes']:>8,.0f}"
            )
            unit = _(row["unit"]) if row["unit"] == ZERO3_UNIT else row["unit"]  # JSON: English
            lines.append(
                f"  {k:<6} {row['pass'] or '-':<13} {row['op']:<22} {ljust(unit, 12)} {sizes}{pre}"
            )
    return "\n".join(lines)
