"""One rank of a pipeline: execute its row of a schedule, action by action.

:func:`pipeline_job` runs on every rank of a cluster. Rank ``r < P`` builds the seeded model (see
:mod:`edu_parallel.pipeline_parallel.model`), keeps its stages ``s`` with ``s % P == r`` and runs
its actions in slot order:

* ``F(s, m)``: receive the activation from ``rank_of(s-1)`` (blocking), run the chunk forward
  keeping the autograd graph, stash it, post a non-blocking send of the output to
  ``rank_of(s+1)``; the last stage computes this microbatch's loss ``MSE / M`` instead (GPipe,
  Huang et al. 2019, arXiv 1811.06965).
* ``B(s, m)``, the full backward: receive the output gradient from ``rank_of(s+1)`` (the last
  stage starts from its loss), backpropagate through the chunk, accumulate the weight gradients,
  free the stash and send the input gradient to ``rank_of(s-1)`` (1F1B, Narayanan et al. 2021,
  arXiv 2104.04473).
* ``I(s, m)`` and ``W(s, m)`` (Zero Bubble, Qi et al. 2023, arXiv 2401.10241, whose "B" is
  torch's ``I``): I receives the same gradient and computes only the input gradient
  (``retain_graph=True``) for ``rank_of(s-1)``; W computes the weight gradients from the same graph
  and frees it. This simple split replays the chunk's backward for W; the paper's kernels keep
  the intermediate gradients instead, so W costs only the weight GEMMs.

Only receives block, and every dependency of an action sits in an earlier slot of a valid schedule,
so the ranks cannot deadlock. Sends are waited for at the end (their buffers are never reused).
Plain isend/irecv with one tag per (direction, stage, microbatch): ``batch_isend_irecv`` is
unreliable on gloo.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.schema import ACTIVATION
from ..engine.autograd import grads_from
from ..engine.context import RankContext
from .config import PipelineConfig
from .model import DTYPE, build_stages, make_batch, microbatch_loss
from .schedule import Action, Schedule

FWD, BWD = 0, 1  # message directions: activations go up the stages, gradients come down


def message_tag(direction: int, sender_stage: int, microbatch: int, sched: Schedule) -> int:
    """One tag per (direction, sending stage, microbatch): a message can only meet its receive."""
    return 1 + (direction * sched.num_stages + sender_stage) * sched.num_microbatches + microbatch


class _RankPipeline:
    """This rank's stages, stashes and gradient sums while it walks its schedule row."""

    def __init__(
        self, ctx: RankContext, sched: Schedule, layers: int, hidden: int, mb: int, seed: int
    ):
        self.ctx, self.s = ctx, sched
        self.last = sched.num_stages - 1
        self.stages = [s for s in range(sched.num_stages) if sched.rank_of(s) == ctx.rank]
        self.chunks = build_stages(self.stages, sched.num_stages, layers, hidden, seed)
        self.params = {s: list(c.parameters()) for s, c in self.chunks.items()}
        self.param_ptrs = {p.data_ptr() for ps in self.params.values() for p in ps}
        self.grads = {s: [torch.zeros_like(p) for p in ps] for s, ps in self.params.items()}
        self.x, self.y = make_batch(sched.num_microbatches, mb, hidden, seed)  # (M, mb, h) each
        self.shape = (mb, hidden)  # one microbatch's activation, and its gradient
        self.stash: dict[tuple[int, int], dict[str, Any]] = {}
        self.live = dict.fromkeys(self.stages, 0)
        self.peak = dict.fromkeys(self.stages, 0)
        self.live_bytes = self.peak_bytes = 0
        self.sends: list[Any] = []  # pending isends, waited for at the end
        self.local: dict[int, torch.Tensor] = {}  # messages to a stage on this same rank (P = 1)

    # ------------------------------------------------------------------ messages
    def _send(self, t: torch.Tensor, stage: int, direction: int, m: int) -> None:
        dst = self.s.rank_of(stage + (1 if direction == FWD else -1))
        tag = message_tag(direction, stage, m, self.s)
        if dst == self.ctx.rank:
            self.local[tag] = t
            return
        phase = "fwd" if direction == FWD else "bwd"
        self.sends.append(self.ctx.isend(t, dst, tag=tag, step=m, phase=phase, chunk=stage))

    def _recv(self, sender_stage: int, direction: int, m: int) -> torch.Tensor:
        src = self.s.rank_of(sender_stage)
        tag = message_tag(direction, sender_stage, m, self.s)
        if src == self.ctx.rank:
            return self.local.pop(tag)
        buf = torch.empty(self.shape, dtype=DTYPE, device=self.ctx.device)  # (mb, h)
        phase = "fwd" if direction == FWD else "bwd"
        receiving = sender_stage + (1 if direction == FWD else -1)
        self.ctx.irecv(buf, src, tag=tag, step=m, phase=phase, chunk=receiving).wait()
        return buf

    # ------------------------------------------------------------------ actions
    def run(self, a: Action) -> None:
        s, m = a.stage, a.microbatch
        self.ctx.tracer.where(f"pipeline {a.text()} (stage {s}, microbatch {m}, {a.kind})")
        inbound = None
        if a.kind == "F" and s > 0:
            inbound = self._recv(s - 1, FWD, m)  # (mb, h) activation of stage s-1
        elif a.kind in ("B", "I") and s < self.last:
            inbound = self._recv(s + 1, BWD, m)  # (mb, h) gradient of stage s's output
        start = self.ctx.tracer.now()
        outbound = getattr(self, "_" + a.kind)(s, m, inbound)
        end = self.ctx.tracer.now()
        phase = {"F": "fwd", "B": "bwd", "I": "bwd", "W": "wgrad"}[a.kind]
        nbytes = self.x[m].numel() * self.x.element_size()
        attrs = {"microbatch": m, "stage": s}
        self.ctx.record_compute(
            a.kind, nbytes, start, end, step=m, phase=phase, chunk=s, attrs=attrs
        )
        if outbound is not None:
            self._send(outbound, s, FWD if a.kind == "F" else BWD, m)

    def _F(self, s: int, m: int, inp: torch.Tensor | None) -> torch.Tensor | None:
        saved = [0]

        def pack(t: torch.Tensor) -> torch.Tensor:
            if t.data_ptr() not in self.param_ptrs:  # weights are not activations
                saved[0] += t.numel() * t.element_size()
            return t

        x = self.x[m] if inp is None else inp.requires_grad_()  # (mb, h)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = self.chunks[s](x)  # blocks of (mb, h) @ (h, h) + b, GeLU -> (mb, h)
            if s == self.last:
                out = microbatch_loss(out, self.y[m], self.s.num_microbatches)  # scalar
        self.stash[(s, m)] = {"inp": x, "out": out, "bytes": saved[0]}
        self.live[s] += 1
        self.peak[s] = max(self.peak[s], self.live[s])
        self.live_bytes += saved[0]
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        self.ctx.memory(ACTIVATION, saved[0], step=m, phase="fwd")
        return None if s == self.last else out.detach()  # (mb, h) to stage s+1

    def _I(self, s: int, m: int, grad_out: torch.Tensor | None) -> torch.Tensor | None:
        """Zero Bubble's input-gradient pass: the weight gradient waits for W(s, m)."""
        st = self.stash[(s, m)]
        st["grad_out"] = grad_out
        if s == 0:  # stage 0's input is data: no gradient to send
            return None
        (g_in,) = grads_from(st["out"], [st["inp"]], grad_out, retain_graph=True)
        return g_in  # (mb, h) to stage s-1

    def _B(self, s: int, m: int, grad_out: torch.Tensor | None) -> torch.Tensor | None:
        st = self.stash[(s, m)]
        wants_input = s > 0  # stage 0's input is data: no gradient to send
        targets = ([st["inp"]] if wants_input else []) + self.params[s]
        grads = grads_from(st["out"], targets, grad_out)  # frees the graph
        self._accumulate(s, grads[1:] if wants_input else grads)
        self._free(s, m)
        return grads[0] if wants_input else None

    def _W(self, s: int, m: int, _: None) -> None:
        st = self.stash[(s, m)]
        self._accumulate(s, grads_from(st["out"], self.params[s], st["grad_out"]))
        self._free(s, m)

    def _accumulate(self, s: int, grads: Any) -> None:
        for acc, g in zip(self.grads[s], grads, strict=True):
            acc += g  # (h, h) weights, (h,) biases

    def _free(self, s: int, m: int) -> None:
        st = self.stash.pop((s, m))
        self.live[s] -= 1
        self.live_bytes -= st["bytes"]
        self.ctx.memory(ACTIVATION, -st["bytes"], step=m, phase="bwd")


def pipeline_job(ctx: RankContext, config: PipelineConfig | str, *sizes: int) -> dict[str, Any]:
    """On one rank: execute this rank's row of the schedule; return its stages' gradients.

    ``config``: the run's :class:`~edu_parallel.pipeline_parallel.config.PipelineConfig`, checked
    in the parent before any rank started (trusted here: its ``plan`` is the schedule); or, as
    the exercises call it with a learner's schedule, the schedule's text followed by ``layers,
    hidden, microbatch_size, seed``.

    Returns ``{"rank", "stages", "grads": {stage: [tensors]}, "peak_live": {stage: int},
    "peak_activation_bytes", "start", "end"}``; ranks ``>= P`` take no part and return at once.
    """
    if isinstance(config, PipelineConfig):
        sched = config.plan
        layers, hidden, microbatch_size, seed = (
            config.layers,
            config.hidden,
            config.microbatch_size,
            config.seed,
        )
    else:
        sched = Schedule.from_text(config)
        layers, hidden, microbatch_size, seed = sizes
    t = ctx.tracer.now()
    if ctx.rank >= sched.num_ranks:
        return {
            "rank": ctx.rank,
            "stages": [],
            "grads": {},
            "peak_live": {},
            "peak_activation_bytes": 0,
            "start": t,
            "end": t,
        }
    rp = _RankPipeline(ctx, sched, layers, hidden, microbatch_size, seed)
    start = ctx.tracer.now()
    for slot, action in enumerate(row := sched.actions[ctx.rank], 1):
        if action is not None:  # None: an idle slot (the bubble)
            rp.run(action)
        ctx.progress(slot, len(row))
    ctx.wait_all(rp.sends)
    end = ctx.tracer.now()
    if rp.stash:
        left = ", ".join(f"{s}F{m}" for s, m in rp.stash)
        raise RuntimeError(f"rank {ctx.rank}: activations never freed by a backward: {left}")
    return {
        "rank": ctx.rank,
        "stages": rp.stages,
        "grads": rp.grads,
        "peak_live": rp.peak,
        "peak_activation_bytes": rp.peak_bytes,
        "start": start,
        "end": end,
    }
