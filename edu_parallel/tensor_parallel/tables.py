"""Tensor-parallel runs as tables (pandas DataFrames): collectives and bytes beside the formulas.

* :func:`rule_table`: layers under Megatron's rule and the outline's, what each rank held before
  its collective, and whether the result equals the dense layer (Shoeybi et al. 2019, arXiv
  1909.08053, §3; errata E4);
* :func:`message_table`: each collective of one run, its bytes beside ``b*s*h*itemsize``;
* :func:`pass_table`: bytes per pass of the MLP with and without sequence parallelism, beside
  ``2(t-1)/t M`` and :func:`~edu_parallel.tensor_parallel.formulas.sp_sent_bytes_per_pass`
  (Korthikanti et al. 2022, arXiv 2205.05198, §4.2.2).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..core.i18n import N_
from ..core.shown import shown
from .config import ITEMSIZE
from .formulas import allreduce_message_bytes, sp_sent_bytes_per_pass
from .report import TPReport


def rule_table(reports: Sequence[TPReport]) -> pd.DataFrame:
    """One row per run: layer, rule, what rank 0 held, collectives per pass, shapes, equal?"""
    rows = [
        {
            N_("layer"): r.mode,
            N_("rule"): r.rule,
            N_("each rank held"): r.local_output_kind[0],
            N_("forward"): r.forward_collectives,
            N_("backward"): r.backward_collectives,
            N_("output"): r.output_shape,
            N_("dense output"): r.dense_output_shape,
            N_("equals dense"): r.matches_dense,
        }
        for r in reports
    ]
    return shown(pd.DataFrame(rows).set_index(["layer", "rule"]))


def _message(report: TPReport) -> int:
    b, s, h = report.batch, report.seq, report.hidden
    return allreduce_message_bytes(b, s, h, ITEMSIZE[report.dtype])


def message_table(report: TPReport) -> pd.DataFrame:
    """Rank 0's collectives in order: pass, op, bytes in the trace, and ``b*s*h*itemsize``."""
    rows = [
        {
            N_("pass"): c["phase"],
            N_("op"): c["op"],
            N_("bytes in the trace"): c["nbytes"],
            "b*s*h*itemsize": _message(report),
        }
        for c in report.collectives
    ]
    return shown(pd.DataFrame(rows))


def pass_formula(report: TPReport) -> dict[str, float] | None:
    """Bytes one rank sends per pass: Megatron's MLP one all-reduce each, ``2(t-1)/t M``; with
    SP :func:`sp_sent_bytes_per_pass`; ``None`` for the single layers."""
    t = report.world_size
    if report.mode == "mlp":
        each = 2 * (t - 1) / t * _message(report)
        return {"forward": each, "backward": each}
    if report.mode == "mlp-sp":
        b, s, h = report.batch, report.seq, report.hidden
        return sp_sent_bytes_per_pass(t, b, s, h, ITEMSIZE[report.dtype])
    return None


def pass_table(reports: Sequence[TPReport]) -> pd.DataFrame:
    """One row per run: its collectives and rank 0's bytes per pass, each beside the formula."""
    rows = []
    for r in reports:
        by_pass, formula = r.per_rank_sent_bytes_by_phase[0], pass_formula(r) or {}
        rows.append(
            {
                N_("mode"): r.mode,
                N_("forward"): r.forward_collectives,
                N_("backward"): r.backward_collectives,
                N_("sent forward (B)"): by_pass["forward"],
                N_("formula forward (B)"): formula.get("forward"),
                N_("sent backward (B)"): by_pass["backward"],
                N_("formula backward (B)"): formula.get("backward"),
                N_("matches dense"): r.matches_dense,
            }
        )
    return shown(pd.DataFrame(rows).set_index("mode"))
