"""Run one 3D-parallel step on a cluster, check it against one process, and read its numbers.

:func:`run_3d` checks the degrees and sizes once (a
:class:`~edu_parallel.parallel_3d.config.Run3D`) before any process works; :func:`execute_3d` runs
that checked run, trusted, with :func:`~edu_parallel.parallel_3d.step.step_job` on every rank, and
compares with :func:`~edu_parallel.parallel_3d.model.reference_step` on one process:

* the loss: the shares of the last stage's ranks (one TP rank per replica) add up to it;
* every gradient: each rank's local gradient before the DP sync, summed over its DP group, equals
  the slice of the full gradient it holds (TP shard of its stage's layers; EP: its experts);
* every parameter after Adam equals the one-process update of its slice.

Beside the measured bytes per rank and group (:mod:`edu_parallel.parallel_3d.measure`) it keeps
what the planner predicts for the same model and layout
(:func:`edu_parallel.planner.traffic.group_bytes_per_rank`): the two are equal for the dense model.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.dims import ParallelDims
from ..core.i18n import _
from ..core.trace import Trace
from ..core.units import format_bytes
from ..core.width import fitted, rjust
from ..engine.executor import Executor
from ..planner.traffic import mesh_group_bytes
from ..task.mlp import EPS
from .config import ITEMSIZE, Config3D, Run3D
from .measure import GROUP_TYPES, bubble_fraction, measure_3d
from .model import reference_step
from .step import step_job
from .tables import GROUP_HEADERS

RTOL, ATOL = 1e-4, 1e-6  # float32, sums in another order


@dataclass
class Report3D:
    """A 3D step's outcome: the check against one process, per-rank rows, the trace."""

    dims: ParallelDims
    config: Config3D
    matches_reference: bool
    max_abs_error: float  # the worst gradient's (the updates: within update_tolerance)
    loss: float
    reference_loss: float
    rows: list[dict[str, Any]]
    predicted_bytes_by_group: list[dict[str, float]] | None
    trace: Trace = field(repr=False)

    @property
    def layout(self) -> str:
        d = self.dims
        text = f"DP{d.dp} x TP{d.tp} x PP{d.pp}"
        return text + (f" x EP{d.ep}" if self.config.experts else "")

    @property
    def bubble_fraction_measured(self) -> float:
        return bubble_fraction(self.rows)

    @property
    def bubble_fraction_model(self) -> float:
        """1F1B's idle share of a stage's span with equal F and B times: (p-1)/(M+p-1)."""
        p, m = self.dims.pp, self.config.num_microbatches(self.dims.pp)
        return (p - 1) / (m + p - 1)

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        return self.matches_reference

    @property
    def matches_planner(self) -> bool:
        if self.predicted_bytes_by_group is None:
            return False
        return all(
            abs(row["sent_bytes_by_group"][k] - pred.get(k, 0.0)) < 0.5
            for row, pred in zip(self.rows, self.predicted_bytes_by_group, strict=True)
            for k in GROUP_TYPES
        )

    @fitted
    def format(self) -> str:
        return format_3d(self)

    def to_json_dict(self) -> dict[str, Any]:
        d = self.dims
        return {
            "layout": self.layout,
            "dims": {"world_size": d.world_size, "dp": d.dp, "tp": d.tp, "pp": d.pp, "ep": d.ep},
            "config": dict(self.config.__dict__),
            "matches_reference": self.matches_reference,
            "max_abs_error": self.max_abs_error,
            "loss": self.loss,
            "reference_loss": self.reference_loss,
            "per_rank_coords": [{k: r[k] for k in ("pp", "dp", "tp")} for r in self.rows],
            "per_rank_sent_bytes_by_group": [r["sent_bytes_by_group"] for r in self.rows],
            "per_rank_messages_by_group": [r["messages_by_group"] for r in self.rows],
            "per_rank_model_state_bytes": [
                {k: r[k] for k in ("param_bytes", "grad_bytes", "optimizer_bytes")}
                for r in self.rows
            ],
            "per_rank_activation_bytes": [r["activation_bytes"] for r in self.rows],
            "per_rank_idle_s": [r["idle_s"] for r in self.rows],
            "bubble_fraction_measured": self.bubble_fraction_measured,
            "bubble_fraction_model": self.bubble_fraction_model,
            "predicted_sent_bytes_by_group": self.predicted_bytes_by_group,
            "matches_planner": self.matches_planner,
        }


def grad_tolerance(grad: torch.Tensor) -> torch.Tensor:
    """How far a gradient summed in another order may sit from the reference's: ``ATOL`` plus
    ``RTOL`` of the tensor's largest entry. Float32 rounding scales with the summands, not with
    each sum: an entry near 0 made of large terms (256 microbatches through 32 layers) carries the
    tensor's rounding, 2.9e-6 where ``ATOL`` alone allowed 1e-6. A microbatch left out (1/M of
    the gradient) or a planted error still shows."""
    return ATOL + RTOL * grad.abs().max()


def update_tolerance(grad: torch.Tensor, lr: float) -> torch.Tensor:
    """How far a weight after the step may sit from the reference's when its gradient ``grad``
    agrees within :func:`grad_tolerance` ``d``: Adam's first step moves it by
    ``lr g / (|g| + eps)``, so a gradient rounded by ``d`` moves it by up to
    ``2 lr d / (|g| + eps)``, at most ``2 lr`` (a sign flipped). Tight where ``|g|`` is large; up
    to ``2 lr`` where ``|g|`` is within rounding of 0, as 32 float32 layers summed in another
    order leave some."""
    return lr * torch.clamp(2 * grad_tolerance(grad) / (grad.abs() + EPS), max=2.0)


def _compare(
    results: list[dict[str, Any]], ref: dict[str, Any], dims: ParallelDims, lr: float
) -> tuple[bool, float]:
    """(all equal, worst absolute difference of a gradient) over the gradients (summed over DP)
    and the weights after the step (within :func:`update_tolerance` of their gradients)."""
    summed: dict[tuple[Any, ...], torch.Tensor] = defaultdict(lambda: 0)  # type: ignore[arg-type]
    ok, worst = bool(results), 0.0
    for res in results:
        for name, (index, g) in res["grads"].items():
            key = (res["coords"]["tp"], res["coords"]["pp"], name, tuple(map(tuple, index)))
            summed[key] = summed[key] + g
        for name, (index, t) in res["updated"].items():
            at = tuple(slice(a, b) for a, b in index)
            want, grad = ref["updated"][name][at], ref["grads"][name][at]
            if t.shape != want.shape:
                return False, float("inf")
            room = ATOL + RTOL * want.abs() + update_tolerance(grad, lr)
            ok &= bool(((t - want).abs() <= room).all())
    for (_tp, _pp, name, index), g in summed.items():
        want = ref["grads"][name][tuple(slice(a, b) for a, b in index)]
        if g.shape != want.shape:
            return False, float("inf")
        ok &= bool(((g - want).abs() <= grad_tolerance(want)).all())
        worst = max(worst, float((g - want).abs().max()))
    return ok, worst


def run_3d(
    cluster: Executor, dp: Any = -1, tp: Any = 1, pp: Any = 1, ep: Any = 1, **sizes: Any
) -> Report3D | None:
    """One training step of the layout on ``cluster`` (``sizes``: fields of :class:`Config3D`),
    checked once here (:meth:`Run3D.build`; the executor's ranks, validated when it started, set
    the world size); None on a non-zero rank under torchrun."""
    run = Run3D.build(cluster.world_size, dp, tp, pp, ep, max_world_size=None, **sizes)
    return execute_3d(cluster, run)


def execute_3d(executor: Executor, run: Run3D) -> Report3D | None:
    """Run the checked ``run`` on ``executor`` (its ranks are ``run.dims``'s), trusted: nothing
    below checks the degrees or the sizes again; None on a non-zero rank under torchrun."""
    dims, cfg = run.dims, run.config
    out = executor.run(step_job, run)
    if out is None:
        return None
    ref = reference_step(cfg)
    ok, worst = _compare(out.results, ref, dims, cfg.lr)
    last = [
        r["loss"]
        for r in out.results
        if r["coords"]["pp"] == dims.pp - 1 and r["coords"]["tp"] == 0
    ]
    loss = sum(last)
    ok &= abs(loss - ref["loss"]) <= RTOL * abs(ref["loss"]) + ATOL
    out.trace.meta.update({"concept": "3d", "world_size": dims.world_size})
    predicted = None
    if not cfg.experts:
        m = cfg.num_microbatches(dims.pp)
        predicted = mesh_group_bytes(
            cfg.shape(), dims, cfg.micro_batch(dims), m, cfg.seq, cfg.zero, ITEMSIZE
        )
    return Report3D(
        dims, cfg, ok, worst, loss, ref["loss"], measure_3d(out.trace, dims), predicted, out.trace
    )


@fitted
def format_3d(report: Report3D) -> str:
    """The check, then one line per rank: coordinates, model state, activations, bytes per
    group (EP only with experts), idle."""
    kinds = ("tp", "pp", "dp", "ep") if report.config.experts else ("tp", "pp", "dp")
    check = (
        _(
            "3D step {layout} on {n} ranks: matches one process (loss {loss}, max gradient"
            " |difference| {diff})"
        )
        if report.matches_reference
        else _(
            "3D step {layout} on {n} ranks: DOES NOT match one process (loss {loss}, max"
            " gradient |difference| {diff})"
        )
    )
    sent = [_(GROUP_HEADERS[f"{k.upper()} sent"]) for k in kinds]
    header = (
        f"{'rank':>4} {'pp':>2} {'dp':>2} {'tp':>2} "
        + " ".join(rjust(h, 12) for h in (_("model state"), _("activations")))
        + "".join(" " + rjust(h, 10) for h in sent)
        + " "
        + rjust(_("idle"), 8)
    )
    lines = [
        check.format(
            layout=report.layout,
            n=report.dims.world_size,
            loss=f"{report.loss:.6f}",
            diff=f"{report.max_abs_error:.1e}",
        ),
        header,
    ]
    for r in report.rows:
        sent = r["sent_bytes_by_group"]
        lines.append(
            f"{r['rank']:>4} {r['pp']:>2} {r['dp']:>2} {r['tp']:>2}"
            f" {format_bytes(r['model_state_bytes']):>12} {format_bytes(r['activation_bytes']):>12}"
            + "".join(f" {format_bytes(sent[k]):>10}" for k in kinds)
            + f" {r['idle_s'] * 1e3:>6.1f}ms"
        )
    lines.append(
        _(
            "bubble: measured {measured} of the compute span, 1F1B model (p-1)/(M+p-1) = {model}"
        ).format(
            measured=f"{report.bubble_fraction_measured:.0%}",
            model=f"{report.bubble_fraction_model:.0%}",
        )
    )
    if report.predicted_bytes_by_group is not None:
        lines.append(
            _("bytes per rank and group: equal the planner's prediction")
            if report.matches_planner
            else _("bytes per rank and group: DIFFERENT from the planner's prediction")
        )
    return "\n".join(lines)


def runner_3d(cluster: Executor) -> Any:
    """``run(**layout) -> Report3D`` on ``cluster``, for the lesson's quiz (predict, then run)."""

    def run(**layout: Any) -> Report3D | None:
        return run_3d(cluster, **layout)

    return run
