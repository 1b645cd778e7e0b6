"""The planner: every parallel configuration of a model on a cluster, estimated and ranked.

:func:`plan` enumerates every combination (after the Ultra-Scale Playbook's "finding the best
configuration", Tazi et al. 2025, done exhaustively): TP over the divisors of the GPUs per node (TP
stays inside a node), PP over the divisors of ``world / tp``, DP the rest; interleaved chunks
``v`` in 1, 2, 4, ... (``p·v`` at most the layers); ZeRO stage 0-3; micro-batch size over the
divisors of ``global_batch / dp`` (the microbatch count follows); activation recomputation none,
selective or full; for a mixture-of-experts model the EP degree over the divisors of ``dp`` that
divide the experts (EP carved out of DP, :mod:`edu_parallel.planner.experts`), dense models
having ``ep = 1``. Each is estimated by
:class:`~edu_parallel.planner.estimate.Estimator`; configurations that do not divide or do not fit
stay in the result with the reason. Ranking: feasible ones by step time, then memory.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import bad_value
from ..core.i18n import _, get_language
from ..memory.model_states import RECOMPUTE, ZERO_STAGES
from ..memory.presets import ModelShape, active_params
from .estimate import ConfigEstimate, Estimator
from .hardware import ClusterSpec
from .inputs import PlannerInputs, planner_inputs

PLANS_KEPT = 8  # results kept per process: a few MB each (the explorer plans one per change)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def chunk_options(pp: int, layers: int) -> list[int]:
    """1, and with pp > 1 the powers of two v >= 2 with pp * v <= layers."""
    out = [1]
    v = 2
    while pp > 1 and pp * v <= layers:
        out.append(v)
        v *= 2
    return out


def _rank_key(c: ConfigEstimate) -> tuple[Any, ...]:
    if c.feasible:
        return (0, c.step_time_s, c.memory_bytes_per_gpu)
    if c.memory_bytes_per_gpu is not None:
        return (1, c.memory_bytes_per_gpu, c.step_time_s)
    return (2, 0.0, 0.0)


@dataclass
class PlannerResult:
    """Every configuration, best first (:attr:`configs`), and the inputs they were planned for."""

    model: ModelShape
    cluster: ClusterSpec
    global_batch: int
    seq: int
    efficiency: float
    memory_budget: float
    configs: list[ConfigEstimate] = field(default_factory=list)

    @property
    def feasible(self) -> list[ConfigEstimate]:
        return [c for c in self.configs if c.feasible]

    @property
    def best(self) -> ConfigEstimate:
        return self.configs[0]

    def rank_of(self, **config: Any) -> int | None:
        """1-based rank among the feasible configurations of the first one matching ``config``
        (e.g. ``tp=8, pp=16``); None when no feasible one matches."""
        for i, c in enumerate(self.feasible, 1):
            if all(getattr(c, k) == v for k, v in config.items()):
                return i
        return None

    def pareto(self) -> list[ConfigEstimate]:
        """The feasible configurations no other beats in both memory and step time, fastest
        first."""
        front: list[ConfigEstimate] = []
        for c in self.feasible:  # sorted by step time, then memory
            if not front or c.memory_bytes_per_gpu < front[-1].memory_bytes_per_gpu:
                front.append(c)
        return front

    def to_json_dict(self, all: bool = False, top: int | None = None) -> dict[str, Any]:  # noqa: A002
        """``configs`` best first: the feasible ones, or every one with ``all=True``; at most
        ``top`` of them."""
        chosen = self.configs if all else self.feasible
        if top is not None:
            chosen = chosen[:top]
        moe = {"active_params": active_params(self.model)} if self.model.experts else {}
        return {
            "model": self.model.name,
            "params": self.model.params,
            **moe,
            "cluster": self.cluster.describe(),
            "world_size": self.cluster.world_size,
            "global_batch": self.global_batch,
            "seq": self.seq,
            "efficiency": self.efficiency,
            "memory_budget_bytes": self.memory_budget,
            "count": len(self.configs),
            "feasible_count": len(self.feasible),
            "configs": [c.to_json_dict() for c in chosen],
        }


def plan(
    model: Any,
    cluster: ClusterSpec | None = None,
    global_batch: int | None = None,
    seq: int | None = None,
    *,
    efficiency: float = 0.5,
    memory_budget: float | None = None,
    zero_stages: tuple[int, ...] = ZERO_STAGES,
    recompute: tuple[str, ...] = RECOMPUTE,
) -> PlannerResult:
    """Every configuration of ``model`` (a preset name or a ModelShape) on ``cluster`` for
    ``global_batch`` sequences of ``seq`` tokens, ranked (see the module docstring).

    ``memory_budget``: bytes per GPU (None: the GPU's memory). The inputs are checked once into
    a :class:`PlannerInputs` (or given as one in place of the first six arguments, trusted as
    built): bad ones raise one ValueError naming each of them; when no configuration fits the
    budget, one line names the smallest memory per GPU that would fit."""
    inputs = planner_inputs(model, cluster, global_batch, seq, efficiency, memory_budget)
    key = (inputs, tuple(zero_stages), tuple(recompute), _language())
    try:
        hash(key)
    except TypeError:  # a model shape that cannot be hashed: plan it every time
        return _plan(inputs, zero_stages, recompute)
    return _plan_once(*key)


def _language() -> str:
    """The language the reasons are written in (English where the setting is unreadable, as
    :func:`~edu_parallel.core.i18n._` shows them then)."""
    try:
        return get_language()
    except ValueError:
        return "en"


@functools.lru_cache(maxsize=PLANS_KEPT)
def _plan_once(
    inputs: PlannerInputs, zero_stages: tuple[int, ...], recompute: tuple[str, ...], lang: str
) -> PlannerResult:
    """:func:`_plan`, kept for this process: a lesson plans the same model and cluster in a cell,
    its quiz and its explorer (each about 0.25 s); a result is only read after it is made."""
    return _plan(inputs, zero_stages, recompute)


def _plan(
    inputs: PlannerInputs, zero_stages: tuple[int, ...], recompute: tuple[str, ...]
) -> PlannerResult:
    """:func:`plan` of checked inputs."""
    shape, cluster, batch = inputs.shape, inputs.cluster, inputs.global_batch
    seq, efficiency, budget = inputs.seq, inputs.efficiency, inputs.budget
    est = Estimator(shape, cluster, batch, seq, efficiency, budget)
    world, layers, experts = cluster.world_size, shape.layers, shape.experts
    configs: list[ConfigEstimate] = []
    for tp in divisors(cluster.gpus_per_node):
        if world % tp:
            continue
        for pp in divisors(world // tp):
            dp = world // (tp * pp)
            per_replica = batch // dp
            mbs = divisors(batch // dp) if batch % dp == 0 else [1]
            eps = [e for e in divisors(dp) if experts % e == 0] if experts else [1]
            for chunks in chunk_options(pp, layers):
                for mb in mbs:
                    m = per_replica // mb
                    for zero in zero_stages:
                        for rc in recompute:
                            for ep in eps:
                                configs.append(
                                    est.evaluate(dp, tp, pp, chunks, zero, mb, m, rc, ep)
                                )
    configs.sort(key=_rank_key)
    result = PlannerResult(shape, cluster, batch, seq, efficiency, budget, configs)
    if not configs or not configs[0].feasible:
        sized = [c for c in configs if c.memory_bytes_per_gpu is not None]
        if not sized:
            raise ValueError(
                _("no configuration of {model} splits over {cluster}: {reason}").format(
                    model=shape.name,
                    cluster=cluster.describe(),
                    reason=configs[0].reason if configs else _("no degrees to try"),
                )
            )
        c = min(sized, key=lambda c: c.memory_bytes_per_gpu)
        raise bad_value(
            "memory_budget",
            f"{budget / 1e9:.4g} GB",
            _(
                "at least {gb} GB per GPU: no configuration fits, and the smallest memory per GPU"
                " that would fit is {gb} GB ({config})"
            ).format(
                gb=f"{c.memory_bytes_per_gpu / 1e9:.4g}",
                config=f"dp={c.dp}, tp={c.tp}, pp={c.pp},{f' ep={c.ep},' if experts else ''}"
                f" zero={c.zero}, micro_batch={c.micro_batch}, recompute={c.recompute}",
            ),
        )
    return result
