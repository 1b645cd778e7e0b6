"""Parent side of the strategy map: run the strategies, check them, read the table off the traces.

Every number of the table is read from a strategy's trace by
:func:`edu_parallel.strategy_map.table.measure`.

Correctness: every rank's output rows (TP+SP: its sequence block) and gradient slices equal
(``allclose``) the single-process reference of
:func:`edu_parallel.strategy_map.model.reference_step`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ..core.i18n import _
from ..core.trace import Trace
from ..core.width import fitted, ljust, rjust
from ..engine.executor import Executor
from .formulas import STRATEGIES, STRATEGY_NAMES, MapRun
from .model import model_param_bytes, reference_step
from .strategies import strategy_job
from .table import measure

RTOL, ATOL = 1e-4, 1e-5  # float32, other summation orders


@dataclass
class StrategyRun:
    """One strategy's step on N ranks: checked against one process, measured from its trace."""

    strategy: str
    name: str
    model: str  # "dense" or "moe" (EP trains the MoE variant)
    matches_reference: bool
    max_abs_diff: float
    model_param_bytes: int  # one full copy of the model it trains
    per_rank: list[dict[str, Any]]  # rows of measure()
    trace: Trace = field(repr=False)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # e.g. EP routing per rank

    def column(self, key: str) -> list[Any]:
        return [row[key] for row in self.per_rank]

    def to_json_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("trace", "extra")}


@dataclass
class StrategyMapReport:
    """The measured table of :func:`run_strategy_map`: ``runs[strategy]`` and the 1-process
    baseline."""

    world_size: int
    config: dict[str, Any]
    microbatches: int
    runs: dict[str, StrategyRun]
    reference_activation_bytes: int  # the dense model, whole batch, one process
    dense_param_bytes: int
    moe_param_bytes: int

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        return all(run.matches_reference for run in self.runs.values())

    @property
    def trace(self) -> Trace:
        """All runs in one trace; each event's phase is prefixed with its strategy
        (``"tp/forward"``)."""
        events = [
            replace(e, phase=f"{s}/{e.phase or '-'}")
            for s, run in self.runs.items()
            for e in run.trace.events
        ]
        return Trace(
            {"concept": "map", "world_size": self.world_size, "strategies": list(self.runs)}, events
        )

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per (strategy, rank), the table as data."""
        return [
            {"strategy": run.name, "rank": r, **{k: v for k, v in row.items() if k != "holds"}}
            for run in self.runs.values()
            for r, row in enumerate(run.per_rank)
        ]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "concept": "map",
            "world_size": self.world_size,
            "config": self.config,
            "microbatches": self.microbatches,
            "matches_reference": self.matches_builtin,
            "reference_activation_bytes": self.reference_activation_bytes,
            "dense_param_bytes": self.dense_param_bytes,
            "moe_param_bytes": self.moe_param_bytes,
            "runs": {s: run.to_json_dict() for s, run in self.runs.items()},
            "rows": self.rows(),
        }

    @fitted
    def format(self) -> str:
        return format_strategy_map(self)


def _compare(results: list[dict[str, Any]], ref: dict[str, Any]) -> tuple[bool, float]:
    ok, worst = True, 0.0
    for res in results:
        pairs = []
        if res["out"] is not None:
            (lo, hi), (s_lo, s_hi) = res["rows"], res.get("seq", (0, ref["out"].shape[1]))
            pairs.append((res["out"], ref["out"][lo:hi, s_lo:s_hi]))  # (rows, positions, h)
        for name, (index, g) in res["grads"].items():
            pairs.append((g, ref["grads"][name][tuple(slice(a, b) for a, b in index)]))
        for got, want in pairs:
            same = got.shape == want.shape and torch.allclose(got, want, rtol=RTOL, atol=ATOL)
            ok &= bool(same)
            worst = max(
                worst, float((got - want).abs().max()) if got.shape == want.shape else float("inf")
            )
    return ok, worst


def run_strategy_map(
    cluster: Executor, strategies: Any = STRATEGIES, **sizes: Any
) -> StrategyMapReport | None:
    """One training step of each strategy on ``cluster``; ``sizes``: fields of
    :class:`MapConfig`. Checked once, here (:meth:`MapRun.build` on the executor's ranks), then
    run by :func:`execute_strategy_map`."""
    return execute_strategy_map(cluster, MapRun.build(cluster.world_size, strategies, **sizes))


def execute_strategy_map(executor: Executor, run: MapRun) -> StrategyMapReport | None:
    """Run the checked ``run`` on ``executor`` (its ``world_size`` ranks): every rank and the
    one-process reference receive ``run.config`` as it is, nothing is checked again."""
    n, cfg = run.world_size, run.config
    refs: dict[str, dict[str, Any]] = {}
    runs = {}
    for s in run.strategies:
        out = executor.run(strategy_job, s, cfg)
        if out is None:  # a non-zero rank under torchrun: take part in every run, report nothing
            continue
        variant = "moe" if s == "ep" else "dense"
        if variant not in refs:
            refs[variant] = reference_step(cfg, variant, n)
        ok, worst = _compare(out.results, refs[variant])
        out.trace.meta.update({"concept": "map", "strategy": s, "world_size": n})
        extra = {"routings": [res["routings"] for res in out.results]} if s == "ep" else {}
        runs[s] = StrategyRun(
            s,
            STRATEGY_NAMES[s],
            variant,
            ok,
            worst,
            model_param_bytes(cfg, variant),
            measure(out.trace, n),
            out.trace,
            extra,
        )
    if not runs:
        return None
    dense_ref = refs.get("dense") or reference_step(cfg, "dense", n)
    return StrategyMapReport(
        n,
        dict(cfg.__dict__),
        cfg.num_microbatches(n),
        runs,
        dense_ref["activation_bytes"],
        model_param_bytes(cfg, "dense"),
        model_param_bytes(cfg, "moe"),
    )


def ops_text(ops: dict[str, int]) -> str:
    """``{"all_reduce": 8}`` -> ``"all_reduce x8"``; point-to-point ``isend`` shown as ``send``."""
    return ", ".join(f"{'send' if op == 'isend' else op} x{k}" for op, k in ops.items()) or "-"


@fitted
def format_strategy_map(report: StrategyMapReport) -> str:
    """The table: one line per (strategy, rank), then the whole-model sizes it is measured
    against."""
    c = report.config
    head = _(
        "Strategy map on {n} ranks: {layers} residual MLP blocks h={hidden} (FFN {ffn}), batch"
        " {batch} x {seq} tokens, one SGD step; EP: {experts} experts of width {width},"
        " top-{top_k}"
    ).format(
        n=report.world_size,
        layers=c["layers"],
        hidden=c["hidden"],
        ffn=4 * c["hidden"],
        batch=c["batch"],
        seq=c["seq"],
        experts=c["experts"],
        width=4 * c["hidden"] // c["experts"],
        top_k=c["top_k"],
    )
    cols = (
        ljust(_("strategy"), 9)
        + rjust("rank", 5)
        + rjust(_("params B"), 11)
        + rjust(_("activ. B"), 11)
        + rjust(_("sent B/step"), 13)
        + rjust(_("msgs"), 6)
        + "  "
        + _("collectives called")
    )
    lines = [
        head,
        "",
        cols,
        ljust(_("1 proc"), 9) + f"{'-':>5}{report.dense_param_bytes:>11,}"
        f"{report.reference_activation_bytes:>11,}{0:>13,}{0:>6}  -",
    ]
    for run in report.runs.values():
        mark = "" if run.matches_reference else "  " + _("(DOES NOT MATCH ONE PROCESS)")
        for r, row in enumerate(run.per_rank):
            lines.append(
                f"{run.name if r == 0 else '':<9}{r:>5}{row['param_bytes']:>11,}"
                f"{row['activation_bytes']:>11,}{row['sent_bytes']:>13,.0f}{row['messages']:>6}"
                f"  {ops_text(row['ops'])}{mark if r == 0 else ''}"
            )
    yes, no = _("yes"), _("NO")
    checked = ", ".join(
        f"{run.name} {yes if run.matches_reference else no} ({run.max_abs_diff:.1e})"
        for run in report.runs.values()
    )
    lines += [
        "",
        _("outputs and gradients equal one process (max |diff|): {checked}").format(
            checked=checked
        ),
        _(
            "whole model: dense {dense} B, MoE variant {moe} B (same FFN parameters, plus"
            " routers); sent bytes = ring volume for all-reduce, bytes to other ranks for"
            " all-to-all and sends"
        ).format(dense=f"{report.dense_param_bytes:,}", moe=f"{report.moe_param_bytes:,}"),
    ]
    return "\n".join(lines)


def map_runner(cluster: Executor, strategies: Any = STRATEGIES, **sizes: Any) -> Any:
    """``run(world_size) -> StrategyMapReport`` of ``strategies`` for predict-then-run quizzes:
    ``cluster`` when the world size matches, else a short-lived one of that size."""

    def run(world_size: int) -> StrategyMapReport | None:
        with cluster.sized(world_size) as ranks:
            return run_strategy_map(ranks, strategies, **sizes)

    return run
