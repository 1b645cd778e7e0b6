"""DDP runs as text and as a table (a pandas DataFrame): counted bytes beside the formulas.

* :func:`format_ddp`: one run as ``edu-parallel run ddp`` prints it: the checks, the buckets,
  bytes and messages, time and overlap;
* :func:`ddp_sync_table`: DDP's bytes and messages per step under each sync mode, against
  ``2(N-1)/N Psi 4`` and ``2(N-1)`` messages per bucket (Li et al. 2020, arXiv 2006.15704).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..core.i18n import N_, _
from ..core.shown import shown
from ..core.units import format_bytes
from ..core.width import fitted
from .buckets import bucket_line
from .report import DdpReport


def ddp_sync_table(runs: Mapping[str, DdpReport]) -> pd.DataFrame:
    """One row per sync mode: rank 0's bytes and messages per step, each beside its formula."""
    rows = [
        {
            N_("sync"): sync,
            N_("sent per rank per step (B)"): r.per_rank_sent_bytes[0],
            "2(N-1)/N·Ψ·4 (B)": r.config.bytes_per_step(),
            "buckets": len(r.buckets),
            N_("messages per step"): r.messages_per_step,
            N_("2(N-1) × buckets"): r.config.messages_per_step(),
        }
        for sync, r in runs.items()
    ]
    return shown(pd.DataFrame(rows).set_index("sync"), messages={"buckets": N_("buckets (count)")})


def diverged_lines(report: DdpReport) -> list[str]:
    """What the run measured when SGD diverged: the step whose loss became inf or NaN, or the
    weights after the last step; nothing when every loss and weight is finite. The checks
    compare by differences: inf - inf is NaN, and NaN equals nothing, not even itself."""
    r, lr = report, f"{report.config.lr:g}"
    step = r.diverged_at_step
    if step is not None:
        text = _("the loss became {value} at step {step}").format(
            value=r.losses[step - 1], step=step
        )
        if step > 1:
            text += _(" (it was {loss} at step 1)").format(loss=f"{r.losses[0]:.4g}")
    elif not r.finite_weights:
        text = _("the weights became inf or NaN in the last step")
    else:
        return []
    why = _(
        ": SGD diverged, lr={lr} is too large for this model; inf - inf is NaN and NaN equals"
        " nothing, so no check that compares these values can match"
    )
    return [text + why.format(lr=lr)]


@fitted
def format_ddp(report: DdpReport) -> str:
    """Readable output: the checks, the buckets, bytes and messages, time and overlap."""
    r, c = report, report.config
    yes = {True: _("yes"), False: _("NO"), None: _("not run")}
    cap = (
        _("DDP default (25 MiB, first 1 MiB)")
        if c.bucket_cap_mb is None
        else f"{c.bucket_cap_mb} MiB"
    )
    big = _("matches one big batch: {ok} (max |diff| {diff})").format(
        ok=yes[r.matches_big_batch], diff=f"{r.max_abs_diff_big_batch:.1e}"
    )
    one = _("matches one process: {ok}").format(ok=yes[r.matches_reference])
    if r.bitwise_equal_reference:
        one = _("matches one process: {ok} (bit for bit)").format(ok=yes[r.matches_reference])
    torch_line = _("torch DDP buckets equal: {buckets}; torch DDP gradients equal: {grads}").format(
        buckets=yes[r.matches_torch_ddp_buckets], grads=yes[r.matches_torch_ddp_grads]
    )
    if r.max_abs_diff_torch_ddp:
        torch_line += f" (max |diff| {r.max_abs_diff_torch_ddp:.1e})"
    lines = [
        _(
            "data parallel, {model} model (Psi = {psi}), {n} ranks, sync {sync}, buckets {cap},"
            " accumulate {accumulate}, {steps} SGD steps"
        ).format(
            model=c.model,
            psi=f"{c.psi:,}",
            n=c.world_size,
            sync=c.sync,
            cap=cap,
            accumulate=c.accumulate,
            steps=c.steps,
        ),
        one + "; " + big,
        torch_line,
        *diverged_lines(r),
        "",
    ]
    lines += ["  " + bucket_line(b["bucket"], b["params"], b["bytes"]) for b in r.buckets]
    sent = ", ".join(format_bytes(int(x)) for x in r.per_rank_sent_bytes)
    lines += [
        "",
        _("sent per rank per step: {sent}; formula 2(N-1)/N * Psi * 4 B = {formula}").format(
            sent=sent, formula=format_bytes(int(r.formula_sent_bytes))
        ),
        _(
            "messages per rank per step: {messages} (all-reduces: {collectives}, each 2(N-1) ring"
            " messages)"
        ).format(messages=f"{r.messages_per_step:g}", collectives=f"{r.collectives_per_step:g}"),
        _(
            "step {step} ms (measured on this machine); backward {backward} ms; all-reduce {comm}"
            " ms, of which {hidden} hidden under backward"
        ).format(
            step=f"{r.step_time_s * 1e3:.1f}",
            backward=f"{r.backward_s * 1e3:.1f}",
            comm=f"{r.comm_s * 1e3:.1f}",
            hidden=f"{r.overlap_fraction_measured:.0%}",
        ),
    ]
    if r.modelled is not None:
        m = r.modelled
        lines.append(
            _(
                "modelled on a GPU ({tflops} TFLOP/s, {link}, {rows} rows per rank): step {step}"
                " us, {hidden} of {comm} us all-reduce hidden"
            ).format(
                tflops=f"{m.flops_per_s / 1e12:g}",
                link=m.link,
                rows=m.rows,
                step=f"{m.step_time_s * 1e6:.0f}",
                hidden=f"{m.overlap_fraction:.0%}",
                comm=f"{m.comm_s * 1e6:.0f}",
            )
        )
    return "\n".join(lines)
