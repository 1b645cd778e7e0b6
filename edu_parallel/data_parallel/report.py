"""Parent side of :mod:`edu_parallel.data_parallel.ddp`: run, check, measure, sweep.

:func:`run_ddp` checks its options once, into a :class:`~edu_parallel.data_parallel.config.DdpRun`
(the command line builds its own), before any process starts; :func:`run_ddp_config` trusts it,
hands its :class:`~edu_parallel.data_parallel.config.DdpConfig` (bucket plan included) to the
ranks, and checks them against

* the single-process reference that replays the ranks' ring additions (bit for bit);
* one backward over the whole global batch (equal up to the order of additions);
* PyTorch's ``DistributedDataParallel`` on the same ranks: its buckets (from its comm hook and its
  logging data) equal ours, its gradients equal ours within ``1e-5 N`` relative (gloo sums in its
  own order; with two ranks a sum has one order, so they agree bit for bit).

Then it reads the trace (:func:`~edu_parallel.data_parallel.overlap.measure`) and, with a link
preset, retimes it for a GPU (:func:`~edu_parallel.data_parallel.overlap.gpu_retime`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from ..comm.bench import ProgressBar
from ..core.errors import Problems, check_bool
from ..core.i18n import N_, _
from ..core.shown import shown
from ..core.trace import Trace
from ..core.units import MIB
from ..engine.executor import Executor
from .buckets import BucketPlan
from .config import DEFAULT_SYNC, DdpConfig, DdpRun, ModelName, Sync, try_build
from .ddp import CommHook, ddp_job
from .model import big_batch_grads, build_model, reference_training, trained_params
from .overlap import Measured, Modelled, gpu_retime, measure

RTOL = 1e-5  # per rank, relative to the largest gradient: another order of fp32 additions


def _flat(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max()) if a.numel() else 0.0


@dataclass
class DdpReport:
    """What a lesson and ``edu-parallel run ddp`` show for one data-parallel run."""

    config: DdpConfig = field(repr=False)
    buckets: list[dict[str, Any]]  # per bucket: params (names) and bytes, in reduction order
    matches_reference: bool  # every rank equals the one-process reference (bit for bit)
    bitwise_equal_reference: bool
    matches_big_batch: bool  # step-1 gradients equal one backward over the global batch
    max_abs_diff_big_batch: float
    matches_torch_ddp_buckets: bool | None  # None: torch DDP not run
    matches_torch_ddp_grads: bool | None
    max_abs_diff_torch_ddp: float | None
    torch_ddp_bucket_sizes: list[list[int]]  # per iteration, bytes of each GradBucket
    torch_ddp_step_time_s: float | None
    per_rank_sent_bytes: list[float]  # per optimizer step
    formula_sent_bytes: float  # 2(N-1)/N Psi * 4
    messages_per_step: float
    collectives_per_step: float
    step_time_s: float
    backward_s: float
    comm_s: float
    hidden_s: float
    exposed_s: float
    overlap_fraction_measured: float
    losses: list[float]
    diverged_at_step: int | None = None  # the first step whose loss was inf or NaN
    finite_weights: bool = True  # rank 0's weights after the last step are all finite
    modelled: Modelled | None = field(default=None, repr=False)
    trace: Trace = field(default_factory=Trace, repr=False)

    @property
    def plan(self) -> BucketPlan:
        """The run's buckets, as its config made them."""
        return self.config.buckets()

    @property
    def matches_builtin(self) -> bool:  # the CLI's exit status
        checks = (self.matches_reference, self.matches_big_batch, self.matches_torch_ddp_buckets)
        return all(c is not False for c in checks) and self.matches_torch_ddp_grads is not False

    def to_json_dict(self) -> dict[str, Any]:
        c = self.config
        data = {k: v for k, v in self.__dict__.items() if k not in ("config", "modelled", "trace")}
        data.update(
            world_size=c.world_size,
            model=c.model,
            sync=c.sync,
            bucket_cap_mb=c.bucket_cap_mb,
            accumulate=c.accumulate,
            steps=c.steps,
            psi=c.psi,
        )
        if self.modelled is not None:
            m = self.modelled
            data.update(
                overlap_fraction_modelled=m.overlap_fraction,
                step_time_modelled_s=m.step_time_s,
                modelled_with={"link": m.link, "flops_per_s": m.flops_per_s, "rows": m.rows},
            )
        return {"concept": "ddp", **data}

    def table(self) -> pd.DataFrame:
        """One row per bucket: parameters, bytes, when issued and reduced (rank 0, last step)."""
        step = max(e.step for e in self.trace.events if e.step is not None)
        coll = {
            e.attrs["bucket"]: e
            for e in self.trace.events
            if e.kind == "collective" and e.rank == 0 and e.step == step
        }
        rows = []
        for b in self.buckets:
            e = coll.get(b["bucket"])
            rows.append(
                {
                    N_("bucket"): b["bucket"],
                    N_("params"): len(b["params"]),
                    N_("first"): b["params"][0],
                    N_("last"): b["params"][-1],
                    N_("MiB"): b["bytes"] / MIB,
                    N_("after layer"): e.attrs.get("after_layer") if e else None,
                    N_("all-reduce ms"): e.duration * 1e3 if e else math.nan,
                }
            )
        return shown(pd.DataFrame(rows).set_index("bucket"))


def run_ddp(
    cluster: Executor,
    model: ModelName = "mlp",
    bucket_cap_mb: float | None = None,
    sync: Sync = DEFAULT_SYNC,
    accumulate: int = 1,
    steps: int = 3,
    lr: float = 0.01,
    seed: int = 0,
    freeze: int = 0,
    link: str | None = None,
    flops_per_s: float | None = None,
    rows: int | None = None,
    compare_torch: bool = True,
    hook: CommHook | None = None,
) -> DdpReport | None:
    """Train data-parallel on ``cluster`` and check it (see the module doc). The options are
    checked here, once, into a :class:`~edu_parallel.data_parallel.config.DdpRun`, before any
    process starts; :func:`run_ddp_config` runs it. ``flops_per_s`` and ``rows`` belong to the
    GPU model and are refused without ``link`` (None: the default rate, the run's own rows)."""
    options = dict(model=model, bucket_cap_mb=bucket_cap_mb, sync=sync, accumulate=accumulate)
    options.update(steps=steps, lr=lr, seed=seed, freeze=freeze)
    gpu = dict(link=link, flops_per_s=flops_per_s, rows=rows)
    run = DdpRun.of(cluster.world_size, **gpu, compare_torch=compare_torch, hook=hook, **options)
    return run_ddp_config(cluster, run)


def run_ddp_config(cluster: Executor, run: DdpRun) -> DdpReport | None:
    """Train ``run`` (checked, for ``cluster.world_size`` ranks) and check it against the
    references; the ranks receive its :class:`DdpConfig` (and the bucket plan in it) as is."""
    config = run.config
    out = cluster.run(ddp_job, config, run.hook, run.compare_torch)
    if out is None:  # a non-zero rank under torchrun
        return None
    res, r0, plan = out.results, out.results[0], config.buckets()
    ref_model, ref_grads = reference_training(config)
    ref_params = _flat([p for _, p in trained_params(ref_model)])
    same_ranks = len({tuple(x["digests"]) for x in res}) == 1
    bitwise = same_ranks and torch.equal(r0["params"], ref_params)
    bitwise = bitwise and torch.equal(r0["grads"], _flat(ref_grads))
    tol = RTOL * config.world_size * max(1.0, float(r0["grads1"].abs().max()))
    big = _flat(big_batch_grads(config, build_model(config), 1))
    d_big = _diff(r0["grads1"], big)
    ours = [(list(b.params), b.nbytes) for b in plan]
    torch_ok = grads_ok = d_torch = t_time = None
    sizes: list[list[int]] = []
    if run.compare_torch:
        t0 = r0["torch"]
        hooked = [(b["params"], b["nbytes"]) for b in t0["hook_buckets"][-1]]
        logged = list(zip(t0["logged_bucket_params"], t0["logged_bucket_sizes"], strict=False))
        torch_ok = hooked == ours and logged == ours
        d_torch = max(_diff(r0["grads1"], t0["grads1"]), _diff(r0["params"], t0["params"]))
        grads_ok = len({tuple(x["torch"]["digests"]) for x in res}) == 1 and d_torch <= tol
        sizes = [[b["nbytes"] for b in it] for it in t0["hook_buckets"]]
        t_time = t0["step_time_s"]
    meta = {"concept": "ddp", "model": config.model, "sync": config.sync}
    meta.update(bucket_cap_mb=config.bucket_cap_mb, accumulate=config.accumulate)
    meta.update(steps=config.steps, psi=config.psi, buckets=plan.to_text())
    out.trace.meta.update(meta)
    m: Measured = measure(out.trace)
    modelled = gpu_retime(out.trace, run.link, run.flops_per_s, run.rows) if run.link else None
    return DdpReport(
        config=config,
        buckets=[{"bucket": b.index, "params": list(b.params), "bytes": b.nbytes} for b in plan],
        matches_reference=same_ranks and _diff(r0["params"], ref_params) <= tol * config.steps,
        bitwise_equal_reference=bitwise,
        matches_big_batch=d_big <= tol,
        max_abs_diff_big_batch=d_big,
        matches_torch_ddp_buckets=torch_ok,
        matches_torch_ddp_grads=grads_ok,
        max_abs_diff_torch_ddp=d_torch,
        torch_ddp_bucket_sizes=sizes,
        torch_ddp_step_time_s=t_time,
        per_rank_sent_bytes=m.per_rank_sent_bytes,
        formula_sent_bytes=config.bytes_per_step(),
        messages_per_step=m.messages_per_step,
        collectives_per_step=m.collectives_per_step,
        step_time_s=m.step_time_s,
        backward_s=m.backward_s,
        comm_s=m.comm_s,
        hidden_s=m.hidden_s,
        exposed_s=m.exposed_s,
        overlap_fraction_measured=m.overlap_fraction,
        losses=list(r0["losses"]),
        diverged_at_step=next(
            (s for s, loss in enumerate(r0["losses"], 1) if not math.isfinite(loss)), None
        ),
        finite_weights=bool(torch.isfinite(r0["params"]).all()),
        modelled=modelled,
        trace=out.trace,
    )


# caps from one parameter per bucket to one bucket for everything; None = DDP's default
SWEEP_CAPS: tuple[float | None, ...] = (1e-6, 1.0, 2.0, 3.0, 4.0, 6.0, None, 25.0)


def _cap_text(cap: float | None) -> str:
    return "default" if cap is None else f"{cap:g} MiB"


def sweep_buckets(
    cluster: Executor,
    caps: Sequence[float | None] = SWEEP_CAPS,
    model: ModelName = "deep",
    link: str = "ib-ndr-400",
    rows: int | None = 16384,
    steps: int = 1,
    progress: bool = True,
) -> pd.DataFrame:
    """Step time against bucket size, measured on the ranks and retimed for a GPU; each size
    checked against one process (``= one process``, bit for bit).

    One step per size by default: the GPU model reads the run's structure only (the layers'
    FLOPs, the buckets and the layer each was issued in), the same in every step, so its columns
    equal those of a longer run; the measured step is then the first one, warm-up included.
    Every size is checked before the first one runs. ``progress``: a progress bar over the sizes
    (``tqdm.auto``: a widget in Jupyter)."""
    p = Problems()
    gpu = dict(link=link, rows=rows, compare_torch=False)
    runs = [  # every size checked before the first one runs
        try_build(
            p, DdpRun.of, cluster.world_size, model=model, bucket_cap_mb=cap, steps=steps, **gpu
        )
        for cap in caps
    ]
    show = try_build(p, check_bool, "progress", progress)
    p.raise_any()
    bar = ProgressBar(_("training each bucket size")) if show else None
    rows_out = []
    for done, (cap, run) in enumerate(zip(caps, runs, strict=True)):
        if bar is not None:
            bar(done, len(runs), _cap_text(cap))
        rep = run_ddp_config(cluster, run)
        m = rep.modelled
        rows_out.append(
            {
                "bucket_cap_mb": "default" if cap is None else cap,
                "buckets": len(rep.buckets),
                N_("messages"): rep.messages_per_step,
                N_("sent MiB"): rep.per_rank_sent_bytes[0] / MIB,
                N_("step ms (measured)"): rep.step_time_s * 1e3,
                N_("hidden (measured)"): rep.overlap_fraction_measured,
                N_("step us (modelled)"): m.step_time_s * 1e6,
                N_("hidden (modelled)"): m.overlap_fraction,
                N_("= one process"): rep.bitwise_equal_reference,
            }
        )
    if bar is not None:
        bar(len(runs), len(runs), "")
    return shown(pd.DataFrame(rows_out), messages={"buckets": N_("buckets (count)")})


def ddp_runner(cluster: Executor, **fixed: Any) -> Any:
    """``run(world_size=..., **options) -> DdpReport`` for predict-then-run quizzes."""

    def run(world_size: int | None = None, **options: Any) -> DdpReport | None:
        with cluster.sized(world_size or cluster.world_size) as ranks:
            return run_ddp(ranks, **{**fixed, **options})

    return run
