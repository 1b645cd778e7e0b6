"""Parent side of gradient compression: run a compressor, check it, read its cost off the trace.

:func:`run_compress_config` takes a :class:`~edu_parallel.compression.config.CompressConfig`
(:func:`run_compress` builds it, once, from keyword options, before any process starts), trains
the classifier task with the compressor's hook on lesson 06's trainer, and reports, from the
trace and the ranks' results:

* wire bytes per rank per step (every ``send`` of phase ``grad_sync``), the formula
  :func:`~edu_parallel.compression.config.wire_bytes_per_step` beside it, and the
  compression ratio against DDP's fp32 all-reduce;
* the compressor's own compute (``compress`` / ``decompress`` events) per step;
* training loss per step (mean over ranks), held-out loss and accuracy per step, the steps to the
  task's target, and the residual's norm per step (``compress`` marks);
* against torch's hook where torch has one (``fp16_compress_hook``, ``powerSGD_hook``): both
  train :data:`COMPARE_STEPS` steps on the same ranks, untraced, and their parameters must agree
  within :data:`TORCH_RTOL` of the largest parameter. On 2 ranks (a sum of two has one order)
  fp16 and PowerSGD at ranks 1 and 3 agree bit for bit; at rank 2 PowerSGD sometimes differs in
  the last bits (up to 1.5e-8 after 8 steps), and not the same from run to run: the
  orthogonalisation, the seeds and the sums are equal, which leaves the BLAS kernel of the
  ``(1, n, m) @ (1, m, 2)`` products (MKL picks kernels by memory alignment unless its
  conditional numerical reproducibility is switched on). On more ranks gloo's
  all-reduce adds in another order than our ring, which changes the last bit of an fp32 sum
  and, for fp16, the last of 11 bits of every element.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..core.errors import bad_value
from ..core.i18n import _
from ..core.schema import COMPRESS_MARK, COMPRESS_PHASE, GRAD_SYNC, STEP_END_MARK, STEP_START_MARK
from ..core.trace import Trace
from ..core.width import fitted
from ..data_parallel.ddp import CommHook, allreduce_mean_hook, train_ddp
from ..engine.context import RankContext
from ..engine.executor import Executor
from ..task.classifier import steps_to_target
from ..task.targets import TARGET_ACCURACY
from .compressors import COMPRESSORS
from .config import CompressConfig, Method, dense_bytes_per_step, wire_bytes_per_step
from .powersgd import PowerSGD
from .torch_hooks import has_torch_reference, torch_hook_run
from .whatif import Measured

COMPARE_STEPS = 8  # steps of the side-by-side run against torch's hook
# per method, relative to the largest parameter: another order of additions in fp32, or of
# fp16 additions (unit roundoff 2^-11 per step, carried through the training steps)
TORCH_RTOL = {"fp16": 1e-3, "bf16": 1e-2, "powersgd": 1e-5}


def make_hook(config: CompressConfig) -> CommHook:
    """The communication hook of ``config.method`` (``none``: DDP's mean all-reduce)."""
    if config.method == "none":
        return allreduce_mean_hook
    if config.method == "powersgd":
        return PowerSGD(config)
    return COMPRESSORS[config.method](config)


def compress_job(
    ctx: RankContext, config: CompressConfig, short: CompressConfig | None
) -> dict[str, Any]:
    """On every rank: train with the compressor (traced); then, untraced, ours and torch's hook
    for the ``short`` run (None: no comparison). Only rank 0 returns parameters."""
    out = train_ddp(ctx, config.ddp(), make_hook(config))
    res = {k: out[k] for k in ("losses", "evals", "digests")}
    if short is not None:
        with ctx.tracer.paused():
            ours = train_ddp(ctx, short.ddp(), make_hook(short))
            ref = torch_hook_run(ctx, short)
        if ctx.rank == 0:
            res.update(short_ours=ours["params"], short_torch=ref["params"])
    return res


@dataclass
class CompressReport:
    """What lesson 13 and ``edu-parallel run compress`` show for one compressor."""

    config: CompressConfig = field(repr=False)
    wire_bytes_per_step: float  # mean over ranks and steps, counted from the trace
    per_rank_wire_bytes: list[float]
    formula_wire_bytes: float
    dense_bytes_per_step: float  # DDP's fp32 ring all-reduce: 2(N-1)/N * 4 Psi
    compression_ratio: float
    messages_per_step: float
    compress_s_per_step: float  # the compressor's own compute, mean over ranks
    step_time_s: float
    losses: list[float]  # training loss per step, mean over ranks
    heldout_losses: list[float]
    accuracies: list[float]
    final_loss: float  # held-out loss after the last step
    final_accuracy: float
    steps_to_target: int | None
    residual_norms: list[float]  # rank 0, per step (0 without error feedback's memory)
    ranks_agree: bool  # every rank ends with the same parameters
    matches_torch_hook: bool | None  # None: torch has no hook for this run
    max_abs_diff_torch: float | None
    trace: Trace = field(default_factory=Trace, repr=False)

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        """Every rank agrees, the trace's bytes equal the formula, torch's hook agrees (where
        there is one)."""
        same_bytes = abs(self.wire_bytes_per_step - self.formula_wire_bytes) < 0.5
        return self.ranks_agree and same_bytes and self.matches_torch_hook is not False

    def to_json_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k not in ("config", "trace")}
        data["matches_builtin"] = self.matches_builtin
        c = self.config
        data.update(
            method=c.method,
            label=c.label,
            ratio=c.ratio,
            rank=c.rank,
            error_feedback=c.error_feedback,
            world_size=c.world_size,
            steps=c.steps,
            target_accuracy=TARGET_ACCURACY,
        )
        return {"concept": "compress", **data}

    def measured(self) -> Measured:
        """What :func:`~edu_parallel.compression.whatif.what_if` retimes."""
        c = self.config
        return Measured(
            c.label,
            c.method,
            c.world_size,
            c.ddp().psi,
            self.wire_bytes_per_step,
            self.messages_per_step,
        )

    def curve(self) -> pd.DataFrame:
        """Per step: training loss, held-out loss and accuracy, cumulative wire bytes, residual."""
        steps = range(1, len(self.losses) + 1)
        sent = self._sent_per_step()
        return pd.DataFrame(
            {
                "step": list(steps),
                "label": self.config.label,
                "loss": self.losses,
                "heldout_loss": self.heldout_losses,
                "accuracy": self.accuracies,
                "sent_MB": [sum(sent[:s]) / 1e6 for s in steps],
                "residual_norm": self.residual_norms or [math.nan] * len(self.losses),
            }
        )

    def _sent_per_step(self) -> list[float]:
        """Mean bytes per rank of each step (from the trace)."""
        n, per = self.config.world_size, [0.0] * len(self.losses)
        for e in self.trace.events:
            if e.kind == "send" and e.phase == GRAD_SYNC and e.step:
                per[e.step - 1] += e.nbytes / n
        return per


def _measure(trace: Trace, n: int, steps: int) -> dict[str, Any]:
    sent, msgs, comp = [0.0] * n, [0] * n, [0.0] * n
    norms: dict[int, float] = {}
    for e in trace.events:
        if e.kind == "send" and e.phase == GRAD_SYNC:
            sent[e.rank] += e.nbytes
            msgs[e.rank] += 1
        elif e.kind == "compute" and e.phase == COMPRESS_PHASE:
            comp[e.rank] += e.duration
        elif e.kind == "mark" and e.op == COMPRESS_MARK and e.rank == 0:
            s = e.attrs["step"]
            norms[s] = math.hypot(norms.get(s, 0.0), e.attrs["residual_norm"])
    marks = [e for e in trace.events if e.kind == "mark" and e.rank == 0]
    starts = {e.attrs["step"]: e.start for e in marks if e.op == STEP_START_MARK}
    ends = {e.attrs["step"]: e.end for e in marks if e.op == STEP_END_MARK}
    times = [ends[s] - starts[s] for s in ends if s in starts and s > 1]
    return {
        "per_rank": [x / steps for x in sent],
        "messages": sum(msgs) / n / steps,
        "compress_s": sum(comp) / n / steps,
        "step_time_s": sorted(times)[len(times) // 2] if times else math.nan,
        "norms": [norms.get(s, 0.0) for s in range(1, steps + 1)],
    }


def run_compress(
    cluster: Executor, method: Method = "none", **options: Any
) -> CompressReport | None:
    """Train the classifier with ``method`` on ``cluster`` and measure it (see the module doc):
    ``method`` and ``options`` (``ratio``, ``rank``, ``error_feedback``, ``steps``, ``lr``,
    ``seed``, ``start_step``, ``compare_torch``) become one :class:`CompressConfig` on the
    cluster's ranks, checked here before any process starts, for :func:`run_compress_config`."""
    return run_compress_config(cluster, CompressConfig(cluster.world_size, method, **options))


def run_compress_config(cluster: Executor, config: CompressConfig) -> CompressReport | None:
    """Run ``config`` on ``cluster`` (its world size) and measure it; the config is trusted."""
    if cluster.world_size != config.world_size:
        valid = _("{n}, the executor's ranks").format(n=cluster.world_size)
        raise bad_value("config.world_size", config.world_size, valid)
    short = None
    if config.compare_torch and has_torch_reference(config, cluster.backend):
        # at least one compressed step: PowerSGD's first start_step steps are plain all-reduces
        steps = max(COMPARE_STEPS, (config.start_step or 0) + 1)
        short = dataclasses.replace(config, steps=min(steps, config.steps))
    out = cluster.run(compress_job, config, short)
    if out is None:  # a non-zero rank under torchrun
        return None
    res, r0, n = out.results, out.results[0], config.world_size
    m = _measure(out.trace, n, config.steps)
    losses = [sum(x["losses"][s] for x in res) / n for s in range(config.steps)]
    held = [loss for loss, _ in r0["evals"]]
    acc = [a for _, a in r0["evals"]]
    matches = diff = None
    if short is not None:
        ours, ref = r0["short_ours"], r0["short_torch"]
        diff = float((ours - ref).abs().max())
        matches = diff <= TORCH_RTOL[config.method] * max(1.0, float(ref.abs().max()))
    meta = {"concept": "compress", "method": config.method, "steps": config.steps}
    out.trace.meta.update(meta)
    wire = sum(m["per_rank"]) / n
    dense = dense_bytes_per_step(config)
    return CompressReport(
        config=config,
        wire_bytes_per_step=wire,
        per_rank_wire_bytes=m["per_rank"],
        formula_wire_bytes=wire_bytes_per_step(config),
        dense_bytes_per_step=dense,
        compression_ratio=dense / wire if wire else math.inf,
        messages_per_step=m["messages"],
        compress_s_per_step=m["compress_s"],
        step_time_s=m["step_time_s"],
        losses=losses,
        heldout_losses=held,
        accuracies=acc,
        final_loss=held[-1],
        final_accuracy=acc[-1],
        steps_to_target=steps_to_target(acc),
        residual_norms=m["norms"],
        ranks_agree=len({x["digests"][-1] for x in res}) == 1,
        matches_torch_hook=matches,
        max_abs_diff_torch=diff,
        trace=out.trace,
    )


@fitted
def format_compress(report: CompressReport) -> str:
    """Readable output: bytes, ratio, compute, accuracy, the torch check."""
    r, c = report, report.config
    yes = {True: _("yes"), False: _("NO"), None: _("no torch hook for this run")}
    target = (
        _("step {step}").format(step=r.steps_to_target)
        if r.steps_to_target
        else _("not within {steps} steps").format(steps=c.steps)
    )
    torch_check = _("same parameters on every rank: {agree}; equals torch's hook: {hook}").format(
        agree=yes[r.ranks_agree], hook=yes[r.matches_torch_hook]
    )
    if r.max_abs_diff_torch is not None:
        torch_check += f" (max |diff| {r.max_abs_diff_torch:.1e})"
    lines = [
        _("{label} on {n} ranks, {steps} SGD steps (lr {lr}) of the classifier").format(
            label=c.label, n=c.world_size, steps=c.steps, lr=f"{c.lr:g}"
        ),
        _(
            "sent per rank per step: {sent} B (formula {formula} B); fp32 all-reduce {dense} B;"
            " ratio {ratio}x; messages per step: {messages}"
        ).format(
            sent=f"{r.wire_bytes_per_step:,.0f}",
            formula=f"{r.formula_wire_bytes:,.0f}",
            dense=f"{r.dense_bytes_per_step:,.0f}",
            ratio=f"{r.compression_ratio:.1f}",
            messages=f"{r.messages_per_step:g}",
        ),
        _("compressor compute: {ms} ms per step (this machine)").format(
            ms=f"{r.compress_s_per_step * 1e3:.2f}"
        ),
        _("held-out accuracy {accuracy}, loss {loss}; target {target} reached at {reached}").format(
            accuracy=f"{r.final_accuracy:.1%}",
            loss=f"{r.final_loss:.3f}",
            target=f"{TARGET_ACCURACY:.0%}",
            reached=target,
        ),
        torch_check,
    ]
    return "\n".join(lines)
