"""Tensor-parallel attention on real ranks, checked against one process, collectives counted.

:func:`attention_job` runs on every rank: the seeded weights of an ``h``-wide self-attention with
``a`` heads (``nn.Linear`` layout, with biases), the input X (b, s, h) and an upstream gradient dY,
all built on every rank from the seed of the run's
:class:`~edu_parallel.tensor_parallel.config.AttentionConfig` (as if rank 0 had broadcast them);
the rank keeps its heads (:func:`~edu_parallel.tensor_parallel.attention.shard_attention`), runs
:func:`~edu_parallel.tensor_parallel.attention.tp_attention` forward and ``backward(dY)``.

:func:`run_tp_attention` compares every rank's Y and dX (full on every rank) and its weight
gradients (its rows of ``dWq``, ``dWk``, ``dWv`` and their biases, its columns of ``dWo``, the full
``dbo``) with :func:`~edu_parallel.tensor_parallel.attention.dense_attention` on one process
(``torch.allclose`` with :data:`~edu_parallel.tensor_parallel.config.TOLERANCES` of the dtype),
and reads the collectives and their bytes off the trace (Megatron-LM, arXiv 1909.08053 §3,
Fig. 3b: one all-reduce forward, one backward).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..core.errors import bad_value
from ..core.i18n import _
from ..core.trace import Trace
from ..core.units import torch_dtype
from ..core.width import fitted
from ..engine.autograd import backward_from
from ..engine.context import RankContext
from ..engine.executor import Executor
from .attention import BIASES, PROJECTIONS, dense_attention, shard_attention, tp_attention
from .config import AttentionConfig
from .formulas import ATTENTION_COLLECTIVES, attention_sent_bytes, traced_collectives
from .layers import own_block

ROW_SPLIT = ("wq", "wk", "wv", "bq", "bk", "bv")  # the rank's heads: block r along dim 0


def make_attention_problem(
    batch: int, seq: int, hidden: int, seed: int, dtype: str
) -> dict[str, torch.Tensor]:
    """Weights ``wq``, ``wk``, ``wv``, ``wo`` (h, h) and biases (h,), X and dY (b, s, h)."""
    g = torch.Generator().manual_seed(seed)
    dt = torch_dtype(dtype)

    def rand(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dt)

    p = {name: rand(hidden, hidden, scale=hidden**-0.5) for name in PROJECTIONS}
    p.update({name: rand(hidden, scale=0.1) for name in BIASES})
    p["x"], p["dy"] = rand(batch, seq, hidden), rand(batch, seq, hidden)
    return p


def dense_attention_grads(
    p: dict[str, torch.Tensor], heads: int, causal: bool
) -> dict[str, torch.Tensor]:
    """Y, dX and every weight's gradient of the layer on one process."""
    w = {k: v.clone().requires_grad_() for k, v in p.items() if k in PROJECTIONS + BIASES}
    x = p["x"].clone().requires_grad_()
    y = dense_attention(x, w, heads, causal)
    backward_from(y, p["dy"])
    return {"y": y.detach(), "dx": x.grad, **{"d" + k: v.grad for k, v in w.items()}}


def attention_problem_of(config: AttentionConfig) -> dict[str, torch.Tensor]:
    """:func:`make_attention_problem` of the run ``config`` describes."""
    c = config
    return make_attention_problem(c.batch, c.seq, c.hidden, c.seed, c.dtype)


def attention_job(ctx: RankContext, config: AttentionConfig) -> dict[str, Any]:
    """On every rank: keep a/t heads, forward, ``backward(dY)``; returns Y, dX, the shard grads."""
    r, t = ctx.rank, ctx.world_size
    p = attention_problem_of(config)
    w = shard_attention({k: p[k] for k in PROJECTIONS + BIASES}, r, t, config.heads)
    w = {k: v.requires_grad_() for k, v in w.items()}
    x = p["x"].clone().requires_grad_()
    ctx.tracer.where("tp attention: forward")
    per = config.heads_per_rank
    y = tp_attention(
        ctx,
        x,
        w["wq"],
        w["wk"],
        w["wv"],
        w["wo"],
        w["bo"],
        heads=per,
        bq=w["bq"],
        bk=w["bk"],
        bv=w["bv"],
        causal=config.causal,
        step=1,
    )  # (b, s, h) on every rank
    ctx.tracer.where("tp attention: backward")
    backward_from(y, p["dy"])
    grads = {"d" + k: v.grad.detach().clone() for k, v in w.items()}
    return {"y": y.detach(), "dx": x.grad.detach(), **grads, "heads": (r * per, (r + 1) * per)}


def expected_attention_piece(name: str, dense: dict[str, torch.Tensor], rank: int, t: int):
    """What rank ``rank`` must hold of the dense result ``name``."""
    if name[1:] in ROW_SPLIT:
        return own_block(dense[name], rank, t, 0)
    if name == "dwo":
        return own_block(dense[name], rank, t, 1)
    return dense[name]  # y, dx (after f's all-reduce), dbo (every rank sees all of dY)


@dataclass
class AttentionReport:
    """A tensor-parallel attention run: the check, the collectives, the bytes."""

    world_size: int
    batch: int
    seq: int
    hidden: int
    heads: int
    causal: bool
    dtype: str
    seed: int
    heads_per_rank: list[tuple[int, int]]
    matches_dense: bool
    max_abs_diff: dict[str, float]
    rtol: float
    atol: float
    forward_collectives: list[str]
    backward_collectives: list[str]
    expected_forward: list[str]
    expected_backward: list[str]
    same_collectives_on_every_rank: bool
    collectives: list[dict[str, Any]]  # rank 0, in order: op, phase, nbytes, sent_bytes
    per_rank_sent_bytes_by_phase: list[dict[str, float]]
    sent_bytes_formula: dict[str, float]
    trace: Trace = field(repr=False)

    @property
    def matches_builtin(self) -> bool:  # the CLI convention: the check's outcome
        return self.matches_dense

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "concept": "tp-attention",
            **{k: v for k, v in self.__dict__.items() if k != "trace"},
        }


def run_tp_attention(
    cluster: Executor,
    batch: int = 2,
    seq: int = 4,
    hidden: int = 16,
    heads: int = 4,
    causal: bool = True,
    seed: int = 0,
    dtype: str = "float64",
) -> AttentionReport | None:
    """Self-attention with its heads split over the ranks of ``cluster``, checked and counted: the
    options become one :class:`~edu_parallel.tensor_parallel.config.AttentionConfig` (checked
    here, before any process starts) for :func:`run_attention_config`."""
    config = AttentionConfig(cluster.world_size, batch, seq, hidden, heads, causal, seed, dtype)
    return run_attention_config(cluster, config)


def run_attention_config(cluster: Executor, config: AttentionConfig) -> AttentionReport | None:
    """Run ``config`` on ``cluster`` and check it against one process; the config is trusted."""
    t = cluster.world_size
    if t != config.world_size:
        valid = _("{n}, the executor's ranks").format(n=t)
        raise bad_value("config.world_size", config.world_size, valid)
    out = cluster.run(attention_job, config)
    if out is None:  # a non-zero rank under torchrun
        return None
    rtol, atol = config.tolerances
    dense = dense_attention_grads(attention_problem_of(config), config.heads, config.causal)
    ok, diffs = True, {}
    for name in dense:
        pairs = [
            (res[name], expected_attention_piece(name, dense, r, t))
            for r, res in enumerate(out.results)
        ]
        diffs[name] = max(float((a - b).abs().max()) for a, b in pairs)
        ok &= all(
            a.shape == b.shape and torch.allclose(a, b, rtol=rtol, atol=atol) for a, b in pairs
        )
    seqs, colls, by_phase = traced_collectives(out.trace, t)
    out.trace.meta.update({"concept": "tp-attention", "world_size": t})
    return AttentionReport(
        world_size=t,
        batch=config.batch,
        seq=config.seq,
        hidden=config.hidden,
        heads=config.heads,
        causal=config.causal,
        dtype=config.dtype,
        seed=config.seed,
        heads_per_rank=[tuple(res["heads"]) for res in out.results],
        matches_dense=bool(ok),
        max_abs_diff=diffs,
        rtol=rtol,
        atol=atol,
        forward_collectives=[c["op"] for c in colls if c["phase"] == "forward"],
        backward_collectives=[c["op"] for c in colls if c["phase"] == "backward"],
        expected_forward=ATTENTION_COLLECTIVES[0],
        expected_backward=ATTENTION_COLLECTIVES[1],
        same_collectives_on_every_rank=all(s == seqs[0] for s in seqs),
        collectives=colls,
        per_rank_sent_bytes_by_phase=by_phase,
        sent_bytes_formula=attention_sent_bytes(
            t, config.batch, config.seq, config.hidden, config.itemsize
        ),
        trace=out.trace,
    )


@fitted
def format_attention(report: AttentionReport) -> str:
    """The check, the heads each rank kept, the collectives by pass, the bytes against the
    formula."""
    r = report
    worst = max(r.max_abs_diff, key=r.max_abs_diff.get)
    setting = (
        _("self-attention, {heads} heads split over {n} ranks: b={b} s={s} h={h} causal {dtype}")
        if r.causal
        else _("self-attention, {heads} heads split over {n} ranks: b={b} s={s} h={h} {dtype}")
    )
    heads = ", ".join(
        _("rank {rank} [{lo}, {hi})").format(rank=i, lo=lo, hi=hi)
        for i, (lo, hi) in enumerate(r.heads_per_rank)
    )
    check = _(
        "matches one process: {ok} (Y, dX, every weight gradient; largest |diff| {diff} in"
        " {worst}; allclose rtol={rtol} atol={atol})"
    )
    lines = [
        setting.format(
            heads=r.heads, n=r.world_size, b=r.batch, s=r.seq, h=r.hidden, dtype=r.dtype
        ),
        _("heads per rank: {heads}").format(heads=heads),
        check.format(
            ok=_("yes") if r.matches_dense else _("NO"),
            diff=f"{r.max_abs_diff[worst]:.1e}",
            worst=worst,
            rtol=f"{r.rtol:g}",
            atol=f"{r.atol:g}",
        ),
        _("forward collectives:  {got}  (expected {expected}: g, Wo)").format(
            got=r.forward_collectives, expected=r.expected_forward
        ),
        _("backward collectives: {got}  (expected {expected}: f, QKV)").format(
            got=r.backward_collectives, expected=r.expected_backward
        ),
    ]
    for c in r.collectives:
        lines.append(
            "  "
            + _("{phase} {op} message {nbytes} B, rank 0 sends {sent} B").format(
                phase=f"{c['phase']:<8}",
                op=f"{c['op']:<10}",
                nbytes=f"{c['nbytes']:>7,}",
                sent=f"{c['sent_bytes']:>9,.1f}",
            )
        )
    sent = [round(sum(d.values()), 1) for d in r.per_rank_sent_bytes_by_phase]
    formula = sum(r.sent_bytes_formula.values())
    lines.append(
        _(
            "sent per rank (trace): {sent}; formula 2 x 2(t-1)/t x b*s*h*itemsize = {formula} B"
        ).format(sent=sent, formula=f"{formula:,.1f}")
    )
    return "\n".join(lines)
