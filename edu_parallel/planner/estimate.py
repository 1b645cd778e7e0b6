"""One parallel configuration of a training step, estimated: memory per GPU, time, tokens/s, MFU.

Pure arithmetic over the package's own models (no processes). For ``Ψ`` parameters, ``T`` tokens
per step (global batch x sequence), ``W`` GPUs of peak ``F`` FLOP/s at ``efficiency`` η:

* **Memory per GPU** = model states + activations. Model states: the memory calculator
  (:func:`~edu_parallel.memory.model_states.model_state_bytes`, mixed-precision Adam, ZeRO
  stage ``zero``) for the heavier of the first and last pipeline stage (the embedding sits on the
  first, the output layer on the last: :func:`~edu_parallel.planner.traffic.stage_params`).
  Activations: :func:`~edu_parallel.memory.activations.shape_activation_estimate` for the stage's
  ``L/p`` layers (Korthikanti's GPT layer, or Llama's own terms for Llama shapes), **with
  sequence parallelism whenever t > 1** (Megatron-LM runs TP with it; eq. (3) of Korthikanti
  et al. 2022), times the microbatches in flight on the first 1F1B stage,
  ``min(M, p)`` (Korthikanti et al. 2022, §4.2.3), times ``1 + (p-1)/(p·v)`` with ``v > 1``
  interleaved chunks (Narayanan et al. 2021, §2.2).
* **Compute** = ``6·Ψ·T / (W·F·η)`` (forward 2Ψ + backward 4Ψ FLOPs per token, Kaplan et al.
  2020). Full recomputation runs the forward twice: x 4/3. Selective recomputation reruns only the
  attention core's forward, ``4·s·h`` FLOPs per token per layer (``4bs²h`` per layer, Korthikanti
  et al. 2022 §5): we add that.
* **TP** = per layer of the stage, per microbatch, 4 ring all-reduces of ``b·s·h`` 16-bit elements
  on the intra-node link (TP is kept inside a node); 6 with full recomputation (its forward runs
  the two forward all-reduces again). All exposed (they sit between dependent matmuls).
* **PP** = the messages the busiest rank sends, ``M·(2v - [p = 2])`` point-to-point sends of
  ``b·s·h`` 16-bit elements, each ``α + S/B``, on the intra-node link if the whole run is on one
  node, else on the inter-node link (PP is the outermost mesh dimension, so neighbours are
  ``dp·tp`` ranks apart and some boundary crosses nodes). Exposed.
* **DP** = ring all-reduce of the rank's gradients (ZeRO-1/2: reduce-scatter + all-gather, the
  same; ZeRO-3: + one all-gather), :func:`~edu_parallel.models.cost.predict` on the intra-node
  link if the DP group fits in a node, else on the inter-node link (rail-optimised: one NIC per
  GPU). **Overlap rule:** gradients are final only during the last microbatch's backward, so DP
  overlaps with that backward (``(2/3 of compute + recompute) / M``); only the excess is exposed.
* **Bubble** = ``(p-1)/(v·M)`` x compute (1F1B, interleaved with ``v`` chunks; Narayanan et al.
  2021 §2.2).

* **EP** (mixture-of-experts models only, else 0): the all-to-alls that carry tokens to their
  experts and back; with the expert memory, the expert-DP gradient sync and ``Ψ`` read as the
  *active* parameters, see :mod:`edu_parallel.planner.experts`.

``step = compute + tp + ep + pp + dp + bubble`` (the ``time_terms``, all exposed times), tokens/s
= ``T/step``, MFU = ``6ΨT / (step·W·F)`` (model FLOPs only: no recomputation, no attention core).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.dims import ParallelDims
from ..core.errors import bad_combination, bad_value
from ..core.i18n import _
from ..memory.activations import shape_activation_estimate
from ..memory.model_states import model_state_bytes
from ..memory.presets import ModelShape, active_params, get_preset
from ..models.cost import predict
from . import experts as moe
from .hardware import ClusterSpec
from .traffic import stage_params

ITEMSIZE = 2  # bf16 activations, gradients and parameters on the wire
TERMS = ("compute", "tp", "ep", "pp", "dp", "bubble")
CONFIG_KEYS = ("dp", "tp", "pp", "ep", "chunks", "zero", "micro_batch", "microbatches", "recompute")
JSON_KEYS = (
    *CONFIG_KEYS,
    "memory_bytes_per_gpu",
    "step_time_s",
    "time_terms",
    "tokens_per_s",
    "mfu",
    "feasible",
    "reason",
)


@dataclass(slots=True)
class ConfigEstimate:
    """One configuration and its estimate; the numbers are None where a factor does not divide."""

    dp: int
    tp: int
    pp: int
    ep: int
    chunks: int
    zero: int
    micro_batch: int
    microbatches: int
    recompute: str
    memory_bytes_per_gpu: float | None = None
    step_time_s: float | None = None
    time_terms: dict[str, float] | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None
    feasible: bool = False
    reason: str = ""
    model_state_bytes: float | None = field(default=None, repr=False)
    activation_bytes: float | None = field(default=None, repr=False)

    def to_json_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in JSON_KEYS}
        d["time_terms"] = None if self.time_terms is None else dict(self.time_terms)
        return d


def resolve_model(model: Any) -> ModelShape:
    """A preset name or a :class:`~edu_parallel.memory.presets.ModelShape`."""
    return model if isinstance(model, ModelShape) else get_preset(model)


class Estimator:
    """Estimates configurations of one (model, cluster, batch, sequence); caches the terms that
    depend on a few factors only, so that ranking thousands of configurations stays fast."""

    def __init__(
        self,
        shape: ModelShape,
        cluster: ClusterSpec,
        global_batch: int,
        seq: int,
        efficiency: float,
        memory_budget: float,
    ) -> None:
        self.shape, self.cluster = shape, cluster
        self.global_batch, self.seq = global_batch, seq
        self.efficiency, self.memory_budget = efficiency, memory_budget
        self.world = cluster.world_size
        self.params = shape.params
        self.active_params = active_params(shape)  # = params for a dense model
        tokens = global_batch * seq
        self.model_flops = 6.0 * self.active_params * tokens
        self.compute_s = self.model_flops / (self.world * cluster.gpu.peak_flops * efficiency)
        core = 4.0 * seq * shape.hidden * shape.layers * tokens  # attention core forward FLOPs
        self.selective_extra_s = core / (self.world * cluster.gpu.peak_flops * efficiency)
        self._dims: dict[tuple[int, ...], str] = {}
        self._states: dict[tuple[int, ...], float] = {}
        self._acts: dict[tuple[Any, ...], float] = {}
        self._tp: dict[tuple[int, ...], float] = {}
        self._dp: dict[tuple[int, ...], float] = {}
        self._ep: dict[tuple[int, ...], float] = {}

    # ------------------------------------------------------------------ cached pieces
    def factor_problems(
        self, dp: int, tp: int, pp: int, chunks: int, m: int | None, ep: int = 1
    ) -> str:
        """'' when the degrees split this model and cluster, else every problem in one line.

        The degrees are checked once for every count of microbatches that splits alike: the
        count matters only with interleaved stages (a multiple of ``pp``) or below one."""
        m = m if chunks > 1 or m is None or m < 1 else None
        key = (dp, tp, pp, chunks, m, ep)
        if key not in self._dims:
            problems = []
            try:
                ParallelDims(
                    self.world,
                    dp=dp,
                    tp=tp,
                    pp=pp,
                    ep=ep,
                    layers=self.shape.layers,
                    heads=self.shape.heads,
                    hidden=self.shape.hidden,
                    microbatches=m,
                    chunks=chunks,
                )
            except ValueError as exc:
                problems.append(str(exc))
            g = self.cluster.gpus_per_node
            if isinstance(tp, int) and tp >= 1 and g % tp:
                problems.append(
                    str(
                        bad_value(
                            "tp",
                            tp,
                            _("a divisor of gpus_per_node={g} (TP kept in a node)").format(g=g),
                        )
                    )
                )
            if isinstance(ep, int) and ep >= 1 and isinstance(dp, int) and dp >= 1:
                problems += moe.ep_problems(self.shape, dp, tp, ep)
            self._dims[key] = "; ".join(problems)
        return self._dims[key]

    def stage_params(self, pp: int) -> int:
        """The heavier of the first and the last stage's parameters."""
        return max(stage_params(self.shape, pp, 0), stage_params(self.shape, pp, pp - 1))

    def state_bytes(self, tp: int, pp: int, zero: int, ep: int = 1) -> float:
        key = (tp, pp, zero, ep)
        if key not in self._states:
            stage = self.stage_params(pp)
            if self.shape.experts:
                experts = moe.stage_expert_params(self.shape, pp)
                self._states[key] = moe.moe_state_bytes(
                    stage, experts, self.world, zero, tp, pp, ep
                )
            else:
                est = model_state_bytes(stage * pp, self.world, zero, tp=tp, pp=pp)
                self._states[key] = est.bytes_per_gpu
        return self._states[key]

    def activation_bytes(self, tp: int, pp: int, chunks: int, mb: int, m: int, rc: str) -> float:
        key = (tp, pp, mb, rc)
        if key not in self._acts:
            s = self.shape
            self._acts[key] = shape_activation_estimate(
                s, self.seq, mb, s.layers // pp, tp, tp > 1, rc
            ).bytes + moe.moe_extra_activation_bytes(s, self.seq, mb, s.layers // pp, tp, rc)
        factor = min(m, pp) * ((1 + (pp - 1) / (pp * chunks)) if chunks > 1 else 1.0)
        return self._acts[key] * factor

    def tp_allreduce_s(self, tp: int, mb: int) -> float:
        key = (tp, mb)
        if key not in self._tp:
            nbytes = mb * self.seq * self.shape.hidden * ITEMSIZE
            self._tp[key] = predict("ring", tp, nbytes, self.cluster.intra).time_s
        return self._tp[key]

    def ep_alltoall_s(self, tp: int, ep: int, mb: int) -> float:
        """One all-to-all of an EP group (:mod:`edu_parallel.planner.experts`)."""
        key = (tp, ep, mb)
        if key not in self._ep:
            c = self.cluster
            link = moe.ep_link(c.gpus_per_node, tp, ep, c.intra, c.inter)
            self._ep[key] = moe.alltoall_s(self.shape, mb, self.seq, ep, link, ITEMSIZE)
        return self._ep[key]

    def dp_sync_s(self, dp: int, tp: int, pp: int, zero: int, ep: int = 1) -> float:
        key = (dp, tp, pp, zero == 3, ep)
        if key not in self._dp:
            g = self.cluster.gpus_per_node
            link = self.cluster.intra if g % (dp * tp) == 0 else self.cluster.inter
            if self.shape.experts:
                experts = moe.stage_expert_params(self.shape, pp)
                stage = self.stage_params(pp)
                t = moe.moe_grad_sync_s(stage, experts, dp, tp, ep, zero, link, ITEMSIZE)
            else:
                nbytes = self.stage_params(pp) / tp * ITEMSIZE
                t = predict("ring", dp, nbytes, link).time_s
                if zero == 3:
                    t += predict("all_gather", dp, nbytes, link).time_s
            self._dp[key] = t
        return self._dp[key]

    # ------------------------------------------------------------------ one configuration
    def evaluate(
        self,
        dp: int,
        tp: int,
        pp: int,
        chunks: int,
        zero: int,
        micro_batch: int,
        microbatches: int,
        recompute: str,
        ep: int = 1,
    ) -> ConfigEstimate:
        """The estimate of one configuration; bad factors give ``feasible=False`` and a reason."""
        out = ConfigEstimate(dp, tp, pp, ep, chunks, zero, micro_batch, microbatches, recompute)
        reason = self.factor_problems(dp, tp, pp, chunks, microbatches, ep)
        if dp * micro_batch * microbatches != self.global_batch:
            batch = dp * micro_batch * microbatches
            problem = bad_combination(
                f"dp * micro_batch * microbatches = {dp} * {micro_batch} * {microbatches}"
                f" = {batch}",
                f"global_batch={self.global_batch}",
            )
            reason += ("; " if reason else "") + str(problem)
        if reason:
            out.reason = reason
            return out
        states = self.state_bytes(tp, pp, zero, ep)
        acts = self.activation_bytes(tp, pp, chunks, micro_batch, microbatches, recompute)
        memory = states + acts
        base = self.compute_s
        if recompute == "full":
            extra = base / 3
        elif recompute == "selective":
            extra = self.selective_extra_s
        else:
            extra = 0.0
        compute = base + extra
        layers = self.shape.layers // pp
        # per layer and microbatch 4 TP all-reduces and 4 EP all-to-alls; 6 with full recompute
        calls = (6 if recompute == "full" else 4) * layers * microbatches
        tp_s = calls * self.tp_allreduce_s(tp, micro_batch) if tp > 1 else 0.0
        ep_s = calls * self.ep_alltoall_s(tp, ep, micro_batch) if ep > 1 else 0.0
        if pp > 1:
            link = self.cluster.intra if self.cluster.nodes == 1 else self.cluster.inter
            nbytes = micro_batch * self.seq * self.shape.hidden * ITEMSIZE
            sends = microbatches * (2 * chunks - (1 if pp == 2 else 0))
            pp_s = sends * link.message_s(nbytes)
        else:
            pp_s = 0.0
        dp_s = self.dp_sync_s(dp, tp, pp, zero, ep) if dp > 1 else 0.0
        backward_last = (base * 2 / 3 + extra) / microbatches
        dp_exposed = max(0.0, dp_s - backward_last)
        bubble = (pp - 1) / (chunks * microbatches) * compute
        terms = {
            "compute": compute,
            "tp": tp_s,
            "ep": ep_s,
            "pp": pp_s,
            "dp": dp_exposed,
            "bubble": bubble,
        }
        step = compute + tp_s + ep_s + pp_s + dp_exposed + bubble
        out.memory_bytes_per_gpu = memory
        out.model_state_bytes, out.activation_bytes = states, acts
        out.step_time_s = step
        out.time_terms = terms
        out.tokens_per_s = self.global_batch * self.seq / step
        out.mfu = self.model_flops / (step * self.world * self.cluster.gpu.peak_flops)
        out.feasible = memory <= self.memory_budget
        if not out.feasible:
            out.reason = _("out of memory: needs {need} GB > {budget} GB per GPU").format(
                need=f"{memory / 1e9:.1f}", budget=f"{self.memory_budget / 1e9:.1f}"
            )
        return out
