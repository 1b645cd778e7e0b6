"""PyTorch's own FSDP2 (``torch.distributed.fsdp.fully_shard``) on the cluster, recorded.

:func:`fsdp_job` trains the MLP of :mod:`edu_parallel.task.mlp` (same weights, same
microbatch per rank, same MSE loss, ``torch.optim.Adam``) with ``fully_shard`` and
``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)``: the sharded fp32 parameters are the
master weights, forward/backward compute and the collectives run in bf16, as in ZeRO §3.1
(Rajbhandari et al. 2019, arXiv 1910.02054). FSDP2 shards every parameter on dim 0 (a DTensor with
``Shard(0)``; uneven dim-0 shards are padded for the all-gather), groups the parameters of each
``fully_shard``-ed module into one **unit** (one all-gather, one reduce-scatter per unit), unshards
a unit before its forward and backward, reshards it after forward (``reshard_after_forward``) and
after backward, and prefetches the next unit's all-gather in backward. Per-parameter sharding is
FSDP2's design: the PyTorch ``torch.distributed.fsdp.fully_shard`` API docs, the FSDP2 RFC
pytorch/pytorch#114299 ("Per-Parameter-Sharding FSDP") and Liang et al. 2024, "TorchTitan",
arXiv 2410.06511 (FSDP2 on DTensor). Units, resharding and backward prefetch come from FSDP1,
whose ``FlatParameter`` flattens a unit's parameters into one sharded buffer (Zhao et al. 2023,
"PyTorch FSDP", arXiv 2304.11277, §3.3-3.4).

What FSDP issued is read back from the profiler
(``torch.autograd.profiler.profile(record_shapes=True)``, the same kineto CPU events as
``torch.profiler``): torch 2.13 on gloo emits no ``record_param_comms`` events, but every collective
is a ``c10d::*`` op (shapes and dtypes of its tensors) inside FSDP's own ``record_function`` ranges
``FSDP::all_gather (fqn)``, ``FSDP::post_backward_reduce (fqn)``, ``FSDP::backward_prefetch for
fqn``. :func:`trace_profile` turns them into engine events: ``collective`` (op, bytes of the OUTPUT
tensor like ``ctx.collective``, ``attrs["unit"]``, ``attrs["prefetch"]``) and ``memory`` of category
``gathered_params`` (+bytes at a unit's all-gather, - at the FSDP marker where it is resharded).
``attrs["gloo"]`` names what gloo ran: in torch 2.13 ``gloo:all_reduce`` of the whole input for a
reduce-scatter. Bytes sent are counted as the ring algorithm of the requested collective sends
them (:func:`edu_parallel.core.metrics.ring_sent_bytes`), which is what NCCL would do.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from ..core.errors import EngineError
from ..core.schema import GATHERED_PARAMS
from ..engine.context import RankContext
from ..task.mlp import init_master, layer_views, microbatch_of
from .config import FsdpConfig

PASSES = ("forward", "backward", "optimizer")
C10D_OPS = {  # profiler name of the c10d op -> the torch.distributed call (as in zero.py's trace)
    "c10d::_allgather_base_": "all_gather_single",
    "c10d::_reduce_scatter_base_": "reduce_scatter_single",
    "c10d::allgather_": "all_gather",
    "c10d::reduce_scatter_": "reduce_scatter",
    "c10d::allreduce_": "all_reduce",
}
DTYPE_BYTES = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4, "double": 8}
_FSDP_RANGE = re.compile(r"^FSDP::(\w+?)(?: \((.*)\)| for (.*))?$")
_PASS_RANGE = re.compile(r"^edu_parallel::(\w+) (\d+)$")
_RESHARD_MARKERS = ("post_forward", "post_backward_reshard")


class FsdpUnavailableError(EngineError):
    """The installed torch has no FSDP2 (``torch.distributed.fsdp.fully_shard``, torch >= 2.6)."""


def require_fsdp2() -> tuple[Any, Any]:
    """``(fully_shard, MixedPrecisionPolicy)`` or :class:`FsdpUnavailableError` saying why."""
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError as exc:
        raise FsdpUnavailableError(
            "run_fsdp needs FSDP2: torch.distributed.fsdp.fully_shard (torch >= 2.6); the"
            f" installed torch {torch.__version__} does not have it ({exc}). Lesson 07 explains"
            " FSDP against ZeRO-3 (edu_parallel.zero.stages) instead."
        ) from exc
    return fully_shard, MixedPrecisionPolicy


def preload() -> bool:
    """Import FSDP2 and ``torch._dynamo`` (which its first DTensor imports: ~1-2 s) in THIS process.

    Call it before starting a :class:`~edu_parallel.engine.cluster.Cluster`: forked ranks inherit
    the modules instead of each importing them. Returns False (and does nothing) without FSDP2."""
    try:
        require_fsdp2()
    except FsdpUnavailableError:
        return False
    import torch._dynamo  # noqa: F401

    return True


def unit_name(fqn: str) -> str:
    """FSDP's module path of a unit ("" is the root module) as shown in traces and pictures."""
    return fqn if fqn else "root"


def build_model(dims: Sequence[int], seed: int) -> torch.nn.Sequential:
    """``Linear, ReLU, ..., Linear`` in fp32 holding exactly ``init_master(dims, seed)``."""
    layers: list[torch.nn.Module] = []
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:], strict=False)):
        layers.append(torch.nn.Linear(d_in, d_out))
        if i < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for (w, b), lin in zip(layer_views(init_master(dims, seed), dims), linears, strict=True):
            lin.weight.copy_(w)  # (d_out, d_in)
            lin.bias.copy_(b)  # (d_out,)
    return model


def shard_model(
    model: torch.nn.Sequential,
    world_size: int,
    granularity: str,
    reshard_after_forward: bool | None,
    forward_prefetch: bool,
) -> list[str]:
    """Apply ``fully_shard`` bottom-up (each Linear for "layer", then the root); returns unit names.

    ``forward_prefetch`` (layer granularity): unit k's pre-forward issues unit k+1's all-gather too
    (``FSDPModule.set_modules_to_forward_prefetch``); backward prefetch is FSDP2's default.
    """
    from torch.distributed.device_mesh import init_device_mesh

    fully_shard, policy_cls = require_fsdp2()
    mesh = init_device_mesh("cpu", (world_size,))  # 1-D mesh over the default (gloo) group
    kw: dict[str, Any] = {
        "mesh": mesh,
        "reshard_after_forward": reshard_after_forward,
        "mp_policy": policy_cls(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16),
    }
    units = []
    linears = [(str(i), m) for i, m in enumerate(model) if isinstance(m, torch.nn.Linear)]
    if granularity == "layer":
        for name, lin in linears:
            fully_shard(lin, **kw)
            units.append(name)
        if forward_prefetch:
            for (_, lin), (_, nxt) in zip(linears[:-1], linears[1:], strict=True):
                lin.set_modules_to_forward_prefetch([nxt])
    fully_shard(model, **kw)
    return [*units, unit_name("")]


def fsdp_job(ctx: RankContext, config: FsdpConfig) -> dict[str, Any]:
    """On every rank: FSDP2 training under the profiler; returns full fp32 params (Psi,) and
    losses."""
    # The autograd profiler (same events as torch.profiler.profile): torch.profiler's start probes
    # ``hasattr(torch, "_inductor")``, which imports the compiler stack (seconds per rank).
    from torch.autograd.profiler import profile, record_function

    n, r, granularity, steps = ctx.world_size, ctx.rank, config.granularity, config.steps
    ctx.tracer.where(f"fsdp {granularity}: fully_shard")
    model = build_model(config.dims, config.seed)
    units = shard_model(
        model, n, granularity, config.reshard_after_forward, config.forward_prefetch
    )
    # params: fp32 DTensor shards
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, foreach=False)
    x, y = microbatch_of(r, config.dims, n, config.microbatch, config.seed)  # (B, d_in), (B, d_out)
    losses = []
    with quiet_profile(profile) as prof:
        t_clock = ctx.tracer.now()  # the engine clock at the "edu_parallel::clock" range below
        with record_function("edu_parallel::clock"):
            pass
        for step in range(1, steps + 1):
            ctx.tracer.where(f"fsdp {granularity} step {step}: forward")
            with record_function(f"edu_parallel::forward {step}"):
                out = model(x)  # (B, d_out) bf16: inputs cast by the mixed-precision policy
                loss = torch.nn.functional.mse_loss(out, y.to(out.dtype))
            losses.append(float(loss.detach()))
            ctx.tracer.where(f"fsdp {granularity} step {step}: backward")
            with record_function(f"edu_parallel::backward {step}"):
                loss.backward()  # bf16 grads reduce-scattered (AVG) into fp32 sharded .grad
            with record_function(f"edu_parallel::optimizer {step}"):
                opt.step()  # Adam on the local fp32 shards: no communication
                opt.zero_grad()
            ctx.progress(step, steps)
    trace_profile(ctx, prof.function_events, t_clock)
    with ctx.tracer.paused():  # untraced: gather the full fp32 params for checking
        flat = [p.full_tensor().detach().flatten() for p in model.parameters()]  # W1, b1, W2, ...
    return {"params": torch.cat(flat).clone(), "losses": losses, "units": units}


@contextlib.contextmanager
def _fd2_to_devnull() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null for the block (and back)."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


@contextlib.contextmanager
def quiet_profile(profile: Any) -> Iterator[Any]:
    """``profile(record_shapes=True)`` whose start and stop print nothing.

    kineto writes ``profiler_start`` / ``profiler_stop`` lines straight to file descriptor 2 on
    every rank (``KINETO_LOG_LEVEL`` does not silence them), and Jupyter shows a forked rank's
    fd 2 in the notebook; only those two calls are silenced, errors still raise.
    """
    prof = profile(record_shapes=True)
    with _fd2_to_devnull():
        prof.__enter__()
    try:
        yield prof
    finally:
        with _fd2_to_devnull():
            prof.__exit__(None, None, None)


def _us(e: Any) -> tuple[float, float]:
    return float(e.time_range.start), float(e.time_range.end)


def _inside(outer: tuple[float, float], inner: tuple[float, float]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def _nbytes(e: Any, k: int) -> tuple[int, str]:
    """Bytes and dtype of the k-th tensor argument of a profiled op (needs ``record_shapes``)."""
    shape = e.input_shapes[k]
    dtype = (getattr(e, "input_dtypes", None) or [""] * (k + 1))[k]
    if dtype not in DTYPE_BYTES:
        raise ValueError(
            f"dtype={dtype!r} of {e.name} is not valid: expected one of {list(DTYPE_BYTES)}"
        )
    return int(torch.Size(shape).numel()) * DTYPE_BYTES[dtype], dtype


def trace_profile(ctx: RankContext, events: Sequence[Any], t_clock: float) -> None:
    """Add FSDP's collectives, reshard points and gathered-parameter bytes to ``ctx.tracer``.

    ``events``: the profiler's FunctionEvents. Times: profiler microseconds shifted onto the engine
    clock by the ``edu_parallel::clock`` range. A collective's unit and reason come from the
    innermost enclosing FSDP range on the same thread; its pass and step from ``edu_parallel::``.
    """
    clock = next(e for e in events if e.name == "edu_parallel::clock")
    shift = t_clock - _us(clock)[0] * 1e-6
    main = clock.thread
    passes, fsdp, ops, gloo = [], [], [], []
    for e in events:
        if e.thread == main and (m := _PASS_RANGE.match(e.name)):
            passes.append((_us(e), m.group(1), int(m.group(2))))
        elif e.thread == main and (m := _FSDP_RANGE.match(e.name)):
            fsdp.append((_us(e), m.group(1), unit_name(m.group(2) or m.group(3) or "")))
        elif e.name in C10D_OPS:
            ops.append(e)
        elif e.name.startswith("gloo:"):
            gloo.append(e)
    ops.sort(key=lambda e: _us(e)[0])
    gloo.sort(key=lambda e: _us(e)[0])
    done = gloo if len(gloo) == len(ops) else [None] * len(ops)  # gloo runs them in issue order
    gathers: list[tuple[float, str, int, int | None, str]] = []  # (t, unit, bytes, step, pass)
    for e, g in zip(ops, done, strict=True):
        span = _us(e)
        _, phase, step = next((p for p in passes if _inside(p[0], span)), (None, None, None))
        ranges = [f for f in fsdp if _inside(f[0], span)]
        unit = min(ranges, key=lambda f: f[0][1] - f[0][0])[2] if ranges else "?"
        reasons = [f[1] for f in ranges]
        nbytes, dtype = _nbytes(e, 0)  # the first tensor: all-gather / reduce-scatter OUTPUT
        end = max(span[1], _us(g)[1]) if g is not None else span[1]
        op = C10D_OPS[e.name]
        attrs = {
            "unit": unit,
            "prefetch": any(x.endswith("_prefetch") for x in reasons),
            "issued_in": reasons,
            "c10d": e.name,
            "gloo": g.name if g is not None else None,
            "dtype": dtype,
            "input_nbytes": _nbytes(e, 1)[0],
        }
        start = span[0] * 1e-6 + shift
        ctx.record(
            "collective",
            op,
            start,
            end * 1e-6 + shift,
            step=step,
            phase=phase,
            nbytes=nbytes,
            attrs=attrs,
        )
        if op.startswith("all_gather"):
            gathers.append((start, unit, nbytes, step, phase))
    _trace_gathered(ctx, gathers, fsdp, passes, shift)


def _trace_gathered(
    ctx: RankContext,
    gathers: list[tuple[float, str, int, int | None, str]],
    fsdp: list[Any],
    passes: list[Any],
    shift: float,
) -> None:
    """``gathered_params`` memory events: a unit's all-gathered bytes stay alive until the LAST
    ``FSDP::post_forward`` / ``FSDP::post_backward_reshard`` of that unit before its next
    all-gather (FSDP only all-gathers a sharded unit, so that marker is where it was resharded)."""
    marks = sorted((f[0][0] * 1e-6 + shift, f[2], f[1]) for f in fsdp if f[1] in _RESHARD_MARKERS)
    for t, unit, what in marks:
        phase, step = _pass_at(t, passes, shift)
        ctx.record("mark", what, t, t, step=step, phase=phase, attrs={"unit": unit})
    changes = []
    for k, (t0, unit, nbytes, step, phase) in enumerate(gathers):
        t_next = next((g[0] for g in gathers[k + 1 :] if g[1] == unit), float("inf"))
        t1 = max((t for t, u, _ in marks if u == unit and t0 < t < t_next), default=None)
        if t1 is None:
            raise ValueError(
                f"unit={unit!r} is not valid: its all-gather at {t0:.6f} s has no reshard marker"
            )
        changes += [(t0, nbytes, step, phase), (t1, -nbytes, step, _pass_at(t1, passes, shift)[0])]
    for t, delta, step, phase in sorted(changes, key=lambda c: (c[0], c[1])):
        op = "alloc" if delta > 0 else "free"
        attrs = {"category": GATHERED_PARAMS}
        ctx.record("memory", op, t, t, step=step, phase=phase, nbytes=delta, attrs=attrs)


def _pass_at(t: float, passes: list[Any], shift: float) -> tuple[str | None, int | None]:
    """(pass, step) of the ``edu_parallel::`` range around engine time ``t``."""
    for (t0, t1), phase, step in passes:
        if t0 * 1e-6 + shift <= t <= t1 * 1e-6 + shift:
            return phase, step
    return None, None
