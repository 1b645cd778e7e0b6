"""Exercise 02: write the pipelined chain broadcast.

``my_chain_broadcast(ctx, tensor, root, segments)`` copies the root's ``tensor`` into every rank's,
as ``dist.broadcast`` does. The ranks form a chain ``root -> root+1 -> ... -> root-1``; the root's
buffer is cut into S segments (``torch.tensor_split``) and every rank forwards segment k to the next
as soon as it has it, so the segments flow down the chain like a pipeline and the last one reaches
the chain's end after ``S + N - 2`` steps. This is NCCL's ring broadcast, a chain that starts at
the root (``plans/collectives.py``, :func:`chain_broadcast_plan`). In the one-port model where a
rank sends one message and receives one per round (Bar-Noy & Kipnis 1994, "Broadcasting multiple
messages in simultaneous send/receive systems"), the optimum for S pieces is
``S - 1 + ⌈log2 N⌉`` rounds (Träff & Ripke 2008, "Optimal broadcast for fully connected
processor-node networks"): the chain is simple and within ``N - 1 - ⌈log2 N⌉`` rounds of it.

Graded on the result against ``dist.broadcast`` on the same input; on the bytes each rank sent
against ``D`` (every rank forwards the buffer once, the chain's last rank sends nothing:
:func:`volume_formula`), where the naive broadcast's root sends ``(N-1)·D``; on the messages: at
most S per rank, each at most one segment; and on the latency: the rounds of the run
(:func:`message_rounds`, a rank sends one message and receives one per round) against the
plan's ``S + N - 2`` steps.
"""

from __future__ import annotations

import math

import torch

from ...core.i18n import N_, _
from ...core.trace import Trace
from ...core.units import DTYPES, format_bytes, torch_dtype
from ...engine.context import RankContext
from ...plans.collectives import chain_broadcast_plan, volume_formula
from ..checks import bytes_sent, messages_sent, rounds_finding, tensor_result, values_equal
from ..inputs import builtin_on_input, case_input
from ..spec import Case, Exercise, Finding, RankOutcome


def chain_broadcast(
    ctx: RankContext, tensor: torch.Tensor, root: int, segments: int
) -> torch.Tensor:
    """The reference solution: S segments pipelined down the chain root -> root+1 -> ..."""
    n, r = ctx.world_size, ctx.rank
    pos = (r - root) % n  # my place in the chain: the root is 0, the last rank N-1
    prev, nxt = (r - 1) % n, (r + 1) % n
    parts = torch.tensor_split(tensor, segments)  # views: receiving into them fills tensor
    for s in range(segments + n - 2):  # segment k leaves position p at step k + p
        out, into = s - pos, s - pos + 1  # the segment I forward now, the one arriving now
        with ctx.step(s, "broadcast"):
            pending = []
            if pos < n - 1 and 0 <= out < segments:  # it arrived one step ago (or I am the root)
                pending.append(ctx.isend(parts[out], nxt, chunk=out))
            if pos > 0 and 0 <= into < segments:
                pending.append(ctx.irecv(parts[into], prev, chunk=into))
            ctx.wait_all(pending)
    return tensor


def prepare(ctx: RankContext, case: Case) -> tuple[tuple, torch.Tensor]:
    """Rank r holds 2^r (or random numbers): after the broadcast every rank holds the root's."""
    x = case_input(ctx.rank, case)
    return (x, case.option("root", 0), case.option("segments")), x


def finish(ctx: RankContext, case: Case, args: tuple, result: object) -> torch.Tensor:
    """torch's builtin on the same input: what every rank should hold."""
    return builtin_on_input(ctx, case, "broadcast", src=case.option("root", 0))


def segment_sizes(trace: Trace, case: Case, segments: int) -> list[Finding]:
    """Every message carries at most one segment, ⌈D/S⌉ elements."""
    most = math.ceil(case.numel / segments) * DTYPES[case.dtype]
    for e in sorted(trace.events, key=lambda e: e.start):
        if e.kind == "send" and e.nbytes > most:
            msg = _(
                "rank {r} sent a message of {size}; a segment is \u2308D/S\u2309 = {most}: send "
                "the S pieces of torch.tensor_split one by one, so the next rank forwards one "
                "while the next is on its way"
            ).format(r=e.rank, size=format_bytes(e.nbytes), most=format_bytes(most))
            return [Finding("messages", False, msg, case, rank=e.rank, step=e.step)]
    return [Finding("messages", True, _("every message carries at most one segment"), case)]


def judge(case: Case, outputs: list[RankOutcome], trace: Trace) -> list[Finding]:
    n, root, segments = case.world_size, case.option("root", 0), case.option("segments")
    found = tensor_result(outputs, case, (case.numel,), torch_dtype(case.dtype))
    if found:
        return found
    want = [o.facts for o in outputs]
    what = _("the root's (rank {root}'s) input").format(root=root)
    found = values_equal(outputs, want, case, what)
    sent = volume_formula("broadcast", n, case.numel * DTYPES[case.dtype], root)["sent"]
    found += bytes_sent(trace, case, sent, _("D (0 on the chain's last rank, root\u22121)"))
    found += messages_sent(trace, case, segments, "S")
    found += segment_sizes(trace, case, segments)
    steps = len(chain_broadcast_plan(n, root, segments).steps)
    fix = _("forward each segment as soon as it has arrived, before the next one comes in")
    found.append(rounds_finding(trace, case, steps, "S + N \u2212 2", fix))
    return found


def segment_chunks(case: Case) -> int:
    return case.option("segments")


STARTER = """\
def my_chain_broadcast(ctx, tensor, root, segments):
    n, r = ctx.world_size, ctx.rank
    pos = (r - root) % n  # my place in the chain root -> root+1 -> ...: the root is 0
    prev, nxt = (r - 1) % n, (r + 1) % n
    parts = torch.tensor_split(tensor, segments)  # S views into tensor: receive into them
    for s in range(segments + n - 2):
        with ctx.step(s, "broadcast"):
            ...  # forward the segment that arrived last step, receive the next one
    return tensor
"""


def _case(n: int, numel: int, root: int, segments: int, dtype: str = "float32", pattern: str = ""):
    options = (("root", root), ("segments", segments))
    return Case(n, numel, dtype, options + ((("pattern", pattern),) if pattern else ()))


EXERCISE = Exercise(
    lesson="02_collectives",
    title=N_("Broadcast as a pipelined chain"),
    function="my_chain_broadcast",
    params=("ctx", "tensor", "root", "segments"),
    task=N_(
        "Write `my_chain_broadcast(ctx, tensor, root, segments)`: when it returns, every rank's "
        "`tensor` holds the root's, as after `dist.broadcast(tensor, src=root)`. The ranks form a "
        "chain root \u2192 root+1 \u2192 \u2026 (mod N); cut the buffer into S = `segments` "
        "pieces and forward each piece to the next rank as soon as it has arrived, wrapping each "
        "step in `with ctx.step(s, phase):`. Target: each rank sends at most D bytes in at most "
        "S messages, and the last segment arrives after S + N \u2212 2 steps."
    ),
    starter=STARTER,
    hints=(
        N_(
            "Number the ranks by their place in the chain, `pos = (r - root) % n`: the root is 0. "
            "Every step, each rank may send one segment to `nxt` and receive one from `prev`."
        ),
        N_(
            "Segment k leaves the root at step k and moves one rank further every step: at step s "
            "the rank at position p forwards segment s \u2212 p (if it exists, and unless p is the "
            "last) and receives segment s \u2212 p + 1 (unless p is the root). The last segment "
            "reaches position N \u2212 1 at step S + N \u2212 3."
        ),
        N_(
            "`if pos < n - 1 and 0 <= s - pos < segments: pending.append(ctx.isend(parts[s - pos], "
            "nxt, chunk=s - pos))`, the same for `ctx.irecv(parts[s - pos + 1], prev, ...)`, then "
            "`ctx.wait_all(pending)`"
        ),
    ),
    reference=chain_broadcast,
    prepare=prepare,
    finish=finish,
    judge=judge,
    cases=(
        _case(2, 8, 0, 4),
        _case(2, 6, 1, 2),
        _case(4, 10, 1, 3),  # segments of 4, 3 and 3 elements
        _case(4, 64, 3, 8, "int64", "random"),
        _case(4, 4096, 1, 16, "float64", "random"),
        _case(4, 16, 0, 4),
        _case(4, 16, 2, 4),
    ),
    chunks=segment_chunks,
    powers_of_two=True,
    point_to_point=True,
)
